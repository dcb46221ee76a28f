"""``python manage.py mcp_cleanup``: expire abandoned calls and delete old rows (run it from cron)."""

from __future__ import annotations

import math
from typing import Any

from django.core.management.base import BaseCommand, CommandError

#: Units a span is reported in, largest first.
_UNITS = (("day", 86400.0), ("hour", 3600.0), ("minute", 60.0), ("second", 1.0))


def readable_duration(seconds: float) -> str:
    """``seconds`` in the largest unit it makes at least one of, for people: ``2592000`` is ``"30 days"``.

    (``:g`` printed the default retention as ``2.592e+06 second(s)``.) Up to two decimals, so
    ``--days 1.5`` reads ``1.5 days``.
    """
    name, size = next(((name, size) for name, size in _UNITS if seconds >= size), _UNITS[-1])
    amount = f"{seconds / size:.2f}".rstrip("0").rstrip(".")
    return f"{amount} {name}" + ("" if amount == "1" else "s")


class Command(BaseCommand):
    help = (
        "Mark calls older than MCP_TOOLS['CALL_TTL'] (tasks: past their ttl) as expired, but for background calls "
        "a worker still holds (their tokens are then refused); mark working calls whose server stopped under them, "
        "that no client can resume, as cancelled; "
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
            self.stdout.write(f"Dry run: would expire {report.expired_calls} call(s), cancel {report.cancelled_calls} abandoned "
                              f"call(s) and delete {report.events} old stream event(s).")
        else:
            self.stdout.write(f"Expired {report.expired_calls} call(s); cancelled {report.cancelled_calls} abandoned call(s); "
                              f"deleted {report.events} old stream event(s).")
        verb = "Dry run: would delete" if dry_run else "Deleted"
        if report.sessions is not None and report.idle_seconds is not None:  # both None when sessions are kept
            self.stdout.write(f"{verb} {report.sessions} session(s) unused for {readable_duration(report.idle_seconds)}.")
        if report.keep_seconds is None:
            self.stdout.write("Finished calls are kept (RETAIN_FINISHED_SECONDS is None).")
            return
        self.stdout.write(f"{verb} {report.finished_calls} finished call(s) and {report.steps} step(s) "
                          f"older than {readable_duration(report.keep_seconds)}.")
        if report.kept_calls and report.call_ttl is not None:
            # Older than that too, but left: their client may still resume the stream for the answer.
            kept = "Dry run: would keep" if dry_run else "Kept"
            self.stdout.write(f"{kept} {report.kept_calls} finished call(s) a 2025-11-25 stream carried, until their stream "
                              f"can no longer be resumed (CALL_TTL, {readable_duration(report.call_ttl)} after they ended).")
