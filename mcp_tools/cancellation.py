"""``notifications/cancelled`` for requests that may run in another process.

Each process registers the handler tasks of its in-flight 2025-11-25 requests.
A cancellation that arrives at a process which does not run the request is
broadcast on the shared channel layer (when there is one) to the process that does.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

logger = logging.getLogger("mcp_tools.cancellation")

GROUP = "mcp_tools.cancel"

_running: dict[tuple[str, str], asyncio.Task[Any]] = {}
_listener: asyncio.Task[None] | None = None


def _key(session_id: str, request_id: Any) -> tuple[str, str]:
    return session_id, repr(request_id)


def register(session_id: str, request_id: Any, task: asyncio.Task[Any]) -> None:
    _running[_key(session_id, request_id)] = task
    _ensure_listener()


def unregister(session_id: str, request_id: Any) -> None:
    _running.pop(_key(session_id, request_id), None)


def _cancel_local(session_id: str, request_id: Any) -> bool:
    task = _running.get(_key(session_id, request_id))
    if task is None:
        return False
    task.cancel()
    return True


async def cancel(session_id: str, request_id: Any) -> None:
    """Cancel the request's handler here, or ask the other processes to."""
    if _cancel_local(session_id, request_id):
        return
    from .wakeups import _shared_layer

    layer = _shared_layer()
    if layer is not None:
        try:
            await layer.group_send(GROUP, {"type": "mcp.cancel", "session_id": session_id, "request_id": request_id})
        except Exception:
            logger.warning("Could not broadcast a cancellation", exc_info=True)


async def _listen(layer: Any) -> None:
    channel = await layer.new_channel()
    await layer.group_add(GROUP, channel)
    while True:
        message = await layer.receive(channel)
        _cancel_local(message.get("session_id", ""), message.get("request_id"))


def _ensure_listener() -> None:
    global _listener
    if _listener is not None and not _listener.done():
        return
    from .wakeups import _shared_layer

    layer = _shared_layer()
    if layer is not None:
        _listener = asyncio.ensure_future(_listen(layer))
