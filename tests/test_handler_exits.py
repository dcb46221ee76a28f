"""A tool that raises ``SystemExit`` or ``KeyboardInterrupt``: argparse, click and libraries call ``sys.exit()``.

asyncio lets these two out of its event loop. Inline, the handler's stopped the server process (daphne
exited, its client read "Server disconnected"). On a Celery worker it ended the thread of the worker's
event loop, which was handed out again, unclosed: the task body waited on its call for good (``working``,
its lease not renewed, SIGTERM never finishing the worker), and the next worker's sweep took the call over
and ran the handler again, to hang the same way. Now the call fails with the usual internal error, once,
and the server and the worker go on. A real Ctrl-C still stops the process.

The Celery task runs eagerly in a thread of the test (``run_call.apply``), on the worker loop a worker
process has. A broken run never returns: the test waits for it in bounds and fails instead.
"""
from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from asgiref.sync import async_to_sync

from mcp_tools import ToolContext, tasks
from mcp_tools.models import ToolCall
from mcp_tools.registry import make_tool, registry
from mcp_tools.server import background
from mcp_tools.server.core import internal_error_text
from mcp_tools.testing import McpTestClient
from mcp_tools.transports.http import McpEndpoint
from tests.test_background_lost import _new_call

pytestmark = pytest.mark.django_db(transaction=True)
APP = McpEndpoint()
RUNS: list[str] = []


def _exit_at_once() -> str:
    raise SystemExit(4)


async def _exit_in_first_step(ctx: ToolContext) -> str:
    raise SystemExit("usage: tool [-h] --secret-flag")


async def _exit_after_waiting(ctx: ToolContext) -> str:
    await asyncio.sleep(0)
    raise SystemExit(3)


async def _interrupt_after_waiting(ctx: ToolContext) -> str:
    await asyncio.sleep(0)
    raise KeyboardInterrupt()


async def _fine(ctx: ToolContext) -> str:
    return "fine"


@pytest.fixture
def server_owns_sigint() -> Iterator[None]:
    """SIGINT handled as daphne (Twisted), uvicorn and ``mcp_stdio`` handle it: not Python's default handler."""
    previous = signal.signal(signal.SIGINT, lambda signum, frame: None)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


async def _call(name: str) -> dict[str, Any]:
    """Call ``name`` over HTTP, with the endpoint run in this task (:class:`McpTestClient`)."""
    try:
        return await McpTestClient(APP).call_tool(name)
    except (SystemExit, KeyboardInterrupt) as exc:  # as daphne's event loop would let it out
        pytest.fail(f"{exc!r} came out of the endpoint: the server process would have ended")


@pytest.mark.parametrize("fn", [_exit_at_once, _exit_in_first_step, _exit_after_waiting, _interrupt_after_waiting])
async def test_an_inline_tool_that_exits_is_a_tool_error_and_the_server_goes_on(fn: Callable[..., Any], server_owns_sigint: None) -> None:
    name = fn.__name__.strip("_")
    with registry.registered_temporarily(make_tool(fn, name=name)), registry.registered_temporarily(make_tool(_fine, name="fine")):
        failed = await _call(name)  # before: SystemExit (KeyboardInterrupt) out of the endpoint
        after = await _call("fine")
    # The usual internal error, never the exception's own text (a usage line, an exit code).
    assert (failed["content"], failed["isError"]) == ([{"type": "text", "text": internal_error_text(name)}], True)
    assert after["content"] == [{"type": "text", "text": "fine"}]


@pytest.mark.parametrize("python_default", [True, False])
async def test_a_real_ctrl_c_still_stops_the_server(python_default: bool) -> None:
    """Python's default SIGINT handler, or asyncio.run's (this test's runner: from the second Ctrl-C on), raises
    KeyboardInterrupt in the main thread wherever it is, a handler included: that one cannot be told from a
    handler's own, and it stops the process as it always did."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler) if python_default else None

    async def interrupted(ctx: ToolContext) -> str:
        raise KeyboardInterrupt()

    try:
        # McpTestClient runs the endpoint in this task: the interrupt reaches the test, not its event loop.
        with registry.registered_temporarily(make_tool(interrupted, name="interrupted")), pytest.raises(KeyboardInterrupt):
            await McpTestClient(APP).call_tool("interrupted")
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def _run_task(call_id: str) -> Any:
    """Run the call's Celery task in a thread; its result, or None when it never returned."""
    outcome: list[Any] = []
    worker = threading.Thread(target=lambda: outcome.append(tasks.run_call.apply(args=[call_id], task_id="t-0")), daemon=True)
    worker.start()
    worker.join(60)  # a bound for a broken run only (a daemon thread: a hung one ends with the test process)
    return outcome[0] if outcome else None


async def _background(ctx: ToolContext) -> str:
    RUNS.append(ctx.call_id or "")
    await asyncio.sleep(0)
    if len(RUNS) == 1:
        raise SystemExit(2)
    if len(RUNS) == 2:
        raise KeyboardInterrupt()  # off the main thread: never a real Ctrl-C
    return "fine"


def test_a_background_tool_that_exits_fails_its_call_once_and_the_worker_goes_on() -> None:
    RUNS.clear()
    with registry.registered_temporarily(make_tool(_background, name="exits_bg", background=True)):
        calls = [async_to_sync(_new_call)("exits_bg") for _ in range(3)]
        results = [_run_task(call_id) for call_id in calls]  # before: the first never returned
        rows = [ToolCall.objects.get(id=call_id) for call_id in calls]
    assert [result and (result.state, result.result) for result in results] == [("SUCCESS", "finished")] * 3
    assert [(row.status, row.worker, row.lease_expires_at) for row in rows] == [("failed", "", None)] * 2 + [("completed", "", None)]
    assert rows[0].result == rows[1].result == {"content": [{"type": "text", "text": internal_error_text("exits_bg")}], "isError": True}
    assert RUNS == calls  # each ran once


def _exit_the_loop() -> None:
    raise SystemExit(1)


async def _stops_its_loop(ctx: ToolContext) -> str:
    RUNS.append(ctx.call_id or "")
    if len(RUNS) > 1:
        return "fine"
    # Not the handler's own exception: a callback it left behind, as a library's thread or timer
    # may leave one. It ends the loop's thread, under the running call.
    asyncio.get_running_loop().call_soon(_exit_the_loop)
    await asyncio.Event().wait()
    return "never"


def test_a_worker_loop_that_dies_under_a_call_is_not_waited_on_and_is_replaced() -> None:
    RUNS.clear()
    with registry.registered_temporarily(make_tool(_stops_its_loop, name="stops_its_loop", background=True)):
        first, second = async_to_sync(_new_call)("stops_its_loop"), async_to_sync(_new_call)("stops_its_loop")
        dead = _run_task(first)  # before: its task body waited on the dead loop for good
        dead_loop = background._loop
        replaced = _run_task(second)
        rows = [ToolCall.objects.get(id=call_id) for call_id in (first, second)]
    assert dead is not None and dead.state == "FAILURE" and "event loop stopped" in str(dead.result)
    assert dead_loop is not None and dead_loop.is_closed() and background._loop is not dead_loop
    assert replaced is not None and (replaced.state, replaced.result) == ("SUCCESS", "finished")
    # The first is left to the sweep, as for a lost worker (its lease runs out); the second ran on a new loop.
    assert [row.status for row in rows] == ["working", "completed"] and RUNS == [first, second]
