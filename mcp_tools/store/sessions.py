"""2025-11-25 sessions, resource subscriptions and the SSE event log in the ORM (sync)."""

from __future__ import annotations

import json

import secrets
from collections.abc import Callable
from typing import Any, Literal

from ..conf import mcp_settings


def create_session(protocol_version: str, client_info: dict[str, Any], capabilities: dict[str, Any], principal: str) -> str:
    from ..models import McpSession

    session_id = secrets.token_urlsafe(24)
    McpSession.objects.create(
        id=session_id, protocol_version=protocol_version, client_info=client_info,
        client_capabilities=capabilities, principal=principal,
    )
    return session_id


def get_session(session_id: str) -> Any:
    from ..models import McpSession

    return McpSession.objects.filter(id=session_id).first()


def touch_session(session_id: str, *, unless_within: float | None = None) -> bool:
    """Record that the session was used now (``last_seen_at``), which keeps it from expiring; False
    when it is gone. ``unless_within``: not if it was recorded within that many seconds (by anyone:
    another request, another process), False then too."""
    from datetime import timedelta

    from django.utils import timezone

    from ..models import McpSession

    now = timezone.now()
    rows = McpSession.objects.filter(id=session_id)
    if unless_within is not None:
        rows = rows.filter(last_seen_at__lt=now - timedelta(seconds=unless_within))
    return bool(rows.update(last_seen_at=now))


def purge_idle_sessions(idle_seconds: float, *, dry_run: bool = False,
                        deleted: Callable[[list[str]], None] | None = None) -> int:
    """Delete sessions unused for ``idle_seconds`` (with their subscriptions and replay events); how many.

    In batches, each in a transaction; ``deleted`` hears the ids of each batch once it committed.
    """
    from datetime import timedelta

    from django.utils import timezone

    from ..models import McpSession

    cutoff = timezone.now() - timedelta(seconds=idle_seconds)
    idle = McpSession.objects.filter(last_seen_at__lt=cutoff)
    if dry_run:
        return idle.count()
    purged = 0
    while ids := list(idle.order_by().values_list("id", flat=True)[:500]):
        gone = _delete_sessions(ids, unused_since=cutoff)
        purged += len(gone)
        if deleted is not None and gone:
            deleted(gone)
    return purged


def delete_session(session_id: str, *, unused_since: Any = None) -> bool:
    """Delete a session with its subscriptions and replay events; False when it is gone already, or
    (``unused_since``) it was used at or after that time."""
    return bool(_delete_sessions([session_id], unused_since=unused_since))


def _delete_sessions(ids: list[str], *, unused_since: Any) -> list[str]:
    """Delete those of the sessions ``ids`` that exist (and, with ``unused_since``, were last used
    before it), in one transaction; their ids.

    The rows are locked and read again before anything goes: a request of another process that just
    used the session (``touch_session``) or subscribes now (:func:`subscribe` locks the row too) has
    either committed, and the session is kept (used) or its subscription goes with it, or it waits
    and then finds the session gone. A ``DELETE ... WHERE id IN (ids read earlier)`` would delete a
    session used meanwhile; and Django's delete of a row with cascades selects it first, so the
    condition has to be checked under the lock, not in the delete.
    """
    from django.db import transaction

    from ..models import McpSession, StreamEvent

    with transaction.atomic(using=McpSession.objects.db):  # the alias the tables are on (routers)
        rows = McpSession.objects.select_for_update().filter(id__in=ids)
        if unused_since is not None:
            rows = rows.filter(last_seen_at__lt=unused_since)
        locked = list(rows.order_by("id").values_list("id", flat=True))
        if locked:
            StreamEvent.objects.filter(session_id__in=locked).delete()
            McpSession.objects.filter(id__in=locked).delete()
    return locked


def set_session_log_level(session_id: str, level: str) -> None:
    from ..models import McpSession

    McpSession.objects.filter(id=session_id).update(log_level=level)


#: What :func:`subscribe` did: ``subscribed`` (also when the session was already), or why nothing was stored.
SubscribeOutcome = Literal["subscribed", "uri_too_long", "limit_reached", "session_gone"]


def subscribe(session_id: str, uri: str, limit: int) -> SubscribeOutcome:
    """Subscribe the session to ``uri``, unless it holds ``limit`` subscriptions already.

    Nothing is stored for a URI longer than the table's column holds (PostgreSQL would refuse it
    with an error, SQLite keep it anyway), nor for a new URI once the session has ``limit`` of
    them; a URI the session is subscribed to already is ``subscribed`` whatever the count (it
    adds no row). The session's row is locked while it counts (on databases that lock rows), so
    concurrent subscribes of one session cannot pass the limit together.
    """
    from django.db import transaction

    from ..models import SUBSCRIPTION_URI_MAX_LENGTH, McpSession, ResourceSubscription

    if len(uri) > SUBSCRIPTION_URI_MAX_LENGTH:
        return "uri_too_long"
    with transaction.atomic(using=ResourceSubscription.objects.db):
        if not list(McpSession.objects.select_for_update().filter(id=session_id).values_list("id", flat=True)):
            return "session_gone"  # deleted meanwhile (by its client, mcp_cleanup, expiry in another process)
        mine = ResourceSubscription.objects.filter(session_id=session_id)
        if not mine.filter(uri=uri).exists():
            if mine.count() >= limit:
                return "limit_reached"
            ResourceSubscription.objects.create(session_id=session_id, uri=uri)
    return "subscribed"


def unsubscribe(session_id: str, uri: str) -> None:
    from ..models import ResourceSubscription

    ResourceSubscription.objects.filter(session_id=session_id, uri=uri).delete()


def subscribers(uri: str) -> list[str]:
    from ..models import ResourceSubscription

    return list(ResourceSubscription.objects.filter(uri=uri).values_list("session_id", flat=True))


def subscriptions(uri: str) -> list[tuple[str, str]]:
    """``(session id, the session's principal)`` of each session subscribed to ``uri``."""
    from ..models import ResourceSubscription

    return list(ResourceSubscription.objects.filter(uri=uri).values_list("session_id", "session__principal"))


def unsubscribe_sessions(uri: str, session_ids: list[str]) -> None:
    """Remove the subscriptions of ``session_ids`` to ``uri``."""
    from ..models import ResourceSubscription

    ResourceSubscription.objects.filter(uri=uri, session_id__in=session_ids).delete()


def mark_subscriptions_updated(uri: str) -> None:
    """Note on every subscription to ``uri`` that it changed now (a resumed stream's client hears of it)."""
    from django.utils import timezone

    from ..models import ResourceSubscription

    ResourceSubscription.objects.filter(uri=uri).update(updated_at=timezone.now())


def subscriptions_updated_since(session_id: str, event_id: int) -> list[str]:
    """The URIs the session subscribed to that changed at or after the time of its stream event
    ``event_id`` (none if that event is gone): what a stream resumed from it may have missed."""
    from ..models import ResourceSubscription, StreamEvent

    at = StreamEvent.objects.filter(id=event_id, session_id=session_id).values_list("created_at", flat=True).first()
    if at is None:
        return []
    return list(ResourceSubscription.objects.filter(session_id=session_id, updated_at__gte=at).order_by("uri").values_list("uri", flat=True))


def active_users_of(principal_ids: list[str]) -> dict[str, Any]:
    """The active user each of ``principal_ids`` names (``user:<pk>``), by principal id; a principal
    that names none (anonymous, an OAuth client, a user since deleted or made inactive) is left out.

    A principal whose pk was too long to keep (:func:`~mcp_tools.server.auth.fit_principal_id`)
    names no user it can be read back from: it is left out too.
    """
    from django.contrib.auth import get_user_model
    from django.core.exceptions import ValidationError

    user_model = get_user_model()
    pks: dict[Any, str] = {}
    for principal_id in principal_ids:
        if principal_id.startswith("user:"):
            try:
                pks[user_model._meta.pk.to_python(principal_id[len("user:"):])] = principal_id
            except (ValidationError, ValueError, TypeError):  # no pk of this model: names nobody
                continue
    if not pks:
        return {}
    # is_active read from each user, not filtered on: a custom user model may have no such column.
    users = user_model._default_manager.filter(pk__in=list(pks))
    return {pks[user.pk]: user for user in users if user.pk in pks and getattr(user, "is_active", True)}


# -- SSE event log -------------------------------------------------------------

def append_event(session_id: str, stream_id: str, payload: str) -> int:
    from ..models import StreamEvent

    return StreamEvent.objects.append(session_id, stream_id, payload, mcp_settings.EVENT_RETENTION)


#: How a response's kept payload begins (``jsonrpc.result_message`` / ``error_message``): a request's
#: does too, its next key is ``method``; a notification's does not.
_ID_FIRST = '{"jsonrpc":"2.0","id":'


def append_response_event(session_id: str, stream_id: str, payload: str) -> int | None:
    """Keep a request's response as its stream's event, unless the stream carries one already: its
    event id, or None when another connection to the stream answered first.

    A client may resume a POST's stream while the server still holds the earlier connection (a
    half-open one, or one in another process): both follow the call, and each would answer it.
    The session's row is locked while the log is looked at (on databases that lock rows; SQLite's
    IMMEDIATE transactions take its write lock at once), so one of them keeps the response, and
    the other ends without one (one request, one response; a later resume replays it once).
    """
    from django.db import transaction

    from ..models import McpSession, StreamEvent

    with transaction.atomic(using=StreamEvent.objects.db):
        list(McpSession.objects.select_for_update().filter(id=session_id).values_list("id", flat=True))
        kept = StreamEvent.objects.filter(stream_id=stream_id, payload__startswith=_ID_FIRST)
        for earlier in kept.values_list("payload", flat=True):
            try:
                message = json.loads(earlier)
            except ValueError:
                continue
            if isinstance(message, dict) and "method" not in message and ("result" in message or "error" in message):
                return None
        return StreamEvent.objects.append(session_id, stream_id, payload, mcp_settings.EVENT_RETENTION)


def events_after(stream_id: str, last_id: int) -> list[tuple[int, str]]:
    from ..models import StreamEvent

    return [(e.id, e.payload) for e in StreamEvent.objects.after(stream_id, last_id, mcp_settings.EVENT_RETENTION)]


def payloads_through(stream_id: str, last_id: int, containing: str) -> list[str]:
    """The payloads of an SSE stream's kept events up to ``last_id`` (included) that contain ``containing``,
    oldest first: what of the stream a client resuming at ``last_id`` received (one indexed range)."""
    from ..models import StreamEvent

    events = StreamEvent.objects.filter(stream_id=stream_id, id__lte=last_id, payload__contains=containing)
    return list(events.order_by("id").values_list("payload", flat=True))


def last_event_of_stream(stream_id: str) -> str | None:
    """The payload of an SSE stream's newest kept event, or None (one indexed row: a POST stream's
    response is its last event, whatever the stream carried before it)."""
    from ..models import StreamEvent

    return StreamEvent.objects.filter(stream_id=stream_id).order_by("-id").values_list("payload", flat=True).first()


def last_progress_on_stream(stream_id: str) -> float | None:
    """The value of the last ``notifications/progress`` an SSE stream sent (from its kept events), or None.

    A resumed stream goes on from it: each value of a token must be above the one before, and the
    client saw this one (before its stream dropped, or in the replay).
    """
    from ..models import StreamEvent

    events = StreamEvent.objects.filter(stream_id=stream_id, payload__contains="notifications/progress").order_by("-id")
    for payload in events.values_list("payload", flat=True)[:5]:
        try:
            message = json.loads(payload)
        except ValueError:
            continue
        if isinstance(message, dict) and message.get("method") == "notifications/progress":
            value = (message.get("params") or {}).get("progress")
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return float(value)
    return None


def stream_of_event(event_id: int) -> tuple[str, str] | None:
    from ..models import StreamEvent

    return StreamEvent.objects.filter(id=event_id).values_list("session_id", "stream_id").first()
