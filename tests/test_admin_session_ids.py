"""No admin page prints a whole session id: an anonymous 2025-11-25 caller's session id is its credential.

Whoever sees a screen, a screenshot or a copied link of the admin would otherwise be able to act
as that caller. The pages show its first 8 characters; staff who paste a whole id still find it.
"""

from __future__ import annotations

import re
import secrets
from html import unescape
from typing import Any

import pytest
from django.contrib.admin.utils import quote
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from mcp_tools.console import queries
from mcp_tools.models import McpSession, ToolCall
from tests.test_admin_console import client_for, make_call, make_user

pytestmark = pytest.mark.django_db

SESSIONS = "admin:mcp_tools_mcpsession_changelist"
CALLS = "admin:mcp_tools_toolcall_changelist"


@pytest.fixture
def anonymous_session() -> tuple[McpSession, ToolCall]:
    """An anonymous caller's session (its id made as the store makes one) and a call waiting in it."""
    # An id as the store makes one (secrets.token_urlsafe(24)), starting with "_5F": its alphabet holds
    # "_", and "_5F" is the admin's own escape of "_" in its URLs (a handle starts with it too).
    session = McpSession.objects.create(id="_5F" + secrets.token_urlsafe(24)[3:], protocol_version="2025-11-25", principal="anonymous",
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


def page(client: Client, url: str, **params: str) -> str:
    response = client.get(url, params, follow=True)
    assert response.status_code == 200, (url, response.status_code)
    return response.content.decode()


def session_link(listing: str) -> str:
    """The address the sessions' list links its (only) row to."""
    links = re.findall(r'<a href="(/admin/mcp_tools/mcpsession/[^"?]+/change/)(?:\?[^"]*)?"', listing)
    assert len(links) == 1, links
    return unescape(links[0])


def test_no_page_prints_the_whole_session_id(staff: Client, anonymous_session: tuple[McpSession, ToolCall]) -> None:
    session, call = anonymous_session
    label = f"{session.id[:8]}…"
    listing = page(staff, reverse(SESSIONS))
    detail_url = session_link(listing)
    pages = {
        "sessions": listing,
        "session": page(staff, detail_url),
        "session history": page(staff, detail_url.replace("/change/", "/history/")),
        "calls": page(staff, reverse(CALLS), state="all"),
        "call": page(staff, reverse("admin:mcp_tools_toolcall_change", args=[call.pk])),
        "call history": page(staff, reverse("admin:mcp_tools_toolcall_history", args=[call.pk])),
        "dashboard": page(staff, reverse("admin:mcp_tools_toolcall_dashboard")),
        "dashboard data": page(staff, reverse("admin:mcp_tools_toolcall_dashboard_data")),
        "index": page(staff, reverse("admin:index")),
        "app": page(staff, reverse("admin:app_list", args=["mcp_tools"])),
    }
    for name, text in pages.items():
        assert session.id not in text and session.id not in unescape(text), f"the {name} page holds the whole session id"
    assert label in pages["sessions"] and label in pages["session"]
    assert "browser" in pages["session"], "the session's page is its report"
    assert call.tool_name in pages["session"], "the session's page lists its calls"
    assert label in unescape(pages["calls"]) and label in pages["call"] and label in unescape(pages["dashboard"])


def test_a_pasted_whole_id_still_finds_the_session_and_its_calls(staff: Client, anonymous_session: tuple[McpSession, ToolCall]) -> None:
    session, call = anonymous_session
    McpSession.objects.create(id=secrets.token_urlsafe(24), protocol_version="2025-11-25", principal="anonymous")
    label = f"{session.id[:8]}…"
    found = page(staff, reverse(SESSIONS), q=session.id)
    assert label in found and session_link(found)
    # The session's page by its whole id (quoted as the admin quotes ids: "_" starts an escape): shown, not printed.
    by_id = page(staff, reverse("admin:mcp_tools_mcpsession_change", args=[quote(session.id)]))
    assert label in by_id and session.id not in by_id.replace(f'value="{session.id}"', "")
    call_link = reverse("admin:mcp_tools_toolcall_change", args=[call.pk])
    assert label in page(staff, reverse(SESSIONS), id=session.id)
    assert call_link in page(staff, reverse(CALLS), q=session.id)
    assert call_link in page(staff, reverse(CALLS), session_id=session.id)
    assert call_link in page(staff, reverse(CALLS), principal=f"anonymous:session:{session.id}")


def test_a_session_page_by_an_unknown_handle_is_not_found(staff: Client, anonymous_session: tuple[McpSession, ToolCall]) -> None:
    session, _call = anonymous_session
    for handle in (f"{session.id[:8]}.{'0' * 16}", "nothing.0123456789abcdef", ".x", "a.b.c"):
        response = staff.get(reverse("admin:mcp_tools_mcpsession_change", args=[handle]))
        assert response.status_code == 302 and response["Location"] == reverse("admin:index"), handle


def test_sessions_cannot_be_found_a_character_at_a_time(staff: Client, anonymous_session: tuple[McpSession, ToolCall]) -> None:
    session, _call = anonymous_session
    staff.raise_request_exception = False
    for lookup in ("id__startswith", "id__contains", "pk__startswith", "id__gt"):
        assert staff.get(reverse(SESSIONS), {lookup: session.id[:1]}).status_code == 400, lookup


def test_no_admin_action_prints_a_session_id(staff: Client, anonymous_session: tuple[McpSession, ToolCall]) -> None:
    """Django's delete confirmation, its message and its LogEntry name a session by its str(), the whole id:
    sessions are a read-only report (they end when their client deletes them, or idle)."""
    session, _call = anonymous_session
    listing = page(staff, reverse(SESSIONS))
    assert 'name="_selected_action"' not in listing and 'name="action"' not in listing
    response = staff.post(reverse(SESSIONS), {"action": "delete_selected", "_selected_action": [session.id], "index": "0"}, follow=True)
    assert session.id not in response.content.decode()
    assert staff.get(reverse("admin:mcp_tools_mcpsession_delete", args=[quote(session.id)])).status_code == 403
    response = staff.post(reverse("admin:mcp_tools_mcpsession_change", args=[quote(session.id)]), {"log_level": "debug"})
    assert response.status_code in (200, 403, 405) and session.id not in response.content.decode()
    assert McpSession.objects.filter(id=session.id, log_level="info").exists()


AUTOCOMPLETE = "/admin/autocomplete/"


def test_no_autocomplete_answers_with_a_session_id(staff: Client, anonymous_session: tuple[McpSession, ToolCall]) -> None:
    """Django's autocomplete of a foreign key to sessions (a subscription's) would list every session by
    its whole id, to staff who may only view sessions: refused. The calls' one (a step's call) lists no session id."""
    session, call = anonymous_session
    for term in ("", "anonymous", session.id, session.id[:8]):
        response = staff.get(AUTOCOMPLETE, {"app_label": "mcp_tools", "model_name": "resourcesubscription", "field_name": "session", "term": term})
        assert response.status_code == 403, (term, response.status_code)
        assert session.id not in response.content.decode()
    for term in ("", "deploy", session.id, f"anonymous:session:{session.id}"):
        response = staff.get(AUTOCOMPLETE, {"app_label": "mcp_tools", "model_name": "callstep", "field_name": "call", "term": term})
        assert response.status_code == 200, (term, response.status_code)
        body = response.content.decode()
        assert session.id not in body and str(call.pk) in body, term


@pytest.mark.parametrize("params", [{"_popup": "1"}, {"_popup": "1", "_to_field": "id"}, {"_to_field": "id"},
                                    {"_to_field": "principal"}, {"_popup": "1", "_to_field": "principal"}])
def test_no_popup_list_of_sessions_holds_a_session_id(staff: Client, anonymous_session: tuple[McpSession, ToolCall], params: dict[str, str]) -> None:
    """The related-object popup of the sessions' list would give each row's whole id to the page that opened it
    (``data-popup-opener``): refused, as is any ``?_to_field=``. A session's page ignores both."""
    session, _call = anonymous_session
    staff.raise_request_exception = False
    response = staff.get(reverse(SESSIONS), params)
    assert response.status_code == 400 and session.id not in response.content.decode(), response.status_code
    detail = page(staff, reverse("admin:mcp_tools_mcpsession_change", args=[queries.session_handle(session.id)]), **params)
    assert session.id not in detail


@pytest.mark.parametrize("params", [{"_popup": "1"}, {"_popup": "1", "_to_field": "session_id"}, {"_to_field": "session_id"},
                                    {"_to_field": "principal"}, {"e": "1"}])
def test_no_popup_list_of_calls_holds_a_session_id(staff: Client, anonymous_session: tuple[McpSession, ToolCall], params: dict[str, str]) -> None:
    """The calls' popup hands over call ids; a call's session id is never a ``_to_field`` (400)."""
    session, call = anonymous_session
    staff.raise_request_exception = False
    for response in (staff.get(reverse(CALLS), {"state": "all", **params}),
                     staff.get(reverse("admin:mcp_tools_toolcall_change", args=[call.pk]), params),
                     staff.get(reverse("admin:mcp_tools_toolcall_history", args=[call.pk]), params)):
        assert response.status_code in (200, 400), response.status_code
        assert session.id not in response.content.decode() and session.id not in unescape(response.content.decode())
