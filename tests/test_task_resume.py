"""A 2025-11-25 task's ``tasks/result`` stream, dropped after it carried the task's input request and
resumed with ``Last-Event-ID``: the resumed stream answers the ``tasks/result`` request (its id, the
related-task ``_meta``), not the ``tools/call`` that created the task, which was answered long ago
(with the ``CreateTaskResult``). Spec 2025-11-25, transports, Resumability: a resumed stream carries
on the stream that was disconnected; JSON-RPC: a response has the id of its request."""
from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from mcp_tools.server import background
from tests.asgi_client import HANDSHAKE, post_headers, post_json
from tests.test_background_review import APP, queued  # noqa: F401
from tests.test_http_spec_edges import Stream
from tests.test_task_review import open_session

pytestmark = pytest.mark.django_db(transaction=True)

RELATED_TASK = "io.modelcontextprotocol/related-task"
CAPABILITIES = {"elicitation": {"form": {}}, "tasks": {}}


async def _task_waiting_on_a_dropped_result_stream(headers: dict[str, str], result_request_id: Any) -> tuple[str, str, dict[str, Any]]:
    """A task that asked for input on its tasks/result stream, which the client then lost:
    ``(task id, the id of the stream's last event, the input request)``."""
    call = {"jsonrpc": "2.0", "id": "call-1", "method": "tools/call",
            "params": {"name": "confirm_delete", "arguments": {}, "task": {}}}
    created = await post_json(APP, call, headers)
    task_id = created.json()["result"]["task"]["taskId"]
    assert await background.run_in_worker(task_id, "w") == "input-required"
    request = {"jsonrpc": "2.0", "id": result_request_id, "method": "tasks/result", "params": {"taskId": task_id}}
    first = Stream("POST", headers, json.dumps(request).encode())
    event_id, ask = await first.wait_for(lambda m: m.get("method") == "elicitation/create")
    assert event_id is not None
    first.gone.set()  # the client loses the stream
    await asyncio.wait_for(first.task, 10)
    return task_id, event_id, ask


async def _resumed_answer(headers: dict[str, str], event_id: str) -> dict[str, Any]:
    resumed = Stream("GET", {**headers, "accept": "text/event-stream", "last-event-id": event_id})
    _, final = await resumed.wait_for(lambda m: "id" in m and ("result" in m or "error" in m))
    resumed.gone.set()
    await asyncio.wait_for(resumed.task, 10)
    return final


@pytest.mark.parametrize("result_request_id", ["result-7", 7])
async def test_a_resumed_tasks_result_stream_answers_the_tasks_result_request(
    queued: list[str], result_request_id: Any,  # noqa: F811
) -> None:
    """The client answers the input request, the worker finishes the task, then the client resumes."""
    session = await open_session(capabilities=CAPABILITIES)
    headers = post_headers(version=HANDSHAKE, session=session)
    task_id, event_id, ask = await _task_waiting_on_a_dropped_result_stream(headers, result_request_id)
    answer = {"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"confirm": True}}}
    assert (await post_json(APP, answer, headers)).status == 202
    assert await background.run_in_worker(task_id, "w") == "finished"
    final = await _resumed_answer(headers, event_id)
    assert final["id"] == result_request_id and type(final["id"]) is type(result_request_id), final
    assert final["result"]["content"][0]["text"] == "deleted file.txt", final
    assert final["result"]["_meta"][RELATED_TASK] == {"taskId": task_id}, final


async def test_a_stream_resumed_while_the_task_waits_carries_it_to_its_end(queued: list[str]) -> None:  # noqa: F811
    """Resumed before the answer: the stream holds the task (the input request it carried is not sent
    again), then answers the tasks/result request once the task ends."""
    session = await open_session(capabilities=CAPABILITIES)
    headers = post_headers(version=HANDSHAKE, session=session)
    task_id, event_id, ask = await _task_waiting_on_a_dropped_result_stream(headers, "result-9")
    resumed = Stream("GET", {**headers, "accept": "text/event-stream", "last-event-id": event_id})
    answer = {"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"confirm": False}}}
    assert (await post_json(APP, answer, headers)).status == 202
    assert await background.run_in_worker(task_id, "w") == "finished"
    _, final = await resumed.wait_for(lambda m: "id" in m and ("result" in m or "error" in m))
    resumed.gone.set()
    await asyncio.wait_for(resumed.task, 10)
    assert final["id"] == "result-9" and final["result"]["content"][0]["text"] == "kept file.txt", final
    assert final["result"]["_meta"][RELATED_TASK] == {"taskId": task_id}, final
    asked_again = [m for _, m in resumed.events() if m.get("method") == "elicitation/create"]
    assert asked_again == [], asked_again


async def test_cancelling_the_resumed_tasks_result_request_leaves_the_task_going_on(queued: list[str]) -> None:  # noqa: F811
    """notifications/cancelled for the tasks/result request on its resumed stream stops that request (no
    answer), as on the request's own stream: the task goes on (tasks/cancel is what ends a task)."""
    session = await open_session(capabilities=CAPABILITIES)
    headers = post_headers(version=HANDSHAKE, session=session)
    task_id, event_id, _ask = await _task_waiting_on_a_dropped_result_stream(headers, "result-5")
    resumed = Stream("GET", {**headers, "accept": "text/event-stream", "last-event-id": event_id})
    await resumed.wait_for(lambda m: m.get("method") == "notifications/tasks/status")  # it carries the task again
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "result-5"}}
    assert (await post_json(APP, cancel, headers)).status == 202
    await asyncio.wait_for(resumed.task, 10)  # the stream ends ...
    answers = [m for _, m in resumed.events() if "id" in m and ("result" in m or "error" in m)]
    status = await post_json(APP, {"jsonrpc": "2.0", "id": "get-1", "method": "tasks/get", "params": {"taskId": task_id}}, headers)
    assert (answers, status.json()["result"]["status"]) == ([], "input_required")  # ... unanswered; the task waits on
