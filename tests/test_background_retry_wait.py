"""A background call that waits for its ``retry_on`` retry, and a second message for it (the sweep's
re-queue of a slow queue, a redelivery): the retry's message alone runs it, with the row's attempt count."""
from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from mcp_tools import ToolContext
from mcp_tools.models import ToolCall
from mcp_tools.registry import make_tool, registry
from mcp_tools.server import background
from tests.test_background_lost import _later, _new_call

pytestmark = pytest.mark.django_db(transaction=True)

RUNS: list[int] = []


@pytest.fixture
def messages(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The Celery task ids handed to the (simulated) broker, in order."""
    sent: list[str] = []
    monkeypatch.setattr(background, "send", lambda call_id, tool, task_id: sent.append(task_id))
    return sent


async def _flaky(ctx: ToolContext) -> str:
    RUNS.append(1)
    raise ConnectionError("upstream down")


def _row(call_id: str) -> ToolCall:
    return ToolCall.objects.get(id=call_id)


async def test_a_second_message_does_not_run_a_call_waiting_for_its_retry(messages: list[str], settings: Any) -> None:
    """The queue is slow: the sweep sends message B for a call whose message A is still queued. A runs
    it, and its retry_on exception has it wait 60 s for its retry (a task A queues). B reaches a
    worker during that wait: it finds the call claimed, rather than run it at once from attempt 0. A's
    retry runs it, as the last of max_retries=1: the tool ran twice, not three times."""
    RUNS.clear()
    tool = make_tool(_flaky, name="flaky_dup", background=True, retry_on=(ConnectionError,), max_retries=1, retry_backoff=60.0)
    with registry.registered_temporarily(tool):
        call_id = await _new_call("flaky_dup")
        lease = float(settings.MCP_TOOLS.get("WORKER_LEASE_SECONDS", 30))
        await background.requeue(call_id)  # message A, with its queue deadline
        with _later(lease + 1):  # the sweep sends message B
            assert (await sync_to_async(background.sweep)())["requeued"] == 1
        a, b = messages
        with pytest.raises(background.RetryCall) as retry:  # A: attempt 0 fails; its retry runs in 60 s
            await background.run_in_worker(call_id, "w-A", task_id=a)
        outcome = await background.run_in_worker(call_id, "w-B", task_id=b)
        final = await background.run_in_worker(call_id, "w-A", task_id=retry.value.task_id)  # A's retry: attempt 1, the last
        row = await sync_to_async(_row)(call_id)
    assert (outcome, final, len(RUNS)) == ("claimed-elsewhere", "finished", 2)
    assert row.status == "failed" and "after 2 attempts" in str(row.result), row.result


async def test_a_call_queued_again_after_its_retry_was_lost_keeps_its_attempt_count(messages: list[str]) -> None:
    """The retry's message never comes (the broker lost it): past the wait's lease the sweep queues the
    call again, under a new task whose Celery retry count is 0. The attempt count is the row's: with
    max_retries=1 that run is the last attempt, not a first one with the whole backoff again."""
    RUNS.clear()
    tool = make_tool(_flaky, name="flaky_lost_retry", background=True, retry_on=(ConnectionError,), max_retries=1, retry_backoff=60.0)
    with registry.registered_temporarily(tool):
        call_id = await _new_call("flaky_lost_retry")
        await background.requeue(call_id)
        with pytest.raises(background.RetryCall):
            await background.run_in_worker(call_id, "w-A", task_id=messages[0])
        with _later(3600):  # long past the retry's time and its lease
            assert (await sync_to_async(background.sweep)())["requeued"] == 1
        outcome = await background.run_in_worker(call_id, "w-B", task_id=messages[1])
        row = await sync_to_async(_row)(call_id)
    assert (outcome, len(RUNS), row.status, row.retries) == ("finished", 2, "failed", 1), str(row.result)
    assert "after 2 attempts" in str(row.result)
