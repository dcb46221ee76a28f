"""Messages between server processes over the Channels layer, when the layer is shared.

With the in-memory layer (one process) there is nobody to tell, and these are no-ops;
every caller keeps a local path that works without them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from django.core.signals import setting_changed
from django.dispatch import receiver

logger = logging.getLogger("mcp_tools.broadcast")

_listeners: dict[str, asyncio.Task[None]] = {}
#: ``[layer or None]`` once asked (every finished durable round publishes a wakeup); reset when CHANNEL_LAYERS changes.
_shared: list[Any] = []


@receiver(setting_changed)
def _forget_layer(*, setting: str, **kwargs: Any) -> None:
    if setting == "CHANNEL_LAYERS":
        _shared.clear()


def shared_layer() -> Any:
    """The configured channel layer if it reaches other processes (e.g. channels-redis), else None."""
    if not _shared:
        from channels.layers import InMemoryChannelLayer, get_channel_layer

        layer = get_channel_layer()
        _shared.append(None if layer is None or isinstance(layer, InMemoryChannelLayer) else layer)
    return _shared[0]


async def publish(group: str, message: dict[str, Any]) -> bool:
    """Send ``message`` to every process listening on ``group`` (best effort, logged on failure).

    Whether it was sent: False without a shared layer, or when the layer failed.
    """
    layer = shared_layer()
    if layer is None:
        return False
    try:
        await layer.group_send(group, message)
    except Exception:
        logger.warning("Could not publish to %s", group, exc_info=True)
        return False
    return True


def listen(group: str, handler: Callable[[dict[str, Any]], None]) -> None:
    """Run ``handler`` for every message published on ``group``, for the life of this event loop.

    A listener that stopped (the layer failed) or belongs to another event loop (a
    loop that ended: tests, ``async_to_sync``) is started again on the running one.
    """
    running = _listeners.get(group)
    if running is not None and not running.done() and running.get_loop() is asyncio.get_running_loop():
        return
    layer = shared_layer()
    if layer is None:
        return

    async def receive_forever() -> None:
        try:
            channel = await layer.new_channel()
            await layer.group_add(group, channel)
            while True:
                handler(await layer.receive(channel))
        except Exception:  # logged here, not "never retrieved" at exit; the next listen() starts again
            logger.warning("Stopped listening on %s", group, exc_info=True)

    _listeners[group] = asyncio.ensure_future(receive_forever())
