"""RequestThread (server/threads.py): "a sync job it stopped waiting for is not waited for". end() looks
only at the request's *last* job: with one job still running and a later one cancelled before it
started (asyncio.gather of two sync calls, cancelled), the last is done, so end() queues the
connection close behind the running job and the request waits for that job to finish."""

from __future__ import annotations

import asyncio
import threading

import pytest
from asgiref.sync import sync_to_async

from mcp_tools.server import threads


@pytest.fixture(autouse=True)
def _no_idle_threads():  # type: ignore[no-untyped-def]
    threads.close_idle_threads()
    yield
    threads.close_idle_threads()


async def test_a_cancelled_request_does_not_wait_for_its_abandoned_sync_job() -> None:
    release = threading.Event()

    def slow() -> None:
        release.wait(10)

    def quick() -> None:
        return None

    async def request() -> None:
        async with threads.RequestThread():
            await asyncio.gather(sync_to_async(slow)(), sync_to_async(quick)())

    task = asyncio.ensure_future(request())
    try:
        await asyncio.sleep(0.3)  # slow() runs, quick() waits behind it in the request's thread
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=2)
        ended = task in done
    finally:
        release.set()
        await asyncio.wait({task}, timeout=10)
    assert ended, "the cancelled request still waits (2 s on) for the sync job it abandoned"
