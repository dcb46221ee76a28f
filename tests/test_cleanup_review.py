"""Review of ``mcp_cleanup`` and retention. Each test asserts the correct behaviour and fails on the current code."""
from __future__ import annotations

import asyncio
import io
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from mcp_tools.models import McpSession, ResourceSubscription, ToolCall
from mcp_tools.server import sessions
from tests.asgi_client import HANDSHAKE, post_headers
from tests.test_http_spec_edges import Stream, _in_memory_layer, open_session  # noqa: F401

DAY = 24 * 3600


# -- 1. a running background call is expired by the cleanup once CALL_TTL has passed since creation -----------


@pytest.mark.django_db
def test_cleanup_does_not_expire_a_background_call_a_worker_is_running() -> None:
    """docs/settings.md: CALL_TTL is "Seconds a call may wait for input before it expires"; the command's help:
    "Mark calls that waited longer than CALL_TTL as expired". A (non-task) background call that a live worker
    holds (lease renewed a moment ago) is not waiting for anything: it must not be ended under its worker."""
    now = timezone.now()
    call = ToolCall.objects.create(
        tool_name="nightly_export", principal="user:1", flavor="session", params_digest="0" * 64,
        status="working", background=True, worker="host:123", lease_expires_at=now + timedelta(seconds=30),
        expires_at=now - timedelta(minutes=5),  # created 24 h 5 min ago, with the default CALL_TTL
    )
    # What still expires: a task past its ttl (the client's limit on the whole task), and a call past
    # CALL_TTL whose worker is gone (its lease ran out).
    common = {"tool_name": "nightly_export", "principal": "user:1", "params_digest": "0" * 64, "status": "working",
              "background": True, "expires_at": now - timedelta(minutes=5)}
    task = ToolCall.objects.create(flavor="task", worker="host:1", lease_expires_at=now + timedelta(seconds=30), **common)
    lost = ToolCall.objects.create(flavor="session", worker="host:2", lease_expires_at=now - timedelta(seconds=1), **common)
    out = io.StringIO()
    call_command("mcp_cleanup", "--dry-run", stdout=out)
    assert "would expire 2 call(s)" in out.getvalue(), out.getvalue()
    call_command("mcp_cleanup", stdout=io.StringIO())
    call.refresh_from_db()
    assert call.status == "working", f"an in-flight call held by a live worker was ended: {call.status}"
    assert [ToolCall.objects.get(id=row.id).status for row in (task, lost)] == ["expired", "expired"]


@pytest.mark.django_db
def test_a_call_waiting_for_its_retry_past_call_ttl_is_still_run_by_a_worker() -> None:
    """A retry_on retry holds a lease with no worker (background.py); past CALL_TTL since the call started, the
    worker that gets the retry must still claim it, as the cleanup leaves it alone (it waits for nothing)."""
    from mcp_tools.store import sync_calls

    now = timezone.now()
    call = ToolCall.objects.create(
        tool_name="nightly_export", principal="user:1", flavor="session", params_digest="0" * 64, status="working",
        background=True, worker="", lease_expires_at=now + timedelta(seconds=30), expires_at=now - timedelta(minutes=5),
    )
    assert sync_calls.claim_for_worker(call.id, "host:9", 30.0)
    call.refresh_from_db()
    assert (call.status, call.worker) == ("working", "host:9")


# -- 2. --days values that are not a usable number crash with a traceback ---------------------------------




# -- 3. idle-session cleanup leaves an open listening stream subscribed to nothing ------------------------------




# -- 4. idle-session cleanup leaves the session's waiting calls live (DELETE ends them) --------------------------


