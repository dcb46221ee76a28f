"""Waking the process that holds a 2025-11-25 stream when a client's answer lands elsewhere.

Three paths, fastest first: an in-process event (answer posted to the same
process), the Channels layer (another process, when a shared layer such as
channels-redis is configured), and a slow database poll as the safety net,
so correctness never depends on the first two.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from . import broadcast

logger = logging.getLogger("mcp_tools.wakeups")

_events: dict[str, set[asyncio.Event]] = {}
POLL_SECONDS = 0.5


def group_name(call_id: str) -> str:
    return f"mcp_tools.call.{call_id}"


async def notify(call_id: str) -> None:
    for event in list(_events.get(call_id, ())):
        event.set()
    await broadcast.publish(group_name(call_id), {"type": "mcp.wakeup"})


@contextlib.asynccontextmanager
async def listening(call_id: str) -> Any:
    """Yield an ``asyncio.Event`` that is set when someone calls :func:`notify` for the call."""
    event = asyncio.Event()
    _events.setdefault(call_id, set()).add(event)
    layer = broadcast.shared_layer()
    channel = None
    reader: asyncio.Task[None] | None = None
    # The clean-up covers the join: a stream dropped (or a call cancelled) while the layer
    # answers would otherwise leave its event in _events, and its channel in the group, for good.
    try:
        if layer is not None:
            try:
                channel = await layer.new_channel()
                await layer.group_add(group_name(call_id), channel)

                async def read() -> None:
                    while True:
                        await layer.receive(channel)
                        event.set()

                reader = asyncio.ensure_future(read())
            except Exception:
                logger.warning("Channel layer unavailable; falling back to polling for call %s", call_id, exc_info=True)
        yield event
    finally:
        _events.get(call_id, set()).discard(event)
        if not _events.get(call_id):
            _events.pop(call_id, None)
        if reader is not None:
            reader.cancel()
        if layer is not None and channel is not None:
            with contextlib.suppress(Exception):
                await layer.group_discard(group_name(call_id), channel)


async def wait(event: asyncio.Event, timeout: float = POLL_SECONDS) -> None:
    """Wait for a wake-up of ``event`` (or ``timeout``: the poll), then re-arm it."""
    await broadcast.wait_set(event, timeout)
    event.clear()
