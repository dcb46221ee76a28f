"""Server-initiated notifications for 2025-11-25 sessions: resource updates and list changes.

Each open standalone ``GET`` stream registers here under its session id. A
notification for a session reaches the stream held by this process directly
and, through the shared channel layer (when there is one), a stream held by
any other process.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from asgiref.sync import async_to_sync

from . import broadcast, store

logger = logging.getLogger("mcp_tools.notifications")

_streams: dict[str, set[asyncio.Queue[dict[str, Any]]]] = {}


def group_name(session_id: str) -> str:
    return f"mcp_tools.session.{session_id}"


def open_stream(session_id: str, queue: asyncio.Queue[dict[str, Any]]) -> None:
    _streams.setdefault(session_id, set()).add(queue)


def close_stream(session_id: str, queue: asyncio.Queue[dict[str, Any]]) -> None:
    queues = _streams.get(session_id)
    if queues is not None:
        queues.discard(queue)
        if not queues:
            _streams.pop(session_id, None)


async def send_to_session(session_id: str, message: dict[str, Any]) -> None:
    for queue in list(_streams.get(session_id, ())):
        queue.put_nowait(message)
    await broadcast.publish(group_name(session_id), {"type": "mcp.notification", "message": message})


async def notify_resource_updated(uri: str) -> int:
    """Tell every session subscribed to ``uri`` that it changed (``notifications/resources/updated``).

    Returns the number of subscribed sessions. Call it after the data behind a
    resource changes (from a view, a signal handler, a Celery task); use
    :func:`notify_resource_updated_sync` from sync code.
    """
    session_ids = await store.db(store.subscribers)(uri)
    message = {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": uri}}
    for session_id in session_ids:
        await send_to_session(session_id, message)
    return len(session_ids)


def notify_resource_updated_sync(uri: str) -> int:
    """:func:`notify_resource_updated` for sync code."""
    return async_to_sync(notify_resource_updated)(uri)
