"""No admin page prints a whole session id: an anonymous 2025-11-25 caller's session id is its credential.

Whoever sees a screen, a screenshot or a copied link of the admin would otherwise be able to act
as that caller. The pages show its first 8 characters; staff who paste a whole id still find it.
"""

from __future__ import annotations

import secrets
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from mcp_tools.models import McpSession, ToolCall
from tests.test_admin_console import client_for, make_call, make_user

pytestmark = pytest.mark.django_db

SESSIONS = "admin:mcp_tools_mcpsession_changelist"


@pytest.fixture
def anonymous_session() -> tuple[McpSession, ToolCall]:
    """An anonymous caller's session (its id made as the store makes one) and a call waiting in it."""
    session = McpSession.objects.create(id=secrets.token_urlsafe(24), protocol_version="2025-11-25", principal="anonymous",
                                        client_info={"name": "browser", "version": "1"})
    call = make_call("deploy", principal=f"anonymous:session:{session.id}", session_id=session.id, flavor="legacy")
    return session, call


@pytest.fixture(params=["superuser", "viewer"])
def staff(request: Any) -> Client:
    """Staff who may do anything, and staff who may only look at calls and sessions."""
    if request.param == "superuser":
        user = make_user("root")
        user.is_superuser = True
        user.save()
        return client_for(user)
    user = make_user("viewer", perms=("view_toolcall",))
    user.user_permissions.add(Permission.objects.get(content_type__app_label="mcp_tools", codename="view_mcpsession"))
    return client_for(user)


def test_sessions_cannot_be_found_a_character_at_a_time(staff: Client, anonymous_session: tuple[McpSession, ToolCall]) -> None:
    session, _call = anonymous_session
    staff.raise_request_exception = False
    for lookup in ("id__startswith", "id__contains", "pk__startswith", "id__gt"):
        assert staff.get(reverse(SESSIONS), {lookup: session.id[:1]}).status_code == 400, lookup
