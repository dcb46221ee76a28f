"""Which permission each page of the console needs, as docs/admin.md's Permissions says.

The doc said `view_toolcall` alone "sees every page"; the sessions' pages answer 403 without
`view_mcpsession`: each model's pages ask for that model's permissions, as in any Django admin.
"""
from __future__ import annotations

import secrets

import pytest
from django.urls import reverse

from mcp_tools.admin import session_page
from mcp_tools.console.queries import session_handle
from mcp_tools.models import McpSession
from tests.test_admin_console import client_for, make_call, make_user

pytestmark = pytest.mark.django_db

CALL_PAGES = ["admin:mcp_tools_toolcall_changelist", "admin:mcp_tools_toolcall_dashboard", "admin:mcp_tools_toolcall_dashboard_data"]


@pytest.mark.parametrize("perms, calls, sessions", [
    (("view_toolcall",), 200, 403),
    (("view_mcpsession",), 403, 200),
    (("view_toolcall", "view_mcpsession"), 200, 200),
    ((), 403, 403),
])
def test_each_model_s_pages_need_its_own_view_permission(perms: tuple[str, ...], calls: int, sessions: int) -> None:
    session = McpSession.objects.create(id=secrets.token_urlsafe(24), protocol_version="2025-11-25", principal="user:1")
    call = make_call("deploy", principal="user:1", session_id=session.id, flavor="legacy")
    staff = client_for(make_user("staff", perms=perms))
    call_pages = [reverse(name) for name in CALL_PAGES] + [reverse("admin:mcp_tools_toolcall_change", args=[call.pk])]
    session_pages = [reverse("admin:mcp_tools_mcpsession_changelist"),
                     reverse(session_page(McpSession._meta), args=[session_handle(session.id)])]
    assert {url: staff.get(url).status_code for url in call_pages} == dict.fromkeys(call_pages, calls)
    assert {url: staff.get(url).status_code for url in session_pages} == dict.fromkeys(session_pages, sessions)
