"""A 2025-11-25 ``tasks/result`` on a task that a 2026-07-28 client made (extension tasks): its input
requests are the 2026 client's to answer (``tasks/update``). The 2025 stream used to send them as
``elicitation/create`` requests, refuse every answer to them (HTTP 400: the call is not a session's),
and hang to ``TASK_RESULT_WAIT_SECONDS``. It now asks nothing and waits, relaying the task's status,
until the task ends: then it answers the task's result.

The worker is simulated in-process (``background.run_in_worker``), as in tests/test_background_review.py.
"""
from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from mcp_tools.server import background
from tests.asgi_client import HANDSHAKE, call_modern, handshake_message, post_headers
from tests.clients import create_user_with_token
from tests.test_background_review import APP, TASKS_ELICIT, queued  # noqa: F401
from tests.test_http_spec_edges import Stream, _in_memory_layer  # noqa: F401
from tests.test_task_review import open_session

pytestmark = pytest.mark.django_db(transaction=True)


async def _modern(method: str, params: dict[str, Any], token: str, capabilities: dict[str, Any] = TASKS_ELICIT) -> dict[str, Any]:
    headers = {"mcp-name": params["taskId"]} if method.startswith("tasks/") else None
    r = await call_modern(APP, method, params, token=token, capabilities=capabilities, headers=headers)
    assert r.status == 200, (r.status, r.body)
    answer: dict[str, Any] = r.json()
    return answer


def _is_answer(message: dict[str, Any]) -> bool:
    return "method" not in message and ("result" in message or "error" in message)


async def test_a_2025_tasks_result_on_a_2026_task_asks_nothing_and_answers_once_tasks_update_answered(queued: list[str]) -> None:  # noqa: F811
    token = await sync_to_async(create_user_with_token)("alice")
    created = await _modern("tools/call", {"name": "confirm_delete", "arguments": {}}, token)
    task_id = created["result"]["taskId"]
    assert await background.run_in_worker(task_id, "w") == "input-required"
    session = await open_session(token, {"elicitation": {"form": {}}, "tasks": {}})
    headers = post_headers(version=HANDSHAKE, session=session, token=token)
    stream = Stream("POST", headers, json.dumps(handshake_message("tasks/result", {"taskId": task_id})).encode())
    await stream.wait_for(lambda m: m.get("method") == "notifications/tasks/status" and m["params"]["status"] == "input_required")
    # The 2026 client answers its task's input request as the extension says.
    pending = await _modern("tasks/get", {"taskId": task_id}, token)
    assert list(pending["result"]["inputRequests"]) == ["confirm"], pending
    await _modern("tasks/update", {"taskId": task_id, "inputResponses": {"confirm": {"action": "accept", "content": {"confirm": True}}}}, token)
    assert queued.count(task_id) == 2  # back on a worker
    assert await background.run_in_worker(task_id, "w") == "finished"
    _, answer = await stream.wait_for(_is_answer)
    assert answer["result"]["content"] == [{"type": "text", "text": "deleted file.txt"}], answer
    assert answer["result"]["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": task_id}
    # Nothing was asked on the 2025 stream that the server would have refused to take an answer to.
    asked = [m for _, m in stream.events() if m.get("method") == "elicitation/create"]
    assert asked == [], asked
