"""Background calls whose worker or broker message is lost (a review of the Celery paths).

In-process, as the other background tests: ``background.send`` is a recorder, the test runs
``background.run_in_worker`` and ``background.sweep`` itself, and a lost worker is a lease made to
run out.
"""
from __future__ import annotations

import asyncio
import threading
import time
from datetime import timedelta
from typing import Any
from unittest import mock

import pytest
from asgiref.sync import sync_to_async
from django.db import connections
from django.utils import timezone

from mcp_tools import ToolContext
from mcp_tools.models import ToolCall
from mcp_tools.registry import make_tool, registry
from mcp_tools.server import background
from mcp_tools.store import sync_calls
from tests.test_background_review import legacy, open_session, queued  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)

RUNS: list[str] = []


def _row(call_id: str) -> ToolCall:
    return ToolCall.objects.get(id=call_id)


async def _new_call(name: str, **fields: Any) -> str:
    return await sync_to_async(sync_calls.create_call)(
        [], method="tools/call", tool_name=name, arguments={"name": name, "arguments": {}}, principal="anon",
        protocol_version="2026-07-28", flavor="tasks", status="working", background=True, celery_task_id="t-0", **fields)


async def _worker_dies_holding(call_id: str, worker: str) -> None:
    """``worker`` claims the call and is lost: killed before its lease was renewed (it runs out)."""
    assert await sync_to_async(sync_calls.claim_for_worker)(call_id, worker, 30.0)
    await sync_to_async(lambda: ToolCall.objects.filter(id=call_id).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)))()


async def _poison(ctx: ToolContext) -> str:
    RUNS.append(ctx.call_id or "")
    return "ran"


async def test_a_call_that_keeps_losing_its_worker_fails_instead_of_running_again_forever(queued: list[str]) -> None:  # noqa: F811
    """Each run of the call kills its worker (Celery's hard time limit, out of memory): the sweep took it
    over every time, and every worker in turn ran it again, until CALL_TTL. max_retries=0: one lost worker
    is taken over; at the second the worker that would run it a third time ends it failed, unrun."""
    RUNS.clear()
    with registry.registered_temporarily(make_tool(_poison, name="poison_bg", background=True)):
        call_id = await _new_call("poison_bg")
        await _worker_dies_holding(call_id, "w-A")
        first = await sync_to_async(background.sweep)()
        again = await sync_to_async(background.sweep)()  # a second sweep before any worker: no second count
        assert (first["requeued"], again["requeued"], queued) == (1, 0, [call_id])
        assert (await sync_to_async(_row)(call_id)).lost_workers == 1
        await _worker_dies_holding(call_id, "w-B")
        assert (await sync_to_async(background.sweep)())["requeued"] == 1
        outcome = await background.run_in_worker(call_id, "w-C")
        row = await sync_to_async(_row)(call_id)
    assert (outcome, row.status, row.lost_workers, RUNS) == ("failed", "failed", 2, [])
    assert "the worker running it was lost 2 times" in row.status_message
    assert row.result["isError"] and "lost 2 times" in row.result["content"][0]["text"]
    assert (row.worker, row.lease_expires_at) == ("", None)


async def test_a_worker_that_takes_over_a_lapsed_lease_itself_counts_the_lost_worker() -> None:
    """The call's message may reach a worker after the lease ran out and before the sweep (a redelivery):
    that takeover counts the lost worker too, and a call within its bound runs."""
    RUNS.clear()
    tool = make_tool(_poison, name="poison_bg2", background=True, max_retries=1)
    with registry.registered_temporarily(tool):
        call_id = await _new_call("poison_bg2")
        await _worker_dies_holding(call_id, "w-A")
        await _worker_dies_holding(call_id, "w-B")
        assert (await sync_to_async(_row)(call_id)).lost_workers == 1
        assert await background.run_in_worker(call_id, "w-C") == "finished"  # 2 lost: max_retries + 1
        row = await sync_to_async(_row)(call_id)
    assert (row.status, row.lost_workers, len(RUNS)) == ("completed", 2, 1)


SEEN: dict[str, Any] = {}


def _lease_meanwhile(call_id: str, wait: float) -> None:
    """From another thread, while the handler blocks its loop: whether the call's lease ran out."""
    time.sleep(wait)
    try:
        SEEN["lapsed"] = ToolCall.objects.filter(id=call_id, lease_expires_at__lt=timezone.now()).exists()
    finally:
        connections.close_all()


async def _blocks_its_loop(ctx: ToolContext) -> str:
    lease = SEEN["lease"]
    checker = threading.Thread(target=_lease_meanwhile, args=(ctx.call_id, 2.5 * lease))
    checker.start()
    time.sleep(3 * lease)  # a sync client library in an async tool: the event loop stands still
    checker.join()
    return "done"


async def test_a_worker_renews_its_lease_while_the_handler_blocks_its_event_loop(settings: Any) -> None:
    """The renewal was a task on the handler's loop: a handler that blocks the loop stopped it, and the
    sweep handed the call to another worker while this one still ran it (and then wrote nothing)."""
    SEEN.clear()
    SEEN["lease"] = 1.0
    settings.MCP_TOOLS = {**settings.MCP_TOOLS, "WORKER_LEASE_SECONDS": SEEN["lease"]}
    with registry.registered_temporarily(make_tool(_blocks_its_loop, name="blocks_loop", background=True)):
        call_id = await _new_call("blocks_loop")
        outcome = await background.run_in_worker(call_id, "w-A")
        row = await sync_to_async(_row)(call_id)
    assert SEEN["lapsed"] is False, "the lease ran out while its worker ran the call"
    assert (outcome, row.status) == ("finished", "completed")


async def _stops_when_told(ctx: ToolContext) -> str:
    await asyncio.sleep(30)
    return "never"


async def test_a_renewal_that_finds_the_call_taken_over_stops_the_handler(settings: Any) -> None:
    settings.MCP_TOOLS = {**settings.MCP_TOOLS, "WORKER_LEASE_SECONDS": 0.3}
    with registry.registered_temporarily(make_tool(_stops_when_told, name="taken_bg", background=True)):
        call_id = await _new_call("taken_bg")
        run = asyncio.ensure_future(background.run_in_worker(call_id, "w-A"))
        await asyncio.sleep(0.2)
        await sync_to_async(lambda: ToolCall.objects.filter(id=call_id).update(worker="w-B"))()
        outcome = await asyncio.wait_for(run, 10)
        row = await sync_to_async(_row)(call_id)
    assert (outcome, row.status, row.worker) == ("stopped", "working", "w-B")


# -- a lost broker message --------------------------------------------------------------------------


def _later(seconds: float) -> Any:
    """``timezone.now`` ``seconds`` from now (the sweep reads the clock through it)."""
    return mock.patch("django.utils.timezone.now", return_value=timezone.now() + timedelta(seconds=seconds))


async def _quick(ctx: ToolContext) -> str:
    RUNS.append("quick")
    return "ok"


async def test_a_queued_call_whose_message_was_lost_is_queued_again_by_the_sweep(queued: list[str], settings: Any) -> None:  # noqa: F811
    """The broker lost the message (restarted without persistence; the server died between the row's commit
    and the send): a queued call had no lease and a task id, which the sweep never took for lost, and it
    stayed working until CALL_TTL. Past its queue deadline it is queued again; the two messages run it once."""
    RUNS.clear()
    with registry.registered_temporarily(make_tool(_quick, name="quick_lost", background=True)):
        session = await open_session()
        created = await legacy(session, "tools/call", {"name": "quick_lost", "arguments": {}, "task": {}})
        call_id = created["result"]["task"]["taskId"]
        assert queued == [call_id]
        assert (await sync_to_async(background.sweep)())["requeued"] == 0  # within its deadline: the message may come
        lease = float(settings.MCP_TOOLS.get("WORKER_LEASE_SECONDS", 30))
        with _later(lease + 1):
            swept = await sync_to_async(background.sweep)()
        assert (swept["requeued"], queued) == (1, [call_id, call_id])
        assert await background.run_in_worker(call_id, "w-A") == "finished"
        assert await background.run_in_worker(call_id, "w-B") == "claimed-elsewhere"  # the first message came after all
        row = await sync_to_async(_row)(call_id)
    assert (row.status, RUNS, row.requeues) == ("completed", ["quick"], 1)


async def test_a_call_queued_again_after_its_answers_gets_a_queue_deadline(queued: list[str], settings: Any) -> None:  # noqa: F811
    """go_on_if_answered queues the call again: that message may be lost too."""
    call_id = await _new_call("quick_lost2")
    await background.requeue(call_id)
    lease = float(settings.MCP_TOOLS.get("WORKER_LEASE_SECONDS", 30))
    with _later(lease + 1):
        swept = await sync_to_async(background.sweep)()
    assert (swept["requeued"], queued) == (1, [call_id, call_id])


async def test_queueing_a_call_again_leaves_a_worker_that_claimed_it_meanwhile_alone(queued: list[str]) -> None:  # noqa: F811
    """Between go_on_if_answered's claim of the round and its re-queue, another message for the call
    (the sweep re-queued a slow queue) may be claimed by a worker: the re-queue cleared that worker's
    claim and sent a new message, which a second worker could run at the same time."""
    call_id = await _new_call("quick_lost_claimed")
    assert await sync_to_async(sync_calls.claim_for_worker)(call_id, "worker-a", 30.0)
    await background.requeue(call_id)
    row = await sync_to_async(_row)(call_id)
    assert (row.worker, row.lease_expires_at is not None, queued) == ("worker-a", True, [])


async def test_a_call_left_without_a_deadline_is_queued_again_once_untouched_for_a_lease(queued: list[str], settings: Any) -> None:  # noqa: F811
    """A row queued before queue deadlines were kept (no lease, a task id), or whose process died between
    moving it back to working and queueing it: queued again once nobody touched it for a lease."""
    call_id = await _new_call("quick_lost3")
    assert (await sync_to_async(background.sweep)())["requeued"] == 0
    lease = float(settings.MCP_TOOLS.get("WORKER_LEASE_SECONDS", 30))
    with _later(lease + 1):
        swept = await sync_to_async(background.sweep)()
    assert (swept["requeued"], queued) == (1, [call_id])


async def test_a_queued_call_is_queued_again_less_and_less_often(queued: list[str], settings: Any) -> None:  # noqa: F811
    """A long backlog is not a lost message: each time the sweep queues a call again, it waits twice as long."""
    lease = float(settings.MCP_TOOLS.get("WORKER_LEASE_SECONDS", 30))
    call_id = await _new_call("quick_lost4")
    await background.requeue(call_id)
    deadlines = []
    for hours in (1, 2, 3):
        with _later(hours * 3600 + 100 * lease):  # every deadline so far has passed
            await sync_to_async(background.sweep)()
        row = await sync_to_async(_row)(call_id)
        deadlines.append(round((row.queued_until - row.updated_at).total_seconds() / lease))
    assert deadlines == [2, 4, 8]


async def test_a_queued_call_past_call_ttl_is_expired_not_queued_again(queued: list[str], settings: Any) -> None:  # noqa: F811
    call_id = await _new_call("quick_lost5")
    await background.requeue(call_id)
    with _later(float(settings.MCP_TOOLS.get("CALL_TTL", 86400)) + 3600):
        swept = await sync_to_async(background.sweep)()
    row = await sync_to_async(_row)(call_id)
    assert (swept, row.status, queued) == ({"expired": 1, "requeued": 0}, "expired", [call_id])
