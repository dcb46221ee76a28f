"""A session's admin page asks the per-object view permission, as a call's page does.

``McpSessionAdmin.change_view`` replaces Django's (its form printed the whole id) and asked
``has_view_permission(request)`` only, the model's: a project whose rule refuses some sessions
(``has_view_permission(request, obj)``, e.g. staff see their own team's callers only) had it
ignored there, while Django's own change view, and the calls' report page here, ask it for the
object. Found by the oauth review.
"""
from __future__ import annotations

import secrets
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from mcp_tools.admin import McpSessionAdmin
from mcp_tools.models import McpSession
from tests.test_admin_console import client_for, make_user
from tests.test_admin_session_ids import SESSIONS, page, session_link

pytestmark = pytest.mark.django_db


@pytest.fixture
def viewer_refused_user_1(monkeypatch: pytest.MonkeyPatch) -> Any:
    """A project's per-object rule: sessions of ``user:1`` may not be looked at; staff who may view sessions."""
    allowed = McpSessionAdmin.has_view_permission

    def per_object(self: Any, request: Any, obj: Any = None) -> bool:
        return False if obj is not None and obj.principal == "user:1" else allowed(self, request, obj)

    monkeypatch.setattr(McpSessionAdmin, "has_view_permission", per_object)
    user = make_user("session-viewer-per-object", perms=())
    user.user_permissions.add(Permission.objects.get(content_type__app_label="mcp_tools", codename="view_mcpsession"))
    return client_for(user)


def test_a_session_the_object_permission_refuses_is_not_shown(viewer_refused_user_1: Any) -> None:
    McpSession.objects.create(id=secrets.token_urlsafe(24), protocol_version="2025-11-25", principal="user:1",
                              client_info={"name": "payroll-agent-of-user-1"})
    link = session_link(page(viewer_refused_user_1, reverse(SESSIONS)))
    response = viewer_refused_user_1.get(link)
    assert response.status_code == 403, (response.status_code, "the session page ignored has_view_permission(request, obj)")
    assert b"payroll-agent-of-user-1" not in response.content


def test_a_session_the_object_permission_allows_is_shown(viewer_refused_user_1: Any) -> None:
    McpSession.objects.create(id=secrets.token_urlsafe(24), protocol_version="2025-11-25", principal="user:2",
                              client_info={"name": "agent-of-user-2"})
    report = page(viewer_refused_user_1, session_link(page(viewer_refused_user_1, reverse(SESSIONS))))
    assert "agent-of-user-2" in report

