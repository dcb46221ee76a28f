"""Only calls created as tasks are tasks: ``tasks/list`` lists them, and ``tasks/get``,
``tasks/result`` and ``tasks/cancel`` reach them (both eras).

A background call that is not a task, a 2025-11-25 ``tools/call`` without ``task`` held on its
session stream or a 2026-07-28 call answered with a resume token, showed up in the caller's
2025-11-25 ``tasks/list`` and was reachable (and cancellable) by its call id as a task: both
looked at ``background`` alone. A client lists what it created as tasks (2025-11-25 tasks,
"tasks/list": tasks retrievable by ``tasks/get`` MUST be listed, and vice versa), not every
long call it made.

The worker is simulated in-process, as in tests/test_background_review.py.
"""
from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from mcp_tools.models import ToolCall
from tests.asgi_client import HANDSHAKE, handshake_message, post_headers
from tests.clients import create_user_with_token
from tests.test_background_review import RESUMES, TASKS, queued  # noqa: F401
from tests.test_http_spec_edges import Stream, _in_memory_layer  # noqa: F401
from tests.test_session_ended_calls import deferred_call
from tests.test_task_cross_era import _modern
from tests.test_task_review import legacy, open_session

pytestmark = pytest.mark.django_db(transaction=True)
SLOW = {"name": "slow_compute", "arguments": {"seconds": 30}}


async def test_background_calls_that_are_not_tasks_are_neither_listed_nor_reachable_as_tasks(queued: list[str]) -> None:  # noqa: F811
    token = await sync_to_async(create_user_with_token)("alice")
    session = await open_session(token)
    # A 2025-11-25 task and a 2026-07-28 task (the extension): tasks, listed and reachable.
    legacy_task = (await legacy(session, "tools/call", {**SLOW, "task": {}}, token))["result"]["task"]["taskId"]
    modern_task = (await _modern("tools/call", SLOW, token, TASKS))["result"]["taskId"]
    # A 2026-07-28 call answered with a resume token: a background call, no task.
    resumed = await _modern("tools/call", SLOW, token, RESUMES)
    assert "nextResumeToken" in resumed["result"], resumed
    # A 2025-11-25 call without "task", held on its session stream while a worker runs it: no task either.
    queued.clear()
    held = Stream("POST", post_headers(version=HANDSHAKE, session=session, token=token),
                  json.dumps(handshake_message("tools/call", SLOW)).encode())
    try:
        held_call = await deferred_call(queued)
        rows = [str(call_id) for call_id in await sync_to_async(lambda: list(ToolCall.objects.values_list("id", flat=True)))()]
        assert len(rows) == 4, rows  # all four run on a worker
        not_tasks = [call_id for call_id in rows if call_id not in (legacy_task, modern_task)]
        assert held_call in not_tasks

        listed = (await legacy(session, "tasks/list", {}, token))["result"]["tasks"]
        assert sorted(task["taskId"] for task in listed) == sorted([legacy_task, modern_task]), listed
        for task_id in (legacy_task, modern_task):
            assert (await legacy(session, "tasks/get", {"taskId": task_id}, token))["result"]["status"] == "working"
            assert (await _modern("tasks/get", {"taskId": task_id}, token, TASKS))["result"]["status"] == "working"
        for call_id in not_tasks:
            for method in ("tasks/get", "tasks/result", "tasks/cancel"):
                answer = await legacy(session, method, {"taskId": call_id}, token)
                assert answer.get("error", {}).get("message") == "Unknown task", (method, call_id, answer)
            for method in ("tasks/get", "tasks/cancel"):
                answer = await _modern(method, {"taskId": call_id}, token, TASKS)
                assert answer.get("error", {}).get("message") == "Unknown task", (method, call_id, answer)
        statuses = await sync_to_async(lambda: dict(ToolCall.objects.values_list("id", "status")))()
        assert {str(k): v for k, v in statuses.items()} == dict.fromkeys(rows, "working")  # nothing was cancelled
    finally:
        held.gone.set()
        await asyncio.wait_for(held.task, 10)
