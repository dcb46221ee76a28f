"""Waking the process that holds a 2025-11-25 stream when a client's answer lands elsewhere.

Three paths, fastest first: an in-process event (answer posted to the same
process), the Channels layer (another process, when a shared layer such as
channels-redis is configured), and a slow database poll as the safety net,
so correctness never depends on the first two.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from . import broadcast

_events: dict[str, set[asyncio.Event]] = {}
POLL_SECONDS = 0.5


def group_name(call_id: str) -> str:
    return f"mcp_tools.call.{call_id}"


async def notify(call_id: str) -> None:
    for event in list(_events.get(call_id, ())):
        event.set()
    await broadcast.publish(group_name(call_id), {"type": "mcp.wakeup"})


@contextlib.asynccontextmanager
async def listening(call_id: str) -> AsyncIterator[asyncio.Event]:
    """Yield an ``asyncio.Event`` that is set when someone calls :func:`notify` for the call.

    Other processes' wakeups come through the process's channel (:func:`broadcast.subscribed`),
    not one per call: a stream woken by the local event leaves before the published copy
    arrives, and a channel of its own would keep that copy in the layer for good.
    """
    event = asyncio.Event()
    _events.setdefault(call_id, set()).add(event)
    # The clean-up covers the join: a stream dropped (or a call cancelled) while the layer
    # answers would otherwise leave its event in _events, and the process in the group, for good.
    try:
        async with broadcast.subscribed(group_name(call_id), lambda message: event.set()):
            yield event
    finally:
        _events.get(call_id, set()).discard(event)
        if not _events.get(call_id):
            _events.pop(call_id, None)


async def wait(event: asyncio.Event, timeout: float = POLL_SECONDS) -> None:
    """Wait for a wake-up of ``event`` (or ``timeout``: the poll), then re-arm it."""
    await broadcast.wait_set(event, timeout)
    event.clear()
