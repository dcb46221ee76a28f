"""A 2025-11-25 task's ``ttl`` (the client's limit) ends it when it runs out, whatever it is doing.

Only the periodic sweep used to expire a task, so one with ttl 2000 ms whose run took 5 s finished
``completed``, and one that waited was failed up to a sweep interval late. Now the worker's lease
keeper renews once more at the ttl, which ends the task expired and stops its handler; a run that
finishes past the ttl writes nothing over it; and a read of the task (``tasks/get``, a waiting
``tasks/result``) ends one whose ttl ran out while nothing ran it.

The worker is simulated in-process (``background.run_in_worker``, what the Celery task body runs).
"""
from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from mcp_tools import ToolContext
from mcp_tools.models import ToolCall
from mcp_tools.registry import make_tool, registry
from mcp_tools.server import background
from tests.asgi_client import HANDSHAKE, handshake_message, post_headers
from tests.test_background_review import _expire_now, legacy, queued  # noqa: F401
from tests.test_http_spec_edges import Stream, _in_memory_layer  # noqa: F401
from tests.test_task_review import open_session

pytestmark = pytest.mark.django_db(transaction=True)
EXPIRED = "The task expired before it finished."
RAN_TO_ITS_END: list[str] = []


async def _long_job(ctx: ToolContext, seconds: float) -> str:
    await asyncio.sleep(seconds)
    RAN_TO_ITS_END.append(ctx.call_id or "")
    return "done"


async def _loop_blocking_job(ctx: ToolContext, seconds: float) -> str:
    # A sync client library in an async tool: the loop is blocked past the ttl, and nothing can stop
    # the handler before it returns; its result must not be written over the expired task.
    time.sleep(seconds)
    return "done"


async def _run_a_task_past_its_ttl(fn: Any, name: str) -> tuple[str, str, str]:
    """Run a 1 s task whose handler takes 3 s on the (simulated) worker: (task id, run's outcome, row status)."""
    session = await open_session()
    with registry.registered_temporarily(make_tool(fn, name=name, background=True)):
        created = await legacy(session, "tools/call", {"name": name, "arguments": {"seconds": 3}, "task": {"ttl": 1000}})
        task_id = created["result"]["task"]["taskId"]
        ran = await background.run_in_worker(task_id, "w-test")
    row = await sync_to_async(ToolCall.objects.get)(id=task_id)
    return task_id, ran, row.status


async def test_a_running_task_ends_failed_when_its_ttl_runs_out_and_its_handler_stops(queued: list[str]) -> None:  # noqa: F811
    task_id, ran, status = await _run_a_task_past_its_ttl(_long_job, "ttl_long_job")
    assert (ran, status) == ("expired", "expired")
    assert task_id not in RAN_TO_ITS_END  # stopped at the ttl, not run to its end
    row = await sync_to_async(ToolCall.objects.get)(id=task_id)
    assert row.result is None and row.finished_at is not None


async def test_a_run_that_finishes_past_its_tasks_ttl_does_not_complete_it(queued: list[str]) -> None:  # noqa: F811
    _, ran, status = await _run_a_task_past_its_ttl(_loop_blocking_job, "ttl_blocking_job")
    assert (ran, status) == ("expired", "expired")


async def test_a_task_waiting_for_input_reads_failed_once_its_ttl_ran_out(queued: list[str]) -> None:  # noqa: F811
    session = await open_session(capabilities={"elicitation": {"form": {}}, "tasks": {}})
    created = await legacy(session, "tools/call", {"name": "confirm_delete", "arguments": {}, "task": {"ttl": 60_000}})
    task_id = created["result"]["task"]["taskId"]
    assert await background.run_in_worker(task_id, "w-test") == "input-required"
    await sync_to_async(_expire_now)(task_id)  # its ttl runs out; no sweep runs
    got = (await legacy(session, "tasks/get", {"taskId": task_id}))["result"]
    assert (got["status"], got["statusMessage"]) == ("failed", EXPIRED), got


async def test_a_waiting_tasks_result_answers_once_the_tasks_ttl_ran_out(queued: list[str]) -> None:  # noqa: F811
    session = await open_session(capabilities={"elicitation": {"form": {}}, "tasks": {}})
    created = await legacy(session, "tools/call", {"name": "confirm_delete", "arguments": {}, "task": {"ttl": 60_000}})
    task_id = created["result"]["task"]["taskId"]
    assert await background.run_in_worker(task_id, "w-test") == "input-required"
    headers = post_headers(version=HANDSHAKE, session=session)
    stream = Stream("POST", headers, json.dumps(handshake_message("tasks/result", {"taskId": task_id})).encode())
    await stream.wait_for(lambda m: m.get("method") == "elicitation/create")
    await sync_to_async(_expire_now)(task_id)  # its ttl runs out while the stream waits; no sweep runs
    _, answer = await stream.wait_for(lambda m: "method" not in m and ("result" in m or "error" in m))
    assert answer["result"]["isError"] is True, answer
    assert answer["result"]["content"][0]["text"] == "The call expired before it finished."
    status: list[Any] = [m["params"]["status"] for _, m in stream.events() if m.get("method") == "notifications/tasks/status"]
    assert status[-1] == "failed", status


def test_a_late_renewal_of_a_background_call_that_is_not_a_task_keeps_it_running() -> None:
    """A diff review of the change above: the renewal ran the expiry for every background call, so a
    long job (past ``CALL_TTL``, which does not end a run a worker holds) whose renewal came late (a
    database failover, a stalled thread: its lease had run out) ended ``expired`` at that renewal,
    where it went on before. Only a 2025-11-25 task's renewal ends it at its ttl (a statement more)."""
    from datetime import timedelta

    from django.utils import timezone

    from mcp_tools.states import WireFlavor

    past = timezone.now() - timedelta(seconds=5)
    for flavor, renewed, status in ((WireFlavor.MRTR, True, "working"), (WireFlavor.TASK, False, "expired")):
        row = ToolCall.objects.create(tool_name="slow_compute", principal="user:1", flavor=flavor, params_digest="0" * 64,
                                      background=True, status="working", worker="w1", expires_at=past, lease_expires_at=past)
        # (What the lease keeper asks: ends_with_ttl for a task only, the default otherwise.)
        options = {"ends_with_ttl": True} if flavor == WireFlavor.TASK else {}
        assert ToolCall.objects.renew_lease(row.id, "w1", 60, **options) is renewed, flavor
        assert ToolCall.objects.get(id=row.id).status == status, flavor
