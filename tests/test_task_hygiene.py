"""No task left behind: what a request, a stream or a write starts ends with it, and no failure goes unread.

A review of every task the package starts (after CI failed on a task the collector destroyed pending,
7fb713e) found these; each test failed before its fix:

- a resumed 2025-11-25 stream (GET + ``Last-Event-ID``) cancelled from outside left the call's
  ``continue_call`` run going, unheard and beyond any cancel;
- under ``include("mcp_tools.urls")``, a client that left while Django sent the streamed answer's start
  left the endpoint running for good (Django never iterated the stream whose ``finally`` stopped it);
- a slow call's row write that failed, and a call kept for its resume whose write failed after a second
  cancel, were "Task exception was never retrieved" instead of a warning of ours;
- ``broadcast.subscribed`` and the process channel raised "Event loop is closed" out of the collector
  when their loop had closed under them (tests/test_loop_wind_down.py);
- a tool raising a ``BaseException`` of a library's own was a 500 over HTTP and no reply over stdio.
"""
from __future__ import annotations

import asyncio
import gc
import io
import json
import logging
from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser

from mcp_tools import ToolContext, store
from mcp_tools.interprocess import notifications
from mcp_tools.protocol import jsonrpc
from mcp_tools.registry import make_tool, registry
from mcp_tools.server import core
from mcp_tools.server.auth import Principal
from mcp_tools.transports.stdio import StdioServer
from tests.asgi_client import call_modern, http_scope, post_headers, receive_then_disconnect
from tests.test_http_spec_edges import APP, open_session
from tests.test_session_stream_drop import Gate, dropped_at_two, gate, resumed  # noqa: F401  (gate: a fixture)

# The tests collect garbage to see what their own code left (a future whose exception nobody read):
# what earlier tests left is collected first.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("earlier_garbage_collected")]


def _pending(qualname: str) -> list[asyncio.Task[Any]]:
    return [t for t in asyncio.all_tasks() if not t.done() and getattr(t.get_coro(), "__qualname__", "") == qualname]


def _never_retrieved(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage()[:300] for r in caplog.records if "never retrieved" in r.getMessage()]


async def test_a_resumed_stream_cancelled_from_outside_stops_the_run_it_started(gate: Gate) -> None:  # noqa: F811
    session = await open_session()
    headers = post_headers(version="2025-11-25", session=session)
    first, event_id = await dropped_at_two(gate, headers, 7, "drop_count_rowed")
    again = resumed(headers, event_id)
    for _ in range(200):
        if _pending("continue_call"):
            break
        await asyncio.sleep(0.02)
    assert _pending("continue_call")
    again.task.cancel()  # the server stopping, the ASGI server's disconnect
    with pytest.raises(asyncio.CancelledError):
        await again.task
    await asyncio.sleep(0.2)
    left = _pending("continue_call")
    gate.release.set()
    first.gone.set()
    await asyncio.wait_for(first.task, 10)
    for task in left:
        task.cancel()
    assert left == []


async def test_a_view_stream_django_never_iterated_stops_its_endpoint(settings: Any) -> None:
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    from django.core.asgi import get_asgi_application

    app = get_asgi_application()
    session = await open_session()
    headers = {**post_headers(version="2025-11-25", session=session), "accept": "text/event-stream"}
    gone, starting = asyncio.Event(), asyncio.Event()
    receive = receive_then_disconnect(b"", gone)

    async def send(event: dict[str, Any]) -> None:
        if event["type"] == "http.response.start":
            starting.set()
            await asyncio.Event().wait()  # a slow socket: the start is still going out when the client leaves

    path = "/mcp-via-django"
    scope = http_scope("GET", path, headers)
    served = asyncio.ensure_future(app(scope, receive, send))
    await asyncio.wait_for(starting.wait(), 10)
    gone.set()  # the client leaves
    await asyncio.wait_for(served, 10)
    for _ in range(50):
        if not _pending("McpEndpoint.__call__"):
            break
        await asyncio.sleep(0.02)
    left = _pending("McpEndpoint.__call__")
    for task in left:
        task.cancel()
    assert left == []
    assert session not in notifications._streams, "the session's stream slot is free again"


async def test_a_slow_calls_row_write_that_fails_is_logged_not_left_unread(
    settings: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    settings.MCP_TOOLS = {**settings.MCP_TOOLS, "SLOW_CALL_SECONDS": 0.05}
    attempts: list[int] = []

    async def create_call(*args: Any, **kwargs: Any) -> str:
        attempts.append(1)
        raise RuntimeError("database went away (simulated)")

    monkeypatch.setattr(store, "create_call", create_call)

    async def slow_tool(ctx: ToolContext) -> str:
        """Slow: past SLOW_CALL_SECONDS."""
        await asyncio.sleep(0.3)
        return "done"

    caplog.set_level(logging.WARNING)
    with registry.registered_temporarily(make_tool(slow_tool)):
        await call_modern(APP, "tools/call", {"name": "slow_tool", "arguments": {}})
        await asyncio.sleep(0.05)
        gc.collect()
        await asyncio.sleep(0)
    assert attempts, "the slow call's row write ran"
    assert _never_retrieved(caplog) == []
    assert any(r.getMessage() == "Could not record the slow call of slow_tool" for r in caplog.records)


async def test_a_kept_calls_write_that_fails_after_a_second_cancel_is_logged(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    import types

    async def ensure_row(inv: Any, *, status: str) -> str:
        await asyncio.sleep(0.1)
        raise RuntimeError("database gone too (simulated)")

    monkeypatch.setattr(core, "ensure_row", ensure_row)
    caplog.set_level(logging.WARNING)
    inv = types.SimpleNamespace(state={"target": types.SimpleNamespace(name="some_tool")})
    keeping = asyncio.ensure_future(core._keep_for_resume(inv))  # type: ignore[arg-type]
    await asyncio.sleep(0.01)  # in its shielded write
    keeping.cancel()  # the server's second cancel
    await asyncio.wait({keeping})
    await core.kept_calls_written()
    await asyncio.sleep(0.05)
    gc.collect()
    await asyncio.sleep(0)
    assert _never_retrieved(caplog) == []
    assert any("Could not keep a stopped call of some_tool" in r.getMessage() for r in caplog.records)


class _LibraryAbort(BaseException):
    """A library's own control flow (gevent's ``GreenletExit``, pytest's outcomes)."""


async def _aborting_tool() -> str:
    """Raises a BaseException that is no Exception."""
    await asyncio.sleep(0)
    raise _LibraryAbort("stop")


def _aborting_sync_tool() -> str:
    """The same, in sync code."""
    raise _LibraryAbort("stop")


@pytest.mark.parametrize("tool", [_aborting_tool, _aborting_sync_tool], ids=["async", "sync"])
async def test_a_tools_own_base_exception_is_a_tool_error_over_http(tool: Any) -> None:
    with registry.registered_temporarily(make_tool(tool, name="aborting")):
        response = await call_modern(APP, "tools/call", {"name": "aborting", "arguments": {}})
    assert response.status == 200
    result = response.json()["result"]
    assert result["isError"] is True and result["content"][0]["text"] == core.internal_error_text("aborting")


async def test_a_tools_own_base_exception_is_answered_over_stdio(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger="asyncio")
    out = io.BytesIO()
    server = StdioServer(Principal(user=AnonymousUser(), id="anonymous"), io.BytesIO(), out)
    with registry.registered_temporarily(make_tool(_aborting_tool, name="aborting")):
        await server.handle(jsonrpc.parse_body(json.dumps(
            {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "aborting", "arguments": {}}}).encode()))
        for _ in range(100):
            if not server.running:
                break
            await asyncio.sleep(0.02)
    gc.collect()
    await asyncio.sleep(0)
    [line] = out.getvalue().splitlines()
    reply = json.loads(line)
    assert reply["id"] == 3 and reply["result"]["isError"] is True
    assert _never_retrieved(caplog) == []
