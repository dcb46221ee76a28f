"""core.execute does its slow-call work when the handler first waits, inline in a request or on its own.

A call that completes in one step arms no ``SLOW_CALL_SECONDS`` timer (docs/performance.md, issue 9's
fourth pass); one that waits gets its row after the threshold whether or not an enclosing
:class:`~mcp_tools.server.core.Awaiting` (the HTTP transport's) reports the first wait.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any

import pydantic
import pytest
from asgiref.sync import sync_to_async
from django.test import override_settings

import mcp_tools

from mcp_tools.models import ToolCall
from mcp_tools.registry import make_tool, registry
from mcp_tools.registry.results import ToolError
from mcp_tools.server import core
from mcp_tools.server.auth import ANONYMOUS
from mcp_tools.server.context import RequestContext

pytestmark = pytest.mark.django_db(transaction=True)


async def doze(release: float) -> str:
    """Wait until the test lets go (or ``release`` seconds)."""
    await asyncio.sleep(release)
    return "awake"


async def snap(text: str) -> str:
    """Answer in one step."""
    return text


async def rows() -> list[tuple[str, str]]:
    return await sync_to_async(lambda: list(ToolCall.objects.values_list("tool_name", "status")))()


async def first_rows(running: asyncio.Future[Any]) -> list[tuple[str, str]]:
    """The rows as soon as there are any, while ``running`` runs ([] if it ends first)."""
    while not running.done():
        found = await rows()
        if found:
            return found
        await asyncio.sleep(0.02)
    return []


def _rc() -> RequestContext:
    return RequestContext(principal=ANONYMOUS, protocol_version="2026-07-28", modern=True, client_capabilities={}, request_id=1)


async def _run(name: str, arguments: dict[str, Any], inline: bool) -> Any:
    rc = _rc()
    target = await core.resolve_target("tools/call", {"name": name, "arguments": arguments}, rc.principal)
    inv = core.new_invocation(target, rc)
    waited: list[bool] = []
    if inline:  # as the HTTP transport runs it: inside an Awaiting of its own
        return await core.Awaiting(core.execute(target, inv), lambda: waited.append(True)), inv, waited
    return await core.execute(target, inv), inv, waited


@pytest.fixture
def tools():  # type: ignore[no-untyped-def]
    with registry.registered_temporarily(make_tool(doze), make_tool(snap)):
        yield


@pytest.mark.parametrize("inline", [True, False])
async def test_a_call_that_waits_past_the_threshold_gets_its_row(tools, settings, inline: bool) -> None:  # type: ignore[no-untyped-def]
    with override_settings(MCP_TOOLS={**settings.MCP_TOOLS, "SLOW_CALL_SECONDS": 0.05}):
        running = asyncio.ensure_future(_run("doze", {"release": 0.6}, inline))
        assert await first_rows(running) == [("doze", "working")]
        outcome, inv, waited = await running
    assert outcome.value == "awake"
    assert inv.call_id is not None
    assert inv.state.get("task") is None, "the handler is done: its task is forgotten"
    if inline:
        assert waited == [True], "the enclosing Awaiting still hears of the first wait"


@pytest.mark.parametrize("inline", [True, False])
async def test_a_call_done_in_one_step_arms_nothing(tools, settings, inline: bool) -> None:  # type: ignore[no-untyped-def]
    with override_settings(MCP_TOOLS={**settings.MCP_TOOLS, "SLOW_CALL_SECONDS": 0}):
        outcome, inv, waited = await _run("snap", {"text": "hi"}, inline)
        await asyncio.sleep(0.05)  # a timer due at once would have fired by now
    assert outcome.value == "hi"
    assert inv.call_id is None
    assert await rows() == []
    assert waited == []


async def test_the_first_step_hook_is_not_left_behind() -> None:
    """A run that completes inline gives the enclosing Awaiting's hook back; a later wait calls only the transport's."""
    calls: list[str] = []

    async def request() -> str:
        assert core.Awaiting.first_step() is not None
        waiter = core.Awaiting.first_step()
        assert waiter is not None and waiter.also is None
        await asyncio.sleep(0)  # the first wait of the request, after the run ended
        assert core.Awaiting.first_step() is None, "only the first step of the request is one"
        return "done"

    assert await core.Awaiting(request(), lambda: calls.append("transport")) == "done"
    assert calls == ["transport"]


async def test_a_task_started_in_the_first_step_is_not_in_it() -> None:
    seen: list[Any] = []

    async def child() -> None:
        seen.append(core.Awaiting.first_step())

    async def request() -> None:
        started = asyncio.ensure_future(child())
        await started

    await core.Awaiting(request(), lambda: None)
    assert seen == [None]


# -- run_fresh: a new call's first step run before anything is made for it ----------------


async def boom_at_once() -> str:
    """Fail before ever waiting."""
    raise ValueError("broken before the first wait")


async def boom_later() -> str:
    """Fail after waiting once."""
    await asyncio.sleep(0)
    raise ValueError("broken after the first wait")


async def refuse_at_once() -> str:
    """A failure the model may read."""
    raise ToolError("no such shelf")


@pytest.fixture
def fresh_tools():  # type: ignore[no-untyped-def]
    tools = (doze, snap, boom_at_once, boom_later, refuse_at_once)
    with registry.registered_temporarily(*(make_tool(fn) for fn in tools)):
        yield


async def _run_fresh(name: str, arguments: dict[str, Any], inline: bool) -> Any:
    rc = _rc()
    target = await core.resolve_target("tools/call", {"name": name, "arguments": arguments}, rc.principal)
    waited: list[bool] = []
    if inline:
        inv, outcome = await core.Awaiting(core.run_fresh(target, rc), lambda: waited.append(True))
    else:
        inv, outcome = await core.run_fresh(target, rc)
    return outcome, inv, waited


@pytest.mark.parametrize("inline", [True, False])
async def test_a_fresh_call_done_in_its_first_step_makes_no_invocation(fresh_tools, settings, inline: bool) -> None:  # type: ignore[no-untyped-def]
    with override_settings(MCP_TOOLS={**settings.MCP_TOOLS, "SLOW_CALL_SECONDS": 0}):
        outcome, inv, waited = await _run_fresh("snap", {"text": "hi"}, inline)
        await asyncio.sleep(0.05)
    assert outcome.value == "hi"
    assert inv is None
    assert await rows() == []
    assert waited == []


@pytest.mark.parametrize("inline", [True, False])
async def test_a_fresh_call_that_waits_is_taken_over_with_its_timer(fresh_tools, settings, inline: bool) -> None:  # type: ignore[no-untyped-def]
    """The handler's first step ran before execute; the rest runs under it: the slow-call row still comes."""
    with override_settings(MCP_TOOLS={**settings.MCP_TOOLS, "SLOW_CALL_SECONDS": 0.05}):
        running = asyncio.ensure_future(_run_fresh("doze", {"release": 0.6}, inline))
        assert await first_rows(running) == [("doze", "working")]
        outcome, inv, waited = await running
    assert outcome.value == "awake"
    assert inv is not None and inv.call_id is not None
    assert inv.started is None, "the handler's rest was awaited once"
    assert inv.state.get("task") is None
    if inline:
        assert waited == [True]


@pytest.mark.parametrize("name", ["boom_at_once", "boom_later"])
async def test_a_fresh_call_that_fails_answers_as_execute_does(fresh_tools, name: str, caplog) -> None:  # type: ignore[no-untyped-def]
    expected = f"Internal error while running {name!r}; the server log has the details."
    outcome, inv, _ = await _run_fresh(name, {}, inline=True)
    assert outcome == {"content": [{"type": "text", "text": expected}], "isError": True}
    assert inv is not None
    rc = _rc()
    target = await core.resolve_target("tools/call", {"name": name, "arguments": {}}, rc.principal)
    assert await core.execute(target, core.new_invocation(target, rc)) == outcome
    logged = [r for r in caplog.records if r.name == "mcp_tools.calls" and r.exc_info]
    assert len(logged) == 2 and all("broken" in str(r.exc_info[1]) for r in logged), "both runs logged the handler's exception"


async def test_a_fresh_call_refused_by_the_tool_is_an_error_result(fresh_tools) -> None:  # type: ignore[no-untyped-def]
    outcome, _, _ = await _run_fresh("refuse_at_once", {}, inline=False)
    assert outcome == {"content": [{"type": "text", "text": "no such shelf"}], "isError": True}


async def test_an_operator_cancel_stops_a_fresh_call_taken_over_after_its_first_step(fresh_tools, settings) -> None:  # type: ignore[no-untyped-def]
    """The row's watch reaches a handler whose first step ran outside execute: the client gets the ended answer."""
    with override_settings(MCP_TOOLS={**settings.MCP_TOOLS, "SLOW_CALL_SECONDS": 0}):
        running = asyncio.ensure_future(_run_fresh("doze", {"release": 30}, inline=True))
        assert await first_rows(running) == [("doze", "working")]
        call_id = await sync_to_async(lambda: ToolCall.objects.get().id)()
        assert await core.end_call(str(call_id), "cancelled")
        outcome, inv, _ = await asyncio.wait_for(running, 10)
    assert outcome == core.ended_answer(inv.state["target"].method, "cancelled")
    assert await rows() == [("doze", "cancelled")]


async def block_then_wait() -> str:
    """Hold the loop past the slow-call threshold in the first step, then wait briefly."""
    time.sleep(0.4)  # noqa: ASYNC251 - the point: a first step that blocks
    await asyncio.sleep(0.15)
    return "done"


async def test_the_slow_call_threshold_counts_the_first_step(settings) -> None:  # type: ignore[no-untyped-def]
    """The timer is due SLOW_CALL_SECONDS after the call started, not after run_fresh handed it to execute."""
    with registry.registered_temporarily(make_tool(block_then_wait)):
        with override_settings(MCP_TOOLS={**settings.MCP_TOOLS, "SLOW_CALL_SECONDS": 0.3}):
            outcome, inv, _ = await _run_fresh("block_then_wait", {}, inline=False)
    assert outcome.value == "done"
    assert inv is not None and inv.call_id is not None, "the timer fired at the first wait, 0.4 s after the start"
    assert await rows() == [("block_then_wait", "working")]  # finish() would close it


def future_of_text(text: str) -> Any:
    """A plain function that returns a Future (what a function marked as a coroutine function may do)."""
    future = asyncio.get_running_loop().create_future()
    future.set_result(f"from a future: {text}")
    return future


def fails_when_called(text: str) -> Any:
    raise ValueError("broken before returning an awaitable")


@pytest.mark.parametrize("inline", [True, False])
async def test_an_awaitable_that_is_not_a_coroutine_is_awaited_as_before(inline: bool) -> None:
    # On Python 3.12+ inspect.markcoroutinefunction makes such a function count as async.
    tool = dataclasses.replace(make_tool(future_of_text), is_async=True)
    with registry.registered_temporarily(tool):
        outcome, inv, _ = await _run_fresh("future_of_text", {"text": "hi"}, inline)
    assert outcome.value == "from a future: hi"
    assert inv is not None


async def test_a_handler_that_fails_when_called_answers_as_execute_does() -> None:
    tool = dataclasses.replace(make_tool(fails_when_called), is_async=True)
    with registry.registered_temporarily(tool):
        outcome, _, _ = await _run_fresh("fails_when_called", {"text": "hi"}, inline=True)
    assert outcome == core.error_result("Internal error while running 'fails_when_called'; the server log has the details.")


# -- a converging tool run again for a client without resume tokens ---------------------

_converge_runs: list[int] = []


async def settle(pause: float) -> Any:
    """Not yet on the first run; the second run takes ``pause`` seconds and answers."""
    _converge_runs.append(len(_converge_runs) + 1)
    if len(_converge_runs) == 1:
        return mcp_tools.Pending("settling", poll_seconds=0.01)
    await asyncio.sleep(pause)
    return "settled"


@pytest.mark.parametrize("first_slow", [False, True])
async def test_a_slow_rerun_of_a_converging_tool_leaves_one_finished_row(settings, first_slow: bool) -> None:  # type: ignore[no-untyped-def]
    """A re-run past SLOW_CALL_SECONDS is the same call: its row is the call's, finished with the result.

    Before, a re-run's own row stayed ``working`` (nobody finished it) until CALL_TTL, beside the
    first run's row when that had one.
    """
    _converge_runs.clear()

    async def slow_first(pause: float) -> Any:
        if not _converge_runs:
            await asyncio.sleep(0.15)  # past the threshold: the first run gets a row
        return await settle(pause)

    tool = make_tool(slow_first if first_slow else settle, name="settle")
    with registry.registered_temporarily(tool), \
            override_settings(MCP_TOOLS={**settings.MCP_TOOLS, "SLOW_CALL_SECONDS": 0.05, "CONVERGE_WAIT_SECONDS": 5}):
        rc = _rc()
        target = await core.resolve_target("tools/call", {"name": "settle", "arguments": {"pause": 0.15}}, rc.principal)
        inv, outcome = await core.run_fresh(target, rc)
        assert (inv is not None and inv.call_id is not None) is first_slow
        result = await core.finish(inv, target, outcome, rc, 0)
    assert result["content"] == [{"type": "text", "text": "settled"}]
    assert _converge_runs == [1, 2]
    assert await rows() == [("settle", "completed")], "one row, finished with the call's result"
    row = await sync_to_async(ToolCall.objects.get)()
    assert row.result == result


async def test_a_rerun_that_journals_closes_the_row_it_made(settings) -> None:  # type: ignore[no-untyped-def]
    """A converging tool whose runs each journal a ``ctx.once`` step: every run's row ends finished."""
    runs: list[int] = []

    async def poll_once(ctx: mcp_tools.ToolContext) -> Any:
        runs.append(await ctx.once("look", lambda: len(runs) + 1))
        return mcp_tools.Pending("settling", poll_seconds=0.01) if len(runs) == 1 else "settled"

    with registry.registered_temporarily(make_tool(poll_once)), \
            override_settings(MCP_TOOLS={**settings.MCP_TOOLS, "CONVERGE_WAIT_SECONDS": 5}):
        rc = _rc()
        target = await core.resolve_target("tools/call", {"name": "poll_once", "arguments": {}}, rc.principal)
        inv, outcome = await core.run_fresh(target, rc)
        assert inv is not None and inv.call_id is not None, "the first run's once gave the call its row"
        result = await core.finish(inv, target, outcome, rc, 0)
    assert runs == [1, 2]
    assert result["content"] == [{"type": "text", "text": "settled"}]
    assert sorted(await rows()) == [("poll_once", "completed"), ("poll_once", "completed")], "no row left working"


# -- the pending state when CONVERGE_WAIT_SECONDS runs out --------------------------------


class Converged(pydantic.BaseModel):
    ready: bool


async def never_typed() -> Converged | mcp_tools.Pending:
    """Never converges; converged, it would be structured content (the tool has an outputSchema)."""
    return mcp_tools.Pending("still settling", progress=1, total=3, poll_seconds=0.01)


async def never_text() -> str | mcp_tools.Pending:
    """Never converges; a tool without an outputSchema."""
    return mcp_tools.Pending("still settling", progress=1, total=3, poll_seconds=0.01)


async def _pending_answer(name: str, capabilities: dict[str, Any]) -> dict[str, Any]:
    rc = dataclasses.replace(_rc(), client_capabilities=capabilities)
    target = await core.resolve_target("tools/call", {"name": name, "arguments": {}}, rc.principal)
    inv, outcome = await core.run_fresh(target, rc)
    return await core.finish(inv, target, outcome, rc, 0)


@pytest.mark.parametrize("capabilities", [{}, {"experimental": {"resumeTokens": {}}}])
async def test_the_pending_state_of_a_tool_with_an_output_schema(settings, capabilities: dict[str, Any]) -> None:  # type: ignore[no-untyped-def]
    """A client without resume tokens whose wait ran out gets the pending state as an error result: a result
    that is not one MUST carry structured content that fits the outputSchema (the official SDK raises
    without it). Before, it was a plain result with no structuredContent. A client that resumes gets the
    interim answer its extension defines (no error: it calls again with the token). A recorded call ends
    as its answer says: failed for the error."""
    tool = make_tool(never_typed)
    assert tool.to_wire().get("outputSchema") is not None
    with registry.registered_temporarily(tool), override_settings(
            MCP_TOOLS={**settings.MCP_TOOLS, "CONVERGE_WAIT_SECONDS": 0.05, "RECORD_ALL_CALLS": True}):
        result = await _pending_answer("never_typed", capabilities)
    assert await rows() == [("never_typed", "completed" if capabilities else "failed")]
    assert result.get("isError", False) is (not capabilities), result
    assert "structuredContent" not in result
    assert result["content"] == [{"type": "text", "text": "still settling"}]
    assert result["_meta"]["io.modelcontextprotocol/status"] == {"status": "pending", "message": "still settling", "progress": 1, "total": 3}
    assert result["nextResumeToken"]


async def test_the_pending_state_of_a_tool_without_an_output_schema_stays_a_result(settings) -> None:  # type: ignore[no-untyped-def]
    """Nothing to fit: the state is the result, as before."""
    tool = make_tool(never_text)
    assert "outputSchema" not in tool.to_wire()
    with registry.registered_temporarily(tool), \
            override_settings(MCP_TOOLS={**settings.MCP_TOOLS, "CONVERGE_WAIT_SECONDS": 0.05}):
        result = await _pending_answer("never_text", {})
    assert "isError" not in result, result
    assert result["_meta"]["io.modelcontextprotocol/status"]["status"] == "pending"
