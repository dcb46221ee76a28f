"""A stalled channel layer (a half-open connection, a paused Redis) does not hold a listener's block.

Found by a review of durability under failure (a proxy that keeps Redis's connections open and forwards
nothing): ``broadcast.subscribed`` waited for its group's join, and again for the leave after it, with no
bound, each redis-py's 5 s socket timeout: every 2025-11-25 round (``wakeups.listening``) and every held
background call took ~10 s longer, though a publish waits at most 1 s and a missed wakeup is the 0.5 s
database poll's (docs/robustness.md). Both now wait at most ``MEMBERSHIP_WAIT_SECONDS``.
"""
from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from mcp_tools.interprocess import broadcast


class StalledLayer:
    """A layer whose group operations never answer (its channel is made; nothing arrives)."""

    async def new_channel(self) -> str:
        return "stalled!channel"

    async def receive(self, channel: str) -> Any:
        await asyncio.sleep(3600)

    async def group_add(self, group: str, channel: str) -> None:
        await asyncio.sleep(3600)

    async def group_discard(self, group: str, channel: str) -> None:
        await asyncio.sleep(3600)


async def test_a_listener_does_not_wait_on_a_stalled_layer(monkeypatch: pytest.MonkeyPatch) -> None:
    layer = StalledLayer()
    monkeypatch.setattr(broadcast, "shared_layer", lambda: layer)
    started = time.monotonic()
    async with broadcast.subscribed("mcp_tools.stalled", lambda message: None):
        entered = time.monotonic() - started
    left = time.monotonic() - started - entered
    assert entered < 3 and left < 3, (entered, left)
    process = broadcast._process_channels.pop(asyncio.get_running_loop(), None)
    if process is not None:  # its channel task: stopped, not left running with the fake layer
        process.task.cancel()
