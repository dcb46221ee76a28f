"""A background call's run holds it by its lease: a run whose lease another worker took over neither
cancels the call nor writes over it; progress only goes up, across retries; a retry whose message
never comes is queued again by the sweep. The first four tests failed before their fixes (a review
of the worker paths); the others pin what it found right."""
from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any
from unittest import mock

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from mcp_tools import ToolContext
from mcp_tools.models import ToolCall
from mcp_tools.registry import make_tool, registry
from mcp_tools.server import background
from mcp_tools.store import sync_calls
from tests.test_background_review import queued  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)

EFFECTS: list[str] = []


def _row(call_id: str) -> ToolCall:
    return ToolCall.objects.get(id=call_id)


async def _new_call(name: str) -> str:
    return await sync_to_async(sync_calls.create_call)(
        [], method="tools/call", tool_name=name, arguments={"name": name, "arguments": {}}, principal="anon",
        protocol_version="2026-07-28", flavor="tasks", status="working", background=True)


async def take_over(call_id: str) -> None:
    """Worker A's lease runs out (A stalled: a GC pause, a blocked loop) and worker B claims the call."""
    await sync_to_async(lambda: ToolCall.objects.filter(id=call_id).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)))()
    assert await sync_to_async(sync_calls.claim_for_worker)(call_id, "w-B", 30.0)


async def _slow(ctx: ToolContext) -> str:
    for _ in range(30):
        await asyncio.sleep(0.1)
    return "done"


async def test_a_worker_whose_lease_was_taken_over_does_not_cancel_the_call(settings: Any) -> None:
    """Worker A stalls past its lease and worker B claims the call: A's next renewal fails and stops A,
    which must not end the call B runs now (it was ended "cancelled", though nobody cancelled it)."""
    settings.MCP_TOOLS = {**settings.MCP_TOOLS, "WORKER_LEASE_SECONDS": 0.6}
    with registry.registered_temporarily(make_tool(_slow, name="slow_takeover", background=True)):
        call_id = await _new_call("slow_takeover")
        run_a = asyncio.ensure_future(background.run_in_worker(call_id, "w-A"))
        await asyncio.sleep(0.1)
        await take_over(call_id)
        outcome_a = await asyncio.wait_for(run_a, 10)
        row = await sync_to_async(_row)(call_id)
    assert (row.status, row.worker) == ("working", "w-B"), (outcome_a, row.status, row.worker, row.status_message)


GATE: dict[str, asyncio.Event] = {}


async def _gated(ctx: ToolContext) -> str:
    await GATE["go"].wait()
    return "A's result"


async def test_a_worker_whose_lease_was_taken_over_does_not_write_its_result() -> None:
    """A's lease ran out and B claimed the call; A finishes before its next renewal notices: A's
    result is not written (the compare-and-set is also on the worker), B's run keeps the call."""
    GATE["go"] = asyncio.Event()
    with registry.registered_temporarily(make_tool(_gated, name="gated_takeover", background=True)):
        call_id = await _new_call("gated_takeover")
        run_a = asyncio.ensure_future(background.run_in_worker(call_id, "w-A"))
        await asyncio.sleep(0.2)
        await take_over(call_id)
        GATE["go"].set()
        outcome_a = await asyncio.wait_for(run_a, 10)
        row = await sync_to_async(_row)(call_id)
    assert (row.status, row.worker) == ("working", "w-B"), (outcome_a, row.status, row.worker)


ATTEMPTS: list[int] = []


async def _flaky(ctx: ToolContext) -> str:
    ATTEMPTS.append(1)
    await ctx.report_progress(len(ATTEMPTS) == 1 and 5 or 1, 10)
    if len(ATTEMPTS) == 1:
        raise ConnectionError("net down")
    return "ok"


async def test_progress_stays_monotonic_across_a_retry() -> None:
    """retry_on: attempt 0 reports 5/10 then raises; attempt 1 (from the top) reports 1/10. The row,
    which every relay reads, keeps 5: progress never goes back (the spec: each value increases)."""
    ATTEMPTS.clear()
    tool = make_tool(_flaky, name="flaky_progress", background=True, retry_on=(ConnectionError,), max_retries=2, retry_backoff=0.0)
    with registry.registered_temporarily(tool):
        call_id = await _new_call("flaky_progress")
        with pytest.raises(background.RetryCall) as retry:
            await background.run_in_worker(call_id, "w-A", task_id="m-1")
        first = (await sync_to_async(_row)(call_id)).progress
        assert await background.run_in_worker(call_id, "w-A", task_id=retry.value.task_id) == "finished"  # its retry
        row = await sync_to_async(_row)(call_id)
    assert row.status == "completed"
    assert row.progress >= first, (first, row.progress)


async def _always_fails(ctx: ToolContext) -> str:
    await ctx.once("effect", EFFECTS.append, "x")
    raise ConnectionError("net down")


async def test_retry_on_exhausted_ends_failed_with_a_clear_error_and_once_ran_once() -> None:
    EFFECTS.clear()
    tool = make_tool(_always_fails, name="always_fails", background=True, retry_on=(ConnectionError,), max_retries=2, retry_backoff=1.0)
    with registry.registered_temporarily(tool):
        call_id = await _new_call("always_fails")
        countdowns = []
        task_id = "m-1"
        for _ in range(2):  # attempts 0 and 1, then their retries (each the task the call waits on)
            with pytest.raises(background.RetryCall) as info:
                await background.run_in_worker(call_id, "w", task_id=task_id)
            countdowns.append(info.value.countdown)
            task_id = info.value.task_id
        assert await background.run_in_worker(call_id, "w", task_id=task_id) == "finished"
        row = await sync_to_async(_row)(call_id)
    assert countdowns == [1.0, 2.0]
    assert row.status == "failed" and "after 3 attempts" in str(row.result), row.result
    assert EFFECTS == ["x"]


async def _driver_down(ctx: ToolContext) -> str:
    raise ConnectionError('connection to server at "10.0.0.5", port 5432 failed: password authentication failed for user "app"')


async def test_retry_on_exhausted_tells_the_client_the_class_not_the_exceptions_text(caplog: Any) -> None:
    """A retry_on exception is typically a driver's, whose text names hosts and users: the client read it
    ("The call failed after 1 attempts: ConnectionError: connection to server at ..."), in the result and
    the task's status message (read from the result). It gets the class and the log the text, as for any other failure."""
    tool = make_tool(_driver_down, name="driver_down", background=True, retry_on=(ConnectionError,), max_retries=0)
    with registry.registered_temporarily(tool), caplog.at_level("ERROR", logger="mcp_tools.background"):
        call_id = await _new_call("driver_down")
        assert await background.run_in_worker(call_id, "w") == "finished"
        row = await sync_to_async(_row)(call_id)
    assert row.status == "failed"
    assert row.result == {"content": [{"type": "text", "text": "The call failed after 1 attempt (ConnectionError); "
                                                                 "the server log has the details."}], "isError": True}
    assert "10.0.0.5" not in f"{row.status_message} {row.error} {row.last_outcome}"
    assert any("10.0.0.5" in (r.exc_text or "") for r in caplog.records), "the log keeps the exception"


async def _not_retried(ctx: ToolContext) -> str:
    raise ValueError("bad")


async def test_exception_not_in_retry_on_fails_without_retry() -> None:
    tool = make_tool(_not_retried, name="not_retried", background=True, retry_on=(ConnectionError,), max_retries=2)
    with registry.registered_temporarily(tool):
        call_id = await _new_call("not_retried")
        assert await background.run_in_worker(call_id, "w") == "finished"
        row = await sync_to_async(_row)(call_id)
    assert row.status == "failed"


async def _quick(ctx: ToolContext) -> str:
    EFFECTS.append("ran")
    return "ok"


@pytest.mark.parametrize("status", ["completed", "cancelled", "failed", "input_required"])
async def test_worker_on_an_ended_call_does_nothing(status: str) -> None:
    EFFECTS.clear()
    with registry.registered_temporarily(make_tool(_quick, name="quick_bg", background=True)):
        call_id = await _new_call("quick_bg")
        await sync_to_async(lambda: ToolCall.objects.filter(id=call_id).update(status=status))()
        assert await background.run_in_worker(call_id, "w") == "claimed-elsewhere"
    row = await sync_to_async(_row)(call_id)
    assert (row.status, EFFECTS) == (status, [])


async def test_sweep_leaves_a_live_lease_alone(queued: list[str]) -> None:  # noqa: F811
    with registry.registered_temporarily(make_tool(_quick, name="quick_bg2", background=True)):
        call_id = await _new_call("quick_bg2")
        assert await sync_to_async(sync_calls.claim_for_worker)(call_id, "w-A", 30.0)
        swept = await sync_to_async(background.sweep)()
    assert swept["requeued"] == 0 and queued == []


async def _lost_retry(ctx: ToolContext) -> str:
    raise ConnectionError("net down")


async def test_a_retry_the_broker_never_delivers_is_queued_again_by_the_sweep(queued: list[str]) -> None:  # noqa: F811
    """retry_on: the worker leaves the call for its retry message. If that message is lost (the broker
    refused the retry; a worker holding the delayed message died with a broker that does not deliver it
    again), the sweep finds the call past the retry's lease and queues it again: not a lost call."""
    tool = make_tool(_lost_retry, name="flaky_lost", background=True, retry_on=(ConnectionError,), max_retries=3, retry_backoff=0.0)
    with registry.registered_temporarily(tool):
        call_id = await sync_to_async(sync_calls.create_call)(
            [], method="tools/call", tool_name="flaky_lost", arguments={"name": "flaky_lost", "arguments": {}},
            principal="anon", protocol_version="2026-07-28", flavor="tasks", status="working", background=True,
            celery_task_id="t-1")
        with pytest.raises(background.RetryCall):
            await background.run_in_worker(call_id, "w", task_id="m-1")
        # ... the retry message never arrives. Long after its countdown (and any lease) the sweep runs:
        later = timezone.now() + timedelta(hours=1)
        with mock.patch("django.utils.timezone.now", return_value=later):
            swept = await sync_to_async(background.sweep)()
        row = await sync_to_async(_row)(call_id)
    assert swept["requeued"] == 1 and queued == [call_id], (row.status, row.worker, row.lease_expires_at, swept)


async def test_cancelling_a_queued_call_sends_no_revoke_and_its_message_then_runs_nothing() -> None:
    """The row ends the call; its queued message finds it ended (above). A revoke broadcast added
    nothing but a warning on every worker ("Failed to mark task ... as revoked in backend: No result
    backend is configured"), at every cancel, with the settings docs/background.md recommends."""
    from celery.app.control import Control

    from mcp_tools.server.core import end_call_sync

    EFFECTS.clear()
    with registry.registered_temporarily(make_tool(_quick, name="quick_bg3", background=True)):
        call_id = await _new_call("quick_bg3")
        await sync_to_async(lambda: ToolCall.objects.filter(id=call_id).update(celery_task_id="celery-task-1"))()
        with mock.patch.object(Control, "revoke") as revoke:
            assert await sync_to_async(end_call_sync)(call_id, "cancelled", "Cancelled by an operator.")
        assert revoke.call_count == 0
        assert await background.run_in_worker(call_id, "w") == "claimed-elsewhere"
    row = await sync_to_async(_row)(call_id)
    assert (row.status, EFFECTS) == ("cancelled", [])
