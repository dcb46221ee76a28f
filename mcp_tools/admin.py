"""A read-only monitoring admin for calls in flight, with cancel and expire actions."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.utils import timezone

from .models import TERMINAL_STATUSES, CallStatus, CallStep, McpSession, ToolCall


class CallStepInline(admin.TabularInline):
    model = CallStep
    extra = 0
    can_delete = False
    fields = ("seq", "kind", "key", "status", "request", "response", "error", "created_at", "answered_at")
    readonly_fields = fields
    ordering = ("seq",)

    def has_add_permission(self, request: Any, obj: Any = None) -> bool:
        return False


@admin.register(ToolCall)
class ToolCallAdmin(admin.ModelAdmin):
    list_display = ("tool_name", "status", "flavor", "principal", "round", "progress_display", "created_at", "updated_at")
    list_filter = ("status", "flavor", "method")
    search_fields = ("tool_name", "principal", "=id", "session_id")
    list_select_related = ("user",)
    date_hierarchy = "created_at"
    show_full_result_count = False  # COUNT(*) on a huge table is slow
    inlines = [CallStepInline]
    actions = ["cancel_calls", "expire_calls"]
    readonly_fields = [f.name for f in ToolCall._meta.fields]

    @admin.display(description="progress")
    def progress_display(self, obj: ToolCall) -> str:
        if obj.progress is None:
            return "—"
        return f"{obj.progress:g}/{obj.progress_total:g}" if obj.progress_total else f"{obj.progress:g}"

    def has_add_permission(self, request: Any) -> bool:
        return False

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def _finish(self, request: Any, queryset: Any, status: str) -> None:
        from .interprocess import wakeups
        from asgiref.sync import async_to_sync

        live = queryset.exclude(status__in=list(TERMINAL_STATUSES))
        ids = [str(pk) for pk in live.values_list("id", flat=True)]
        changed = live.update(status=status, finished_at=timezone.now(), updated_at=timezone.now())
        for call_id in ids:
            async_to_sync(wakeups.notify)(call_id)
        self.message_user(request, f"{changed} call(s) marked {status}.", messages.SUCCESS)

    @admin.action(description="Cancel selected calls", permissions=["change"])
    def cancel_calls(self, request: Any, queryset: Any) -> None:
        self._finish(request, queryset, CallStatus.CANCELLED)

    @admin.action(description="Expire selected calls", permissions=["change"])
    def expire_calls(self, request: Any, queryset: Any) -> None:
        self._finish(request, queryset, CallStatus.EXPIRED)


@admin.register(McpSession)
class McpSessionAdmin(admin.ModelAdmin):
    list_display = ("id", "protocol_version", "principal", "log_level", "created_at", "last_seen_at")
    search_fields = ("=id", "principal")
    readonly_fields = [f.name for f in McpSession._meta.fields]

    def has_add_permission(self, request: Any) -> bool:
        return False
