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
