"""What the Celery task of a background call waits for after its round ended.

Only a sync tool's own function that runs on after its round ended (its ``time_limit``, a cancel),
and not for long: at most the time left to Celery's hard limit, else ``WORKER_LEASE_SECONDS``; then
the task returns and the function runs on in its thread. An async tool that gave up on a slow
``sync_to_async`` call (``asyncio.wait_for``, the usual pattern) and completed does not hold its
worker at all: its abandoned call is its own business, and may never end.

The task runs eagerly in a thread of the test (``run_call.apply``); each tool blocks until the test
lets it go, always at the end.
"""
from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async

from mcp_tools import ToolContext, tasks
from mcp_tools.models import ToolCall
from mcp_tools.registry import make_tool, registry
from tests.test_background_lost import _new_call

pytestmark = pytest.mark.django_db(transaction=True)

RELEASE = threading.Event()


def _slow_api() -> str:
    RELEASE.wait()  # a hung socket without a timeout, in real life
    return "late"


async def _impatient(ctx: ToolContext) -> str:
    try:
        return await asyncio.wait_for(sync_to_async(_slow_api)(), 0.3)
    except TimeoutError:
        return "the API was slow; answered from the cache"


def _hung_report(rows: int = 1) -> str:
    """Sync, past its time limit, and never ending until the test lets it."""
    return _slow_api()


def _run_task(call_id: str) -> tuple[bool, list[Any]]:
    """Run the call's task in a thread; whether it returned while the tool's slow code still blocked."""
    outcome: list[Any] = []
    worker = threading.Thread(target=lambda: outcome.append(tasks.run_call.apply(args=[call_id], task_id="t-1")))
    try:
        worker.start()
        worker.join(30)  # a bound for a broken run only: the task returns long before
        returned = not worker.is_alive() and not RELEASE.is_set()
    finally:
        RELEASE.set()  # never leave the slow code blocked
        worker.join()
    return returned, outcome


def test_a_completed_async_call_does_not_hold_its_worker() -> None:
    RELEASE.clear()
    with registry.registered_temporarily(make_tool(_impatient, name="impatient_bg", background=True)):
        call_id = async_to_sync(_new_call)("impatient_bg")
        returned, outcome = _run_task(call_id)
    row = ToolCall.objects.get(id=call_id)
    assert returned, "the task waited for the sync call its completed tool had given up on"
    assert (outcome[0].state, row.status) == ("SUCCESS", "completed"), row.status
    assert "answered from the cache" in str(row.result)


@pytest.mark.parametrize("hard_limit", [None, 1.0], ids=["lease-cap", "celery-hard-limit"])
def test_the_wait_for_an_overrun_sync_function_is_bounded(settings: Any, caplog: pytest.LogCaptureFixture,
                                                          monkeypatch: pytest.MonkeyPatch, hard_limit: float | None) -> None:
    """Without a hard limit the wait ends after WORKER_LEASE_SECONDS; with one, when it comes (a pool
    that enforces none, as here, would otherwise wait on): the task returns, saying so."""
    RELEASE.clear()
    settings.MCP_TOOLS = {**settings.MCP_TOOLS, "WORKER_LEASE_SECONDS": 1.0 if hard_limit is None else 300.0}
    monkeypatch.setattr(tasks.run_call, "time_limit", hard_limit)  # task_time_limit, as a worker applies it
    with caplog.at_level(logging.WARNING, "mcp_tools.background"), \
            registry.registered_temporarily(make_tool(_hung_report, name="hung_report", background=True, time_limit=0.2)):
        call_id = async_to_sync(_new_call)("hung_report")
        returned, outcome = _run_task(call_id)
    row = ToolCall.objects.get(id=call_id)
    assert returned, "the task waited for the hung sync function past its bound"
    assert (outcome[0].state, row.status) == ("SUCCESS", "failed") and "ran out of time" in str(row.result), row.result
    assert any("stops waiting" in r.getMessage() and r.levelno == logging.ERROR for r in caplog.records), caplog.text
