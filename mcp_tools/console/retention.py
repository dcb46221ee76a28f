"""Retention: finished calls are kept for ``RETAIN_FINISHED_SECONDS``, then deleted with their steps.

Used by ``mcp_cleanup`` and meant for the periodic cleanup task. Deletes in
batches, so a large backlog neither holds one long transaction nor loads every
row into memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from ..models import CallStep, ToolCall
from ..states import TERMINAL_STATUSES

BATCH = 500


@dataclass
class Purged:
    calls: int
    steps: int


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
    ``(status, -updated_at)`` index finds them. Live calls are never touched.
    With ``dry_run``, counts what would go and deletes nothing.
    """
    try:
        cutoff = timezone.now() - timedelta(seconds=older_than_seconds)
    except OverflowError:  # before the year 1: no call ended that long ago
        return Purged(0, 0)
    finished = ToolCall.objects.filter(status__in=list(TERMINAL_STATUSES), updated_at__lt=cutoff)
    if dry_run:
        return Purged(finished.count(), CallStep.objects.filter(call__in=finished.values("pk")).count())
    purged = Purged(0, 0)
    while True:
        ids = list(finished.order_by().values_list("pk", flat=True)[:batch])
        if not ids:
            return purged
        with transaction.atomic(using=ToolCall.objects.db):  # the alias the tables are on (routers)
            steps, _ = CallStep.objects.filter(call_id__in=ids).delete()
            calls, _ = ToolCall.objects.filter(pk__in=ids, status__in=list(TERMINAL_STATUSES)).delete()
        purged.calls += calls
        purged.steps += steps
