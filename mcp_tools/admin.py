"""A read-only monitoring admin for calls in flight, with cancel and expire actions."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages

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

    def _end(self, request: Any, queryset: Any, status: str) -> None:
        """Cancel or expire the selected calls that are still live, and stop their handlers.

        Each change is a compare-and-set in the manager: a call that finished
        meanwhile keeps its outcome and is reported as already ended.
        """
        from .server.core import end_call_sync

        ended = 0
        for call in queryset.exclude(status__in=list(TERMINAL_STATUSES)).select_related(None).only("id", "tool_name"):
            if end_call_sync(str(call.pk), status, f"{status} by {request.user.get_username()}"):
                ended += 1
                self.log_change(request, call, f"Marked {status} from the admin.")
        skipped = queryset.count() - ended
        self.message_user(request, f"{ended} call(s) marked {status}.", messages.SUCCESS)
        if skipped:
            self.message_user(request, f"{skipped} selected call(s) had already ended and were left as they are.", messages.WARNING)

    @admin.action(description="Cancel selected calls", permissions=["change"])
    def cancel_calls(self, request: Any, queryset: Any) -> None:
        self._end(request, queryset, CallStatus.CANCELLED)

    @admin.action(description="Expire selected calls", permissions=["change"])
    def expire_calls(self, request: Any, queryset: Any) -> None:
        self._end(request, queryset, CallStatus.EXPIRED)


@admin.register(McpSession)
class McpSessionAdmin(admin.ModelAdmin):
    list_display = ("id", "protocol_version", "principal", "log_level", "created_at", "last_seen_at")
    search_fields = ("=id", "principal")
    readonly_fields = [f.name for f in McpSession._meta.fields]

    def has_add_permission(self, request: Any) -> bool:
        return False
