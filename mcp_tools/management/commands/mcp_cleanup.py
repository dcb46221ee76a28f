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
        from mcp_tools.console.retention import FROM_SETTINGS, cleanup

        dry_run = bool(options["dry_run"])
        # Checked before anything is changed: nan or inf would fail halfway through.
        if options["days"] is not None and not math.isfinite(options["days"]):
            raise CommandError("--days must be a finite number")
        if options["days"] is not None and options["days"] < 0:
            raise CommandError("--days must not be negative")
        report = cleanup(keep_seconds=options["days"] * 86400 if options["days"] is not None else FROM_SETTINGS, dry_run=dry_run)
        if dry_run:
            self.stdout.write(f"Dry run: would expire {report.expired_calls} call(s) and delete {report.events} old stream event(s).")
        else:
            self.stdout.write(f"Expired {report.expired_calls} call(s); deleted {report.events} old stream event(s).")
        verb = "Dry run: would delete" if dry_run else "Deleted"
        if report.sessions is not None:
            self.stdout.write(f"{verb} {report.sessions} session(s) unused for {report.idle_seconds:g} second(s).")
        if report.keep_seconds is None:
            self.stdout.write("Finished calls are kept (RETAIN_FINISHED_SECONDS is None).")
            return
        self.stdout.write(f"{verb} {report.finished_calls} finished call(s) and {report.steps} step(s) "
                          f"older than {report.keep_seconds:g} second(s).")
