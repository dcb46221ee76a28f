"""A background call's progress reaches the client under the progressToken of the request that started it:
on a 2025-11-25 stream resumed with Last-Event-ID, and on a task's ``tasks/result`` stream. Both failed before
their fixes (the token was never stored on the call's row). The worker is simulated in-process."""
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
from tests.asgi_client import handshake_message, post_headers, post_json
from tests.test_background_review import APP, queued  # noqa: F401
from tests.test_http_spec_edges import HANDSHAKE, Stream, _in_memory_layer, open_session  # noqa: F401
from tests.test_session_ended_calls import deferred_call

pytestmark = pytest.mark.django_db(transaction=True)

GATES: dict[int, asyncio.Event] = {}


async def _stepped(ctx: ToolContext) -> str:
    """Reports 1, 2, 3 of 3, each once the test opens its gate."""
    for step in (1, 2, 3):
        await GATES[step].wait()
        await ctx.report_progress(step, 3)
    return "done"


def _progress(stream: Stream) -> list[tuple[Any, float]]:
    return [(m["params"]["progressToken"], m["params"]["progress"]) for _, m in stream.events() if m.get("method") == "notifications/progress"]


async def _resumed_progress(queued: list[str], report_while_dropped: bool) -> tuple[list[Any], list[Any]]:
    """A stream that drops after progress 1, resumed with Last-Event-ID; the worker reports 2 (while the client is
    away, or once the resumed stream follows the call), then 3. The progress on each stream."""
    GATES.clear()
    GATES.update({step: asyncio.Event() for step in (1, 2, 3)})
    with registry.registered_temporarily(make_tool(_stepped, name="stepped_bg", background=True)):
        session = await open_session()
        headers = post_headers(version=HANDSHAKE, session=session)
        call = {"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                "params": {"name": "stepped_bg", "arguments": {}, "_meta": {"progressToken": "p-9"}}}
        first = Stream("POST", headers, json.dumps(call).encode())
        call_id = await deferred_call(queued)
        worker = asyncio.ensure_future(background.run_in_worker(call_id, "w"))
        GATES[1].set()
        event_id, _ = await first.wait_for(lambda m: m.get("method") == "notifications/progress")
        first.gone.set()  # the client's connection drops
        await asyncio.wait_for(first.task, 10)
        if report_while_dropped:
            GATES[2].set()
            for _ in range(200):  # the worker records 2 while no stream is open
                if (await sync_to_async(ToolCall.objects.get)(id=call_id)).progress == 2:
                    break
                await asyncio.sleep(0.02)
        resumed = Stream("GET", {**headers, "accept": "text/event-stream", "last-event-id": str(event_id)})
        if not report_while_dropped:
            await asyncio.sleep(0.3)  # the resumed stream follows the call, whose row still says 1
            GATES[2].set()
        await resumed.wait_for(lambda m: m.get("method") == "notifications/progress" and m["params"]["progress"] == 2)
        GATES[3].set()
        await resumed.wait_for(lambda m: "result" in m)
        assert await asyncio.wait_for(worker, 10) == "finished"
        resumed.gone.set()
        await asyncio.wait_for(resumed.task, 10)
    return _progress(first), _progress(resumed)


@pytest.mark.parametrize("report_while_dropped", [True, False], ids=["reported-while-away", "reported-after-resume"])
async def test_progress_goes_on_under_the_request_token_after_a_last_event_id_resume(
    queued: list[str], report_while_dropped: bool,  # noqa: F811
) -> None:
    """The resumed stream got the result but no progress: its request context had no progressToken (the row
    did not keep it). It goes on from above what the client saw: 1 is not sent again on the token."""
    first, resumed = await _resumed_progress(queued, report_while_dropped)
    assert first == [("p-9", 1.0)]
    assert resumed in ([("p-9", 2.0), ("p-9", 3.0)], [("p-9", 2.0)]), resumed


async def test_a_task_augmented_call_reports_progress_on_tasks_result_under_its_token(queued: list[str]) -> None:  # noqa: F811
    """2025-11-25 tasks: "The progressToken provided in the initial request remains valid throughout the
    task lifetime". tasks/result's stream carried notifications/tasks/status only, never the progress."""
    GATES.clear()
    GATES.update({step: asyncio.Event() for step in (1, 2, 3)})
    with registry.registered_temporarily(make_tool(_stepped, name="stepped_task", background=True)):
        session = await open_session()
        headers = post_headers(version=HANDSHAKE, session=session)
        created = await post_json(APP, handshake_message("tools/call", {"name": "stepped_task", "arguments": {}, "task": {},
                                                                        "_meta": {"progressToken": "tp"}}), headers)
        task_id = created.json()["result"]["task"]["taskId"]
        result = Stream("POST", headers, json.dumps(handshake_message("tasks/result", {"taskId": task_id})).encode())
        worker = asyncio.ensure_future(background.run_in_worker(task_id, "w"))
        for step in (1, 2, 3):
            GATES[step].set()
            await result.wait_for(lambda m, step=step: m.get("method") == "notifications/progress" and m["params"]["progress"] == step)
        await result.wait_for(lambda m: "result" in m)
        assert await asyncio.wait_for(worker, 10) == "finished"
        await asyncio.wait_for(result.task, 10)
    assert _progress(result) == [("tp", 1.0), ("tp", 2.0), ("tp", 3.0)]
    # "All requests, notifications, and responses related to a task MUST include the
    # io.modelcontextprotocol/related-task key in their _meta" (but notifications/tasks/status, which
    # SHOULD NOT): the progress carried none.
    related = {"io.modelcontextprotocol/related-task": {"taskId": task_id}}
    metas = [(m["method"], m["params"].get("_meta")) for _, m in result.events() if "method" in m]
    assert {method for method, _ in metas} == {"notifications/progress", "notifications/tasks/status"}, metas
    assert all(meta == (related if method == "notifications/progress" else None) for method, meta in metas), metas


async def _reports_then_waits(ctx: ToolContext) -> str:
    await ctx.report_progress(1, 3)
    await GATES[1].wait()
    return "done"


async def test_a_second_tasks_result_does_not_send_the_progress_value_again(queued: list[str], settings: Any) -> None:  # noqa: F811
    """A task outlives TASK_RESULT_WAIT_SECONDS (the stream pauses, tests/test_task_result_wait.py) and the
    client calls tasks/result again (rather than resuming the stream). That stream sent
    the row's progress (1/3) under the task's token a second time, a value the client had; the spec:
    each value of a token increases. It goes on from above what the earlier tasks/result sent."""
    settings.MCP_TOOLS = {**settings.MCP_TOOLS, "TASK_RESULT_WAIT_SECONDS": 1.0}
    GATES.clear()
    GATES[1] = asyncio.Event()
    with registry.registered_temporarily(make_tool(_reports_then_waits, name="slow_task_p", background=True)):
        session = await open_session()
        headers = post_headers(version=HANDSHAKE, session=session)
        created = await post_json(APP, handshake_message("tools/call", {"name": "slow_task_p", "arguments": {}, "task": {},
                                                                        "_meta": {"progressToken": "tp"}}), headers)
        task_id = created.json()["result"]["task"]["taskId"]
        worker = asyncio.ensure_future(background.run_in_worker(task_id, "w"))
        seen: list[Any] = []
        for _ in range(3):  # the client calls tasks/result again each time the stream pauses
            stream = Stream("POST", headers, json.dumps(handshake_message("tasks/result", {"taskId": task_id})).encode())
            await asyncio.wait_for(stream.task, 10)
            seen += _progress(stream)
        GATES[1].set()
        assert await asyncio.wait_for(worker, 10) == "finished"
    assert seen == [("tp", 1.0)]
