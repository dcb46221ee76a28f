"""A 2025-11-25 session call whose POST response stream drops while it runs, before it has a row.

The spec (2025-11-25 transports): "Disconnection SHOULD NOT be interpreted as the client cancelling
its request"; the client resumes with ``GET`` and ``Last-Event-ID``. A call gets its ``ToolCall`` row
only when it suspends, uses ``ctx.once`` or runs past ``SLOW_CALL_SECONDS``; one stopped by its
closed stream before that was lost, and the resumed stream ended without a response (the official
SDK then reconnects forever). It gets its row when it stops, if the client can resume (it was sent
an event id), and the resumed stream runs it again and answers.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from mcp_tools import ToolContext
from mcp_tools.models import CallStep, ToolCall
from mcp_tools.registry import make_tool, registry
from tests.asgi_client import post_headers
from tests.test_http_spec_edges import HANDSHAKE, Stream, _in_memory_layer, open_session  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


class Gate:
    """What the test tools wait on: runs started, and the release of the first run."""

    def __init__(self) -> None:
        self.runs = 0
        self.waiting = asyncio.Event()
        self.release = asyncio.Event()


@pytest.fixture
def gate(settings: Any) -> Any:
    """Registers ``drop_count`` and ``drop_quiet``; a resumed stream takes over a stopped run's round
    after three ``CANCEL_POLL_SECONDS`` without a touch of its row (``session._owner_gone``)."""
    settings.MCP_TOOLS = {**settings.MCP_TOOLS, "CANCEL_POLL_SECONDS": 0.05}
    held = Gate()

    async def drop_count(ctx: ToolContext, n: int) -> str:
        """Count to n, reporting progress; the first run stops at 2 until released."""
        held.runs += 1
        for i in range(1, n + 1):
            await ctx.report_progress(i, n)
            if i == 2 and not held.release.is_set():
                held.waiting.set()
                await held.release.wait()
        return f"counted to {n}"

    async def drop_quiet(ctx: ToolContext) -> str:
        """Wait until released, sending nothing before."""
        held.runs += 1
        held.waiting.set()
        await held.release.wait()
        return "done"

    with registry.registered_temporarily(make_tool(drop_count), make_tool(drop_quiet)):
        yield held


def call_message(request_id: Any, name: str, arguments: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                       "params": {"name": name, "arguments": arguments, "_meta": {"progressToken": "tok"}}}).encode()


def progress_values(stream: Stream) -> list[float]:
    return [m["params"]["progress"] for _, m in stream.events() if m.get("method") == "notifications/progress"]


async def test_a_rowless_call_whose_stream_dropped_after_progress_is_resumed_and_answers(gate: Gate) -> None:
    session = await open_session()
    headers = post_headers(version=HANDSHAKE, session=session)
    first = Stream("POST", headers, call_message(7, "drop_count", {"n": 4}))
    event_id, _ = await first.wait_for(lambda m: m.get("method") == "notifications/progress" and m["params"]["progress"] == 2)
    await asyncio.wait_for(gate.waiting.wait(), 10)
    assert await sync_to_async(ToolCall.objects.count)() == 0  # a fast call: no row while it runs
    first.gone.set()  # the network drops the POST's stream
    await asyncio.wait_for(first.task, 10)
    assert not any("result" in m or "error" in m for _, m in first.events())

    # Kept for the client: working, on the stream it had, with the progress it reached.
    row = await sync_to_async(ToolCall.objects.get)()
    assert (row.status, row.tool_name, row.request_id, row.progress) == ("working", "drop_count", "7", 2)
    assert row.stream_id
    # Nothing journaled: running it again repeats no effect.
    assert await sync_to_async(CallStep.objects.filter(call=row).count)() == 0

    gate.release.set()
    resumed = Stream("GET", {**headers, "accept": "text/event-stream", "last-event-id": event_id})
    _, final = await resumed.wait_for(lambda m: "result" in m or "error" in m)
    resumed.gone.set()
    await asyncio.wait_for(resumed.task, 10)
    assert final["id"] == 7 and final["result"]["content"] == [{"type": "text", "text": "counted to 4"}], final
    assert gate.runs == 2
    # The progress goes on from above what the client saw: never backwards on the token.
    assert progress_values(resumed) == [3, 4]
    row = await sync_to_async(ToolCall.objects.get)()
    assert (row.status, row.progress) == ("completed", 4)


async def test_a_rowless_call_whose_stream_closed_before_it_streamed_leaves_no_row(gate: Gate) -> None:
    """The client was sent no event id, so it cannot resume: the call is stopped as before, and no
    ``working`` row is left that nobody can reach."""
    session = await open_session()
    headers = post_headers(version=HANDSHAKE, session=session)
    first = Stream("POST", headers, call_message(8, "drop_quiet", {}))
    await asyncio.wait_for(gate.waiting.wait(), 10)
    first.gone.set()
    await asyncio.wait_for(first.task, 10)
    assert first.events() == []
    assert await sync_to_async(ToolCall.objects.count)() == 0
