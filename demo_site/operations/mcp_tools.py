"""Background tools of the demo: they run on a Celery worker, not in the request.

* ``generate_report`` is ``background=True``: the client gets a task (when it
  supports tasks), a resume token (2026-07-28 without tasks), or an SSE stream
  with progress and then the result (2025-11-25). Its side effect runs in
  ``ctx.once``, so a worker that dies mid-call does not open the report twice.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

from pydantic import BaseModel, Field

import mcp_tools

from .models import ReportRun


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
