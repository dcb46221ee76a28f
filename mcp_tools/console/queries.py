"""The reads behind the console: bounded query counts, and indexes to serve them on large tables.

Every function here runs a fixed number of queries, whatever the number of calls
or steps (the tests assert it). The indexes they rely on are declared in
``ToolCall.Meta``: ``(status, -updated_at)``, ``(status, -created_at)``,
``(tool_name, -created_at)``, ``-updated_at`` and ``created_at``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone
from typing import Any

from django.db.models import (
    BooleanField, Case, Count, DurationField, ExpressionWrapper, F, IntegerField, Max, OuterRef, Q, QuerySet, Subquery, TextField,
    Value, When,
)
from django.db.models import Window as Over  # not the dashboard's Window below
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, RowNumber
from django.utils import timezone
from django.utils.crypto import constant_time_compare

from ..models import CallStep, McpSession, ToolCall
from ..states import LIVE_STATUSES, CallStatus, WireFlavor

#: How many rows each dashboard table shows.
TOP = 10
#: Columns the dashboard's call tables read (one query each, the user joined), besides the user's login name.
ROW_FIELDS = ("id", "tool_name", "status", "principal", "flavor", "created_at", "updated_at",
              "finished_at", "progress", "progress_total")


def user_name_field() -> str:
    """The lookup of a call's user's login name: ``user__`` and the user model's ``USERNAME_FIELD``.

    Read when a page is built, not at import: the project's user model (``AUTH_USER_MODEL``) need not
    have a ``username`` field (an email login, say), and ``get_username()`` reads this field too.
    """
    from django.contrib.auth import get_user_model

    return f"user__{get_user_model().USERNAME_FIELD}"


#: The principal of an anonymous 2025-11-25 caller: its session id, which is its whole credential.
ANONYMOUS_SESSION_PREFIX = "anonymous:session:"


def session_label(session_id: str) -> str:
    """A session id as the console shows it: enough to tell sessions apart, never the whole id.

    An anonymous caller's session id is its only credential (whoever sends it is that caller),
    so staff who may only look must not be able to copy it from a page.
    """
    return f"{session_id[:8]}…" if len(session_id) > 8 else session_id


#: Hex digits of a session's digest in its admin address (:func:`session_handle`).
HANDLE_DIGEST_CHARS = 16


def session_handle(session_id: str) -> str:
    """How the admin's URLs name a session: its :func:`session_label` characters and a digest.

    Never the id itself: a link's address shows in the address bar, the status bar and a copied
    link, and the id is an anonymous caller's credential. The digest cannot be turned back into
    the id (it is a one-way hash of 192 random bits); :func:`session_by_handle` finds the session.
    """
    digest = hashlib.sha256(session_id.encode()).hexdigest()[:HANDLE_DIGEST_CHARS]
    return f"{session_id[:8]}.{digest}"


def session_by_handle(handle: str) -> str | None:
    """The id of the session :func:`session_handle` gave ``handle``, or None (not a handle, or no such session).

    Session ids never hold ".", so a whole id pasted into the URL is never taken for a handle.
    """
    prefix, dot, _digest = handle.rpartition(".")
    if not dot or not prefix or "." in prefix or "\x00" in handle:
        return None
    # The prefix narrows the read to the sessions sharing 8 random characters: in practice one.
    for session_id in McpSession.objects.filter(id__startswith=prefix).values_list("id", flat=True)[:100]:
        if constant_time_compare(session_handle(session_id), handle):
            return str(session_id)
    return None


def session_calls(session_id: str) -> list[dict[str, Any]]:
    """The :data:`TOP` first calls of a 2025-11-25 session (one query)."""
    # session_id > '' repeats the partial index's condition, so SQLite's planner can use it.
    return _rows(ToolCall.objects.filter(session_id=session_id, session_id__gt="").order_by("created_at"))


def principal_shown(principal: str) -> str:
    """A principal id as the console shows it: an anonymous caller's session id shortened."""
    if principal.startswith(ANONYMOUS_SESSION_PREFIX):
        return ANONYMOUS_SESSION_PREFIX + session_label(principal[len(ANONYMOUS_SESSION_PREFIX):])
    return principal


def principal_label(username: str | None, principal: str) -> str:
    """A principal as an operator reads it: the username, "anonymous", or the raw id of a deleted user
    (an anonymous caller's session id shortened, see :func:`session_label`)."""
    if username:
        return username
    if principal.startswith("user:"):
        return f"{principal} (deleted user)"
    if principal.startswith(ANONYMOUS_SESSION_PREFIX):
        return f"anonymous (session {session_label(principal[len(ANONYMOUS_SESSION_PREFIX):])})"
    return principal or "anonymous"


#: The 2026-07-28 tasks extension, as a client declares it (``mcp_tools.server.flavors.tasks.EXTENSION``).
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"


def modern_tasks() -> Q:
    """The calls served as 2026-07-28 tasks (``resultType: "task"``, then ``tasks/get``).

    Their rows keep the flavor ``mrtr`` of the request that started them, as the flavor means more
    than a label: a ``task`` row's ttl ends it even while a worker runs it (the 2025-11-25 client chose
    that ttl, ``managers._held_by_lease``), and a session's answer to one of its requests is refused
    only for ``mrtr`` and ``saga`` rows (``flavors/session.py``). What a row holds tells them apart:
    a background ``tools/call`` whose client declared the tasks extension, of a tool that supports
    tasks (``flavors.tasks.wants_task``; the tool as it is registered now).
    """
    from ..registry import registry

    task_tools = [tool.name for tool in registry.tools if tool.task_support != "forbidden"]
    if not task_tools:  # no such call (and an empty IN is no expression an annotation can hold)
        return Q(pk__isnull=True)
    return Q(flavor=WireFlavor.MRTR, background=True, method="tools/call", tool_name__in=task_tools,
             client_capabilities__extensions__has_key=TASKS_EXTENSION)


def with_modern_task_flag(queryset: QuerySet[ToolCall]) -> QuerySet[ToolCall]:
    """Annotate ``is_modern_task`` (:func:`modern_tasks`), for rows read without ``client_capabilities``
    (the changelist defers it): :func:`served_as` then reads no column per row."""
    return queryset.annotate(is_modern_task=modern_task_flag())


def modern_task_flag() -> Case:
    """:func:`modern_tasks` as a true-or-false column: the condition alone is NULL, not false, for
    a row whose capabilities lack the key on PostgreSQL (and so would a NOT of it be)."""
    return Case(When(modern_tasks(), then=Value(True)), default=Value(False), output_field=BooleanField())


def served_as(call: ToolCall) -> str:
    """How a call was served (a :class:`~mcp_tools.states.WireFlavor` value): its recorded flavor,
    or ``task`` for a 2026-07-28 task (recorded as ``mrtr``, see :func:`modern_tasks`)."""
    flagged = getattr(call, "is_modern_task", None)
    if flagged is not None:
        return WireFlavor.TASK if flagged else str(call.flavor)
    if call.flavor == WireFlavor.MRTR and call.background and call.method == "tools/call":
        from ..registry import registry

        extensions = (call.client_capabilities or {}).get("extensions") if isinstance(call.client_capabilities, dict) else None
        tool = registry.get_tool(call.tool_name)
        if isinstance(extensions, dict) and TASKS_EXTENSION in extensions and tool is not None and tool.task_support != "forbidden":
            return WireFlavor.TASK
    return str(call.flavor)


def served_label(call: ToolCall) -> str:
    """What the console says a call was served as: the label of :func:`served_as`."""
    flavor = served_as(call)
    return str(WireFlavor(flavor).label) if flavor in WireFlavor.values else flavor


def with_step_counts(queryset: QuerySet[ToolCall]) -> QuerySet[ToolCall]:
    """Annotate ``step_count`` as a correlated subquery.

    Not ``Count("steps")``: a join and GROUP BY would aggregate every matching
    call before the page is cut; the subquery runs for the rows shown only, on
    the ``(call, seq)`` unique index.
    """
    counts = (
        CallStep.objects.filter(call=OuterRef("pk")).order_by().values("call").annotate(n=Count("*")).values("n")
    )
    return queryset.annotate(step_count=Subquery(counts, output_field=IntegerField()))


#: The most characters of one JSON block the call's page shows (arguments, result, error, a step's
#: request or answer): a client may send megabytes of arguments, and a browser given them all stalls.
MAX_JSON_CHARS = 100_000


def pretty_json(value: Any, limit: int = MAX_JSON_CHARS) -> str:
    """JSON for reading: indented, non-ASCII kept, anything odd shown as text, cut after ``limit``
    characters with a line saying so."""
    if value is None:
        return ""
    text = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n… truncated, {len(text):,} characters in all"


# -- the dashboard ------------------------------------------------------------------------


@dataclass
class Window:
    """Counts of calls started in a time window."""

    label: str
    total: int = 0
    by_status: dict[str, int] = field(default_factory=dict)
    by_tool: list[tuple[str, int, int]] = field(default_factory=list)  # (tool, calls, failed), busiest first
    failing: list[tuple[str, int, int]] = field(default_factory=list)  # (tool, failed, calls), most failures first


@dataclass
class Dashboard:
    now: datetime
    windows: list[Window]
    in_flight: dict[str, int]
    oldest: list[dict[str, Any]]
    quietest: list[dict[str, Any]]
    slowest: list[dict[str, Any]]
    failing: list[tuple[str, int, int]]  # (tool, failed, calls) over the last day
    buckets: list[tuple[datetime, int, int]]  # (hour, calls, failed) over the last day
    fingerprint: str


def _window(label: str, since: datetime) -> Window:
    """One query: calls started since ``since`` grouped by tool and status (served by the created_at index)."""
    window = Window(label)
    tools: dict[str, list[int]] = {}
    rows = (
        ToolCall.objects.filter(created_at__gte=since).order_by().values_list("tool_name", "status").annotate(n=Count("*"))
    )
    for tool, status, n in rows:
        window.total += n
        window.by_status[status] = window.by_status.get(status, 0) + n
        counts = tools.setdefault(tool, [0, 0])
        counts[0] += n
        if status == CallStatus.FAILED:
            counts[1] += n
    window.by_tool = sorted(((t, c[0], c[1]) for t, c in tools.items()), key=lambda item: (-item[1], item[0]))[:TOP]
    window.failing = sorted(((t, c[1], c[0]) for t, c in tools.items() if c[1]), key=lambda item: (-item[1], item[0]))[:TOP]
    return window


def _rows(queryset: QuerySet[ToolCall]) -> list[dict[str, Any]]:
    name = user_name_field()
    rows = list(queryset.values(*ROW_FIELDS, name)[:TOP])
    for row in rows:
        login = row.pop(name)
        row["who"] = principal_label(None if login is None else str(login), row["principal"])
    return rows


def _live_first(field_name: str) -> list[dict[str, Any]]:
    """The :data:`TOP` live calls with the smallest ``field_name``: one query per live status, merged.

    ``status IN (...) ORDER BY created_at`` cannot be read in order from the
    ``(status, created_at)`` index, and PostgreSQL then walks the whole
    ``created_at`` index looking for live rows (0.3 s at 200,000 calls); each
    status on its own is a short index range.
    """
    rows = [row for status in LIVE_STATUSES
            for row in _rows(ToolCall.objects.filter(status=status).order_by(field_name))]
    return sorted(rows, key=lambda row: row[field_name])[:TOP]


def fingerprint() -> str:
    """Changes whenever any call changes (one query on the ``-updated_at`` index)."""
    last = ToolCall.objects.order_by().aggregate(last=Max("updated_at"))["last"]
    return f"{last.timestamp():.6f}" if last else ""  # URL-safe: the poll sends it back as ?since=


def local_time(value: datetime) -> datetime:
    """``value`` in the current time zone: aware values converted, naive ones (``USE_TZ = False``, where
    Django stores and returns local wall time) kept as they are, since ``localtime()`` refuses them."""
    return timezone.localtime(value) if timezone.is_aware(value) else value


def dashboard(now: datetime | None = None) -> Dashboard:
    """Everything the dashboard shows, in ten queries."""
    now = now or timezone.now()
    day_ago = now - timedelta(days=1)
    hour = _window("Last hour", now - timedelta(hours=1))
    day = _window("Last 24 hours", day_ago)
    live = ToolCall.objects.filter(status__in=LIVE_STATUSES)
    in_flight = dict(live.order_by().values_list("status").annotate(n=Count("*")))
    duration = ExpressionWrapper(F("finished_at") - F("created_at"), output_field=DurationField())
    slowest = _rows(
        ToolCall.objects.filter(created_at__gte=day_ago, finished_at__isnull=False, status=CallStatus.COMPLETED)
        .annotate(duration=duration).order_by("-duration")
    )
    for row in slowest:
        row["took"] = f"{(row['finished_at'] - row['created_at']).total_seconds():.1f} s"
    return Dashboard(
        now=now,
        windows=[hour, day],
        in_flight={status: in_flight.get(status, 0) for status in LIVE_STATUSES},
        oldest=_live_first("created_at"),
        quietest=_live_first("updated_at"),
        slowest=slowest,
        failing=day.failing,  # from the day's (tool, status) groups: no query of its own
        buckets=_buckets(now),
        fingerprint=fingerprint(),
    )


def _hour_starts(now: datetime, hours: int) -> list[datetime]:
    """The starts of the last ``hours`` hours of the current time zone, oldest first, the current one last.

    Aware ones are in UTC, an hour of real time apart: an aware local time stepped back by an hour
    moves its wall clock, so across a daylight saving change one hour came twice (25 real hours) or
    the chart spanned 23. Naive ones (``USE_TZ = False``) are the local wall times Django stores.
    """
    top = local_time(now).replace(minute=0, second=0, microsecond=0)
    if timezone.is_aware(top):
        top = top.astimezone(dt_timezone.utc)
    return [top - timedelta(hours=i) for i in range(hours - 1, -1, -1)]


def _buckets(now: datetime, hours: int = 24) -> list[tuple[datetime, int, int]]:
    """Calls started per hour over the last ``hours`` (one query), oldest first, empty hours included;
    each hour's start in the current time zone."""
    starts = _hour_starts(now, hours)
    # Each call's hour by comparing with the starts, not by TruncHour: that truncates local wall times,
    # and the database answers a naive one, so the two 01:00 hours of a night the clocks go back were one.
    hour = Case(*(When(created_at__gte=start, then=Value(i)) for i, start in reversed(list(enumerate(starts)))),
                output_field=IntegerField())
    rows = (
        ToolCall.objects.filter(created_at__gte=starts[0], created_at__lt=starts[-1] + timedelta(hours=1))
        .annotate(hour=hour).order_by()
        .values_list("hour").annotate(n=Count("*"), failed=Count("id", filter=Q(status=CallStatus.FAILED)))
    )
    found = {index: (n, failed) for index, n, failed in rows}
    return [(local_time(start), *found.get(index, (0, 0))) for index, start in enumerate(starts)]


# -- the detail page ------------------------------------------------------------------------


def recent_tool_names(known: set[str], scanned: int, most: int) -> list[str]:
    """Up to ``most`` tool names not in ``known``, from the latest ``scanned`` calls, newest first
    (one query on the ``created_at`` index, whatever the size of the table)."""
    names: list[str] = []
    for name in ToolCall.objects.order_by("-created_at").values_list("tool_name", flat=True)[:scanned]:
        if name not in known and name not in names:
            names.append(name)
            if len(names) == most:
                break
    return names


def call_arguments(call: ToolCall) -> Any:
    """What the caller passed: a tool's ``arguments`` (the row keeps the request's bound params, name included)."""
    params = call.arguments
    if call.method == "tools/call" and isinstance(params, dict) and set(params) <= {"name", "arguments"} and "name" in params:
        return params.get("arguments") or {}
    return params


#: How many of a call's first and of its last steps its page shows: each block is capped (a browser
#: given 100,000 characters a block stalls), and a handler of 2,000 ``ctx.once`` steps made a 41 MB page.
TIMELINE_ENDS = 50


@dataclass
class Timeline:
    """A call's journal as its page shows it: the first and the last :data:`TIMELINE_ENDS` steps, and
    how many between them are not shown."""

    first: list[dict[str, Any]]
    last: list[dict[str, Any]]
    omitted: int

    @property
    def total(self) -> int:
        return len(self.first) + self.omitted + len(self.last)


def timeline(call: ToolCall, ends: int = TIMELINE_ENDS) -> Timeline:
    """The call's journal, in the order the handler asked, pretty-printed for reading: all of it up to
    twice ``ends`` steps, else its first and last ``ends``; one query however long the journal.

    The steps are numbered from each end, and counted, by window functions, and only those within
    ``ends`` of either end are read: a long journal's tail and count took two more queries before
    (the page's count was not the one docs/admin.md gives).
    """
    rows = list(
        CallStep.objects.filter(call=call)
        .annotate(
            from_start=Over(RowNumber(), order_by=F("seq").asc()),
            from_end=Over(RowNumber(), order_by=F("seq").desc()),
            total=Over(Count("pk")),
        )
        .filter(Q(from_start__lte=ends) | Q(from_end__lte=ends))
        .order_by("seq")
    )
    total = rows[0].total if rows else 0
    if total <= 2 * ends:
        return Timeline([_timeline_item(step) for step in rows], [], 0)
    return Timeline([_timeline_item(step) for step in rows[:ends]], [_timeline_item(step) for step in rows[ends:]], total - 2 * ends)


def _timeline_item(step: CallStep) -> dict[str, Any]:
    request = step.request or {}
    params = request.get("params", {}) if isinstance(request, dict) else {}
    return {
        "step": step,
        "summary": _summary(step.kind, params),
        "request": pretty_json(step.request),
        "response": pretty_json(step.response),
        "error": pretty_json(step.error),
        "waited": (step.answered_at - step.created_at) if step.answered_at else None,
    }


#: How many of a call's admin actions its page lists (the History has them all).
RECENT_ACTIONS = 3


def operator_actions(call: ToolCall) -> list[Any]:
    """The latest admin actions on ``call`` (``LogEntry``, newest first, the user joined; one query).

    The call's client is told only that an operator cancelled or expired it: this is where
    staff see who did, without opening the History.
    """
    from django.contrib.admin.models import LogEntry

    # By app label and model name, not ContentType.objects.get_for_model: its cache would make
    # the page's query count depend on what ran before.
    return list(
        LogEntry.objects.filter(
            content_type__app_label=ToolCall._meta.app_label, content_type__model=ToolCall._meta.model_name,
            object_id=str(call.pk),
        ).select_related("user").order_by("-action_time", "-pk")[:RECENT_ACTIONS]
    )


#: The most a step's one-line summary shows (as the status message), then "…": the elicitation's
#: message is the handler's text, and a 300,000-character one made a 409 kB page.
MAX_SUMMARY_CHARS = 10_000


def _summary(kind: str, params: Any) -> str:
    """One line saying what a step asked, at most :data:`MAX_SUMMARY_CHARS` characters."""
    from django.utils.text import Truncator

    if not isinstance(params, dict):
        return ""
    if kind == "elicit":
        text = str(params.get("message", ""))
    elif kind == "sample":
        messages = params.get("messages")
        count = len(messages) if isinstance(messages, list) else 0
        text = f"{count} message(s), up to {params.get('maxTokens', '?')} tokens"
    else:
        return ""
    return Truncator(text).chars(MAX_SUMMARY_CHARS) if len(text) > MAX_SUMMARY_CHARS else text


@dataclass
class Linked:
    """Calls related to one call, each list a single bounded query."""

    next_hint: dict[str, Any] | None
    followed_by: list[dict[str, Any]]
    came_from: list[dict[str, Any]]
    same_session: list[dict[str, Any]]


def linked_calls(call: ToolCall) -> Linked:
    """Calls linked to ``call`` (best effort, same caller only):

    - ``followed_by``: calls of the tool its result suggested with ``_meta.nextTool``,
      by the same principal, started after it (within ``CALL_TTL``);
    - ``came_from``: earlier calls of the same principal (within a day) whose result
      suggested this call's tool;
    - ``same_session``: other calls of the same 2025-11-25 session.

    A saga or a 2026-07-28 multi-round call is one row across its rounds: its
    rounds are this page's step timeline, not linked calls.
    """
    from ..conf import mcp_settings

    meta = call.result.get("_meta") if isinstance(call.result, dict) else None
    hint = meta.get("nextTool") if isinstance(meta, dict) else None
    hint = hint if isinstance(hint, dict) and isinstance(hint.get("tool"), str) else None
    mine = ToolCall.objects.filter(principal=call.principal).exclude(pk=call.pk).select_related("user")
    followed_by: list[dict[str, Any]] = []
    if hint is not None:
        until = call.created_at + timedelta(seconds=int(mcp_settings.CALL_TTL))
        followed_by = _rows(
            mine.filter(tool_name=hint["tool"], created_at__gte=call.created_at, created_at__lte=until).order_by("created_at")
        )
    came_from = _rows(
        # The hint's text (->>), not its JSON: the column is PostgreSQL's json, which has no "=".
        mine.alias(hinted_tool=Cast(KT("result___meta__nextTool__tool"), TextField()))
        .filter(created_at__lt=call.created_at, created_at__gte=call.created_at - timedelta(days=1), hinted_tool=call.tool_name)
        .order_by("-created_at")
    )
    same_session: list[dict[str, Any]] = []
    if call.session_id:
        same_session = _rows(
            # session_id > '' repeats the partial index's condition, so SQLite's planner can use it.
            ToolCall.objects.filter(session_id=call.session_id, session_id__gt="").exclude(pk=call.pk).order_by("created_at")
        )
    return Linked(hint, followed_by, came_from, same_session)
