"""2025-11-25 sessions as the transports see them: a short process-local cache over the table.

Looking a session up in the database on every request costs a thread hop and
a query, which dominated the cost of a small call in session mode. Each
process keeps what it read for ``SESSION_CACHE_SECONDS``. Ending a session or
changing its log level drops it from this process's cache at once and, when a
shared channel layer is configured (channels-redis), from every process's
cache through a broadcast. With the in-memory layer and several processes
(not a production setup: check ``mcp_tools.W003``) another process may still
accept an ended session for up to ``SESSION_CACHE_SECONDS``.
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from asgiref.sync import async_to_sync
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils import timezone

from .. import store
from ..conf import RELOAD_ON, mcp_settings
from ..interprocess import broadcast, cancellation, notifications
from ..registry import registry
from . import threads
from .auth import Principal, anonymous_principal

logger = logging.getLogger("mcp_tools.notifications")

GROUP = "mcp_tools.sessions"
MAX_CACHED = 10_000
#: A session in use has its ``last_seen_at`` written at most this many times per ``SESSION_IDLE_SECONDS``.
TOUCHES_PER_IDLE_LIMIT = 24
#: Without ``SESSION_IDLE_SECONDS``, how often a listening stream still looks at its session's row
#: (:func:`keep_in_use`: the backstop for an end no message told it of).
GONE_CHECK_SECONDS = 300.0


@dataclass(frozen=True)
class SessionInfo:
    id: str
    protocol_version: str
    client_capabilities: dict[str, Any]
    principal: str
    log_level: str

    @cached_property
    def anonymous_principal(self) -> Principal:
        """The caller of this session when it is anonymous: bound to the session, whose id is its secret
        (made once per cached session, not per request)."""
        return anonymous_principal(f"session:{self.id}")


_cache: dict[str, tuple[SessionInfo, float]] = {}
#: ``SESSION_CACHE_SECONDS`` as a float, read once per configuration (None: not read yet).
_ttl: float | None = None


def _on_changed(message: dict[str, Any]) -> None:
    _cache.pop(message.get("session_id", ""), None)


def _drop_expired(now: float) -> None:
    """Drop the cache's entries past their time, oldest first, stopping at the first one still good."""
    expired = []
    for session_id, (_, deadline) in _cache.items():
        if deadline > now:
            break
        expired.append(session_id)
    for session_id in expired:
        del _cache[session_id]


async def get(session_id: str) -> SessionInfo | None:
    """The session, from this process's cache or the database (unknown ids are never cached)."""
    global _ttl
    now = time.monotonic()
    hit = _cache.get(session_id)
    if hit is not None and hit[1] > now:
        return hit[0]
    ttl = _ttl
    if ttl is None:
        ttl = _ttl = float(mcp_settings.SESSION_CACHE_SECONDS)
    row = await store.get_session(session_id)
    if row is None:
        _cache.pop(session_id, None)
        return None
    idle_limit = mcp_settings.SESSION_IDLE_SECONDS
    if idle_limit is not None:
        now_there = timezone.now()
        idle = (now_there - row.last_seen_at).total_seconds()
        if idle > float(idle_limit):
            # Unused for longer than it may be: ended, as mcp_cleanup would end it (the client
            # gets 404 and starts a new session, as the spec has it), unless another process's
            # request used it since the row was read.
            if await end(session_id, "The session expired", expired=True,
                         unused_since=now_there - timedelta(seconds=float(idle_limit))):
                return None
            row = await store.get_session(session_id)
            if row is None:
                _cache.pop(session_id, None)
                return None
        if idle > float(idle_limit) / TOUCHES_PER_IDLE_LIMIT:
            # Read from the table (not this process's cache): written rarely, not once per request.
            await store.touch_session(session_id)
    info = SessionInfo(row.id, row.protocol_version, row.client_capabilities, row.principal, row.log_level)
    if ttl > 0:
        # Entries leave in the order they were put in, which is the order they expire in (one TTL):
        # a refreshed one goes to the end, and those past their time go from the front, so the
        # cache holds the sessions used within the last TTL, not every session ever used (each
        # holds its client's capabilities, up to 16 KiB of JSON).
        _cache.pop(session_id, None)
        _drop_expired(now)
        if len(_cache) >= MAX_CACHED:
            _cache.clear()
        _cache[session_id] = (info, now + ttl)
        broadcast.listen(GROUP, _on_changed)
    return info


async def forget(session_id: str) -> None:
    """Drop a session from every process's cache (after it ended or changed)."""
    _cache.pop(session_id, None)
    await broadcast.publish(GROUP, {"type": "mcp.session.changed", "session_id": session_id})


async def end(session_id: str, reason: str, *, expired: bool = False, unused_since: Any = None) -> bool:
    """End a session: its row, its standalone stream (in whichever process holds it) and its
    calls. No request can reach those calls once the session is gone (every one gets 404), so
    one waiting for input would wait until ``CALL_TTL``; they end cancelled with ``reason``.
    Its tasks (background calls) go on, but for an anonymous session's, whose caller is bound to the
    session (nobody could reach them either). A session that ``expired`` (unused for
    ``SESSION_IDLE_SECONDS``) ends only its calls waiting for input: one still working may
    have its client waiting on the POST's open stream for a result it will still get.

    With ``unused_since``, only a session last used before then ends; whether it ended."""
    if not await store.delete_session(session_id, unused_since=unused_since) and unused_since is not None:
        return False
    await _ended([session_id], reason, waiting_only=expired)
    return True


def purge_idle(idle_seconds: float, *, dry_run: bool = False) -> int:
    """Delete the sessions unused for ``idle_seconds``, each ended as :func:`end` ends one; how many (sync).

    ``mcp_cleanup`` runs it. A stream reached through a shared channel layer ends; with the
    in-memory layer, only one this process holds (the stream's own process ends it when
    its client next asks for the session, which is gone).
    """
    def deleted(ids: list[str]) -> None:
        async_to_sync(_ended)(ids, "The session expired", waiting_only=True)

    return store.sync_sessions.purge_idle_sessions(idle_seconds, dry_run=dry_run, deleted=deleted)


async def _ended(session_ids: list[str], reason: str, *, waiting_only: bool = False) -> None:
    """What ends with sessions whose rows were deleted: their cached copies, standalone streams and
    calls (``waiting_only``: the calls waiting for input)."""
    from .core import end_call  # the session layer sits below the call core

    for session_id in session_ids:
        await forget(session_id)
        await notifications.end_streams(session_id)
        await cancellation.stop_detached(session_id)
    # An anonymous session's tasks are its caller's, a caller bound to the session: nobody reaches them after.
    orphaned = [anonymous_principal(f"session:{session_id}").id for session_id in session_ids]
    for call_id in await store.session_calls(*session_ids, waiting_only=waiting_only, orphaned_principals=orphaned):
        await end_call(call_id, "cancelled", reason)
    if not waiting_only:
        # Then whatever still runs on the sessions' open streams (a call without a row yet): stopped
        # as a client's cancel (the client is gone: nothing more is sent).
        for session_id in session_ids:
            await cancellation.stop_detached(session_id, every=True)


async def notify_resource_updated(uri: str) -> int:
    """Tell every session subscribed to ``uri`` that it changed (``notifications/resources/updated``).

    Open ``subscriptions/listen`` streams (2026-07-28) that asked for ``uri`` in
    ``resourceSubscriptions`` hear of it too. Returns the number of 2025-11-25 sessions told.
    Call it after the data behind a resource changes (from a view, a signal handler, a Celery
    task); use :func:`notify_resource_updated_sync` from sync code.

    A session whose principal may no longer read the resource (a permission taken away, the
    user deleted or made inactive) is not told, and its subscription is removed, as
    ``resources/subscribe`` would refuse it now. The check is the user's permissions, read
    now; a token's scopes were checked when it subscribed (the session does not keep them).
    """
    session_ids = await threads.run_sync(_subscribers_told, uri)
    await notifications.publish_resource_updated(uri, session_ids)
    return len(session_ids)


def notify_resource_updated_sync(uri: str) -> int:
    """:func:`notify_resource_updated` for sync code.

    Its reads and writes (the subscribers, a lost reader's unsubscription, the change noted on each
    subscription) are the caller's own, on its thread and connection: sync code that notifies commonly
    runs in a transaction (a signal handler of a save), which on SQLite holds the write lock, and the
    store's connection waited for it (20 s, then "database is locked", every durable call of the
    process behind it). They commit with the caller's change, and the sessions are told once it has
    committed (not at all if it rolls back)."""
    session_ids = _subscribers_told(uri)
    # Told once the caller's change commits (at once outside a transaction): told inside it, a client
    # re-read the resource before the change was visible, and was never told again; one rolled back
    # told of a change that never happened (found by a review).
    store.sync_calls.after_caller_commits(lambda: async_to_sync(notifications.publish_resource_updated)(uri, session_ids))
    return len(session_ids)


def _subscribers_told(uri: str) -> list[str]:
    """Sync: the sessions subscribed to ``uri`` that may read it now, the change noted on their
    subscriptions (a client reconnecting its stream hears of it on its resume:
    ``transports.http.standalone``); the others unsubscribed, as ``resources/subscribe`` would
    refuse them now. The check is the user's permissions, read now."""
    subscribed = store.sync_sessions.subscriptions(uri)
    found = registry.find_resource(uri)
    perms = found[0].permissions if found is not None else ()
    if perms and subscribed:  # a resource anyone may read needs no check (and no query)
        users = store.sync_sessions.active_users_of(sorted({principal for _, principal in subscribed}))
        # Stored ids are fitted already; no scopes: not kept with the session (checked at subscribe).
        readers = {principal_id for principal_id, user in users.items()
                   if Principal(user=user, id=principal_id, stored=True).has_perms(perms)}
        lost = [session_id for session_id, principal in subscribed if principal not in readers]
        if lost:
            store.sync_sessions.unsubscribe_sessions(uri, lost)
            logger.info("Unsubscribed %d session(s) from %s: their principal may no longer read it", len(lost), uri)
        subscribed = [(session_id, principal) for session_id, principal in subscribed if principal in readers]
    if subscribed:
        store.sync_sessions.mark_subscriptions_updated(uri)
    return [session_id for session_id, _ in subscribed]


def in_use_every() -> float:
    """How often (seconds) a listening stream records that its session is in use (:func:`keep_in_use`)."""
    idle_limit = mcp_settings.SESSION_IDLE_SECONDS
    return float(idle_limit) / TOUCHES_PER_IDLE_LIMIT if idle_limit is not None else GONE_CHECK_SECONDS


async def keep_in_use(session_id: str, recorded: float) -> float | None:
    """A client listening on the session's standalone stream uses the session, though it sends nothing.

    ``recorded``: when this stream last recorded that (``time.monotonic()``); returns when it
    last did now, or None when the session is gone. Written at most :data:`TOUCHES_PER_IDLE_LIMIT`
    times per ``SESSION_IDLE_SECONDS``, as :func:`get` writes it (every :data:`GONE_CHECK_SECONDS`
    without one). The stream ends when its session
    ends (a message on the session's group says so at once); finding the row gone here is the
    backstop for a message that never came (a process of an older release, a layer outage).
    """
    now = time.monotonic()
    if now - recorded < in_use_every():
        return recorded
    if not await store.touch_session(session_id):
        return None
    return now


async def log_level(session_id: str, known: str) -> str:
    """The session's log level now, for a request of it that is running (``logging/setLevel`` may have
    changed it since the request began): from this process's cache, from which :func:`set_log_level`
    drops the session in every process, else read again (once per ``SESSION_CACHE_SECONDS``, not
    once per message); ``known`` once the session is gone."""
    info = await get(session_id)
    return known if info is None else info.log_level


async def set_log_level(session_id: str, level: str) -> None:
    await store.set_session_log_level(session_id, level)
    await forget(session_id)


def clear() -> None:
    """Empty this process's cache (tests, settings changes)."""
    global _ttl
    _cache.clear()
    _ttl = None


@receiver(setting_changed)
def _clear_on_setting_change(*, setting: str, **kwargs: Any) -> None:
    if setting in RELOAD_ON:
        clear()
