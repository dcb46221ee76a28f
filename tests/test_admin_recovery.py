"""A background call's recovery state on its admin page: why a call is stuck, was retried or taken over.

The row counts its ``retry_on`` retries, its lost workers and the sweep's re-queues, and keeps the
deadline of its wait in the queue (migration 0008); staff reading the call's page see them.
"""

from __future__ import annotations

from datetime import timedelta
from html import unescape
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from mcp_tools.models import ToolCall
from mcp_tools.registry import make_tool, registry

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff() -> Client:
    client = Client()
    client.force_login(get_user_model().objects.create_superuser("boss", "boss@example.com", "pw"))
    return client


def _call(**fields: Any) -> ToolCall:
    return ToolCall.objects.create(tool_name=fields.pop("tool_name", "crunch_recovery"), principal="user:1", flavor="tasks",
                                   params_digest="0" * 64, arguments={"rows": 3}, **fields)


def _facts(client: Client, call: ToolCall) -> str:
    """The call page's summary (its facts list), unescaped."""
    response = client.get(reverse("admin:mcp_tools_toolcall_change", args=[call.pk]))
    assert response.status_code == 200
    html = unescape(response.content.decode())
    return html.split('<dl class="mcp-facts">')[1].split("</dl>")[0]


def _fact(facts: str, label: str) -> str:
    """The text of one fact (its ``<dd>``), by its label."""
    assert f"<dt>{label}</dt>" in facts, facts
    return facts.split(f"<dt>{label}</dt>")[1].split("</dd>")[0].removeprefix("<dd>")


async def _crunch(rows: int) -> int:
    return rows


def test_a_background_calls_page_shows_its_retries_lost_workers_requeues_and_queue_deadline(staff: Client) -> None:
    """A stuck call, queued again after losing a worker and retried: each count is on its page, the retries
    and lost workers beside the bound the tool sets (max_retries; past max_retries + 1 lost workers it fails)."""
    deadline = timezone.now() + timedelta(minutes=2)
    call = _call(status="working", background=True, celery_task_id="task-r", retries=2, lost_workers=1, requeues=3,
                 queued_until=deadline)
    tool = make_tool(_crunch, name="crunch_recovery", background=True, retry_on=(ConnectionError,), max_retries=4)
    with registry.registered_temporarily(tool):
        facts = _facts(staff, call)
    assert "2 of 4" in _fact(facts, "Retries")
    assert "1 of 5" in _fact(facts, "Lost workers")
    assert "3" in _fact(facts, "Queued again")
    queued = _fact(facts, "Queued until")
    assert timezone.localtime(deadline).strftime("%H:%M:%S") in queued and "in " in queued


def test_a_queue_deadline_that_passed_says_the_sweep_queues_it_again(staff: Client) -> None:
    """The tool is no longer registered: the counts alone. A deadline in the past is what the sweep acts on."""
    call = _call(tool_name="gone_tool", status="working", background=True, celery_task_id="task-p", retries=1,
                 queued_until=timezone.now() - timedelta(minutes=1))
    facts = _facts(staff, call)
    assert _fact(facts, "Retries").strip() == "1"
    assert _fact(facts, "Lost workers").strip() == "0"
    assert "passed" in _fact(facts, "Queued until")


def test_a_call_that_is_not_background_shows_no_recovery_state(staff: Client) -> None:
    facts = _facts(staff, _call(status="completed", finished_at=timezone.now()))
    for label in ("Retries", "Lost workers", "Queued again", "Queued until"):
        assert f"<dt>{label}</dt>" not in facts


def test_a_finished_background_call_keeps_its_counts_and_shows_no_queue_deadline(staff: Client) -> None:
    """Once the call ended, its counts say how it got there; a queue deadline means nothing any more."""
    call = _call(status="failed", background=True, retries=3, lost_workers=2, requeues=2, finished_at=timezone.now(),
                 queued_until=timezone.now() + timedelta(minutes=1))
    facts = _facts(staff, call)
    assert (_fact(facts, "Retries").strip(), _fact(facts, "Lost workers").strip(), _fact(facts, "Queued again").strip()) == ("3", "2", "2")
    assert "<dt>Queued until</dt>" not in facts


def test_a_cancelled_background_calls_page_shows_no_lease_a_running_ones_does(staff: Client) -> None:
    """A cancel keeps the worker and lease its run last held on the row: the page said "lease until"
    for a call that had ended, where a completed one says nothing of a lease."""
    lease = timezone.now() + timedelta(minutes=3)
    running = _call(status="working", background=True, celery_task_id="task-l", worker="host:1", lease_expires_at=lease)
    cancelled = _call(status="cancelled", background=True, celery_task_id="task-c", worker="host:1", lease_expires_at=lease,
                      finished_at=timezone.now())
    assert "lease until" in _fact(_facts(staff, running), "Worker")
    worker = _fact(_facts(staff, cancelled), "Worker")
    assert "done" in worker and "lease until" not in worker, worker
