"""How the console shows a call: status badges, progress bars, table rows (safe HTML)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.timesince import timesince, timeuntil
from django.utils.translation import gettext

from ..states import TERMINAL_STATUSES, CallStatus
from .queries import local_time

if TYPE_CHECKING:
    from ..models import ToolCall
    from .queries import Dashboard

PANEL_TEMPLATE = "admin/mcp_tools/toolcall/dashboard_panel.html"

#: How each status is shown (a CSS class of ``mcp_tools/console.css``).
BADGE: dict[str, str] = {
    CallStatus.WORKING: "working",
    CallStatus.INPUT_REQUIRED: "waiting",
    CallStatus.COMPLETED: "ok",
    CallStatus.FAILED: "bad",
    CallStatus.CANCELLED: "muted",
    CallStatus.EXPIRED: "muted",
}


def status_badge(status: str, label: str | None = None) -> str:
    """A coloured badge for a call status (safe HTML)."""
    return format_html('<span class="mcp-badge mcp-{}">{}</span>', BADGE.get(status, "muted"), label or CallStatus(status).label)


def progress_bar(progress: float | None, total: float | None) -> str:
    """A progress bar when the total is known, the bare count otherwise, a dash when nothing was reported."""
    if progress is None:
        return "—"
    if not total:
        return format_html('<span class="mcp-count">{}</span>', f"{progress:g}")
    percent = max(0.0, min(100.0, 100.0 * progress / total))
    return format_html(
        '<span class="mcp-progress" title="{} of {}"><span style="width:{}%"></span></span> {}%',
        f"{progress:g}", f"{total:g}", f"{percent:.0f}", f"{percent:.0f}",
    )


def decorate(rows: list[dict[str, Any]], current_app: str | None = None) -> list[dict[str, Any]]:
    """Add ``badge``, ``bar`` and ``url`` to rows of :func:`mcp_tools.console.queries` (for dashboard_rows.html);
    ``current_app``: the admin site the page is of (its links stay on it), else the default one."""
    for row in rows:
        row["badge"] = status_badge(row["status"])
        row["bar"] = progress_bar(row["progress"], row["progress_total"])
        row["url"] = reverse("admin:mcp_tools_toolcall_change", args=[row["id"]], current_app=current_app)
    return rows


def badge_class(status: str) -> str:
    return BADGE.get(status, "muted")


def worker_state(call: ToolCall) -> str:
    """Where a background call runs (safe HTML): queued, running on a worker, lease lost, or finished."""
    if not getattr(call, "background", False):
        return "—"
    task_id = getattr(call, "celery_task_id", "") or ""
    worker = getattr(call, "worker", "") or ""
    lease = getattr(call, "lease_expires_at", None)
    if call.status == CallStatus.INPUT_REQUIRED:
        state = "waiting for input"
    elif call.status in TERMINAL_STATUSES:
        state = "done"
    elif worker and lease is not None and lease >= timezone.now():
        state = f"running on {worker}"
    elif worker:
        state = f"lease lost ({worker})"
    else:
        state = "queued"
    if task_id:
        return format_html('{} <code class="mcp-task" title="Celery task {}">{}</code>', state, task_id, task_id[:8])
    return state


def recovery_facts(call: ToolCall, max_retries: int | None) -> list[tuple[str, str]]:
    """``(label, text)`` of a background call's recovery state, for its page: why it waits, or ran again.

    ``max_retries``: the tool's (None when the tool is no longer registered), shown as the bound of
    the retries and of the lost workers (a call is taken over at most ``max_retries + 1`` times, as
    ``background.lost_worker_limit`` says; the worker that would run it again then fails it). Nothing
    for a call that is not a background call; the queue deadline only while the call is live: the
    sweep queues it again once a live call is past it (its message may be lost).
    """
    if not getattr(call, "background", False):
        return []

    def bounded(count: int, bound: int | None) -> str:
        return str(count) if bound is None else f"{count} of {bound}"

    facts = [
        (gettext("Retries"), bounded(call.retries, max_retries)),
        (gettext("Lost workers"), bounded(call.lost_workers, None if max_retries is None else max_retries + 1)),
        (gettext("Queued again"), str(call.requeues)),
    ]
    if call.queued_until is not None and call.status not in TERMINAL_STATUSES:
        until = local_time(call.queued_until)
        if call.queued_until >= timezone.now():
            facts.append((gettext("Queued until"), f"{until:%H:%M:%S} (in {timeuntil(call.queued_until)})"))
        else:
            past = timesince(call.queued_until)
            facts.append((gettext("Queued until"), f"{until:%H:%M:%S} (passed {past} ago: the sweep queues it again)"))
    return facts


def render_panel(data: Dashboard, current_app: str | None = None) -> str:
    """The part of the dashboard that updates (server-rendered; the WebSocket and the poll send it as is),
    its links to the admin site ``current_app`` (the WebSocket's: the site whose dashboard opened it)."""
    return render_to_string(PANEL_TEMPLATE, {
        "data": data,
        "windows": [
            (window, [(label, badge_class(value), window.by_status.get(value, 0)) for value, label in CallStatus.choices])
            for window in data.windows
        ],
        "in_flight": [(CallStatus(s).label, n, badge_class(s)) for s, n in data.in_flight.items()],
        "oldest": decorate(data.oldest, current_app),
        "quietest": decorate(data.quietest, current_app),
        "slowest": decorate(data.slowest, current_app),
        "chart": chart_svg(data.buckets),
        # Reversed here, with the site's name: the template's {% url %} knows no site (no request), and
        # reversed "admin:" to the default one, a NoReverseMatch (a 500) where that one serves no calls.
        "changelist_url": reverse("admin:mcp_tools_toolcall_changelist", current_app=current_app),
    })


def chart_svg(buckets: list[tuple[Any, int, int]], width: int = 720, height: int = 150) -> str:
    """Calls per hour as an SVG bar chart (failed calls in red), rendered on the server: no script, no CDN."""
    from django.utils.html import format_html, format_html_join
    from django.utils.safestring import mark_safe

    top = max([n for _, n, _ in buckets] + [1])
    pad, label_h = 4, 18
    slot = (width - 2 * pad) / max(len(buckets), 1)
    plot_h = height - label_h - pad

    def bar(index: int, hour: Any, n: int, failed: int) -> tuple[Any, ...]:
        x = pad + index * slot + 1
        h = plot_h * n / top
        fh = plot_h * failed / top
        y = pad + plot_h - h
        label = local_time(hour).strftime("%H:00")
        return (f"{x:.1f}", f"{y:.1f}", f"{slot - 2:.1f}", f"{h:.1f}", f"{pad + plot_h - fh:.1f}", f"{fh:.1f}",
                f"{label}: {n} call(s), {failed} failed")

    bars = format_html_join(
        "", '<g><title>{}</title><rect class="mcp-bar" x="{}" y="{}" width="{}" height="{}"/>'
        '<rect class="mcp-bar-failed" x="{}" y="{}" width="{}" height="{}"/></g>',
        ((t, x, y, w, h, x, fy, w, fh) for x, y, w, h, fy, fh, t in (bar(i, *b) for i, b in enumerate(buckets))),
    )
    labels = format_html_join(
        "", '<text x="{}" y="{}" class="mcp-axis">{}</text>',
        ((f"{pad + i * slot:.1f}", height - 4, local_time(hour).strftime("%H:00"))
         for i, (hour, _, _) in enumerate(buckets) if i % 3 == 0),
    )
    return format_html(
        '<svg class="mcp-chart" role="img" aria-label="Calls per hour over the last 24 hours" viewBox="0 0 {} {}" '
        'width="100%" preserveAspectRatio="none" xmlns="http://www.w3.org/2000/svg">'
        '<text x="{}" y="12" class="mcp-axis">max {} / hour</text>{}{}</svg>',
        width, height, width - 110, top, bars, labels,
    ) if buckets else mark_safe("")
