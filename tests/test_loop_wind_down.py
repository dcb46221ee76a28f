"""A channel-layer listener left pending on an event loop that closed is collected without an error.

A Celery worker's event loop that stopped under a call (a ``SystemExit`` from code around a tool) is
closed with its tasks as they were (the call's is left to the sweep, as a lost worker's), the process's
channel-layer listener among them. The garbage collector destroys them later, and the listener's
``finally`` raised "Event loop is closed" out of the collector: an unraisable exception, which pytest
may fail a later test on; so did a ``subscribed()`` block's and the process channel's. Each test failed before its fix.
"""
from __future__ import annotations

import asyncio
import gc
import sys
from typing import Any

import pytest

from mcp_tools.interprocess import broadcast

# Each test collects garbage to see what its own closed loop left: what earlier tests left is collected first.
pytestmark = pytest.mark.usefixtures("earlier_garbage_collected")


class _Layer:
    """A channel layer that never delivers: enough for a listener to join its group and wait."""

    group_expiry = 86400

    async def new_channel(self) -> str:
        return "channel!1"

    async def receive(self, channel: str) -> dict[str, Any]:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def group_add(self, group: str, channel: str) -> None:
        return None

    async def group_discard(self, group: str, channel: str) -> None:
        return None


def _left_on_a_closed_loop(monkeypatch: pytest.MonkeyPatch, coroutine: Any) -> tuple[asyncio.AbstractEventLoop, list[str]]:
    """Run ``coroutine`` as a task on a loop of its own with the never-delivering layer, until it has
    joined its group; then close the loop under it, as a loop that stopped without cancelling its
    tasks. The loop, and the list the unraisable exceptions will be told to."""
    layer = _Layer()
    monkeypatch.setattr(broadcast, "shared_layer", lambda: layer)
    raised: list[str] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda unraisable: raised.append(f"{unraisable.exc_type.__name__}: {unraisable.exc_value}"))
    loop = asyncio.new_event_loop()
    task = loop.create_task(coroutine)
    loop.run_until_complete(asyncio.sleep(0.05))  # joined, receiving
    assert not task.done()
    loop.close()
    return loop, raised


def test_a_listener_left_on_a_closed_loop_is_collected_without_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    _, raised = _left_on_a_closed_loop(monkeypatch, broadcast.follow("mcp_tools.test-group", lambda message: None))
    gc.collect()
    assert raised == []


async def _subscriber() -> None:
    async with broadcast.subscribed("mcp_tools.test-hygiene", lambda message: None):
        await asyncio.Event().wait()


def test_a_subscription_left_on_a_closed_loop_is_collected_without_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its ``finally`` and the process channel's raised it too (found by a review; failed before the fix)."""
    loop, raised = _left_on_a_closed_loop(monkeypatch, _subscriber())
    process = broadcast._process_channels[loop]
    try:
        process.task.get_coro().close()  # the process channel's, as the collector may close it first
        del process
        gc.collect()
    finally:
        broadcast._process_channels.pop(loop, None)
    assert raised == []
