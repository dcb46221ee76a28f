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

What waits to go out on a stream waits in its :class:`Outbox`, which holds a bounded number of
notifications, so a client that keeps its stream open but stops reading holds no more memory
for it however many notifications come.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Any

from .. import store
from . import broadcast

logger = logging.getLogger("mcp_tools.notifications")

UPDATES_GROUP = "mcp_tools.resource_updates"
#: What :meth:`Outbox.get` gives (by identity) once the stream ended: it ends.
END: dict[str, Any] = {"type": "mcp.stream.end"}
#: The most notifications an outbox holds for other URIs than those already waiting (list changes,
#: one per kind, come on top): what a client that stopped reading costs the process per stream.
OUTBOX_LIMIT = 256


class Outbox:
    """The notifications waiting to go out on one stream, at most one per kind or URI; and its end.

    A stream sends one notification at a time, and a client that keeps its stream open but stops
    reading blocks the send (uvicorn waits for the socket to drain). Notifications kept coming all the
    same, one queue entry each, for as long as the connection stayed open. They are hints (the client
    reads the list or the resource again), so one waiting stands for the same one coming later
    (a second is not kept), and once :data:`OUTBOX_LIMIT` wait a resource update for another URI is
    dropped: a client that reads again misses it (and a resumed stream does not replay it: it never went out).
    The end is a flag beside them, never dropped; :meth:`get` gives it once nothing waits.
    """

    def __init__(self, limit: int = OUTBOX_LIMIT) -> None:
        #: By (method, URI or None): insertion order is the order they go out in.
        self._waiting: dict[tuple[str, str | None], dict[str, Any]] = {}
        self._ready = asyncio.Event()
        self._ended = False
        self._dropping = False
        self._limit = limit

    def put(self, message: dict[str, Any]) -> None:
        """Add a ``list_changed`` or ``resources/updated`` notification, unless the same one (its
        method and URI) waits already, or it is a resource update and the outbox is full."""
        if self._ended:
            return
        params = message.get("params")
        uri = params.get("uri") if params else None
        key = (message["method"], uri)
        if key in self._waiting:
            return
        if uri is not None and len(self._waiting) >= self._limit:
            if not self._dropping:  # once per stream: a client that reads now and then would flood the log
                self._dropping = True
                logger.warning("A stream's client is not reading: %d notifications wait, further resource updates are dropped", len(self._waiting))
            return
        self._waiting[key] = message
        self._ready.set()

    def end(self) -> None:
        """The stream ends once what waits has gone out (:meth:`get` gives :data:`END`)."""
        self._ended = True
        self._ready.set()

    def qsize(self) -> int:
        """How many notifications wait."""
        return len(self._waiting)

    async def get(self) -> dict[str, Any]:
        """The notification that has waited longest, else :data:`END` once the stream ended, else the next to come."""
        while not self._waiting:
            if self._ended:
                return END
            self._ready.clear()
            await self._ready.wait()
        return self._waiting.pop(next(iter(self._waiting)))


_streams: dict[str, set[Outbox]] = {}
#: 2026-07-28 ``subscriptions/listen`` streams of this process, by resource URI.
_listeners_by_uri: dict[str, set[Outbox]] = {}


def group_name(session_id: str) -> str:
    return f"mcp_tools.session.{session_id}"


async def open_stream(session_id: str, outbox: Outbox) -> tuple[float, str]:
    """Register a session's standalone stream; it takes over from the session's other ones.

    A session has one standalone stream, the newest: the 2025-11-25 transport forbids sending a
    message on more than one stream, and a client that reconnects (with ``Last-Event-ID``
    or not) must not be refused while the server has not yet noticed that the old connection
    is gone (a 409 would). The older streams of this process end now; those of other
    processes when the returned stamp reaches them (:func:`ends_stream`).
    """
    stamp = (time.time(), uuid.uuid4().hex)
    for older in _streams.pop(session_id, ()):
        older.end()
    _streams[session_id] = {outbox}
    broadcast.listen(UPDATES_GROUP, _on_update)
    await broadcast.publish(group_name(session_id), {"type": END["type"], "opened": list(stamp)})
    return stamp


def close_stream(session_id: str, outbox: Outbox) -> None:
    outboxes = _streams.get(session_id)
    if outboxes is not None:
        outboxes.discard(outbox)
        if not outboxes:
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
    for outbox in _streams.pop(session_id, ()):
        outbox.end()
    await broadcast.publish(group_name(session_id), {"type": END["type"], "opened": None})


def listen_to_resources(uris: list[str], outbox: Outbox) -> None:
    """Deliver updates of ``uris`` to a ``subscriptions/listen`` stream's outbox (untagged: the stream adds its ``_meta``)."""
    for uri in uris:
        _listeners_by_uri.setdefault(uri, set()).add(outbox)
    broadcast.listen(UPDATES_GROUP, _on_update)


def stop_listening(uris: list[str], outbox: Outbox) -> None:
    for uri in uris:
        outboxes = _listeners_by_uri.get(uri)
        if outboxes is not None:
            outboxes.discard(outbox)
            if not outboxes:
                _listeners_by_uri.pop(uri, None)


def updated_message(uri: str) -> dict[str, Any]:
    """The ``notifications/resources/updated`` of ``uri``."""
    return {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": uri}}


def _deliver_to_listeners(uri: str) -> None:
    outboxes = _listeners_by_uri.get(uri)
    if outboxes:
        message = updated_message(uri)
        for outbox in list(outboxes):
            outbox.put(message)


async def _deliver_to_streams(uri: str, session_ids: list[str] | None = None) -> None:
    """Tell this process's standalone streams of the sessions subscribed to ``uri`` (read if not given)."""
    if session_ids is None:
        try:
            session_ids = await store.subscribers(uri)
        except Exception:
            logger.warning("Could not read the subscribers of %s", uri, exc_info=True)
            return
    message = updated_message(uri)
    for session_id in session_ids:
        for outbox in list(_streams.get(session_id, ())):
            outbox.put(message)


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


async def publish_resource_updated(uri: str, session_ids: list[str]) -> None:
    """Tell the sessions subscribed to ``uri`` that it changed, in every process, and the
    ``subscriptions/listen`` streams that asked for it; ``session_ids`` are its subscribers, read by
    the caller (:func:`mcp_tools.server.sessions.notify_resource_updated`, which leaves out and
    unsubscribes the sessions that may no longer read it before it calls this)."""
    # One message for every process (this one too), whose streams hear of it from there; when
    # there is no other process to tell, or the layer failed, this process's streams directly.
    if not await broadcast.publish(UPDATES_GROUP, {"type": "mcp.resource.updated", "uri": uri}):
        _deliver_to_listeners(uri)
        await _deliver_to_streams(uri, session_ids)
