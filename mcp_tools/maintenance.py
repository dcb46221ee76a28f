"""Housekeeping of the tables: what ``manage.py mcp_cleanup`` and the ``mcp_tools.cleanup`` task do.

One function, so the command run from cron and the Celery beat task cannot drift apart:
mark overdue calls expired, delete SSE replay events older than ``CALL_TTL``, 2025-11-25
sessions unused for ``SESSION_IDLE_SECONDS`` (with their subscriptions), and finished calls
with their steps past ``RETAIN_FINISHED_SECONDS``. Each part deletes in bounded statements,
so a large backlog is worked through without one long transaction.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any

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

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def cleanup(*, keep_seconds: float | None = FROM_SETTINGS, dry_run: bool = False) -> CleanupReport:
    """Expire overdue calls and delete old rows (sync; runs in the caller's thread).

    ``keep_seconds``: how long finished calls are kept (default: ``RETAIN_FINISHED_SECONDS``;
    None keeps them). With ``dry_run``, counts what would change and changes nothing.
    """
    from django.utils import timezone

    from .conf import mcp_settings
    from .console.retention import purge_finished_calls, retention_seconds
    from .models import StreamEvent, ToolCall
    from .server.sessions import purge_idle

    keep = retention_seconds() if keep_seconds is FROM_SETTINGS else keep_seconds
    call_ttl = int(mcp_settings.CALL_TTL)
    if dry_run:
        expired = ToolCall.objects.overdue().count()
        events = StreamEvent.objects.filter(created_at__lt=timezone.now() - timedelta(seconds=call_ttl)).count()
    else:
        expired = ToolCall.objects.expire_overdue()
        events = StreamEvent.objects.purge_older_than(call_ttl)
    idle = mcp_settings.SESSION_IDLE_SECONDS
    idle_seconds = None if idle is None else float(idle)
    sessions = None if idle_seconds is None else purge_idle(idle_seconds, dry_run=dry_run)
    finished = steps = None
    if keep is not None:
        purged = purge_finished_calls(keep, dry_run=dry_run)
        finished, steps = purged.calls, purged.steps
    return CleanupReport(expired, events, sessions, finished, steps, idle_seconds, keep)
