"""Staff who may view sessions but not calls see no calls on a session's admin page.

The calls list and each call's page refuse them (no view_toolcall); the session page listed the
session's calls (tool, principal, status, progress) all the same. Staff who may view calls see them.
"""
from __future__ import annotations

import secrets

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from mcp_tools.models import McpSession
from tests.test_admin_console import client_for, make_call, make_user
from tests.test_admin_session_ids import SESSIONS, page, session_link

pytestmark = pytest.mark.django_db


def test_a_session_viewer_without_view_toolcall_sees_no_calls() -> None:
    session = McpSession.objects.create(id=secrets.token_urlsafe(24), protocol_version="2025-11-25", principal="user:1")
    call = make_call("transfer_payroll_secret_tool", principal="user:1", session_id=session.id, flavor="legacy")
    user = make_user("session-viewer", perms=())
    user.user_permissions.add(Permission.objects.get(content_type__app_label="mcp_tools", codename="view_mcpsession"))
    staff = client_for(user)
    assert staff.get(reverse("admin:mcp_tools_toolcall_changelist")).status_code == 403
    assert staff.get(reverse("admin:mcp_tools_toolcall_change", args=[call.pk])).status_code == 403
    report = page(staff, session_link(page(staff, reverse(SESSIONS))))
    assert "transfer_payroll_secret_tool" not in report, "the session page lists calls its viewer may not view"


def test_a_session_viewer_with_view_toolcall_sees_the_calls() -> None:
    session = McpSession.objects.create(id=secrets.token_urlsafe(24), protocol_version="2025-11-25", principal="user:1")
    make_call("visible_tool_of_the_session", principal="user:1", session_id=session.id, flavor="legacy")
    user = make_user("session-and-call-viewer", perms=())
    for codename in ("view_mcpsession", "view_toolcall"):
        user.user_permissions.add(Permission.objects.get(content_type__app_label="mcp_tools", codename=codename))
    staff = client_for(user)
    report = page(staff, session_link(page(staff, reverse(SESSIONS))))
    assert "visible_tool_of_the_session" in report
