"""The operator's console for tool calls, built on Django's admin.

- The changelist shows calls in flight by default, with status badges, progress,
  step counts and worker state, in a fixed number of queries per page.
- The detail page is a read-only report (arguments, step timeline, result or
  error, worker and token state, linked calls), with cancel and expire buttons.
- ``dashboard/`` (linked from the app index and the changelist) shows counts,
  the oldest and quietest calls in flight, the slowest calls and failing tools,
  and updates itself over a WebSocket (``mcp_tools.routing.console_websocket_app``),
  or by polling when the socket is not available.

Acting (cancel, expire, retry) needs the ``change_toolcall`` permission; looking
needs ``view_toolcall``. Every action is recorded in the admin's ``LogEntry``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.options import IS_POPUP_VAR, IncorrectLookupParameters
from django.contrib.admin.utils import quote, unquote
from django.contrib.admin.views.main import SEARCH_VAR, ChangeList
from django.core.exceptions import FieldDoesNotExist, PermissionDenied, ValidationError
from django.db.models import JSONField, Q, QuerySet
from django.db.models.constants import LOOKUP_SEP
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.text import Truncator
from django.utils.timesince import timesince
from django.utils.translation import gettext_lazy as _

from .console import queries
from .console.display import decorate, progress_bar, status_badge, worker_state
from .console.retry import is_retryable, retry_api
from .interprocess import events
from .models import TERMINAL_STATUSES, CallStatus, McpSession, ToolCall
from .registry import registry
from .server.auth import PRINCIPAL_MAX_LENGTH, fit_principal_id
from .states import LIVE_STATUSES, OPERATOR_END_MESSAGES, WireFlavor


def exact_id(search_term: str) -> uuid.UUID | None:
    """The UUID a search term names (a call id or a Celery task id, looked up exactly), or None."""
    try:
        return uuid.UUID(search_term.strip())
    except ValueError:
        return None


def principal_forms(value: str) -> list[str]:
    """``value`` and, for one longer than a principal id can be, the id it stands for: such an id is
    kept fitted to the column (:func:`~mcp_tools.server.auth.fit_principal_id`), and an operator
    pastes the id as it was made (``oauth-client:<a client id URL>``). Both are looked for: a term of
    exactly the limit in the fitted shape may be a stored id itself, or a raw one stored fitted."""
    if len(value) < PRINCIPAL_MAX_LENGTH:
        return [value]
    fitted = fit_principal_id(value)  # past the limit, or at it in the fitted shape
    return [value] if fitted == value else [value, fitted]


def with_fitted_principal(found: QuerySet[Any], queryset: QuerySet[Any], search_term: str) -> QuerySet[Any]:
    """``found`` and the rows of the fitted id a long search term stands for (:func:`principal_forms`)."""
    forms = principal_forms(search_term.strip())
    return found if len(forms) == 1 else found | queryset.filter(principal=forms[1])


class PrincipalFilterChangeList(ChangeList):
    """A changelist whose ``?principal=<id>`` (or ``principal__exact``) in the URL takes a long id as
    it was made as well as its stored, fitted form, as the search does (:func:`principal_forms`).
    Django's changelist matches any of a parameter's values, so the fitted one is added to them."""

    def get_results(self, request: HttpRequest) -> None:
        try:
            super().get_results(request)
        except (ValueError, OverflowError) as exc:
            # A value Django checks only as it compiles the query, which runs here, past the
            # changelist's own check: ``?created_at__year=10000`` ("year 10000 is out of range"), a
            # date past the calendar once in UTC (``?created_at__gte=0001-01-01`` in Asia/Tokyo).
            # Refused as any crafted filter is (the list again, "?e=1"), not a 500.
            raise IncorrectLookupParameters(str(exc)) from exc

    def get_filters_params(self, params: Any = None) -> Any:
        lookup_params = super().get_filters_params(params)
        for key in ("principal", "principal__exact"):
            values = lookup_params.get(key)
            if values:
                lookup_params[key] = list(dict.fromkeys(form for value in values for form in principal_forms(value)))
        return lookup_params


class ServedAsFilter(admin.SimpleListFilter):
    """How calls were served (``?flavor=``, the parameter of the field filter this replaces): "Task"
    lists the tasks of both protocol eras, although a 2026-07-28 task's row keeps the flavor ``mrtr``
    (see :func:`~mcp_tools.console.queries.modern_tasks`); "2026-07-28 multi-round-trip" leaves them out."""

    title = _("served as")
    parameter_name = "flavor"

    def lookups(self, request: Any, model_admin: Any) -> list[tuple[str, Any]]:
        return list(WireFlavor.choices)

    def queryset(self, request: Any, queryset: QuerySet[ToolCall]) -> QuerySet[ToolCall]:
        value = self.value()
        if value == WireFlavor.TASK:
            return queryset.filter(Q(flavor=WireFlavor.TASK) | queries.modern_tasks())
        if value == WireFlavor.MRTR:
            return queryset.filter(flavor=WireFlavor.MRTR).alias(served_as_task=queries.modern_task_flag()).filter(served_as_task=False)
        return queryset.filter(flavor=value) if value else queryset


class StatusFilter(admin.SimpleListFilter):
    """Status, with "In flight" (working or waiting for input) as the default view."""

    title = _("status")
    parameter_name = "state"
    LIVE = "live"
    ALL = "all"

    def lookups(self, request: Any, model_admin: Any) -> list[tuple[str, Any]]:
        return [(self.LIVE, _("In flight")), *CallStatus.choices, (self.ALL, _("All"))]

    def default(self, search_term: str) -> str:
        """The status shown when none is chosen: "In flight", except for a search by exact id.

        An operator pasting a call id from a log wants that call, finished or not: the
        default would hide it behind "In flight" and the page would say nothing matched.
        """
        return self.ALL if exact_id(search_term) is not None else self.LIVE

    def queryset(self, request: Any, queryset: QuerySet[ToolCall]) -> QuerySet[ToolCall]:
        value = self.value() or self.default(request.GET.get(SEARCH_VAR, ""))
        if value == self.ALL:
            return queryset
        if value == self.LIVE:
            return queryset.filter(status__in=LIVE_STATUSES)
        if value in CallStatus.values:
            return queryset.filter(status=value)
        raise IncorrectLookupParameters(f"unknown status {value!r}")

    def choices(self, changelist: Any) -> Any:
        # No blank "All" entry: an unfiltered page is the explicit "all" value, so the default can be "In flight".
        current = self.value() or self.default(changelist.query)
        for value, label in self.lookup_choices:
            yield {
                "selected": current == str(value),
                "query_string": changelist.get_query_string({self.parameter_name: value}),
                "display": label,
            }


class ToolFilter(admin.SimpleListFilter):
    """The calls of one tool, prompt or resource URI (``?tool_name=``), from a bounded list.

    Listed: the names the site's code registers (tools, prompts, fixed resources' URIs), then
    at most :attr:`MOST_OTHERS` other names of the latest :attr:`SCANNED` calls (a tool no
    longer registered, URIs read through a resource template). Not every name ever recorded:
    a resource read records the URI the client chose, so that list would grow by one link per
    URI a client read, and its ``SELECT DISTINCT`` would read the whole table. Any other name
    is still one search, or ``?tool_name=<name>`` in the URL, away.
    """

    title = _("tool")
    parameter_name = "tool_name"  # the parameter of the field filter this replaces: old links still work
    #: How many of the latest calls are read for names the registry does not hold.
    SCANNED = 200
    #: At most this many such names are listed.
    MOST_OTHERS = 10
    #: Longer names (resource URIs) are shortened in the list; the link filters on the whole name.
    LABEL_CHARS = 60

    def lookups(self, request: Any, model_admin: Any) -> list[tuple[str, Any]]:
        registered = (
            {tool.name for tool in registry.tools} | {prompt.name for prompt in registry.prompts}
            | {resource.uri for resource in registry.resources if resource.uri is not None}
        )
        names = sorted(registered) + sorted(queries.recent_tool_names(registered, self.SCANNED, self.MOST_OTHERS))
        current = self.value()
        if current and current not in names:
            names.append(current)  # chosen from a search or a link: shown, and shown selected
        return [(name, Truncator(name).chars(self.LABEL_CHARS)) for name in names]

    def queryset(self, request: Any, queryset: QuerySet[ToolCall]) -> QuerySet[ToolCall]:
        value = self.value()
        if not value:  # a value holding U+0000 never gets here: lookup_allowed refuses it (400)
            return queryset
        return queryset.filter(tool_name=value)


#: The longest search term the calls' changelist takes.
MAX_SEARCH_CHARS = 500
#: Columns the changelist never shows: each may hold megabytes (arguments up to ``MAX_BODY_BYTES``).
LIST_DEFERRED = ("arguments", "result", "error", "last_outcome", "client_capabilities")
#: Lookups no changelist URL may use: a pattern the database cannot compile is a 500 on SQLite
#: (``?tool_name__regex=(``), and a costly one scans the table whatever the indexes.
REFUSED_LOOKUPS = frozenset({"regex", "iregex"})
#: Columns that may hold an anonymous caller's session id (its credential): matched whole only.
SECRET_BEARING_FIELDS = frozenset({"principal", "session_id"})


class ToolCallChangeList(PrincipalFilterChangeList):
    """The calls' changelist: its rows are read without the big JSON columns (:data:`LIST_DEFERRED`).

    Here and not in ``ToolCallAdmin.get_queryset``, which also serves the detail page,
    where those columns are the report.
    """

    def get_queryset(self, request: HttpRequest, exclude_parameters: Any = None) -> QuerySet[ToolCall]:
        return queries.with_modern_task_flag(super().get_queryset(request, exclude_parameters).defer(*LIST_DEFERRED))


def refused_lookup(model: Any, parts: list[str], value: Any) -> bool:
    """Whether a changelist URL's lookup is refused (400) whatever the admin: a regular expression,
    one into a JSON column (:func:`reaches_json_column`), or a value holding U+0000, which no
    column holds and PostgreSQL refuses in a query (a 500)."""
    return bool(REFUSED_LOOKUPS.intersection(parts)) or "\x00" in str(value) or reaches_json_column(model, parts)


def reaches_json_column(model: Any, parts: list[str]) -> bool:
    """Whether a changelist lookup (split on ``__``) goes into a JSON column: only a crafted URL asks
    it, and the database may fail on it (SQLite has no ``contains`` on JSON; the columns hold megabytes)."""
    for part in parts:
        try:
            field = model._meta.get_field(part)
        except FieldDoesNotExist:
            return False  # a lookup or transform name: Django's own check judges the rest
        if isinstance(field, JSONField):
            return True
        if field.related_model is None:
            return False
        model = field.related_model
    return False


class RefusesUnstorableSelections(admin.ModelAdmin):
    """A changelist action whose selected ids are not ids of the model (only a crafted POST sends
    one) is refused (400), nothing changed: Django puts them into ``pk__in``, where one that is not
    of the primary key's type ("nonuuid" for a UUID) raises (a 500), and one holding U+0000 makes
    PostgreSQL refuse the query (a 500); no row has such an id."""

    def response_action(self, request: HttpRequest, queryset: QuerySet[Any], *args: Any, **kwargs: Any) -> HttpResponse | None:
        selected_ids = request.POST.getlist(helpers.ACTION_CHECKBOX_NAME)
        if any("\x00" in selected for selected in selected_ids):
            return HttpResponseBadRequest("A selected id holds U+0000.")
        pk_field = self.model._meta.pk
        assert pk_field is not None
        try:
            # The primary key's own conversion, as the filter makes it: whatever it accepts, the query does.
            for selected in selected_ids:
                pk_field.to_python(selected)
        except ValidationError:
            return HttpResponseBadRequest(f"A selected id is not a {self.opts.verbose_name} id.")
        return super().response_action(request, queryset, *args, **kwargs)


@admin.register(ToolCall)
class ToolCallAdmin(RefusesUnstorableSelections):
    list_display = ("status_badge", "tool_name", "who", "served", "age", "last_activity", "progress_bar", "step_total", "worker_state")
    list_display_links = ("tool_name",)
    list_filter = (
        StatusFilter, ToolFilter, ServedAsFilter, "background", ("user", admin.RelatedOnlyFieldListFilter), "created_at",
    )
    # Principals and sessions by exact match only: a substring search would let staff who may only
    # look find an anonymous caller's session id (its credential) a character at a time.
    search_fields = ("tool_name", "=id", "=principal", "=celery_task_id", "=session_id")
    list_select_related = ("user",)
    list_per_page = 50
    # No date_hierarchy: its MIN/MAX and per-day queries scan the table (0.3 s on PostgreSQL,
    # over 1 s on SQLite at 200,000 calls); the created_at list filter needs no query.
    show_full_result_count = False  # COUNT(*) on a huge table is slow
    actions = ["cancel_calls", "expire_calls", "retry_calls"]
    readonly_fields = [f.name for f in ToolCall._meta.fields]
    change_list_template = "admin/mcp_tools/toolcall/change_list.html"

    class Media:
        css = {"all": ["mcp_tools/console.css"]}

    def get_search_results(self, request: HttpRequest, queryset: QuerySet[ToolCall], search_term: str) -> tuple[QuerySet[ToolCall], bool]:
        """A UUID is a call id or a Celery task id: look it up exactly instead of scanning every text column."""
        term = search_term.strip()
        if len(term) > MAX_SEARCH_CHARS:
            # Longer terms only make the database's LIKE refuse ("pattern too complex") or crawl.
            self.message_user(request, f"Search terms are limited to {MAX_SEARCH_CHARS} characters.", messages.WARNING)
            return queryset.none(), False
        as_uuid = exact_id(term)
        if as_uuid is None:
            found, may_have_duplicates = super().get_search_results(request, queryset, search_term)
            return with_fitted_principal(found, queryset, term), may_have_duplicates
        # Two lookups, not one OR: the OR would defeat the primary key index.
        by_id = queryset.filter(pk=as_uuid)
        return (by_id if by_id.exists() else queryset.filter(celery_task_id=term)), False

    def get_queryset(self, request: HttpRequest) -> QuerySet[ToolCall]:
        return queries.with_step_counts(super().get_queryset(request).select_related("user"))

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return ToolCallChangeList

    def lookup_allowed(self, lookup: str, value: str, request: HttpRequest) -> bool:
        """Django's rules, minus what only a crafted URL asks and the database may fail on.

        Refused (a 400, ``DisallowedModelAdminLookup``): regular expressions (an invalid one is
        a database error, a valid one a full scan), any lookup into a JSON column (SQLite has
        no ``contains`` on JSON, and the columns hold megabytes), and any but an exact match
        on a column that may hold an anonymous caller's session id. The list filters and the
        search use none of them.
        """
        parts = lookup.split(LOOKUP_SEP)
        if refused_lookup(self.model, parts, value):
            return False
        if parts[0] in SECRET_BEARING_FIELDS and parts[1:] not in ([], ["exact"], ["in"], ["isnull"]):
            # An anonymous caller's session id is its credential: ?session_id__startswith=a lists
            # the call or not, which gives the id away a character at a time (as a substring
            # search would: search_fields are exact for these too).
            return False
        return super().lookup_allowed(lookup, value, request)

    # -- columns ---------------------------------------------------------------------

    @admin.display(description=_("status"), ordering="status")
    def status_badge(self, obj: ToolCall) -> str:
        return status_badge(obj.status, obj.get_status_display())

    @admin.display(description=_("principal"), ordering="principal")
    def who(self, obj: ToolCall) -> str:
        # The user is joined (list_select_related): no query per row.
        return queries.principal_label(obj.user.get_username() if obj.user else None, obj.principal)

    @admin.display(description=_("served as"), ordering="flavor")
    def served(self, obj: ToolCall) -> str:
        label = queries.served_label(obj)
        return f"{label} · background" if getattr(obj, "background", False) else label

    @admin.display(description=_("age"), ordering="created_at")
    def age(self, obj: ToolCall) -> str:
        return format_html('<span title="{}">{}</span>', obj.created_at.isoformat(), timesince(obj.created_at))

    @admin.display(description=_("last activity"), ordering="updated_at")
    def last_activity(self, obj: ToolCall) -> str:
        return format_html('<span title="{}">{} ago</span>', obj.updated_at.isoformat(), timesince(obj.updated_at))

    @admin.display(description=_("progress"))
    def progress_bar(self, obj: ToolCall) -> str:
        return progress_bar(obj.progress, obj.progress_total)

    # Not named "steps": Django's changelist orders a column named like a field or relation by that
    # (ToolCall.steps, the reverse relation: each call listed once per step), never by ``ordering``.
    @admin.display(description=_("steps"), ordering="step_count")
    def step_total(self, obj: ToolCall) -> int:
        return getattr(obj, "step_count", None) or 0

    @admin.display(description=_("worker"))
    def worker_state(self, obj: ToolCall) -> str:
        return worker_state(obj)

    # -- permissions: a read-only report; acting needs change --------------------------

    def has_add_permission(self, request: Any) -> bool:
        return False

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def has_retry_permission(self, request: Any) -> bool:
        """The retry action exists only when ``mcp_tools.tasks.retry_call`` does."""
        return retry_api() is not None and self.has_change_permission(request)

    # -- actions ---------------------------------------------------------------------

    def end_calls(self, request: Any, queryset: QuerySet[ToolCall], status: str) -> int:
        """Cancel or expire the selected calls that are still live, and stop their handlers.

        Each change is a compare-and-set in the manager (``end_call_sync``): a call
        that finished meanwhile keeps its outcome and is reported as already ended.
        The call's client is told an operator ended it (:data:`OPERATOR_END_MESSAGES`), not who:
        the operator's login goes to the call's History only. A call the object's own
        ``has_change_permission(request, call)`` refuses is left alone (as the report page's
        button is hidden for it, and Django's ``delete_selected`` checks each object).
        """
        from .server.core import end_call_sync

        ended = 0
        selected = 0
        refused = 0
        for call in queryset.select_related(None).only("id", "tool_name", "status"):
            selected += 1
            if not self.has_change_permission(request, call):
                refused += 1
                continue
            if call.status in TERMINAL_STATUSES:
                continue
            if end_call_sync(str(call.pk), status, OPERATOR_END_MESSAGES[status]):
                ended += 1
                self.log_change(request, call, f"Marked {status} from the admin.")
                events.publish_changed_sync(call.pk, status)
        if ended:  # "0 calls marked" in green beside the warning below would read as a success
            self.message_user(request, f"{ended} call(s) marked {status}.", messages.SUCCESS)
        if selected - ended - refused:
            self.message_user(request, f"{selected - ended - refused} selected call(s) had already ended and were left as they are.", messages.WARNING)
        self._say_refused(request, refused)
        return ended

    def _say_refused(self, request: Any, refused: int) -> None:
        if refused:
            self.message_user(request, f"{refused} selected call(s) you may not change were left as they are.", messages.WARNING)

    @admin.action(description=_("Cancel selected calls"), permissions=["change"])
    def cancel_calls(self, request: Any, queryset: QuerySet[ToolCall]) -> None:
        self.end_calls(request, queryset, CallStatus.CANCELLED)

    @admin.action(description=_("Expire selected calls"), permissions=["change"])
    def expire_calls(self, request: Any, queryset: QuerySet[ToolCall]) -> None:
        self.end_calls(request, queryset, CallStatus.EXPIRED)

    @admin.action(description=_("Retry selected failed background calls"), permissions=["retry"])
    def retry_calls(self, request: Any, queryset: QuerySet[ToolCall]) -> None:
        retry = retry_api()
        if retry is None:  # the action is hidden then; a forged POST gets this
            self.message_user(request, "Retrying is not available in this version of mcp_tools.", messages.ERROR)
            return
        retried = 0
        selected = 0
        refused = 0
        for call in queryset.select_related(None).only("id", "tool_name", "status", "background", "retried_as"):
            selected += 1
            if not self.has_change_permission(request, call):  # the object's own permission, as end_calls
                refused += 1
                continue
            if not is_retryable(call):
                continue
            new_id = retry(str(call.pk))
            if new_id is None:  # it changed meanwhile: not a failed background call any more
                continue
            retried += 1
            self.log_change(request, call, f"Retried from the admin as call {new_id}.")
            events.publish_changed_sync(new_id, CallStatus.WORKING)
        if retried:
            self.message_user(request, f"{retried} call(s) started again as new calls.", messages.SUCCESS)
        if selected - retried - refused:
            self.message_user(request, f"{selected - retried - refused} selected call(s) are not failed background calls and were left as they are.", messages.WARNING)
        self._say_refused(request, refused)

    # -- pages -----------------------------------------------------------------------

    def get_urls(self) -> list[Any]:
        from .console import views

        def wrap(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
            def inner(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
                return view(self, request, *args, **kwargs)

            return self.admin_site.admin_view(inner)

        info = self.opts.app_label, self.opts.model_name
        # Before the default patterns: "<path:object_id>/" would take these paths.
        return [
            path("dashboard/", wrap(views.dashboard), name="%s_%s_dashboard" % info),
            path("dashboard/data/", wrap(views.dashboard_data), name="%s_%s_dashboard_data" % info),
            path("<path:object_id>/act/<str:action>/", wrap(views.act), name="%s_%s_act" % info),
            *super().get_urls(),
        ]

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        # Nothing here is changed through a form: not "Select tool call to change".
        return super().changelist_view(request, {"title": _("Tool calls"), **(extra_context or {})})

    def change_view(self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: Any = None) -> HttpResponse:
        """The read-only report of one call (no form: nothing here is edited)."""
        from .console import views

        if not self.has_view_or_change_permission(request):
            raise PermissionDenied  # before the lookup: no answer may tell which call ids exist
        call = self.get_object(request, unquote(object_id))
        if call is None:
            return self._get_obj_does_not_exist_redirect(request, self.opts, object_id)  # type: ignore[attr-defined]
        if not self.has_view_or_change_permission(request, call):
            raise PermissionDenied
        return views.detail(self, request, call)

    def history_view(self, request: HttpRequest, object_id: str, extra_context: Any = None) -> HttpResponse:
        # Django's looks the call up first, and answers an unknown id with a redirect: the
        # permission comes first here, as on the report, so no answer tells which ids exist.
        if not self.has_view_or_change_permission(request):
            raise PermissionDenied
        return super().history_view(request, object_id, extra_context)


def session_page(opts: Any) -> str:
    """The URL name of a session's page (``reverse`` it with its handle)."""
    return f"admin:{opts.app_label}_{opts.model_name}_change"


class SessionChangeList(PrincipalFilterChangeList):
    """The sessions' changelist: each row links to its session by handle, never by id
    (:func:`~mcp_tools.console.queries.session_handle`)."""

    def url_for_result(self, result: Any) -> str:
        return reverse(session_page(self.opts), args=(quote(queries.session_handle(result.pk)),),
                       current_app=self.model_admin.admin_site.name)


@admin.register(McpSession)
class McpSessionAdmin(RefusesUnstorableSelections):
    """2025-11-25 sessions, a read-only report that never shows a whole session id.

    An anonymous caller's session id is its only credential: whoever sends it is that caller. So
    the pages show its first 8 characters (:func:`~mcp_tools.console.queries.session_label`),
    address a session by a handle that does not give the id away, and offer nothing that would
    print it (no delete confirmation, no change form, no ``LogEntry`` named after it). Staff who
    paste a whole id into the search, or into a session's URL, still find it.
    """

    list_display = ("session", "protocol_version", "shown_principal", "log_level", "created_at", "last_seen_at")
    search_fields = ("=id", "=principal")

    def lookup_allowed(self, lookup: str, value: str, request: HttpRequest) -> bool:
        """Django's rules, minus regular expressions and lookups into the JSON columns (as for calls),
        and any but an exact match on the id (a ``__startswith`` would give it away a character at a time)."""
        parts = lookup.split(LOOKUP_SEP)
        if refused_lookup(self.model, parts, value):
            return False
        if parts[0] in ("id", "pk") and parts[1:] not in ([], ["exact"], ["in"]):
            return False
        return super().lookup_allowed(lookup, value, request)

    def get_object(self, request: HttpRequest, object_id: str, from_field: str | None = None) -> McpSession | None:
        """The session a handle names (the pages' links), or a whole id (pasted by staff who hold it)."""
        if "\x00" in object_id:  # no id holds it, and PostgreSQL refuses it in a query (a 500)
            return None
        found = queries.session_by_handle(object_id)
        return super().get_object(request, found if found is not None else object_id, from_field)

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return SessionChangeList

    def to_field_allowed(self, request: HttpRequest, to_field: str) -> bool:
        """No field, not even the id Django always allows: whatever refers to a session by a field is
        answered with that field's value, the whole id. So Django's autocomplete of a foreign key to
        sessions (a subscription's, a site's own ``autocomplete_fields``) answers 403 instead of
        listing every session's id, and ``?_to_field=`` on the sessions' pages answers 400."""
        return False

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        # The related-object popup (``?_popup=1``, a raw_id_fields lookup) hands each row's id to the
        # page that opened it: a ``data-popup-opener`` attribute on every row would hold a whole id.
        if IS_POPUP_VAR in request.GET or IS_POPUP_VAR in request.POST:
            return HttpResponseBadRequest("Sessions cannot be chosen from a popup: the choice would be a whole session id.")
        return super().changelist_view(request, extra_context)

    def get_search_results(self, request: HttpRequest, queryset: QuerySet[McpSession], search_term: str) -> tuple[QuerySet[McpSession], bool]:
        found, may_have_duplicates = super().get_search_results(request, queryset, search_term)
        return with_fitted_principal(found, queryset, search_term), may_have_duplicates

    @admin.display(description=_("session"), ordering="id")
    def session(self, obj: McpSession) -> str:
        return queries.session_label(obj.id)

    @admin.display(description=_("principal"), ordering="principal")
    def shown_principal(self, obj: McpSession) -> str:
        return queries.principal_shown(obj.principal)

    # -- a read-only report: nothing here adds, changes or deletes a session -------------------
    # (So its changelist offers no action; a site's subclass that adds one still has a malformed
    # selection refused, by RefusesUnstorableSelections, not a 500.)
    # (Django's delete confirmation and its messages, and the LogEntry a change or deletion
    # leaves, print the session's str(): its whole id. Sessions end when their client deletes
    # them, or idle, by SESSION_IDLE_SECONDS and mcp_cleanup.)

    def has_add_permission(self, request: Any) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def change_view(self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: Any = None) -> HttpResponse:
        """The read-only report of one session (Django's form would print the id in its title and fields)."""
        if not self.has_view_permission(request):
            raise PermissionDenied  # before the lookup: no answer may tell which sessions exist
        session = self.get_object(request, unquote(object_id))
        if session is None:
            return self._get_obj_does_not_exist_redirect(request, self.opts, object_id)  # type: ignore[attr-defined]
        if not self.has_view_permission(request, session):
            raise PermissionDenied  # the object's own permission, as Django's change view and a call's page ask it
        label = queries.session_label(session.id)
        # Its calls only for staff who may view calls: their own pages refuse the others.
        calls_admin = self.admin_site._registry.get(ToolCall)
        calls = queries.session_calls(session.id) if calls_admin is not None and calls_admin.has_view_permission(request) else None
        if calls is not None:
            decorate(calls, self.admin_site.name)
        return TemplateResponse(request, "admin/mcp_tools/mcpsession/detail.html", {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "app_label": self.opts.app_label,
            "title": f"{self.opts.verbose_name} {label}",
            "session": session,
            "label": label,
            "principal": queries.principal_shown(session.principal),
            "client_info": queries.pretty_json(session.client_info),
            "capabilities": queries.pretty_json(session.client_capabilities),
            "calls": calls,
            "media": self.media,
        })

    def history_view(self, request: HttpRequest, object_id: str, extra_context: Any = None) -> HttpResponse:
        # Django's History page is titled and linked by the session's str(), its whole id; nothing
        # in the admin changes a session, so there is no history to show: its report instead.
        if not self.has_view_permission(request):
            raise PermissionDenied
        return redirect(reverse(session_page(self.opts), args=(object_id,), current_app=self.admin_site.name))
