"""The original Celery message of a call that waits for its ``retry_on`` retry, delivered again.

A broker delivers a message again when the worker that had it did not acknowledge it in time (Redis's
``visibility_timeout`` passed while a long call ran, the worker was lost between queueing the retry
and acknowledging). If that is the message whose run raised, the call waits for its retry: the copy
must find the call claimed (the retry's message runs it after its backoff), not run it at once.
If the retry's message is lost instead, the sweep still queues the call again past the wait's lease.

In process, as tests/test_background_retry_wait.py: ``background.send`` is a recorder.
"""
from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async

from mcp_tools import ToolContext, tasks
from mcp_tools.models import ToolCall
from mcp_tools.registry import make_tool, registry
from mcp_tools.server import background
from tests.test_background_lost import _later, _new_call
from tests.test_background_retry_wait import messages  # noqa: F401  (the Celery task ids sent, in order)

pytestmark = pytest.mark.django_db(transaction=True)

RUNS: list[int] = []


async def _fails_once(ctx: ToolContext) -> str:
    RUNS.append(1)
    if len(RUNS) == 1:
        raise ConnectionError("upstream down")
    return "ok"


def _row(call_id: str) -> ToolCall:
    return ToolCall.objects.get(id=call_id)


async def test_the_original_message_delivered_again_during_the_retry_wait_does_nothing(messages: list[str]) -> None:  # noqa: F811
    """Message A runs the call, which raises a retry_on exception: the call waits 60 s for its retry.
    A is delivered again meanwhile: it finds the call claimed and runs nothing. The retry's message
    (the task id the row waits on) runs it, as attempt 1."""
    RUNS.clear()
    tool = make_tool(_fails_once, name="fails_once_redelivered", background=True, retry_on=(ConnectionError,),
                     max_retries=2, retry_backoff=60.0)
    with registry.registered_temporarily(tool):
        call_id = await _new_call("fails_once_redelivered")
        await background.requeue(call_id)
        (original,) = messages
        with pytest.raises(background.RetryCall) as retry:
            await background.run_in_worker(call_id, "w-A", task_id=original)
        again = await background.run_in_worker(call_id, "w-B", task_id=original)  # the redelivered copy of A
        waiting = await sync_to_async(_row)(call_id)
        assert (again, len(RUNS), waiting.status, waiting.worker) == ("claimed-elsewhere", 1, "working", "")
        assert retry.value.task_id != original and waiting.celery_task_id == retry.value.task_id
        final = await background.run_in_worker(call_id, "w-A", task_id=retry.value.task_id)  # the retry, after 60 s
        row = await sync_to_async(_row)(call_id)
    assert (final, len(RUNS), row.status, row.retries) == ("finished", 2, "completed", 1)


async def test_a_lost_retry_message_is_still_queued_again_by_the_sweep(messages: list[str], settings: Any) -> None:  # noqa: F811
    """The retry's message never comes (the broker lost it, or refused it) and the original comes again:
    the copy still runs nothing, and past the wait's lease (the backoff plus WORKER_LEASE_SECONDS) the
    sweep queues the call again under a new task, which runs it with the row's attempt count."""
    RUNS.clear()
    tool = make_tool(_fails_once, name="fails_once_lost_retry", background=True, retry_on=(ConnectionError,),
                     max_retries=2, retry_backoff=60.0)
    lease = float(settings.MCP_TOOLS.get("WORKER_LEASE_SECONDS", 30))
    with registry.registered_temporarily(tool):
        call_id = await _new_call("fails_once_lost_retry")
        await background.requeue(call_id)
        (original,) = messages
        with pytest.raises(background.RetryCall):
            await background.run_in_worker(call_id, "w-A", task_id=original)
        with _later(59):  # still in the wait: the sweep leaves it alone, and the copy of A runs nothing
            assert (await sync_to_async(background.sweep)())["requeued"] == 0
            assert await background.run_in_worker(call_id, "w-B", task_id=original) == "claimed-elsewhere"
        with _later(60 + lease + 1):  # past the wait's lease: no retry came
            assert (await sync_to_async(background.sweep)())["requeued"] == 1
            requeued = messages[-1]
            assert len(messages) == 2 and requeued != original
            outcome = await background.run_in_worker(call_id, "w-C", task_id=requeued)
        row = await sync_to_async(_row)(call_id)
    assert (outcome, len(RUNS), row.status, row.retries) == ("finished", 2, "completed", 1)


async def _always_down(ctx: ToolContext) -> str:
    RUNS.append(1)
    raise ConnectionError("upstream down")


def test_the_celery_task_retries_under_the_task_id_the_call_waits_on_as_often_as_the_tool_allows() -> None:
    """The Celery task itself (run eagerly: each retry at once, Celery's own retry path). Every retry
    must come under the task id the row waits on, or it finds the call claimed and the call is left
    waiting for the sweep; and a tool's max_retries past Celery's default of 3 holds."""
    RUNS.clear()
    tool = make_tool(_always_down, name="always_down_celery", background=True, retry_on=(ConnectionError,),
                     max_retries=5, retry_backoff=0.0)
    with registry.registered_temporarily(tool):
        call_id = async_to_sync(_new_call)("always_down_celery")
        result = tasks.run_call.apply(args=[call_id], task_id="t-0")
        row = _row(call_id)
    assert (result.state, result.result, len(RUNS), row.status, row.retries) == ("SUCCESS", "finished", 6, "failed", 5)
    assert "after 6 attempts" in str(row.result)
