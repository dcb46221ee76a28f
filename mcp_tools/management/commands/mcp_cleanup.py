"""``python manage.py mcp_cleanup``: expire abandoned calls and trim old rows (run it from cron)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand
from django.utils import timezone


class Command(BaseCommand):
    help = (
        "Mark calls that waited longer than MCP_TOOLS['CALL_TTL'] as expired (their tokens are then refused), "
        "delete SSE replay events older than CALL_TTL, and optionally delete finished calls older than --days."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--days", type=int, default=None, help="Also delete finished calls (and their steps) older than this many days.")

    def handle(self, *args: Any, **options: Any) -> None:
        from mcp_tools.conf import mcp_settings
        from mcp_tools.models import TERMINAL_STATUSES, StreamEvent, ToolCall

        expired = ToolCall.objects.expire_overdue()
        events = StreamEvent.objects.purge_older_than(int(mcp_settings.CALL_TTL))
        self.stdout.write(f"Expired {expired} call(s); deleted {events} old stream event(s).")
        if options["days"] is not None:
            cutoff = timezone.now() - timedelta(days=options["days"])
            deleted, _ = ToolCall.objects.filter(status__in=list(TERMINAL_STATUSES), updated_at__lt=cutoff).delete()
            self.stdout.write(f"Deleted {deleted} row(s) of finished calls older than {options['days']} day(s).")
