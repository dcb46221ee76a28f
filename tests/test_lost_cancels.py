"""A cancel that arrives as an awaited event is set must end the task (Python 3.11's wait_for drops it)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from mcp_tools.interprocess import broadcast, wakeups


async def _started(coroutine: Any) -> asyncio.Task[Any]:
    task = asyncio.ensure_future(coroutine)
    for _ in range(3):  # into its wait
        await asyncio.sleep(0)
    return task


async def test_wait_set_raises_a_cancel_that_arrives_as_the_event_is_set() -> None:
    event = asyncio.Event()
    task = await _started(broadcast.wait_set(event, 30))
    event.set()
    task.cancel()  # in the same step: the event's waiter completes first, then the cancel is handled
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_wait_set_says_whether_the_event_was_set() -> None:
    event = asyncio.Event()
    assert await broadcast.wait_set(event, 0.01) is False
    event.set()
    assert await broadcast.wait_set(event, 30) is True


async def test_a_wakeup_wait_raises_the_cancel_too() -> None:
    event = asyncio.Event()
    task = await _started(wakeups.wait(event, 30))
    event.set()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_the_admin_console_ticker_ends_on_a_cancel_that_arrives_with_a_change(monkeypatch: pytest.MonkeyPatch) -> None:
    """The dashboard's ticker is cancelled when its socket closes (``disconnect`` awaits it): a change
    announced at that moment must not keep it pushing for good, nor hang the disconnect."""
    from mcp_tools.console import consumers
    from mcp_tools.console.consumers import ConsoleConsumer

    monkeypatch.setattr(consumers, "_fingerprint", lambda: "f")  # nothing changed since the last push
    consumer = ConsoleConsumer()
    consumer.wake = asyncio.Event()
    consumer.fingerprint = "f"
    pushes: list[int] = []

    async def push() -> bool:
        pushes.append(1)
        return True

    consumer.push = push  # type: ignore[method-assign]
    ticker = await _started(consumer.watch())
    consumer.wake.set()
    ticker.cancel()
    try:
        await asyncio.wait_for(asyncio.shield(ticker), 10)
    except asyncio.CancelledError:
        pass
    except asyncio.TimeoutError:
        ticker.cancel()
        pytest.fail(f"the ticker went on after its cancel ({len(pushes)} pushes)")
    assert ticker.cancelled()
    assert pushes == []
