"""Admin pages of the console: the call report, the dashboard and its polling endpoint, the action buttons.

Each view takes the ``ToolCallAdmin`` first; ``ToolCallAdmin.get_urls`` mounts
them behind ``admin_site.admin_view`` (active staff, logged in), and each checks
the model permission it needs: ``view`` to look, ``change`` to act.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, JsonResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import get_script_prefix, reverse
from django.utils import timezone
from django.utils.http import urlencode

from ..models import TERMINAL_STATUSES, ToolCall
from . import queries
from .display import decorate, progress_bar, recovery_facts, render_panel, status_badge, worker_state
from .retry import is_retryable, retry_api
from .consumers import SITE_PARAM, websocket_path

if TYPE_CHECKING:
    from ..admin import ToolCallAdmin

#: How often the page polls when the WebSocket is not available (milliseconds).
POLL_MS = 5000


def _context(model_admin: ToolCallAdmin, request: HttpRequest, title: str, **extra: Any) -> dict[str, Any]:
    return {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.opts,
        "app_label": model_admin.opts.app_label,
        "title": title,
        "has_change_permission": model_admin.has_change_permission(request),
        "media": model_admin.media,
        **extra,
    }


def dashboard(model_admin: ToolCallAdmin, request: HttpRequest) -> HttpResponse:
    if not model_admin.has_view_or_change_permission(request):
        raise PermissionDenied
    data = queries.dashboard()
    return TemplateResponse(request, "admin/mcp_tools/toolcall/dashboard.html", _context(
        model_admin, request, "Tool calls: dashboard",
        panel=render_panel(data, model_admin.admin_site.name),
        fingerprint=data.fingerprint,
        # The page's own prefix (FORCE_SCRIPT_NAME, SCRIPT_NAME or an ASGI root_path), as reverse() adds
        # to the poll's URL: the browser must open the socket inside the site, where the proxy routes it.
        websocket_path=get_script_prefix() + websocket_path() + _site_query(model_admin),
        data_url=reverse("admin:mcp_tools_toolcall_dashboard_data", current_app=model_admin.admin_site.name),
        poll_ms=POLL_MS,
    ))


def _site_query(model_admin: ToolCallAdmin) -> str:
    """``?site=<name>`` for a dashboard of another site than the default one: the socket's pushes link to it."""
    from django.contrib import admin

    site = model_admin.admin_site
    # ``admin.site`` is a lazy proxy of the default site: ``==`` compares what it wraps, ``is`` never holds.
    return "" if site == admin.site else "?" + urlencode({SITE_PARAM: site.name})


#: How long a polled panel may go without being rendered again (the socket's periodic push: 30 s).
REFRESH_MS = 30_000


def dashboard_data(model_admin: ToolCallAdmin, request: HttpRequest) -> JsonResponse:
    """The polling fallback: ``{"fingerprint", "html"}``, or ``{"fingerprint", "unchanged": true}`` (one query)."""
    if not model_admin.has_view_or_change_permission(request):
        raise PermissionDenied
    since = request.GET.get("since")
    # ``age``: how long ago (ms) the page last rendered the panel. Past REFRESH_MS it is rendered again
    # however quiet the calls are, as the socket pushes it: its ages, "last hour" counts and 24-hour
    # chart move with time (a quiet dashboard that polled kept them frozen for good).
    try:
        stale = float(request.GET.get("age", "0")) >= REFRESH_MS
    except ValueError:
        stale = True
    if since is not None and not stale and since == queries.fingerprint():
        return JsonResponse({"fingerprint": since, "unchanged": True})
    data = queries.dashboard()
    return JsonResponse({"fingerprint": data.fingerprint, "html": render_panel(data, model_admin.admin_site.name)})


def detail(model_admin: ToolCallAdmin, request: HttpRequest, call: ToolCall) -> HttpResponse:
    """The report of one call, laid out for reading."""
    linked = queries.linked_calls(call)
    for rows in (linked.followed_by, linked.came_from, linked.same_session):
        decorate(rows, model_admin.admin_site.name)
    can_act = model_admin.has_change_permission(request, call)
    live = call.status not in TERMINAL_STATUSES
    return TemplateResponse(request, "admin/mcp_tools/toolcall/detail.html", _context(
        model_admin, request, f"{call.tool_name} ({call.get_status_display()})",
        call=call,
        original=call,
        badge=status_badge(call.status, call.get_status_display()),
        bar=progress_bar(call.progress, call.progress_total),
        served=queries.served_label(call),
        who=queries.principal_label(call.user.get_username() if call.user else None, call.principal),
        principal=queries.principal_shown(call.principal),
        session=queries.session_label(call.session_id),
        worker=worker_state(call),
        # A call that ended keeps the lease its worker last held: it binds nothing now, so it is not shown.
        lease_until=call.lease_expires_at if live else None,
        recovery=recovery_facts(call, _max_retries(call.tool_name)),
        arguments=queries.pretty_json(queries.call_arguments(call)),
        result=queries.pretty_json(call.result),
        error=queries.pretty_json(call.error),
        steps=queries.timeline(call),
        actions=queries.operator_actions(call),
        linked=linked,
        can_cancel=can_act and live,
        can_retry=can_act and is_retryable(call) and retry_api() is not None,
        token_expired=bool(call.expires_at and call.expires_at < timezone.now()),
        now=timezone.now(),
    ))


def _max_retries(tool_name: str) -> int | None:
    """The ``max_retries`` of the tool a call ran, or None when no tool of that name is registered now."""
    from ..registry import registry

    tool = registry.get_tool(tool_name)
    return tool.max_retries if tool is not None else None


ACTIONS = {"cancel": "cancel_calls", "expire": "expire_calls", "retry": "retry_calls"}


def act(model_admin: ToolCallAdmin, request: HttpRequest, object_id: str, action: str) -> HttpResponse:
    """A detail page button: runs the same admin action on this one call, then shows the call again."""
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    name = ACTIONS.get(action)
    available = model_admin.get_actions(request)  # filtered by the user's permissions
    action_entry = available.get(name) if name is not None else None
    if action_entry is None:
        raise PermissionDenied  # before the lookup: no answer may tell which call ids exist
    call = model_admin.get_object(request, unquote(object_id))
    if call is None:  # purged by retention, or a forged id: say so, as Django's own pages do
        return model_admin._get_obj_does_not_exist_redirect(request, model_admin.opts, object_id)  # type: ignore[attr-defined]
    if not model_admin.has_change_permission(request, call):
        # The object's own permission, as the report page asks it before it shows the button
        # (get_actions asked the model's only): a site with per-object permissions refuses here too.
        raise PermissionDenied
    func = action_entry[0]
    func(model_admin, request, ToolCall.objects.filter(pk=call.pk))
    return redirect(reverse("admin:mcp_tools_toolcall_change", args=[call.pk], current_app=model_admin.admin_site.name))
