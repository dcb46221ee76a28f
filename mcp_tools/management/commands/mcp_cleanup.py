"""``python manage.py mcp_cleanup``: expire abandoned calls and delete old rows (run it from cron)."""

from __future__ import annotations

import math
from typing import Any

from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = (
        "Mark calls older than MCP_TOOLS['CALL_TTL'] (tasks: past their ttl) as expired, but for background calls "
        "a worker still holds (their tokens are then refused); "
        "delete SSE replay events older than CALL_TTL, 2025-11-25 sessions unused for MCP_TOOLS['SESSION_IDLE_SECONDS'], "
        "and finished calls (with their steps) older than MCP_TOOLS['RETAIN_FINISHED_SECONDS'] (or --days)."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--days", type=float, default=None,
            help="Delete finished calls older than this many days (default: RETAIN_FINISHED_SECONDS).",
        )
        parser.add_argument("--dry-run", action="store_true", help="Report what would be expired and deleted; change nothing.")

    def handle(self, *args: Any, **options: Any) -> None:
        from datetime import timedelta

        from django.utils import timezone

        from mcp_tools.conf import mcp_settings
        from mcp_tools.console.retention import purge_finished_calls, retention_seconds
        from mcp_tools.models import StreamEvent, ToolCall
        from mcp_tools.server.sessions import purge_idle

        dry_run = bool(options["dry_run"])
        # Checked before anything is changed: nan or inf would fail halfway through.
        if options["days"] is not None and not math.isfinite(options["days"]):
            raise CommandError("--days must be a finite number")
        if options["days"] is not None and options["days"] < 0:
            raise CommandError("--days must not be negative")
        keep = options["days"] * 86400 if options["days"] is not None else retention_seconds()
        if dry_run:
            expired = ToolCall.objects.overdue().count()
            events = StreamEvent.objects.filter(
                created_at__lt=timezone.now() - timedelta(seconds=int(mcp_settings.CALL_TTL))
            ).count()
            self.stdout.write(f"Dry run: would expire {expired} call(s) and delete {events} old stream event(s).")
        else:
            expired = ToolCall.objects.expire_overdue()
            events = StreamEvent.objects.purge_older_than(int(mcp_settings.CALL_TTL))
            self.stdout.write(f"Expired {expired} call(s); deleted {events} old stream event(s).")
        idle = mcp_settings.SESSION_IDLE_SECONDS
        if idle is not None:
            sessions = purge_idle(float(idle), dry_run=dry_run)
            verb = "Dry run: would delete" if dry_run else "Deleted"
            self.stdout.write(f"{verb} {sessions} session(s) unused for {float(idle):g} second(s).")
        if keep is None:
            self.stdout.write("Finished calls are kept (RETAIN_FINISHED_SECONDS is None).")
            return
        purged = purge_finished_calls(keep, dry_run=dry_run)
        verb = "Dry run: would delete" if dry_run else "Deleted"
        self.stdout.write(f"{verb} {purged.calls} finished call(s) and {purged.steps} step(s) older than {keep:g} second(s).")
