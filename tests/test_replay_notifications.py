"""A handler replayed from its journal does not send again the notifications its earlier run sent.

On each round a handler runs from the top, and every step already journaled returns its answer:
the progress it reported and the log lines it wrote before those steps were sent when the earlier
run got there. 2025-11-25 basic/utilities/progress (and 2026-07-28 basic/patterns/progress): "The
progress value MUST increase with each notification". A 2025-11-25 call keeps one request, one
stream and one progressToken while the client answers an elicitation, or while a worker runs the
rest of a deferred handler: the replay re-sent progress 1 (and the log line) on that stream, and
the client saw 1, 1, 2. Each test failed before the fix.

The Celery worker is simulated in-process, as in tests/test_background_review.py.
"""
from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from mcp_tools import ToolContext
from mcp_tools.models import ToolCall
from mcp_tools.registry import make_tool, registry
from mcp_tools.server import background
from tests.asgi_client import HANDSHAKE, call_modern, post_headers, post_json
from tests.test_background_review import queued  # noqa: F401
from tests.test_http_spec_edges import APP, Stream, _in_memory_layer, open_session  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)

NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}}


def _notifications(sent: Stream | Any) -> tuple[list[Any], list[Any]]:
    """The progress values and log data a stream (or a finished SSE response) carried, in order."""
    messages = [data for _, data in sent.events()] if isinstance(sent, Stream) else sent.sse_messages()
    progress = [m["params"]["progress"] for m in messages if m.get("method") == "notifications/progress"]
    logs = [m["params"]["data"] for m in messages if m.get("method") == "notifications/message"]
    return progress, logs


async def _call_on_a_stream(name: str) -> tuple[dict[str, str], Stream]:
    """A session (that can answer elicitations, at log level info) calling ``name`` with progressToken "p"."""
    session = await open_session({"elicitation": {}})
    headers = post_headers(version=HANDSHAKE, session=session)
    level = await post_json(APP, {"jsonrpc": "2.0", "id": 1, "method": "logging/setLevel", "params": {"level": "info"}}, headers)
    assert level.status == 200, level.body
    call = {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": name, "arguments": {}, "_meta": {"progressToken": "p"}}}
    return headers, Stream("POST", headers, json.dumps(call).encode())


async def _answer_the_question(stream: Stream, headers: dict[str, str]) -> None:
    _, ask = await stream.wait_for(lambda m: m.get("method") == "elicitation/create")
    answered = await post_json(APP, {"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"name": "x"}}}, headers)
    assert answered.status == 202


async def progress_then_ask(ctx: ToolContext) -> str:
    """Progress, a question, more progress."""
    await ctx.report_progress(1, 3, "one")
    await ctx.log("info", "before the question")
    answer = await ctx.elicit("Name?", NAME_SCHEMA, key="name")
    await ctx.report_progress(2, 3, "two")
    await ctx.log("info", "after the question")
    return str(answer.get("name"))


async def test_a_session_call_replayed_after_an_elicitation_sends_each_notification_once() -> None:
    with registry.registered_temporarily(make_tool(progress_then_ask, name="replay_progress_then_ask")):
        headers, stream = await _call_on_a_stream("replay_progress_then_ask")
        try:
            await _answer_the_question(stream, headers)
            _, final = await stream.wait_for(lambda m: m.get("id") == 5)
        finally:
            stream.gone.set()
        row = await sync_to_async(ToolCall.objects.get)(tool_name="replay_progress_then_ask")
    assert final["result"]["content"] == [{"type": "text", "text": "x"}], final
    progress, logs = _notifications(stream)
    assert progress == [1, 2], f"progress went {progress} on one token"
    assert logs == ["before the question", "after the question"], logs
    # The row (tasks/get, the admin) has the last progress reported.
    assert (row.status, row.progress, row.progress_total, row.status_message) == ("completed", 2, 3, "two")


async def progress_then_defer(ctx: ToolContext) -> str:
    """Progress and a log line in the request; the rest on a worker, which asks a question."""
    await ctx.report_progress(1, 3, "one")
    await ctx.log("info", "in the request")
    await ctx.defer()
    answer = await ctx.elicit("Name?", NAME_SCHEMA, key="name")
    await ctx.report_progress(2, 3, "two")
    return str(answer.get("name"))


async def _queued(queued: list[str], count: int) -> str:
    for _ in range(250):
        if len(queued) >= count:
            break
        await asyncio.sleep(0.02)
    assert len(queued) == count, queued
    return queued[-1]


async def test_a_deferred_session_call_relays_only_the_workers_new_progress(queued: list[str]) -> None:
    """The stream that holds a deferred call relays the worker's progress from the row. The worker
    replays the handler from the top (twice: before and after its question): the progress the
    request sent before deferring must not reach the stream again. The stream relays the row's
    progress before it sends the worker's question, so the question marks when a relay was due."""
    with registry.registered_temporarily(make_tool(progress_then_defer, name="replay_progress_then_defer")):
        headers, stream = await _call_on_a_stream("replay_progress_then_defer")
        try:
            call_id = await _queued(queued, 1)
            # The row has the progress the request reported before the call had a row.
            deferred = await sync_to_async(ToolCall.objects.get)(id=call_id)
            assert (deferred.progress, deferred.progress_total, deferred.status_message) == (1, 3, "one")
            assert await background.run_in_worker(call_id, "w-test") == "input-required"
            await _answer_the_question(stream, headers)
            assert await _queued(queued, 2) == call_id
            assert await background.run_in_worker(call_id, "w-test") == "finished"
            _, final = await stream.wait_for(lambda m: m.get("id") == 5)
        finally:
            stream.gone.set()
        row = await sync_to_async(ToolCall.objects.get)(id=call_id)
    assert final["result"]["content"] == [{"type": "text", "text": "x"}], final
    progress, logs = _notifications(stream)
    assert progress == [1, 2], f"progress went {progress} on one token"
    assert logs == ["in the request"], logs
    assert (row.status, row.progress, row.status_message) == ("completed", 2, "two")


async def twice_the_same(ctx: ToolContext) -> str:
    """A handler whose progress does not always increase."""
    await ctx.report_progress(1)
    await ctx.report_progress(1, message="still one")
    await ctx.report_progress(0.5)
    await ctx.report_progress(2)
    return "ok"


async def test_progress_that_does_not_increase_is_not_sent() -> None:
    """Each notification on one token is above the last one sent on it; the others are dropped."""
    with registry.registered_temporarily(make_tool(twice_the_same, name="replay_twice_the_same")):
        _, stream = await _call_on_a_stream("replay_twice_the_same")
        try:
            await stream.wait_for(lambda m: m.get("id") == 5)
        finally:
            stream.gone.set()
    assert _notifications(stream)[0] == [1, 2]


async def test_a_2026_round_gets_the_notifications_of_the_handlers_new_work_only() -> None:
    """2026-07-28: each round is its own request ("completely independent"), and a client may give each
    retry the same progressToken. A retry replays the steps answered before it: it gets the progress
    and log lines of what the handler does after them, not again those the earlier round's request got."""
    meta = {"progressToken": "p", "io.modelcontextprotocol/logLevel": "info"}
    caps = {"elicitation": {"form": {}}}
    params: dict[str, Any] = {"name": "replay_progress_then_ask", "arguments": {}, "_meta": meta}
    with registry.registered_temporarily(make_tool(progress_then_ask, name="replay_progress_then_ask")):
        first = await call_modern(APP, "tools/call", params, capabilities=caps)
        asked = first.json()["result"]
        assert asked["resultType"] == "input_required", asked
        second = await call_modern(APP, "tools/call", {**params, "requestState": asked["requestState"], "inputResponses": {
            "name": {"action": "accept", "content": {"name": "x"}}}}, capabilities=caps)
    assert second.json()["result"]["content"] == [{"type": "text", "text": "x"}]
    assert _notifications(first) == ([1], ["before the question"])
    assert _notifications(second) == ([2], ["after the question"])
