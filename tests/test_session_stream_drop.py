"""A 2025-11-25 session call whose POST response stream drops while its handler runs.

The spec (2025-11-25 transports): "Disconnection SHOULD NOT be interpreted as the client cancelling
its request"; the client resumes with ``GET`` and ``Last-Event-ID``. Once the client holds an event
id of the stream, the handler goes on: what it sends, and its answer, are kept in the stream's event
log, and a resumed stream replays them (a call with a row is followed there until it ends). It is
not run again, so an effect outside ``ctx.once`` happens once. It used to be stopped: a call with
no row yet was lost (the resumed stream ended without a response, and the official SDK reconnected
forever), and one with a row ran again from its journal on the resumed stream.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from mcp_tools import Page, ToolContext
from mcp_tools.models import ToolCall
from mcp_tools.registry import make_tool, registry
from tests.asgi_client import post_headers, post_json, request
from tests.test_http_spec_edges import APP, HANDSHAKE, Stream, _in_memory_layer, open_session  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


class Gate:
    """What the test tools wait on and count: runs started, effects made, runs stopped."""

    def __init__(self) -> None:
        self.runs = 0
        self.effects = 0
        self.stopped = 0
        self.waiting = asyncio.Event()
        self.release = asyncio.Event()
        #: The cursors of the pages whose runs finished counting.
        self.cursors: list[int] = []


@pytest.fixture
def gate(settings: Any) -> Any:
    """Registers ``drop_count`` (no row while it runs), ``drop_count_rowed`` (a ``ctx.once`` first: a
    row from the start) and ``drop_quiet`` (sends nothing). A round nobody runs is taken over after
    three ``CANCEL_POLL_SECONDS`` without a touch of its row (``session._owner_gone``)."""
    settings.MCP_TOOLS = {**settings.MCP_TOOLS, "CANCEL_POLL_SECONDS": 0.05}
    held = Gate()

    async def count(ctx: ToolContext, n: int) -> str:
        held.runs += 1
        try:
            for i in range(1, n + 1):
                await ctx.report_progress(i, n)
                if i == 2 and not held.release.is_set():
                    held.waiting.set()
                    await held.release.wait()
        except asyncio.CancelledError:
            held.stopped += 1
            raise
        held.effects += 1  # an effect outside ctx.once: it must not happen twice
        return f"counted to {n}"

    async def drop_count(ctx: ToolContext, n: int) -> str:
        """Count to n, reporting progress; the first run stops at 2 until released."""
        return await count(ctx, n)

    async def drop_count_rowed(ctx: ToolContext, n: int) -> str:
        """The same, after a ctx.once (which gives the call its row)."""
        await ctx.once("start", lambda: "started")
        return await count(ctx, n)

    async def drop_quiet(ctx: ToolContext) -> str:
        """Wait until released, sending nothing before."""
        held.runs += 1
        held.waiting.set()
        await held.release.wait()
        return "done"

    async def drop_quiet_rowed(ctx: ToolContext) -> str:
        """The same, after a ctx.once (which gives the call its row)."""
        await ctx.once("start", lambda: "started")
        return await drop_quiet(ctx)

    async def drop_then_ask(ctx: ToolContext) -> str:
        """Report progress, wait until released, then ask the user."""
        held.runs += 1
        await ctx.report_progress(1, 2)
        await ctx.report_progress(2, 2)
        if not held.release.is_set():
            held.waiting.set()
            await held.release.wait()
        answer = await ctx.elicit("Name?", {"type": "object", "properties": {"name": {"type": "string"}}})
        held.effects += 1
        return f"hello {answer['name']}"

    def drop_sync(ctx: ToolContext) -> str:
        """A sync tool: progress every 10 ms for 5 s, then its effect."""
        held.runs += 1
        try:
            for i in range(1, 501):
                ctx.report_progress(i, 500)
                time.sleep(0.01)
        except asyncio.CancelledError:
            held.stopped += 1
            raise
        held.effects += 1
        return "done"

    async def drop_pages(ctx: ToolContext) -> Page[list[int]]:
        """Pages of two numbers from the cursor, after a ctx.once (a row from the start); the first
        run of a page after the first stops at progress 2 until released."""
        await ctx.once("start", lambda: "started")
        start = int(ctx.cursor or 0)
        if start and await count(ctx, 4) and start not in held.cursors:
            held.cursors.append(start)
        return Page([start, start + 1], next_cursor=start + 2)

    with registry.registered_temporarily(make_tool(drop_count), make_tool(drop_count_rowed), make_tool(drop_quiet), make_tool(drop_quiet_rowed),
                                         make_tool(drop_then_ask), make_tool(drop_sync), make_tool(drop_pages, paginate=True)):
        yield held


def call_message(request_id: Any, name: str, arguments: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                       "params": {"name": name, "arguments": arguments, "_meta": {"progressToken": "tok"}}}).encode()


def progress_values(stream: Stream) -> list[float]:
    return [m["params"]["progress"] for _, m in stream.events() if m.get("method") == "notifications/progress"]


def resumed(headers: dict[str, str], event_id: str | None) -> Stream:
    assert event_id is not None
    return Stream("GET", {**headers, "accept": "text/event-stream", "last-event-id": event_id})


async def answer_of(stream: Stream) -> dict[str, Any]:
    _, final = await stream.wait_for(lambda m: "result" in m or "error" in m)
    stream.gone.set()
    await asyncio.wait_for(stream.task, 10)
    return final


async def dropped_at_two(gate: Gate, headers: dict[str, str], request_id: int, tool: str) -> tuple[Stream, str | None]:
    """A call of ``tool`` counting to 4 whose POST stream drops after progress 2."""
    first = Stream("POST", headers, call_message(request_id, tool, {"n": 4}))
    event_id, _ = await first.wait_for(lambda m: m.get("method") == "notifications/progress" and m["params"]["progress"] == 2)
    await asyncio.wait_for(gate.waiting.wait(), 10)
    first.gone.set()  # the network drops the POST's stream
    await asyncio.sleep(0.05)
    return first, event_id


@pytest.mark.parametrize("tool", ["drop_count", "drop_count_rowed"])
async def test_a_call_whose_stream_dropped_goes_on_and_the_resumed_stream_gets_its_answer(gate: Gate, tool: str) -> None:
    session = await open_session()
    headers = post_headers(version=HANDSHAKE, session=session)
    first, event_id = await dropped_at_two(gate, headers, 7, tool)
    assert not first.task.done() and gate.stopped == 0  # not stopped: the handler still runs
    rows = await sync_to_async(ToolCall.objects.count)()
    assert rows == (0 if tool == "drop_count" else 1)  # a fast call has no row, and gets none for the drop

    if tool == "drop_count_rowed":
        again = resumed(headers, event_id)  # resumed while it runs: the stream follows the call
        await asyncio.sleep(0.3)  # past three CANCEL_POLL_SECONDS: its runner is alive, nobody takes it over
        gate.release.set()
        final = await answer_of(again)
    else:
        gate.release.set()
        await asyncio.wait_for(first.task, 10)  # the answer goes to the stream's event log
        again = resumed(headers, event_id)
        final = await answer_of(again)
    assert final["id"] == 7 and final["result"]["content"] == [{"type": "text", "text": "counted to 4"}], final
    assert (gate.runs, gate.effects, gate.stopped) == (1, 1, 0)  # run once, never again
    # What the client missed, never backwards on the token: replayed from the event log, or relayed
    # from the row of the call the stream follows (which may skip a value the row moved past).
    seen = progress_values(again)
    assert seen[-1] == 4 and all(2 < a < b for a, b in zip([2.5, *seen], seen)), seen
    if tool == "drop_count":
        assert seen == [3, 4]
    else:
        assert (await sync_to_async(ToolCall.objects.get)()).status == "completed"
    await asyncio.wait_for(first.task, 10)


@pytest.mark.parametrize("tool", ["drop_quiet", "drop_quiet_rowed"])
async def test_a_call_whose_stream_closed_before_it_streamed_is_stopped_and_ends(gate: Gate, tool: str) -> None:
    """The client was sent no event id, so it cannot resume: the call is stopped, as before, and leaves no
    row. One that has its row (a ``ctx.once``, or past ``SLOW_CALL_SECONDS``) ends ``cancelled``: it stayed
    ``working`` until its ``CALL_TTL`` (a day), "in flight" in the console, with nothing left to finish it
    and no client able to resume it."""
    session = await open_session()
    headers = post_headers(version=HANDSHAKE, session=session)
    first = Stream("POST", headers, call_message(8, tool, {}))
    await asyncio.wait_for(gate.waiting.wait(), 10)
    first.gone.set()
    await asyncio.wait_for(first.task, 10)
    assert first.events() == []
    rows = await sync_to_async(list)(ToolCall.objects.values_list("status", flat=True))
    assert rows == ([] if tool == "drop_quiet" else ["cancelled"]), rows


@pytest.mark.parametrize("tool", ["drop_count", "drop_count_rowed"])
async def test_the_clients_cancel_stops_a_call_its_dropped_stream_left_running(gate: Gate, tool: str) -> None:
    """notifications/cancelled after the drop: the handler stops, the row (if any) ends cancelled,
    and no answer is kept for a resume."""
    session = await open_session()
    headers = post_headers(version=HANDSHAKE, session=session)
    first, _ = await dropped_at_two(gate, headers, 11, tool)
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 11, "reason": "gave up"}}
    assert (await post_json(APP, cancel, headers)).status == 202
    await asyncio.wait_for(first.task, 10)
    assert (gate.runs, gate.effects, gate.stopped) == (1, 0, 1)
    assert not any("result" in m or "error" in m for _, m in first.events())
    statuses = await sync_to_async(lambda: list(ToolCall.objects.values_list("status", flat=True)))()
    assert statuses == ([] if tool == "drop_count" else ["cancelled"])


async def test_a_call_whose_runner_was_killed_after_the_drop_is_run_again_and_a_resumed_drop_is_no_cancel(gate: Gate) -> None:
    """The server stops the handler its closed stream left running (Daphne's application_close_timeout,
    a shutdown): a call with a row stays working, and a resumed stream runs it again from its journal.
    That resumed stream dropping in turn is not a cancellation either (it used to end the call
    ``cancelled``): the next resume answers."""
    session = await open_session()
    headers = post_headers(version=HANDSHAKE, session=session)
    first, event_id = await dropped_at_two(gate, headers, 9, "drop_count_rowed")
    first.task.cancel()  # what the ASGI server does to an application that outlives its client
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(first.task, 10)
    assert gate.stopped == 1
    assert (await sync_to_async(ToolCall.objects.get)()).status == "working"

    gate.waiting.clear()
    second = resumed(headers, event_id)
    await asyncio.wait_for(gate.waiting.wait(), 10)  # run again on the resumed stream, stopped at 2
    second.gone.set()
    await asyncio.wait_for(second.task, 10)
    assert (await sync_to_async(ToolCall.objects.get)()).status == "working"

    gate.release.set()
    third = resumed(headers, event_id)
    final = await answer_of(third)
    assert final["id"] == 9 and final["result"]["content"] == [{"type": "text", "text": "counted to 4"}], final
    assert (gate.runs, gate.effects) == (3, 1)
    assert progress_values(third) == [3, 4]


async def test_a_page_whose_runner_was_killed_after_the_drop_is_run_again_for_the_same_page(gate: Gate) -> None:
    """The run a resumed stream makes from the call's row (its runner gone) had ``ctx.cursor`` None, and
    answered the first page for the second: the cursor is in the row (``_meta``, ``mcp-tools/cursor``)."""
    session = await open_session()
    headers = post_headers(version=HANDSHAKE, session=session)
    gate.release.set()
    page_one = await post_json(APP, json.loads(call_message(1, "drop_pages", {})), headers)
    token = page_one.json()["result"]["nextResumeToken"]
    gate.release.clear()
    message = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "drop_pages", "arguments": {}, "resumeToken": token, "_meta": {"progressToken": "tok"}}}
    first = Stream("POST", headers, json.dumps(message).encode())
    event_id, _ = await first.wait_for(lambda m: m.get("method") == "notifications/progress" and m["params"]["progress"] == 2)
    await asyncio.wait_for(gate.waiting.wait(), 10)
    first.gone.set()  # the network drops the POST's stream...
    await asyncio.sleep(0.05)
    first.task.cancel()  # ...and the ASGI server stops the application that outlived its client
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(first.task, 10)
    assert gate.stopped == 1

    gate.release.set()
    final = await answer_of(resumed(headers, event_id))
    assert final["id"] == 2 and final["result"]["structuredContent"]["result"] == [2, 3], final
    assert gate.cursors == [2]


async def test_a_call_that_asks_after_its_stream_dropped_is_taken_over_by_the_journal(gate: Gate) -> None:
    """The handler its dropped stream left running asks for input: it stops there (nothing waits in
    memory), the request is in the stream's event log, and the resumed stream answers once the client has."""
    session = await open_session({"elicitation": {}})
    headers = post_headers(version=HANDSHAKE, session=session)
    first = Stream("POST", headers, call_message(13, "drop_then_ask", {}))
    event_id, _ = await first.wait_for(lambda m: m.get("method") == "notifications/progress" and m["params"]["progress"] == 2)
    await asyncio.wait_for(gate.waiting.wait(), 10)
    first.gone.set()
    await asyncio.sleep(0.05)
    assert not first.task.done()
    gate.release.set()
    await asyncio.wait_for(first.task, 10)  # it asked, and stopped: the journal holds the call
    row = await sync_to_async(ToolCall.objects.get)()
    assert row.status == "input_required"

    again = resumed(headers, event_id)
    _, asked = await again.wait_for(lambda m: m.get("method") == "elicitation/create")
    reply = {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {"name": "ada"}}}
    assert (await post_json(APP, reply, headers)).status == 202
    final = await answer_of(again)
    assert final["id"] == 13 and final["result"]["content"] == [{"type": "text", "text": "hello ada"}], final
    assert (gate.runs, gate.effects) == (2, 1)


async def test_deleting_the_session_stops_what_its_closed_streams_left_running(gate: Gate) -> None:
    """After DELETE no request reaches the session (404), so nobody can resume a stream of it for an
    answer: a handler its closed stream left running stops (the official SDK deletes, then closes)."""
    session = await open_session()
    headers = post_headers(version=HANDSHAKE, session=session)
    first, _ = await dropped_at_two(gate, headers, 15, "drop_count")
    assert (await request(APP, "DELETE", headers=headers)).status == 204
    await asyncio.wait_for(first.task, 10)
    assert (gate.runs, gate.effects, gate.stopped) == (1, 0, 1)
    assert await sync_to_async(ToolCall.objects.count)() == 0


async def test_the_clients_cancel_still_stops_it_after_a_resumed_stream_that_dropped_too(gate: Gate) -> None:
    """A resumed stream registered for the request, then dropped: the detached handler stays registered,
    and a later notifications/cancelled stops it (each registrant leaves with its own entry)."""
    session = await open_session()
    headers = post_headers(version=HANDSHAKE, session=session)
    first, event_id = await dropped_at_two(gate, headers, 21, "drop_count_rowed")
    again = resumed(headers, event_id)
    await asyncio.sleep(0.2)  # the resumed stream follows the call
    again.gone.set()
    await asyncio.wait_for(again.task, 10)
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 21, "reason": "gave up"}}
    assert (await post_json(APP, cancel, headers)).status == 202
    await asyncio.wait_for(first.task, 10)
    assert (gate.runs, gate.effects, gate.stopped) == (1, 0, 1)
    assert (await sync_to_async(ToolCall.objects.get)()).status == "cancelled"


async def test_one_response_per_request_when_a_resumed_stream_and_the_detached_handler_both_answer(gate: Gate) -> None:
    session = await open_session()
    headers = post_headers(version=HANDSHAKE, session=session)
    first, event_id = await dropped_at_two(gate, headers, 23, "drop_count_rowed")
    again = resumed(headers, event_id)
    await asyncio.sleep(0.2)
    gate.release.set()
    assert (await answer_of(again))["id"] == 23
    await asyncio.wait_for(first.task, 10)
    # The client lost that stream before it read the answer: it resumes from its last id again.
    third = resumed(headers, event_id)
    await asyncio.wait_for(third.task, 10)
    responses = [m for _, m in third.events() if "result" in m or "error" in m]
    assert [m["id"] for m in responses] == [23], responses


@pytest.mark.parametrize("tool", ["drop_count", "drop_count_rowed"])
async def test_a_stream_closed_after_its_session_was_deleted_stops_its_handler(gate: Gate, tool: str) -> None:
    """The official SDK deletes its session, then closes its streams: the handler is not detached."""
    session = await open_session()
    headers = post_headers(version=HANDSHAKE, session=session)
    first = Stream("POST", headers, call_message(31, tool, {"n": 4}))
    await first.wait_for(lambda m: m.get("method") == "notifications/progress" and m["params"]["progress"] == 2)
    await asyncio.wait_for(gate.waiting.wait(), 10)
    assert (await request(APP, "DELETE", headers=headers)).status == 204
    first.gone.set()
    await asyncio.wait_for(first.task, 10)
    assert (gate.runs, gate.effects, gate.stopped) == (1, 0, 1)


async def test_a_cancel_while_a_resumed_stream_follows_keeps_no_answer(gate: Gate) -> None:
    """notifications/cancelled while a resumed stream follows the detached call: neither the stream nor the
    handler answers (the log keeps no response); a resume after that is told the call was cancelled."""
    from mcp_tools.models import StreamEvent

    session = await open_session()
    headers = post_headers(version=HANDSHAKE, session=session)
    first, event_id = await dropped_at_two(gate, headers, 41, "drop_count_rowed")
    again = resumed(headers, event_id)
    await asyncio.sleep(0.2)
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 41, "reason": "gave up"}}
    assert (await post_json(APP, cancel, headers)).status == 202
    await asyncio.wait_for(again.task, 10)
    await asyncio.wait_for(first.task, 10)
    assert not any("result" in m or "error" in m for _, m in again.events())
    logged = await sync_to_async(lambda: [p for p in StreamEvent.objects.values_list("payload", flat=True) if '"result"' in p])()
    assert logged == []
    assert (gate.effects, gate.stopped) == (0, 1)
    later = resumed(headers, event_id)
    final = await answer_of(later)
    assert final["id"] == 41 and "cancelled" in final["result"]["content"][0]["text"], final


@pytest.mark.parametrize("drop", [False, True], ids=["open", "dropped"])
async def test_a_sync_tool_without_a_row_stops_at_its_next_step_once_cancelled(gate: Gate, drop: bool) -> None:
    """Python cannot interrupt a sync handler's thread: a stopped run makes its next ctx step raise
    CancelledError (it used to run to its end, effects included, when no send failed to stop it)."""
    session = await open_session()
    headers = post_headers(version=HANDSHAKE, session=session)
    first = Stream("POST", headers, call_message(51, "drop_sync", {}))
    await first.wait_for(lambda m: m.get("method") == "notifications/progress" and m["params"]["progress"] >= 2)
    if drop:
        first.gone.set()
        await asyncio.sleep(0.05)
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 51, "reason": "gave up"}}
    assert (await post_json(APP, cancel, headers)).status == 202
    await asyncio.wait_for(first.task, 10)
    for _ in range(100):  # the thread reaches its next step within 10 ms
        if gate.stopped:
            break
        await asyncio.sleep(0.02)
    assert (gate.runs, gate.effects, gate.stopped) == (1, 0, 1)
    assert await sync_to_async(ToolCall.objects.count)() == 0


# -- the server's shutdown is no cancellation either --------------------------------------------------


async def test_a_call_the_server_stops_at_shutdown_stays_working_and_a_resume_elsewhere_finishes_it(gate: Gate) -> None:
    """Daphne's shutdown cancels every application task without an ``http.disconnect`` first (uvicorn
    does the same past ``--timeout-graceful-shutdown``). A review restarting daphne with the official
    SDK mid-call saw the call end ``cancelled`` ("The call was cancelled before it finished." on the
    resumed stream), its effect never made: the server going away was taken for the client's cancel.
    A call with a row stays working, and the client's resume (here, on what stands for the other
    process) runs it from its journal."""
    session = await open_session()
    headers = post_headers(version=HANDSHAKE, session=session)
    first = Stream("POST", headers, call_message(21, "drop_count_rowed", {"n": 4}))
    event_id, _ = await first.wait_for(lambda m: m.get("method") == "notifications/progress" and m["params"]["progress"] == 2)
    await asyncio.wait_for(gate.waiting.wait(), 10)
    first.task.cancel()  # the server shuts down: its applications are cancelled, the stream still open
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(first.task, 10)
    assert gate.stopped == 1
    assert (await sync_to_async(ToolCall.objects.get)()).status == "working"
    gate.release.set()
    final = await answer_of(resumed(headers, event_id))
    assert final["id"] == 21 and final["result"]["content"] == [{"type": "text", "text": "counted to 4"}], final
    assert (gate.runs, gate.effects) == (2, 1)


@pytest.mark.parametrize("dropped_first", [False, True])
async def test_a_call_without_a_row_the_server_stops_gets_one_and_a_resume_elsewhere_finishes_it(gate: Gate, dropped_first: bool) -> None:
    """A soak review restarting daphne (SIGTERM) mid-call: a call that had no row yet (younger than
    SLOW_CALL_SECONDS, never suspended) was lost. The client's resume with Last-Event-ID on another
    process answered 200 with the leftover events and never an answer ("Nothing runs on this
    stream"), for good. Now the server's stop writes its row, ``working`` with its request, as a call
    past SLOW_CALL_SECONDS has, and the resume takes it over and runs it, as it does a call with a
    row. ``dropped_first``: its stream had closed already and the handler went on (detached)."""
    session = await open_session()
    headers = post_headers(version=HANDSHAKE, session=session)
    if dropped_first:
        first, event_id = await dropped_at_two(gate, headers, 23, "drop_count")
        assert not first.task.done()
    else:
        first = Stream("POST", headers, call_message(23, "drop_count", {"n": 4}))
        event_id, _ = await first.wait_for(lambda m: m.get("method") == "notifications/progress" and m["params"]["progress"] == 2)
        await asyncio.wait_for(gate.waiting.wait(), 10)
    assert await sync_to_async(ToolCall.objects.count)() == 0  # a fast call: no row while it runs
    first.task.cancel()  # the server shuts down
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(first.task, 10)
    assert gate.stopped == 1
    row = await sync_to_async(ToolCall.objects.get)()
    assert (row.status, row.request_id, row.session_id, row.tool_name) == ("working", "23", session, "drop_count")
    gate.release.set()
    again = resumed(headers, event_id)
    final = await answer_of(again)
    assert final["id"] == 23 and final["result"]["content"] == [{"type": "text", "text": "counted to 4"}], final
    assert (gate.runs, gate.effects) == (2, 1)
    assert progress_values(again)[-1] == 4
    assert (await sync_to_async(ToolCall.objects.get)()).status == "completed"


async def test_daphnes_shutdown_waits_for_the_row_when_the_sessions_get_stream_ends_first(gate: Gate) -> None:
    """Daphne's shutdown cancels every application and stops its loop once the first of them has
    ended (``asyncio.gather`` of them, which a cancelled one completes): the official client's
    standalone GET stream ended at once, and the row of the session's running call was never
    written (a review restarting daphne under ``mcp.Client(mode="legacy")``). Every request the
    server cancels now ends only once the rows of the calls it kept for a resume are written."""
    session = await open_session()
    headers = post_headers(version=HANDSHAKE, session=session)
    listening = Stream("GET", {**headers, "accept": "text/event-stream"})
    await asyncio.wait_for(listening.got.wait(), 10)
    first = Stream("POST", headers, call_message(25, "drop_count", {"n": 4}))
    await first.wait_for(lambda m: m.get("method") == "notifications/progress" and m["params"]["progress"] == 2)
    await asyncio.wait_for(gate.waiting.wait(), 10)
    for task in (listening.task, first.task):  # daphne's kill_all_applications, in its connections' order
        task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.gather(listening.task, first.task)  # done when the first has ended: daphne stops its loop
    assert [row.status for row in await sync_to_async(list)(ToolCall.objects.all())] == ["working"]
    await asyncio.wait({first.task})


async def test_a_call_without_a_row_the_server_stops_before_it_streamed_leaves_none(gate: Gate) -> None:
    """The client was sent no event id of its stream, so nothing can resume the call: no row for it."""
    session = await open_session()
    first = Stream("POST", post_headers(version=HANDSHAKE, session=session), call_message(24, "drop_quiet", {}))
    await asyncio.wait_for(gate.waiting.wait(), 10)
    first.task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(first.task, 10)
    assert first.events() == []
    assert await sync_to_async(ToolCall.objects.count)() == 0


async def test_a_call_waiting_for_input_when_the_server_stops_stays_waiting(gate: Gate) -> None:
    """The same while the call waits for the user's answer: it stays ``input_required``, and the
    answer the client gives after resuming elsewhere finishes it."""
    session = await open_session({"elicitation": {}})
    headers = post_headers(version=HANDSHAKE, session=session)
    gate.release.set()
    first = Stream("POST", headers, call_message(22, "drop_then_ask", {}))
    event_id, asked = await first.wait_for(lambda m: m.get("method") == "elicitation/create")
    first.task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(first.task, 10)
    assert (await sync_to_async(ToolCall.objects.get)()).status == "input_required"
    again = resumed(headers, event_id)
    reply = {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {"name": "ada"}}}
    assert (await post_json(APP, reply, headers)).status == 202
    final = await answer_of(again)
    assert final["id"] == 22 and final["result"]["content"] == [{"type": "text", "text": "hello ada"}], final
    assert gate.effects == 1


@pytest.mark.parametrize("status", ["working", "input_required"])
async def test_a_cancel_for_a_call_this_process_does_not_run_ends_its_row(status: str) -> None:
    """notifications/cancelled reaches a process that does not run the call (a load balancer's choice)
    with no shared channel layer, or while Redis is down: only a call waiting for input had its row
    ended, so a running one (its handler in another process) ran to its end, though that handler
    checks its row every CANCEL_POLL_SECONDS for exactly this; and a call the server's shutdown left
    working for a resume was carried on by the next resume. Both end cancelled now."""
    from asgiref.sync import sync_to_async

    session = await open_session()
    headers = post_headers(version=HANDSHAKE, session=session)
    row = await sync_to_async(ToolCall.objects.create)(
        tool_name="slow_count", principal="anonymous", flavor="session", params_digest="0" * 64, status=status,
        session_id=session, request_id="31")
    other = await sync_to_async(ToolCall.objects.create)(
        tool_name="slow_count", principal="anonymous", flavor="session", params_digest="0" * 64, status=status,
        session_id=session, request_id='"31"')  # the string id "31": another request
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 31, "reason": "gave up"}}
    assert (await post_json(APP, cancel, headers)).status == 202
    assert (await sync_to_async(ToolCall.objects.get)(id=row.id)).status == "cancelled"
    assert (await sync_to_async(ToolCall.objects.get)(id=other.id)).status == status


async def test_a_handler_that_raises_cancelled_error_itself_still_ends_its_call(settings: Any) -> None:
    """A CancelledError the handler raises while nothing cancels its task (a library's inner future
    cancelled) is no server shutdown: its call ends (a diff review of the shutdown change found such a
    row left working for CALL_TTL), failed like any other error of the tool's own, as nobody cancelled
    it (tests/test_handler_cancelled_error.py)."""
    async def self_cancel(ctx: ToolContext) -> str:
        await ctx.once("start", lambda: "started")
        inner = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_later(0.05, inner.cancel)
        await inner
        return "never"

    with registry.registered_temporarily(make_tool(self_cancel)):
        session = await open_session()
        stream = Stream("POST", post_headers(version=HANDSHAKE, session=session), call_message(41, "self_cancel", {}))
        await asyncio.wait_for(stream.task, 10)
    assert (await sync_to_async(ToolCall.objects.get)()).status == "failed"
