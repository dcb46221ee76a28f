"""``manage.py mcp_cleanup`` expires abandoned calls, whose tokens are then refused."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from mcp_tools.models import CallStatus, StreamEvent, ToolCall


def make_call(status: str, expires_in: timedelta) -> ToolCall:
    return ToolCall.objects.create(
        tool_name="deploy", principal="anonymous", flavor="mrtr", params_digest="0" * 64,
        status=status, expires_at=timezone.now() + expires_in,
    )


@pytest.mark.django_db
def test_cleanup_expires_overdue_waiting_calls_only() -> None:
    overdue = make_call(CallStatus.INPUT_REQUIRED, timedelta(seconds=-1))
    waiting = make_call(CallStatus.INPUT_REQUIRED, timedelta(hours=1))
    finished = make_call(CallStatus.COMPLETED, timedelta(seconds=-1))
    out = StringIO()
    call_command("mcp_cleanup", stdout=out)
    assert "Expired 1 call(s)" in out.getvalue()
    statuses = dict(ToolCall.objects.values_list("id", "status"))
    assert statuses == {overdue.id: "expired", waiting.id: "input_required", finished.id: "completed"}


@pytest.mark.django_db
def test_cleanup_deletes_old_finished_calls_and_events_when_asked() -> None:
    old = make_call(CallStatus.COMPLETED, timedelta(seconds=-1))
    ToolCall.objects.filter(id=old.id).update(updated_at=timezone.now() - timedelta(days=10))
    recent = make_call(CallStatus.COMPLETED, timedelta(hours=1))
    event = StreamEvent.objects.create(session_id="s", stream_id="x", payload="{}")
    StreamEvent.objects.filter(id=event.id).update(created_at=timezone.now() - timedelta(days=30))
    call_command("mcp_cleanup", "--days", "7", stdout=StringIO())
    assert list(ToolCall.objects.values_list("id", flat=True)) == [recent.id]
    assert not StreamEvent.objects.exists()


# -- retention: RETAIN_FINISHED_SECONDS ---------------------------------------------------------


def _aged(status: str, days: float, steps: int = 2) -> ToolCall:
    from mcp_tools.models import CallStep

    call = make_call(status, timedelta(hours=1))
    for seq in range(steps):
        CallStep.objects.create(call=call, seq=seq, kind="once", key=f"k{seq}", digest="0" * 64, status="done")
    ToolCall.objects.filter(id=call.id).update(updated_at=timezone.now() - timedelta(days=days))
    return call


@pytest.mark.django_db
def test_finished_calls_past_retention_are_deleted_with_their_steps(settings) -> None:  # type: ignore[no-untyped-def]
    from mcp_tools.models import CallStep

    settings.MCP_TOOLS = {**settings.MCP_TOOLS, "RETAIN_FINISHED_SECONDS": 3 * 86400}
    old_done = _aged(CallStatus.COMPLETED, 5)
    old_failed = _aged(CallStatus.FAILED, 5)
    old_but_live = _aged(CallStatus.INPUT_REQUIRED, 5)  # a live call is never deleted, however old
    recent = _aged(CallStatus.CANCELLED, 1)
    out = StringIO()
    call_command("mcp_cleanup", stdout=out)
    assert "Deleted 2 finished call(s) and 4 step(s)" in out.getvalue()
    assert set(ToolCall.objects.values_list("id", flat=True)) == {old_but_live.id, recent.id}
    assert not CallStep.objects.filter(call_id__in=[old_done.id, old_failed.id]).exists()


@pytest.mark.django_db
def test_dry_run_reports_and_changes_nothing(settings) -> None:  # type: ignore[no-untyped-def]
    settings.MCP_TOOLS = {**settings.MCP_TOOLS, "RETAIN_FINISHED_SECONDS": 86400}
    _aged(CallStatus.COMPLETED, 5, steps=3)
    overdue = make_call(CallStatus.INPUT_REQUIRED, timedelta(seconds=-1))
    before = list(ToolCall.objects.order_by("id").values_list("id", "status"))
    out = StringIO()
    call_command("mcp_cleanup", "--dry-run", stdout=out)
    assert "would expire 1 call(s)" in out.getvalue()
    assert "would delete 1 finished call(s) and 3 step(s) older than 1 day." in out.getvalue()
    assert list(ToolCall.objects.order_by("id").values_list("id", "status")) == before
    assert ToolCall.objects.get(id=overdue.id).status == "input_required"


@pytest.mark.django_db
@pytest.mark.parametrize(("retain", "days", "said"), [
    (2592000, None, "older than 30 days."),  # the default, once printed as 2.592e+06 second(s)
    (5400, None, "older than 1.5 hours."),
    (45, None, "older than 45 seconds."),
    (None, "1.5", "older than 1.5 days."),
])
def test_the_report_says_spans_in_readable_units(settings, retain: int | None, days: str | None, said: str) -> None:  # type: ignore[no-untyped-def]
    settings.MCP_TOOLS = {**settings.MCP_TOOLS, "RETAIN_FINISHED_SECONDS": retain or 60, "SESSION_IDLE_SECONDS": 86400}
    out = StringIO()
    call_command("mcp_cleanup", "--dry-run", *(["--days", days] if days else []), stdout=out)
    assert said in out.getvalue()
    assert "session(s) unused for 1 day." in out.getvalue()
    assert "e+" not in out.getvalue()


@pytest.mark.django_db
def test_retention_none_keeps_finished_calls(settings) -> None:  # type: ignore[no-untyped-def]
    settings.MCP_TOOLS = {**settings.MCP_TOOLS, "RETAIN_FINISHED_SECONDS": None}
    kept = _aged(CallStatus.COMPLETED, 400)
    out = StringIO()
    call_command("mcp_cleanup", stdout=out)
    assert "kept" in out.getvalue()
    assert ToolCall.objects.filter(id=kept.id).exists()


@pytest.mark.django_db
def test_purging_a_backlog_works_in_batches() -> None:
    from mcp_tools.console.retention import purge_finished_calls

    for _ in range(7):
        _aged(CallStatus.COMPLETED, 10, steps=1)
    purged = purge_finished_calls(86400, batch=3)
    assert (purged.calls, purged.steps) == (7, 7)
    assert not ToolCall.objects.exists()


@pytest.mark.django_db
def test_negative_days_are_refused() -> None:
    from django.core.management.base import CommandError

    with pytest.raises(CommandError):
        call_command("mcp_cleanup", "--days", "-1", stdout=StringIO())


@pytest.mark.django_db
def test_the_periodic_cleanup_task_deletes_what_mcp_cleanup_does() -> None:
    """The demo's beat schedule had only ``mcp_tools.sweep``, described as doing "retention", and the
    settings docs spoke of a "periodic cleanup task" that did not exist: a site set up like the demo
    kept every finished call, idle session (with its subscriptions) and SSE event for good."""
    from django.conf import settings

    from mcp_tools.models import McpSession, ResourceSubscription
    from mcp_tools.tasks import cleanup

    long_ago = timezone.now() - timedelta(days=400)
    old = make_call(CallStatus.COMPLETED, timedelta(seconds=-1))
    ToolCall.objects.filter(id=old.id).update(updated_at=long_ago, created_at=long_ago)
    overdue = make_call(CallStatus.INPUT_REQUIRED, timedelta(seconds=-1))
    waiting = make_call(CallStatus.INPUT_REQUIRED, timedelta(hours=1))
    session = McpSession.objects.create(id="idle-session", protocol_version="2025-11-25", client_info={},
                                        client_capabilities={}, principal="anonymous")
    McpSession.objects.filter(id=session.id).update(last_seen_at=long_ago)
    ResourceSubscription.objects.create(session_id=session.id, uri="test://watched")
    live = McpSession.objects.create(id="live-session", protocol_version="2025-11-25", client_info={},
                                     client_capabilities={}, principal="anonymous")
    event = StreamEvent.objects.create(session_id=session.id, stream_id="s", payload="{}")
    StreamEvent.objects.filter(id=event.id).update(created_at=long_ago)

    report = cleanup.apply().get()  # as a worker runs it

    assert report["expired_calls"] == 1 and report["finished_calls"] == 1 and report["events"] == 1, report
    assert report["sessions"] == 1, report
    assert not ToolCall.objects.filter(id=old.id).exists()
    assert dict(ToolCall.objects.values_list("id", "status")) == {overdue.id: "expired", waiting.id: "input_required"}
    assert not McpSession.objects.filter(id=session.id).exists()
    assert McpSession.objects.filter(id=live.id).exists()
    assert not ResourceSubscription.objects.filter(session_id=session.id).exists()
    assert not StreamEvent.objects.filter(id=event.id).exists()
    # The demo schedules it.
    assert any(entry["task"] == "mcp_tools.cleanup" for entry in settings.CELERY_BEAT_SCHEDULE.values())


@pytest.mark.django_db
@pytest.mark.parametrize("retain", [-3600, 0, "30d"])
def test_a_retention_that_is_no_positive_number_deletes_nothing(settings, retain: object) -> None:  # type: ignore[no-untyped-def]
    """A negative RETAIN_FINISHED_SECONDS deleted calls that had just finished (a task client then found
    no result), and "30d" was a ValueError: such a value is refused (mcp_tools.E005) before anything changes."""
    from django.core.exceptions import ImproperlyConfigured

    just_finished = make_call(CallStatus.COMPLETED, timedelta(hours=1))
    settings.MCP_TOOLS = {**settings.MCP_TOOLS, "RETAIN_FINISHED_SECONDS": retain}
    with pytest.raises(ImproperlyConfigured, match="RETAIN_FINISHED_SECONDS"):
        call_command("mcp_cleanup", stdout=StringIO())
    assert list(ToolCall.objects.values_list("id", flat=True)) == [just_finished.id]


@pytest.mark.django_db
@pytest.mark.parametrize("entry", ["mcp_cleanup", "celery task"])
@pytest.mark.parametrize("setting, value", [("SESSION_IDLE_SECONDS", 0), ("CALL_TTL", 0), ("RETAIN_FINISHED_SECONDS", -1),
                                            # What finding abandoned calls reads (it was read after the rest had run).
                                            ("CANCEL_POLL_SECONDS", -1), ("TOKEN_TTL", 0)])
def test_a_bad_setting_stops_the_cleanup_before_it_changes_anything(settings, entry: str, setting: str, value: object) -> None:  # type: ignore[no-untyped-def]
    """SESSION_IDLE_SECONDS was read after overdue calls were expired and old events deleted, so with
    0 (mcp_tools.E005) the command and the beat task (which runs no checks) changed rows, then raised.
    docs/settings.md: mcp_cleanup stops before it changes anything."""
    from django.core.exceptions import ImproperlyConfigured

    from mcp_tools.models import McpSession
    from mcp_tools.tasks import cleanup as cleanup_task

    overdue = make_call(CallStatus.INPUT_REQUIRED, timedelta(seconds=-1))
    event = StreamEvent.objects.create(session_id="s", stream_id="x", payload="{}")
    StreamEvent.objects.filter(id=event.id).update(created_at=timezone.now() - timedelta(days=30))
    session = McpSession.objects.create(id="idle-session", protocol_version="2025-11-25", principal="anonymous")
    McpSession.objects.filter(id=session.id).update(last_seen_at=timezone.now() - timedelta(days=30))
    settings.MCP_TOOLS = {**settings.MCP_TOOLS, setting: value}
    with pytest.raises(ImproperlyConfigured, match=setting):
        if entry == "mcp_cleanup":
            call_command("mcp_cleanup", stdout=StringIO())  # call_command skips the system checks
        else:
            cleanup_task()
    assert ToolCall.objects.get(id=overdue.id).status == CallStatus.INPUT_REQUIRED
    assert StreamEvent.objects.filter(id=event.id).exists()
    assert McpSession.objects.filter(id=session.id).exists()


@pytest.mark.django_db
def test_a_finished_call_a_stream_carries_is_kept_while_its_stream_can_be_resumed(settings) -> None:  # type: ignore[no-untyped-def]
    """Left alone by earlier sessions: with RETAIN_FINISHED_SECONDS under CALL_TTL, the row of a call a
    2025-11-25 stream carried was deleted while the stream's events (kept CALL_TTL) still let its client
    resume it, and a detached handler's answer lives only in the row (docs/durable-calls.md): the client
    that resumed got no answer. Such a row is kept until its stream's events are gone."""
    settings.MCP_TOOLS = {**settings.MCP_TOOLS, "RETAIN_FINISHED_SECONDS": 3600, "CALL_TTL": 86400}
    carried = _aged(CallStatus.COMPLETED, 2 / 24)
    ToolCall.objects.filter(id=carried.id).update(stream_id="stream-1")
    plain = _aged(CallStatus.COMPLETED, 2 / 24)
    stale = _aged(CallStatus.COMPLETED, 2)
    ToolCall.objects.filter(id=stale.id).update(stream_id="stream-2")
    call_command("mcp_cleanup", stdout=StringIO())
    assert set(ToolCall.objects.values_list("id", flat=True)) == {carried.id}  # not plain, nor stale


@pytest.mark.django_db
@pytest.mark.parametrize("dry_run", [False, True], ids=["run", "dry-run"])
def test_the_report_says_which_finished_calls_it_kept_for_their_stream(settings, dry_run: bool) -> None:  # type: ignore[no-untyped-def]
    """``mcp_cleanup --days 0`` said "Deleted 1 finished call(s) ... older than 0 seconds" and nothing
    else, while it kept the finished call a 2025-11-25 stream carried (until CALL_TTL, test above): an
    operator read that every finished call was gone. The report now says what it kept, and why."""
    settings.MCP_TOOLS = {**settings.MCP_TOOLS, "CALL_TTL": 86400}
    carried = _aged(CallStatus.COMPLETED, 1 / 24)
    ToolCall.objects.filter(id=carried.id).update(stream_id="stream-1")
    _aged(CallStatus.COMPLETED, 1 / 24)  # a call no stream carried: deleted
    out = StringIO()
    call_command("mcp_cleanup", "--days", "0", *(["--dry-run"] if dry_run else []), stdout=out)
    verb, kept = ("Dry run: would delete", "Dry run: would keep") if dry_run else ("Deleted", "Kept")
    lines = out.getvalue().splitlines()
    assert lines[-2:] == [
        f"{verb} 1 finished call(s) and 2 step(s) older than 0 seconds.",
        f"{kept} 1 finished call(s) a 2025-11-25 stream carried, until their stream can no longer be resumed "
        "(CALL_TTL, 1 day after they ended).",
    ], lines
    assert ToolCall.objects.filter(id=carried.id).exists()
