"""A 2025-11-25 ``tasks/result`` blocks until its task ends, past ``TASK_RESULT_WAIT_SECONDS`` too.

Spec 2025-11-25 tasks: for a task in a non-terminal status the receiver "MUST block the response
until the task reaches a terminal status". At ``TASK_RESULT_WAIT_SECONDS`` the request answered
``-32603 "The task is still running; call tasks/result again"``. Now only the connection ends
there: the SSE stream (primed with an event id) gets a ``retry`` field and closes without a
JSON-RPC response (2025-11-25 transports: after an event with an id the server MAY close the
connection, and the client polls by resuming with ``Last-Event-ID``); the resumed stream goes on
with the request, and answers it, under its id, once the task ends. Input requests the stream
carried are not asked again on the resumed stream. Where nothing can resume (stdio) the request
simply waits.

The worker is simulated in-process (``background.run_in_worker``), as in tests/test_background_review.py.
"""
from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from mcp_tools.server import background
from tests.asgi_client import HANDSHAKE, handshake_message, post_headers, post_json
from tests.test_background_review import APP, queued  # noqa: F401
from tests.test_http_spec_edges import Stream, _in_memory_layer  # noqa: F401
from tests.test_task_review import legacy, open_session

pytestmark = pytest.mark.django_db(transaction=True)
RELATED_TASK = "io.modelcontextprotocol/related-task"


def _wait_seconds(settings: Any, seconds: float) -> None:
    settings.MCP_TOOLS = {**settings.MCP_TOOLS, "TASK_RESULT_WAIT_SECONDS": seconds}


def _is_answer(message: dict[str, Any]) -> bool:
    return "method" not in message and ("result" in message or "error" in message)


async def _paused(stream: Stream) -> str:
    """The stream ended without a response, after a ``retry`` field: the id of its last event."""
    await asyncio.wait_for(stream.task, 10)
    answers = [m for _, m in stream.events() if _is_answer(m)]
    assert answers == [], answers
    text = stream.text()
    assert "\nretry: " in "\n" + text, text
    ids = [line[3:].strip() for line in text.splitlines() if line.startswith("id:")]
    assert ids, text  # primed: the client holds an event id to resume from
    return ids[-1]


async def _a_task() -> tuple[dict[str, str], str]:
    """A session's headers, and a 2025-11-25 task of it that stays working (no worker has run it)."""
    session = await open_session()
    created = await legacy(session, "tools/call", {"name": "slow_compute", "arguments": {"seconds": 0}, "task": {}})
    return post_headers(version=HANDSHAKE, session=session), created["result"]["task"]["taskId"]


async def _an_asking_task() -> tuple[dict[str, str], str]:
    """A session's headers, and a 2025-11-25 task of it (``confirm_delete``) that waits for an elicitation."""
    session = await open_session(capabilities={"elicitation": {"form": {}}, "tasks": {}})
    created = await legacy(session, "tools/call", {"name": "confirm_delete", "arguments": {}, "task": {}})
    task_id = created["result"]["task"]["taskId"]
    assert await background.run_in_worker(task_id, "w") == "input-required"
    return post_headers(version=HANDSHAKE, session=session), task_id


def _tasks_result(headers: dict[str, str], task_id: str, request_id: Any) -> Stream:
    return Stream("POST", headers, json.dumps(handshake_message("tasks/result", {"taskId": task_id}, request_id=request_id)).encode())


async def _resumed(headers: dict[str, str], event_id: str) -> Stream:
    return Stream("GET", {**headers, "accept": "text/event-stream", "last-event-id": event_id})


async def test_a_tasks_result_past_the_wait_ends_its_connection_and_answers_on_the_resumed_stream(
    queued: list[str], settings: Any,  # noqa: F811
) -> None:
    """With TASK_RESULT_WAIT_SECONDS 0 the limit comes before anything went out: the answer is made an
    SSE stream (a status notification, with an event id) so that it can be resumed."""
    headers, task_id = await _a_task()
    _wait_seconds(settings, 0)
    first = _tasks_result(headers, task_id, "r-1")
    event_id = await _paused(first)
    _wait_seconds(settings, 30)
    resumed = await _resumed(headers, event_id)
    await resumed.wait_for(lambda m: m.get("method") == "notifications/tasks/status")  # it carries the task again
    assert await background.run_in_worker(task_id, "w") == "finished"
    _, final = await resumed.wait_for(_is_answer)
    await asyncio.wait_for(resumed.task, 10)
    assert final["id"] == "r-1" and "result" in final, final
    assert final["result"]["_meta"][RELATED_TASK] == {"taskId": task_id}, final


async def test_a_paused_tasks_result_is_resumed_as_often_as_it_pauses_and_never_asks_twice(
    queued: list[str], settings: Any,  # noqa: F811
) -> None:
    """The task asks for input: the stream carries the request, pauses at the limit; resumed, it pauses
    again (the user has not answered yet); resumed once more, the answer comes, the task ends, and the
    stream answers. The elicitation went out once, on the first stream."""
    headers, task_id = await _an_asking_task()
    _wait_seconds(settings, 1.0)
    first = _tasks_result(headers, task_id, 7)
    _, ask = await first.wait_for(lambda m: m.get("method") == "elicitation/create")
    assert ask["params"]["_meta"][RELATED_TASK] == {"taskId": task_id}
    event_id = await _paused(first)
    second = await _resumed(headers, event_id)
    event_id = await _paused(second)
    _wait_seconds(settings, 30)
    third = await _resumed(headers, event_id)
    await third.wait_for(lambda m: m.get("method") == "notifications/tasks/status")
    answer = {"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"confirm": True}}}
    assert (await post_json(APP, answer, headers)).status == 202
    assert await background.run_in_worker(task_id, "w") == "finished"
    _, final = await third.wait_for(_is_answer)
    await asyncio.wait_for(third.task, 10)
    assert final["id"] == 7 and final["result"]["content"] == [{"type": "text", "text": "deleted file.txt"}], final
    asked = [m for stream in (second, third) for _, m in stream.events() if m.get("method") == "elicitation/create"]
    assert asked == [], asked


async def test_a_tasks_result_that_cannot_be_resumed_waits_for_the_end(queued: list[str], settings: Any) -> None:  # noqa: F811
    """Over a transport with no resumable stream (stdio: no stream id) the limit does not apply: the request
    blocks until the task ends, as the spec says, rather than answering an error."""
    from mcp_tools.server.auth import ANONYMOUS
    from mcp_tools.server.context import RequestContext
    from mcp_tools.server.flavors import tasks

    sent: list[dict[str, Any]] = []

    async def emit(message: dict[str, Any]) -> None:
        sent.append(message)

    rc = RequestContext(principal=ANONYMOUS, protocol_version=HANDSHAKE, modern=False, client_capabilities={}, emit=emit, flavor="stdio")
    created = await tasks.create_legacy({"name": "slow_compute", "arguments": {"seconds": 0}, "task": {}}, rc)
    task_id = created["task"]["taskId"]
    _wait_seconds(settings, 0)
    waiting = asyncio.ensure_future(tasks.legacy_result({"taskId": task_id}, rc))
    while not any(m.get("method") == "notifications/tasks/status" for m in sent) and not waiting.done():
        await asyncio.sleep(0.01)  # (until the request waits, or answers: no timing is asserted)
    assert not waiting.done(), waiting.exception()
    assert await background.run_in_worker(task_id, "w") == "finished"
    result = await asyncio.wait_for(waiting, 10)
    assert result["_meta"][RELATED_TASK] == {"taskId": task_id} and not result.get("isError"), result


async def test_of_two_tasks_result_streams_only_the_one_the_task_keeps_pauses(queued: list[str], settings: Any) -> None:  # noqa: F811
    """The row keeps one stream per task, the last tasks/result's: a resume of the other would find no task
    (and the client would resume it in a loop). That one waits on, holding its connection, and answers."""
    headers, task_id = await _a_task()
    _wait_seconds(settings, 1.0)
    older = _tasks_result(headers, task_id, "a")
    await older.wait_for(lambda m: m.get("method") == "notifications/tasks/status")
    newer = _tasks_result(headers, task_id, "b")
    await _paused(newer)
    assert not older.task.done()
    assert await background.run_in_worker(task_id, "w") == "finished"
    _, final = await older.wait_for(_is_answer)
    await asyncio.wait_for(older.task, 10)
    assert final["id"] == "a" and "result" in final, final


async def test_a_tasks_result_of_an_ended_task_answers_with_no_wait_at_all(queued: list[str], settings: Any) -> None:  # noqa: F811
    """TASK_RESULT_WAIT_SECONDS 0 pauses a stream at once, but a task that ended has its answer at hand."""
    headers, task_id = await _a_task()
    assert await background.run_in_worker(task_id, "w") == "finished"
    _wait_seconds(settings, 0)
    stream = _tasks_result(headers, task_id, "done")
    _, final = await stream.wait_for(_is_answer)
    await asyncio.wait_for(stream.task, 10)
    assert final["id"] == "done" and final["result"]["content"][0]["text"].startswith("computed result"), final


async def test_a_tasks_result_that_pauses_at_once_still_sends_the_tasks_input_requests(
    queued: list[str], settings: Any,  # noqa: F811
) -> None:
    """TASK_RESULT_WAIT_SECONDS 0 ends each connection at once, but only where the stream waits: each one
    first relays what the task has for the client. The limit cut the stream at its first write (the
    status notification), before the input request, on every resume: the elicitation never went out and
    the task stayed input_required until its ttl."""
    headers, task_id = await _an_asking_task()
    _wait_seconds(settings, 0)
    first = _tasks_result(headers, task_id, "r-0")
    event_id = await _paused(first)
    asks = [m for _, m in first.events() if m.get("method") == "elicitation/create"]
    assert len(asks) == 1, first.text()
    ask = asks[0]
    assert ask["params"]["_meta"][RELATED_TASK] == {"taskId": task_id}, ask
    answer = {"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"confirm": True}}}
    assert (await post_json(APP, answer, headers)).status == 202
    assert await background.run_in_worker(task_id, "w") == "finished"
    resumed = await _resumed(headers, event_id)
    _, final = await resumed.wait_for(_is_answer)
    await asyncio.wait_for(resumed.task, 10)
    assert final["id"] == "r-0" and final["result"]["content"] == [{"type": "text", "text": "deleted file.txt"}], final
    assert [m for _, m in resumed.events() if m.get("method") == "elicitation/create"] == []
