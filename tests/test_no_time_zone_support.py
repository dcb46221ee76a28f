"""A site with ``USE_TZ = False`` end to end: calls, rounds, ``ctx.once``, sessions, expiry, cleanup, admin.

Django then stores naive wall times of ``TIME_ZONE`` and refuses aware datetimes on SQLite. The store
writes its datetimes itself (``store/sql.py``, with a fast path for aware UTC values): these tests
check that every time it writes is the naive local one Django would write, so that expiry compares
like with like. A naive UTC time mixed in would be 9 hours old in Tokyo (a call expired at once, a
session ended at its next request) or 5 hours ahead in New York (an abandoned call left for hours):
the TTLs here (one hour) are shorter than either offset. No change was needed; nothing covered the
setting end to end before.
"""

from __future__ import annotations

from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.core.management import call_command
from django.test import override_settings
from django.urls import reverse
from django.utils import timezone

from mcp_tools import ToolContext
from mcp_tools.models import CallStep, McpSession, ToolCall
from mcp_tools.registry import make_tool, registry
from tests.asgi_client import HANDSHAKE, call_modern, handshake_message, post_headers, post_json
from tests.conftest import reset_thread_time_zones
from tests.test_admin_console import client_for, make_user

pytestmark = pytest.mark.django_db(transaction=True)
FORM = {"elicitation": {"form": {}}}
TTL = 3600
#: What the tool's ``ctx.once`` effect did, one entry a run.
EFFECTS: list[str] = []


def _record(what: str) -> int:
    EFFECTS.append(what)
    return len(EFFECTS)


async def two_questions(ctx: ToolContext) -> str:
    """Run an effect once, then ask two questions, one per round."""
    runs = await ctx.once("effect", _record, "ran")
    a = await ctx.elicit("A?", {"type": "object", "properties": {"a": {"type": "string"}}}, key="a")
    b = await ctx.elicit("B?", {"type": "object", "properties": {"b": {"type": "string"}}}, key="b")
    return f"{a['a']}{b['b']} after {runs} effect(s)"


def add_one(x: int) -> int:
    """A plain call."""
    return x + 1


@pytest.fixture(params=["Asia/Tokyo", "America/New_York"])
async def app(request: Any, settings: Any) -> Any:
    """The endpoint with ``USE_TZ = False`` in a zone ahead of UTC, then one behind it."""
    from demo_site.asgi import application

    mcp = {**settings.MCP_TOOLS, "RECORD_ALL_CALLS": True, "CALL_TTL": TTL, "SESSION_IDLE_SECONDS": TTL}
    EFFECTS.clear()
    with override_settings(USE_TZ=False, TIME_ZONE=request.param, MCP_TOOLS=mcp):
        await reset_thread_time_zones()
        with registry.registered_temporarily(make_tool(two_questions), make_tool(add_one)):
            yield application
    await reset_thread_time_zones()


def assert_local_wall_time(value: Any) -> None:
    """``value`` is naive and close to the naive local time now (not hours off)."""
    assert value.tzinfo is None
    assert abs((timezone.now() - value).total_seconds()) < 600, (value, timezone.now())


async def rows() -> list[ToolCall]:
    return await sync_to_async(list)(ToolCall.objects.order_by("created_at"))


async def cleanup() -> str:
    out = StringIO()
    await sync_to_async(call_command)("mcp_cleanup", stdout=out)
    return out.getvalue()


async def ask(app: Any, **params: Any) -> dict[str, Any]:
    body: dict[str, Any] = (await call_modern(app, "tools/call", {"name": "two_questions", "arguments": {}, **params},
                                              capabilities=FORM)).json()
    return body


async def test_a_plain_call_is_recorded_in_local_wall_time(app: Any) -> None:
    body = (await call_modern(app, "tools/call", {"name": "add_one", "arguments": {"x": 1}})).json()
    assert body["result"]["structuredContent"] == {"result": 2}, body
    (row,) = await rows()
    assert row.status == "completed"
    for value in (row.created_at, row.updated_at, row.finished_at):
        assert_local_wall_time(value)
    assert row.expires_at - row.created_at == timedelta(seconds=TTL)


async def test_an_eliciting_call_runs_its_rounds_and_its_effect_once(app: Any) -> None:
    first = await ask(app)
    assert first["result"]["resultType"] == "input_required", first
    second = await ask(app, requestState=first["result"]["requestState"],
                       inputResponses={"a": {"action": "accept", "content": {"a": "1"}}})
    assert second["result"]["resultType"] == "input_required", second  # not expired between the rounds
    assert "Expired 0 call(s)" in await cleanup()  # nor by the cleanup, an hour before its time
    third = await ask(app, requestState=second["result"]["requestState"],
                      inputResponses={"b": {"action": "accept", "content": {"b": "2"}}})
    assert third["result"]["content"][0]["text"] == "12 after 1 effect(s)", third
    assert EFFECTS == ["ran"]
    (row,) = await rows()
    assert row.status == "completed" and row.expires_at - row.created_at == timedelta(seconds=TTL)
    assert_local_wall_time(row.finished_at)
    answered = await sync_to_async(list)(CallStep.objects.filter(call=row).exclude(answered_at=None).values_list("answered_at", flat=True))
    assert len(answered) == 3  # the once step and both answers
    for value in answered:
        assert_local_wall_time(value)
    # The admin's call list and the call's page show it.
    operator = await sync_to_async(client_for)(await sync_to_async(make_user)("op", perms=("view_toolcall",)))
    listed = await sync_to_async(operator.get)(reverse("admin:mcp_tools_toolcall_changelist") + "?state=all")
    page = await sync_to_async(operator.get)(reverse("admin:mcp_tools_toolcall_change", args=[row.pk]))
    assert (listed.status_code, page.status_code) == (200, 200)
    assert str(row.pk) in listed.content.decode()


async def test_a_waiting_call_expires_at_its_ttl(app: Any) -> None:
    first = await ask(app)
    (row,) = await rows()
    assert row.status == "input_required"
    assert_local_wall_time(row.updated_at)
    assert "Expired 0 call(s)" in await cleanup()
    # Its TTL is over: the cleanup expires it and the next round is refused.
    await sync_to_async(ToolCall.objects.filter(pk=row.pk).update)(expires_at=timezone.now() - timedelta(seconds=1))
    assert "Expired 1 call(s)" in await cleanup()
    late = await ask(app, requestState=first["result"]["requestState"],
                     inputResponses={"a": {"action": "accept", "content": {"a": "1"}}})
    assert "error" in late or late["result"].get("isError"), late
    assert EFFECTS == ["ran"]


async def test_a_2025_11_25_session_lives_its_idle_time(app: Any) -> None:
    r = await post_json(app, handshake_message("initialize", {"protocolVersion": HANDSHAKE, "capabilities": FORM,
                                                              "clientInfo": {"name": "t", "version": "1"}}), post_headers(version=None))
    assert r.status == 200, r.body
    session = r.header("mcp-session-id")
    headers = post_headers(version=HANDSHAKE, session=session)
    r = await post_json(app, handshake_message("tools/call", {"name": "add_one", "arguments": {"x": 1}}), headers)
    assert r.json()["result"]["structuredContent"] == {"result": 2}, r.body
    row = await sync_to_async(McpSession.objects.get)(id=session)
    assert_local_wall_time(row.last_seen_at)
    assert "Deleted 0 session(s)" in await cleanup()
    # Unused for longer than SESSION_IDLE_SECONDS: ended at its next request (past the process's cache).
    await sync_to_async(McpSession.objects.filter(id=session).update)(last_seen_at=timezone.now() - timedelta(seconds=TTL + 60))
    from mcp_tools.server import sessions

    sessions.clear()
    assert (await post_json(app, handshake_message("ping"), headers)).status == 404
