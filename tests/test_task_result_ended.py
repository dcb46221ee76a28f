"""``tasks/result`` of a task that was cancelled or expired answers what its ``tools/call`` would have.

2025-11-25 tasks, "Result Retrieval": for a task in a terminal status (``cancelled`` included) the
receiver MUST return "exactly what the underlying request would have returned". The same call held on
its own stream answers the tool error "The call was cancelled before it finished." (``core.ended_answer``);
``tasks/result`` answered the JSON-RPC error ``-32602 "The call was cancelled"`` instead, on a task that
had ended and on one that ended while the request waited. The 2026-07-28 extension has no
``tasks/result``: its ``tasks/get`` of a cancelled task is a ``CancelledTask`` (status only).

The worker is simulated in-process, as in tests/test_background_review.py.
"""
from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from mcp_tools.server import core
from mcp_tools.store import sync_calls
from tests.asgi_client import HANDSHAKE, handshake_message, post_headers
from tests.test_background_review import TASKS, _expire_now, legacy, modern, open_session, queued  # noqa: F401
from tests.test_http_spec_edges import Stream, _in_memory_layer  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)
RELATED_TASK = "io.modelcontextprotocol/related-task"
ENDED_TEXT = {"cancelled": "The call was cancelled before it finished.", "expired": "The call expired before it finished."}


def _as_the_call_would(result: dict[str, Any], status: str, task_id: str) -> None:
    """``result`` is the held call's answer for a call ended ``status``, with the task's related-task ``_meta``."""
    assert {k: v for k, v in result.items() if k != "_meta"} == core.ended_answer("tools/call", status), result
    # Worded for the status: "The call was cancelled ...", "The call expired ..." (not "was expired").
    assert result["isError"] is True and result["content"][0]["text"] == ENDED_TEXT[status]
    assert result["_meta"][RELATED_TASK] == {"taskId": task_id}


async def _task(session: str) -> str:
    created = await legacy(session, "tools/call", {"name": "slow_compute", "arguments": {"seconds": 30}, "task": {"ttl": 60_000}})
    task_id: str = created["result"]["task"]["taskId"]
    return task_id


async def _cancel(session: str, task_id: str) -> None:
    cancelled = await legacy(session, "tasks/cancel", {"taskId": task_id})
    assert cancelled["result"]["status"] == "cancelled"


async def _expire(session: str, task_id: str) -> None:
    await sync_to_async(_expire_now)(task_id)
    assert await sync_to_async(sync_calls.expire_overdue)() == 1  # what the sweep does
    assert (await legacy(session, "tasks/get", {"taskId": task_id}))["result"]["status"] == "failed"


@pytest.mark.parametrize(("end", "status"), [(_cancel, "cancelled"), (_expire, "expired")])
async def test_tasks_result_of_an_ended_task_answers_what_the_call_would_have(queued: list[str], end: Any, status: str) -> None:  # noqa: F811
    session = await open_session()
    task_id = await _task(session)
    await end(session, task_id)
    got = await legacy(session, "tasks/result", {"taskId": task_id})
    assert "error" not in got, got
    _as_the_call_would(got["result"], status, task_id)


async def test_a_waiting_tasks_result_answers_what_the_call_would_have_when_the_task_is_cancelled(queued: list[str]) -> None:  # noqa: F811
    session = await open_session()
    task_id = await _task(session)
    headers = post_headers(version=HANDSHAKE, session=session)
    waiting = Stream("POST", headers, json.dumps(handshake_message("tasks/result", {"taskId": task_id})).encode())
    await waiting.wait_for(lambda m: m.get("method") == "notifications/tasks/status" and m["params"]["status"] == "working")
    await legacy(session, "tasks/cancel", {"taskId": task_id})
    _, answer = await waiting.wait_for(lambda m: "method" not in m and ("result" in m or "error" in m))
    assert "error" not in answer, answer
    _as_the_call_would(answer["result"], "cancelled", task_id)


async def test_a_2026_cancelled_task_reads_as_a_cancelled_task(queued: list[str]) -> None:  # noqa: F811
    """The extension's CancelledTask carries the status alone: no result, no error, no input requests."""
    created = await modern("tools/call", {"name": "slow_compute", "arguments": {"seconds": 30}}, TASKS)
    task_id = created["result"]["taskId"]
    await modern("tasks/cancel", {"taskId": task_id}, TASKS)
    got = (await modern("tasks/get", {"taskId": task_id}, TASKS))["result"]
    assert got["status"] == "cancelled" and not {"result", "error", "inputRequests"} & set(got), got
