"""Retention: finished calls are kept for ``RETAIN_FINISHED_SECONDS``, then deleted with their steps;
and :func:`cleanup`, the whole housekeeping of the tables.

:func:`cleanup` is what ``manage.py mcp_cleanup`` and the ``mcp_tools.cleanup`` Celery task both
run, so the command run from cron and the beat task cannot drift apart: mark overdue calls
expired, delete SSE replay events older than ``CALL_TTL``, 2025-11-25 sessions unused for
``SESSION_IDLE_SECONDS`` (with their subscriptions), and finished calls with their steps past
``RETAIN_FINISHED_SECONDS``. Deletes in batches, so a large backlog neither holds one long
transaction nor loads every row into memory.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from ..models import CallStep, ToolCall
from ..states import TERMINAL_STATUSES

BATCH = 500


@dataclass
class Purged:
    calls: int
    steps: int
    #: Calls past the cutoff kept because a 2025-11-25 stream carried them and can still be resumed.
    kept: int = 0


def retention_seconds() -> float | None:
    """``RETAIN_FINISHED_SECONDS`` (None: keep finished calls forever); a value that is not None or a
    number > 0 (a negative one would delete calls just finished) raises ImproperlyConfigured before
    anything is deleted (``conf.ACCEPTS``, check ``mcp_tools.E005``)."""
    from ..conf import mcp_settings

    value = mcp_settings.RETAIN_FINISHED_SECONDS
    return None if value is None else float(value)


def purge_finished_calls(older_than_seconds: float, *, dry_run: bool = False, batch: int = BATCH) -> Purged:
    """Delete calls that ended more than ``older_than_seconds`` ago, and their steps.

    A call's ``updated_at`` is set when it ends and never after, so the
    ``(status, -updated_at)`` index finds them. Live calls are never touched, nor a call a 2025-11-25
    stream carried (``stream_id``) while that stream's events are kept (``CALL_TTL``): a client may
    still resume the stream, and the answer of a handler its stream left is in the row only.
    With ``dry_run``, counts what would go and deletes nothing.
    """
    from ..conf import mcp_settings

    now = timezone.now()
    try:
        cutoff = now - timedelta(seconds=older_than_seconds)
    except OverflowError:  # before the year 1: no call ended that long ago
        return Purged(0, 0)
    finished = ToolCall.objects.filter(status__in=list(TERMINAL_STATUSES), updated_at__lt=cutoff)
    resumable_since = now - timedelta(seconds=int(mcp_settings.CALL_TTL))
    kept = 0
    if resumable_since < cutoff:
        resumable = Q(~Q(stream_id=""), updated_at__gte=resumable_since)
        kept = finished.filter(resumable).count()  # told in the report: not deleted, though past the cutoff
        finished = finished.exclude(resumable)
    if dry_run:
        return Purged(finished.count(), CallStep.objects.filter(call__in=finished.values("pk")).count(), kept)
    purged = Purged(0, 0, kept)
    while True:
        ids = list(finished.order_by().values_list("pk", flat=True)[:batch])
        if not ids:
            return purged
        with transaction.atomic(using=ToolCall.objects.db):  # the alias the tables are on (routers)
            steps, _ = CallStep.objects.filter(call_id__in=ids).delete()
            calls, _ = ToolCall.objects.filter(pk__in=ids, status__in=list(TERMINAL_STATUSES)).delete()
        purged.calls += calls
        purged.steps += steps


#: ``keep_seconds`` left out: the ``RETAIN_FINISHED_SECONDS`` setting decides.
FROM_SETTINGS: Any = object()


@dataclass
class CleanupReport:
    """What one cleanup expired and deleted (or, with ``dry_run``, would have)."""

    expired_calls: int
    events: int
    #: None when ``SESSION_IDLE_SECONDS`` is None (sessions are kept).
    sessions: int | None
    #: None when finished calls are kept (``RETAIN_FINISHED_SECONDS`` None).
    finished_calls: int | None
    steps: int | None
    idle_seconds: float | None
    keep_seconds: float | None
    #: Working calls whose server stopped under them, that no client can resume, marked ``cancelled``
    #: (:meth:`~mcp_tools.managers.ToolCallManager.abandoned`).
    cancelled_calls: int = 0
    #: Finished calls past ``keep_seconds`` kept all the same: a 2025-11-25 stream carried them and can
    #: still be resumed (``CALL_TTL`` after they ended); None when finished calls are kept.
    kept_calls: int | None = None
    #: ``CALL_TTL``, how long after it ended such a call is kept.
    call_ttl: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def cleanup(*, keep_seconds: float | None = FROM_SETTINGS, dry_run: bool = False) -> CleanupReport:
    """Expire overdue calls, cancel abandoned ones and delete old rows (sync; runs in the caller's thread).

    ``keep_seconds``: how long finished calls are kept (default: ``RETAIN_FINISHED_SECONDS``;
    None keeps them). With ``dry_run``, counts what would change and changes nothing. A setting
    it reads that is not accepted raises ImproperlyConfigured before anything is changed.
    """
    from ..conf import mcp_settings
    from ..models import StreamEvent
    from ..server.sessions import purge_idle

    # Every setting read first: a bad one raises ImproperlyConfigured (conf.ACCEPTS) before anything
    # changed, not after overdue calls were expired and old events deleted (the beat task runs no checks).
    keep = retention_seconds() if keep_seconds is FROM_SETTINGS else keep_seconds
    call_ttl = int(mcp_settings.CALL_TTL)
    idle = mcp_settings.SESSION_IDLE_SECONDS
    idle_seconds = None if idle is None else float(idle)
    abandoned = ToolCall.objects.abandoned()  # (reads CANCEL_POLL_SECONDS and TOKEN_TTL)
    if dry_run:
        expired = ToolCall.objects.overdue().count()
        # An abandoned call past its expiry is counted as expired: it ends so.
        cancelled = abandoned.exclude(expires_at__lt=timezone.now()).count()
        events = StreamEvent.objects.filter(created_at__lt=timezone.now() - timedelta(seconds=call_ttl)).count()
    else:
        expired = ToolCall.objects.expire_overdue()
        cancelled = ToolCall.objects.cancel_abandoned()
        events = StreamEvent.objects.purge_older_than(call_ttl)
    sessions = None if idle_seconds is None else purge_idle(idle_seconds, dry_run=dry_run)
    finished = steps = kept = None
    if keep is not None:
        purged = purge_finished_calls(keep, dry_run=dry_run)
        finished, steps, kept = purged.calls, purged.steps, purged.kept
    return CleanupReport(expired, events, sessions, finished, steps, idle_seconds, keep, cancelled, kept, call_ttl)
