"""Background tools of the demo: they run on a Celery worker, not in the request.

* ``generate_report`` is ``background=True``: the client gets a task (when it
  supports tasks), a resume token (2026-07-28 without tasks), or an SSE stream
  with progress and then the result (2025-11-25). Its side effect runs in
  ``ctx.once``, so a worker that dies mid-call does not open the report twice.
* ``list_events`` pages through a table with resume tokens (``paginate=True``,
  returning ``mcp_tools.Page``).
* ``wait_for_rollout`` polls state that converges over time (returning
  ``mcp_tools.Pending`` until it is ready).
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone
from typing import Annotated

from asgiref.sync import sync_to_async
from django.utils import timezone
from pydantic import BaseModel, Field

import mcp_tools

from .models import Event, ReportRun, Rollout


class ReportSummary(BaseModel):
    rows: int
    total: int
    report_id: int


def _open_report(call_id: str, rows: int) -> int:
    # A plain create, not get_or_create: run twice, it would fail on the unique call_id.
    return ReportRun.objects.create(call_id=call_id, rows=rows).pk


def _close_report(report_id: int, total: int) -> None:
    ReportRun.objects.filter(pk=report_id, total__isnull=True).update(total=total)


@mcp_tools.tool(background=True, time_limit=600)
async def generate_report(
    ctx: mcp_tools.ToolContext, rows: Annotated[int, Field(ge=1, le=100_000)] = 1000,
) -> ReportSummary:
    """Generate a report over ``rows`` rows on a background worker, reporting progress.

    Args:
        rows: How many rows the report covers (1-100000).
    """
    report_id = await ctx.once("open", _open_report, ctx.call_id or "", rows)
    total = 0
    chunk = max(1, rows // 10)
    for start in range(0, rows, chunk):
        end = min(rows, start + chunk)
        total += sum(range(start, end))
        await asyncio.sleep(0.2)  # stands for real work
        await ctx.report_progress(end, rows, f"{end} of {rows} rows")
    await ctx.once("close", _close_report, report_id, total)
    return ReportSummary(rows=rows, total=total, report_id=report_id)


class EventOut(BaseModel):
    id: int
    kind: str
    message: str
    created_at: datetime


def _events_page(since: datetime | None, after_id: int, limit: int) -> list[EventOut]:
    rows = Event.objects.filter(id__gt=after_id).order_by("id")
    if since is not None:
        # A date-time sent without its UTC offset is naive: read it in the current time zone, as Django's forms do.
        aware = timezone.make_aware(since) if timezone.is_naive(since) else since
        try:
            rows = rows.filter(created_at__gte=aware.astimezone(dt_timezone.utc))
        except OverflowError:
            # Valid, but before year 1 or after 9999 in UTC (0001-01-01T00:00+01:00): every event
            # is after the one, none after the other.
            if aware.year > 1:
                return []
    return [EventOut.model_validate(e, from_attributes=True) for e in rows[:limit]]


@mcp_tools.tool(paginate=True, annotations={"readOnlyHint": True})
async def list_events(
    ctx: mcp_tools.ToolContext, since: datetime | None = None, page_size: Annotated[int, Field(ge=1, le=500)] = 100,
) -> mcp_tools.Page[list[EventOut]]:
    """List operations events, oldest first, a page at a time.

    Each page that is not the last carries ``nextResumeToken``: call again with
    the same arguments and ``resumeToken`` for the next page.

    Args:
        since: Only events at or after this time.
        page_size: Events per page (1-500).
    """
    after_id = int(ctx.cursor or 0)
    page = await sync_to_async(_events_page)(since, after_id, page_size + 1)
    more = len(page) > page_size
    page = page[:page_size]
    return mcp_tools.Page(page, next_cursor=page[-1].id if more else None)


class RolloutState(BaseModel):
    deployment: str
    ready: bool
    started_at: datetime


def _rollout(deployment: str) -> Rollout:
    rollout, _ = Rollout.objects.get_or_create(
        deployment=deployment, defaults={"ready_at": timezone.now() + timedelta(seconds=ROLLOUT_SECONDS)},
    )
    return rollout


ROLLOUT_SECONDS = 3


@mcp_tools.tool(annotations={"readOnlyHint": False, "idempotentHint": True})
async def wait_for_rollout(deployment: Annotated[str, Field(min_length=1, max_length=64)]) -> RolloutState | mcp_tools.Pending:
    """Wait until a deployment's rollout has converged (it starts on the first call).

    A client that resumes calls gets "still converging" with a ``nextResumeToken``
    until the rollout is ready; other clients wait for the answer.

    Args:
        deployment: The deployment's name.
    """
    rollout = await sync_to_async(_rollout)(deployment)
    now = timezone.now()
    if now < rollout.ready_at:
        elapsed = (now - rollout.started_at).total_seconds()
        return mcp_tools.Pending(f"Rollout of {deployment} is still converging.", progress=round(elapsed, 1),
                                 total=(rollout.ready_at - rollout.started_at).total_seconds(), poll_seconds=0.5)
    return RolloutState(deployment=deployment, ready=True, started_at=rollout.started_at)
