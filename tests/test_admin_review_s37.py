"""The staff console under per-object permissions, a stricter admin site, a second admin site, and retry.

Found by a review; each test failed before its fix:

- the changelist's Cancel / Expire / Retry actions ignored a ``ToolCallAdmin`` subclass's
  per-object ``has_change_permission(request, obj)``: the report page's buttons respected it,
  the bulk actions ended or retried every selected call;
- the dashboard's panel reversed its "tools that fail" links without the admin site's name: with
  the calls' admin registered only on a site named ``ops`` (the default site mounted without it), the
  dashboard and its poll answered 500 (NoReverseMatch) once a tool had failed; with both sites serving
  calls they linked to ``/admin/``; the dashboard's WebSocket, which knew no site, pushed rows
  that linked to the default site's pages;
- the dashboard's WebSocket ignored the admin site's own ``has_permission`` (a superuser-only site,
  django-otp's ``OTPAdminSite``): staff every admin page sent to the login page had the dashboard
  pushed all the same, and kept it after the site stopped letting them in;
- the admin's Retry of a call whose user was deactivated or deleted since (and a worker taking a
  queued call of such a user) ran it as ``AnonymousUser``, even where ``ALLOW_ANONYMOUS`` is off and
  the endpoint refuses that user: it now fails with "the caller is no longer allowed";
- a step's elicitation message was shown whole on the call's page, above its capped request block
  (a 300,000-character message made a 409 kB page);
- a call's page ran the number of queries docs/admin.md gives (8, 9 for a call of a session) only
  for a journal of at most 100 steps: a longer one took two more (its tail and its count).
"""
from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib import messages as django_messages
from django.contrib.admin import AdminSite
from django.contrib.admin.models import LogEntry
from django.contrib.auth import get_user_model
from django.test import override_settings
from django.urls import path, reverse

from mcp_tools import ToolContext
from mcp_tools.admin import ToolCallAdmin
from mcp_tools.models import CallStep, ToolCall
from mcp_tools.registry import make_tool, registry
from mcp_tools.server import background
from tests.admin_sites.urls import ops
from tests.test_admin_console import CHANGELIST, _session_cookie, client_for, detail_url, make_call, make_user

#: A project that registers the calls' admin only on its own site ``ops``; its default site (the
#: ``admin`` namespace) does not serve calls (this module as ROOT_URLCONF).
plain = AdminSite(name="admin")
urlpatterns = [path("admin/", plain.urls), path("ops/", ops.urls)]

pytestmark = pytest.mark.django_db

OPERATOR = ("view_toolcall", "change_toolcall", "view_mcpsession")


def _protect(monkeypatch: pytest.MonkeyPatch, tool: str = "protected") -> None:
    """A project's per-object rule: calls of ``tool`` may be looked at, never changed."""
    allowed = ToolCallAdmin.has_change_permission

    def per_object(self: Any, request: Any, obj: Any = None) -> bool:
        return False if obj is not None and obj.tool_name == tool else allowed(self, request, obj)

    monkeypatch.setattr(ToolCallAdmin, "has_change_permission", per_object)


def _messages(response: Any) -> list[str]:
    return [str(m) for m in django_messages.get_messages(response.wsgi_request)]


@pytest.mark.parametrize("action, status", [("cancel_calls", "cancelled"), ("expire_calls", "expired")])
def test_bulk_cancel_and_expire_leave_the_calls_the_object_permission_refuses(monkeypatch: pytest.MonkeyPatch, action: str, status: str) -> None:
    _protect(monkeypatch)
    operator = client_for(make_user("op", perms=OPERATOR))
    protected, other = make_call("protected", "working"), make_call("deploy", "working")
    response = operator.post(reverse(CHANGELIST), {"action": action, "_selected_action": [str(protected.pk), str(other.pk)]}, follow=True)
    protected.refresh_from_db()
    other.refresh_from_db()
    assert (protected.status, other.status) == ("working", status)
    assert list(LogEntry.objects.values_list("object_id", flat=True)) == [str(other.pk)]
    said = " ".join(_messages(response))
    assert "1 call(s) marked" in said and "1 selected call(s) you may not change" in said, said


def test_bulk_retry_leaves_the_calls_the_object_permission_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    _protect(monkeypatch)
    operator = client_for(make_user("op", perms=OPERATOR))
    protected = make_call("protected", "failed", background=True, arguments={"n": 1})
    other = make_call("slow_count", "failed", background=True, arguments={"n": 3})
    response = operator.post(reverse(CHANGELIST) + "?state=all",
                             {"action": "retry_calls", "_selected_action": [str(protected.pk), str(other.pk)]}, follow=True)
    new = ToolCall.objects.exclude(pk__in=[protected.pk, other.pk])
    assert list(new.values_list("tool_name", flat=True)) == ["slow_count"]
    said = " ".join(_messages(response))
    assert "1 call(s) started again" in said and "1 selected call(s) you may not change" in said, said


@pytest.mark.parametrize("urlconf", [__name__, "tests.admin_sites.urls"])
def test_the_dashboard_of_another_admin_site_links_its_failing_tools_to_that_site(urlconf: str) -> None:
    with override_settings(ROOT_URLCONF=urlconf):
        operator = client_for(make_user("op", perms=OPERATOR))
        make_call("deploy", "failed")
        page = operator.get("/ops/mcp_tools/toolcall/dashboard/")
        assert page.status_code == 200
        poll = operator.get("/ops/mcp_tools/toolcall/dashboard/data/")
        assert poll.status_code == 200
        for html in (page.content.decode(), poll.json()["html"]):
            assert "/ops/mcp_tools/toolcall/?state=failed&amp;tool_name=deploy" in html
            assert "/admin/" not in html.split('id="mcp-failing"')[1]


async def _socket(cookie: bytes, query: str = "") -> Any:
    from channels.testing import WebsocketCommunicator

    from mcp_tools.routing import console_websocket_app

    headers = [(b"origin", b"http://testserver"), (b"host", b"testserver"), (b"cookie", cookie)]
    return WebsocketCommunicator(console_websocket_app(), "/mcp-tools/console/ws/" + query, headers=headers)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("urlconf", [__name__, "tests.admin_sites.urls"])
async def test_the_websocket_of_another_admin_sites_dashboard_pushes_links_to_that_site(urlconf: str) -> None:
    with override_settings(ROOT_URLCONF=urlconf):
        user = await sync_to_async(make_user)("op", perms=OPERATOR)
        operator = await sync_to_async(client_for)(user)
        call = await sync_to_async(make_call)("deploy", "working")
        await sync_to_async(make_call)("deploy", "failed")
        page = (await sync_to_async(operator.get)("/ops/mcp_tools/toolcall/dashboard/")).content.decode()
        assert 'data-ws-path="/mcp-tools/console/ws/?site=ops"' in page
        socket = await _socket(await sync_to_async(_session_cookie)(user), "?site=ops")
        assert (await socket.connect())[0]
        html = (await socket.receive_json_from(timeout=5))["html"]
        await socket.disconnect()
        assert f'href="/ops/mcp_tools/toolcall/{call.pk}/change/"' in html
        assert "/ops/mcp_tools/toolcall/?state=failed" in html and "/admin/" not in html, html


@pytest.mark.django_db(transaction=True)
async def test_the_websocket_of_the_default_sites_dashboard_links_to_it() -> None:
    user = await sync_to_async(make_user)("op", perms=OPERATOR)
    call = await sync_to_async(make_call)("deploy", "working")
    socket = await _socket(await sync_to_async(_session_cookie)(user))
    assert (await socket.connect())[0]
    html = (await socket.receive_json_from(timeout=5))["html"]
    await socket.disconnect()
    assert f'href="/admin/mcp_tools/toolcall/{call.pk}/change/"' in html


def _superusers_only(monkeypatch: pytest.MonkeyPatch, seen: list[Any] | None = None) -> None:
    """A project's stricter admin site: only superusers get in (as django-otp's OTPAdminSite lets in only the verified)."""
    allowed = AdminSite.has_permission

    def has_permission(self: Any, request: Any) -> bool:
        if seen is not None:
            seen.append(request)
        return allowed(self, request) and request.user.is_superuser

    monkeypatch.setattr(AdminSite, "has_permission", has_permission)


@pytest.mark.django_db(transaction=True)
async def test_the_websocket_refuses_whom_the_admin_site_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Any] = []
    _superusers_only(monkeypatch, seen)
    staff = await sync_to_async(make_user)("op", perms=OPERATOR)
    page = await sync_to_async(lambda: client_for(staff).get(reverse("admin:mcp_tools_toolcall_dashboard")))()
    assert page.status_code == 302 and "/login/" in page["Location"]
    socket = await _socket(await sync_to_async(_session_cookie)(staff))
    connected, code = await socket.connect()
    assert not connected and code == 4403
    assert seen[-1].user.pk == staff.pk and seen[-1].META["HTTP_HOST"] == "testserver"

    boss = await sync_to_async(lambda: get_user_model().objects.create_superuser("boss", "boss@example.com", "pw"))()
    socket = await _socket(await sync_to_async(_session_cookie)(boss))
    assert (await socket.connect())[0]
    assert (await socket.receive_json_from(timeout=5))["type"] == "dashboard"
    # The site stops letting them in (OTP device removed, superuser status taken): the next push closes the socket.
    await sync_to_async(lambda: get_user_model().objects.filter(pk=boss.pk).update(is_superuser=False))()
    await socket.send_json_to({"type": "refresh"})
    assert (await socket.receive_output(timeout=5))["type"] == "websocket.close"
    await socket.disconnect()


SEEN: list[str] = []


async def whoami(ctx: ToolContext) -> str:
    SEEN.append(repr(ctx.user))
    return "ran"


@pytest.fixture
def queued(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Call ids handed to the (simulated) broker."""
    sent: list[str] = []
    monkeypatch.setattr(background, "send", lambda call_id, tool, task_id: sent.append(call_id))
    return sent


def _retry_from_the_admin(call: ToolCall) -> str:
    operator = client_for(make_user("op", perms=OPERATOR))
    operator.post(reverse(CHANGELIST) + "?state=all", {"action": "retry_calls", "_selected_action": [str(call.pk)]})
    return str(ToolCall.objects.get(pk=call.pk).retried_as)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("gone", ["deactivated", "deleted"])
async def test_a_retried_call_of_a_user_no_longer_active_fails_instead_of_running_anonymously(queued: list[str], gone: str) -> None:
    SEEN.clear()
    with registry.registered_temporarily(make_tool(whoami, name="zz_whoami", background=True)):
        caller = await sync_to_async(make_user)("caller", staff=False)
        failed = await sync_to_async(make_call)("zz_whoami", "failed", user=caller, steps=0, background=True, arguments={"name": "zz_whoami", "arguments": {}})
        if gone == "deactivated":
            await sync_to_async(lambda: get_user_model().objects.filter(pk=caller.pk).update(is_active=False))()
        else:
            await sync_to_async(caller.delete)()
        new_id = await sync_to_async(_retry_from_the_admin)(failed)
        assert queued == [new_id]
        assert await background.run_in_worker(new_id, "w") == "failed"
    row = await ToolCall.objects.aget(pk=new_id)
    assert SEEN == [], "the handler ran (as AnonymousUser)"
    assert row.status == "failed" and "the caller is no longer allowed" in row.status_message, row.status_message
    assert "no longer allowed" in row.result["content"][0]["text"]


@pytest.mark.django_db(transaction=True)
async def test_a_queued_call_of_a_user_deactivated_meanwhile_fails_and_an_anonymous_one_runs() -> None:
    SEEN.clear()
    with registry.registered_temporarily(make_tool(whoami, name="zz_whoami", background=True)):
        caller = await sync_to_async(make_user)("caller", staff=False)
        theirs = await sync_to_async(make_call)("zz_whoami", "working", user=caller, steps=0, background=True, arguments={"name": "zz_whoami", "arguments": {}})
        anonymous = await sync_to_async(make_call)("zz_whoami", "working", steps=0, background=True, arguments={"name": "zz_whoami", "arguments": {}})
        await sync_to_async(lambda: get_user_model().objects.filter(pk=caller.pk).update(is_active=False))()
        assert await background.run_in_worker(str(theirs.pk), "w") == "failed"
        assert SEEN == []
        assert await background.run_in_worker(str(anonymous.pk), "w") == "finished"
    assert len(SEEN) == 1 and "AnonymousUser" in SEEN[0]


def test_a_steps_huge_elicitation_message_is_capped_on_the_calls_page() -> None:
    import re
    from html import unescape

    operator = client_for(make_user("op", perms=OPERATOR))
    call = make_call("deploy", "input_required", steps=0)
    CallStep.objects.create(call=call, seq=0, kind="elicit", key="huge", digest="0" * 64, status="pending",
                            request={"method": "elicitation/create", "params": {"message": "x" * 300_000}})
    page = operator.get(detail_url(call)).content.decode()
    summary = unescape(re.search(r'<p class="mcp-summary-line">(.*?)</p>', page, re.S).group(1))  # type: ignore[union-attr]
    assert len(summary) == 10_000 and summary.endswith("…"), len(summary)
    assert len(page) < 150_000, len(page)  # the request block's 100,000 characters, and the rest of the page


@pytest.mark.parametrize("session_id, expected", [("", 8), ("s1", 9)])
def test_a_calls_page_runs_the_documented_queries_however_long_its_journal(session_id: str, expected: int) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    operator = client_for(make_user("op", perms=OPERATOR))
    counts = []
    for steps in (3, 130):
        call = make_call("deploy", "input_required", steps=steps, session_id=session_id)
        operator.get(detail_url(call))  # the session's and permission caches warm, as on any page after the first
        with CaptureQueriesContext(connection) as queries:
            assert operator.get(detail_url(call)).status_code == 200
        counts.append(len(queries))
    assert counts == [expected, expected], counts


class _SuperusersOnlySite(AdminSite):
    def has_permission(self, request: Any) -> bool:
        return super().has_permission(request) and request.user.is_superuser


class _GroupSite(AdminSite):
    """A site for the staff of one group (two such sites: each team its own console)."""

    def has_permission(self, request: Any) -> bool:
        return super().has_permission(request) and request.user.groups.filter(name=self.name).exists()


def _urlconf(**sites: AdminSite) -> Any:
    import types

    module = types.ModuleType("s37_urlconf")
    module.urlpatterns = [path(f"{prefix}/", site.urls) for prefix, site in sites.items()]  # type: ignore[attr-defined]
    return module


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("query", ["", "?site=admin", "?site=nonexistent", "?site=s37_strict"])
async def test_no_site_name_gets_a_user_past_a_stricter_site_that_serves_the_calls(query: str) -> None:
    """Found by a review of the fix above: with a stricter site serving the calls (django-otp's OTPAdminSite pattern)
    and the default site unmounted but still registering them (mcp_tools.admin does), a socket without ``?site=``,
    or naming the default or an unknown site, was accepted for a staff user the stricter site refuses, and got
    the dashboard pushed. Only a site the URLconf mounts is the socket's."""
    strict = _SuperusersOnlySite(name="s37_strict")
    strict.register(ToolCall, ToolCallAdmin)
    try:
        with override_settings(ROOT_URLCONF=_urlconf(strict=strict)):
            staff = await sync_to_async(make_user)("op", perms=OPERATOR)
            socket = await _socket(await sync_to_async(_session_cookie)(staff), query)
            connected, _ = await socket.connect()
            if connected:
                await socket.disconnect()
            assert not connected, query
            if query == "?site=s37_strict":  # the site lets its superusers in
                boss = await sync_to_async(lambda: get_user_model().objects.create_superuser("boss", "boss@example.com", "pw"))()
                socket = await _socket(await sync_to_async(_session_cookie)(boss), query)
                assert (await socket.connect())[0]
                await socket.disconnect()
    finally:
        strict.unregister(ToolCall)


@pytest.mark.django_db(transaction=True)
async def test_two_sites_for_two_teams_each_let_their_own_staff_watch() -> None:
    """The fix that asked every site serving the calls refused both teams' sockets (a review of that fix): each
    socket asks the site it is of."""
    from django.contrib.auth.models import Group

    eu, us = _GroupSite(name="eu"), _GroupSite(name="us")
    for site in (eu, us):
        site.register(ToolCall, ToolCallAdmin)
    try:
        with override_settings(ROOT_URLCONF=_urlconf(eu=eu, us=us)):
            for team in ("eu", "us"):
                member = await sync_to_async(make_user)(f"{team}-op", perms=OPERATOR)
                await sync_to_async(lambda: member.groups.add(Group.objects.get_or_create(name=team)[0]))()
                cookie = await sync_to_async(_session_cookie)(member)
                mine = await _socket(cookie, f"?site={team}")
                assert (await mine.connect())[0], team
                await mine.disconnect()
                other = await _socket(cookie, "?site=" + ("us" if team == "eu" else "eu"))
                assert not (await other.connect())[0], team
    finally:
        for site in (eu, us):
            site.unregister(ToolCall)
