"""Server-initiated notifications for 2025-11-25 sessions: resource updates and list changes.

Each open standalone ``GET`` stream registers here under its session id (one
per session: the newest). A notification for a session goes through the shared
channel layer when there is one (to whichever process holds the stream, this
one included), else directly to the stream held by this process: once either way.

A resource update is one message on :data:`UPDATES_GROUP` however many sessions
subscribed, not one per session: all the channels of a process share one
channels-redis inbox, which drops what comes past its ``capacity`` (100 by
default). Each process tells its own streams: the ``subscriptions/listen``
streams that asked for the URI, and the standalone streams of the sessions
subscribed to it (its ``ResourceSubscription`` rows, read by each process that
holds standalone streams).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Any

from asgiref.sync import async_to_sync

from .. import store
from . import broadcast

logger = logging.getLogger("mcp_tools.notifications")

_streams: dict[str, set[asyncio.Queue[dict[str, Any]]]] = {}
#: 2026-07-28 ``subscriptions/listen`` streams of this process, by resource URI.
_listeners_by_uri: dict[str, set[asyncio.Queue[str]]] = {}
UPDATES_GROUP = "mcp_tools.resource_updates"
#: Put on a standalone stream's queue (by identity): the stream ends.
END: dict[str, Any] = {"type": "mcp.stream.end"}


def group_name(session_id: str) -> str:
    return f"mcp_tools.session.{session_id}"


async def open_stream(session_id: str, queue: asyncio.Queue[dict[str, Any]]) -> tuple[float, str]:
    """Register a session's standalone stream; it takes over from the session's other ones.

    A session has one standalone stream, the newest: the 2025-11-25 transport forbids sending a
    message on more than one stream, and a client that reconnects (with ``Last-Event-ID``
    or not) must not be refused while the server has not yet noticed that the old connection
    is gone (a 409 would). The older streams of this process end now; those of other
    processes when the returned stamp reaches them (:func:`ends_stream`).
    """
    stamp = (time.time(), uuid.uuid4().hex)
    for older in _streams.pop(session_id, ()):
        older.put_nowait(END)
    _streams[session_id] = {queue}
    broadcast.listen(UPDATES_GROUP, _on_update)
    await broadcast.publish(group_name(session_id), {"type": END["type"], "opened": list(stamp)})
    return stamp


def close_stream(session_id: str, queue: asyncio.Queue[dict[str, Any]]) -> None:
    queues = _streams.get(session_id)
    if queues is not None:
        queues.discard(queue)
        if not queues:
            _streams.pop(session_id, None)


def ends_stream(event: dict[str, Any], stamp: tuple[float, str]) -> bool:
    """Whether ``event`` from its session's group ends a stream opened at ``stamp``: the session
    ended, or a newer stream of the session opened (in any process; the newest wins a tie).
    Notifications themselves do not travel on the session's group: resource updates go to every
    process (:data:`UPDATES_GROUP`), list changes come from each process's own registry."""
    if event.get("type") != END["type"]:
        return False
    opened = event.get("opened")
    return opened is None or (isinstance(opened, list) and tuple(opened) > stamp)


async def end_streams(session_id: str) -> None:
    """End the session's standalone streams, in every process (the session ended)."""
    for queue in _streams.pop(session_id, ()):
        queue.put_nowait(END)
    await broadcast.publish(group_name(session_id), {"type": END["type"], "opened": None})


def listen_to_resources(uris: list[str], queue: asyncio.Queue[str]) -> None:
    """Deliver updates of ``uris`` to a ``subscriptions/listen`` stream's queue (as the URI)."""
    for uri in uris:
        _listeners_by_uri.setdefault(uri, set()).add(queue)
    broadcast.listen(UPDATES_GROUP, _on_update)


def stop_listening(uris: list[str], queue: asyncio.Queue[str]) -> None:
    for uri in uris:
        queues = _listeners_by_uri.get(uri)
        if queues is not None:
            queues.discard(queue)
            if not queues:
                _listeners_by_uri.pop(uri, None)


def _deliver_to_listeners(uri: str) -> None:
    for queue in list(_listeners_by_uri.get(uri, ())):
        queue.put_nowait(uri)


async def _deliver_to_streams(uri: str, session_ids: list[str] | None = None) -> None:
    """Tell this process's standalone streams of the sessions subscribed to ``uri`` (read if not given)."""
    if session_ids is None:
        try:
            session_ids = await store.subscribers(uri)
        except Exception:
            logger.warning("Could not read the subscribers of %s", uri, exc_info=True)
            return
    message = {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": uri}}
    for session_id in session_ids:
        for queue in list(_streams.get(session_id, ())):
            queue.put_nowait(message)


#: Deliveries in progress (the loop keeps only a weak reference to a task).
_deliveries: set[asyncio.Task[None]] = set()


def _on_update(message: dict[str, Any]) -> None:
    """A resource update published on :data:`UPDATES_GROUP` (by any process, this one included)."""
    uri = message.get("uri", "")
    _deliver_to_listeners(uri)
    if _streams:  # a process without standalone streams reads no subscriptions
        task = asyncio.ensure_future(_deliver_to_streams(uri))
        _deliveries.add(task)
        task.add_done_callback(_deliveries.discard)


async def notify_resource_updated(uri: str) -> int:
    """Tell every session subscribed to ``uri`` that it changed (``notifications/resources/updated``).

    Open ``subscriptions/listen`` streams (2026-07-28) that asked for ``uri`` in
    ``resourceSubscriptions`` hear of it too. Returns the number of subscribed
    2025-11-25 sessions. Call it after the data behind a
    resource changes (from a view, a signal handler, a Celery task); use
    :func:`notify_resource_updated_sync` from sync code.
    """
    session_ids = await store.subscribers(uri)
    # One message for every process (this one too), whose streams hear of it from there; when
    # there is no other process to tell, or the layer failed, this process's streams directly.
    if not await broadcast.publish(UPDATES_GROUP, {"type": "mcp.resource.updated", "uri": uri}):
        _deliver_to_listeners(uri)
        await _deliver_to_streams(uri, session_ids)
    return len(session_ids)


def notify_resource_updated_sync(uri: str) -> int:
    """:func:`notify_resource_updated` for sync code."""
    return async_to_sync(notify_resource_updated)(uri)
