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
        celery_task_id="t-retry",
    )
    assert sync_calls.claim_for_worker(call.id, "host:9", 30.0, "t-retry")  # the retry: the same Celery task
    call.refresh_from_db()
    assert (call.status, call.worker) == ("working", "host:9")


# -- 2. --days values that are not a usable number crash with a traceback ---------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("days", ["nan", "inf"])
def test_days_that_are_not_a_finite_number_are_refused_before_anything_changes(days: str) -> None:
    """`--days nan` (ValueError from timedelta) and `--days inf` (OverflowError) escaped as raw exceptions,
    after the command had expired calls already. They are refused like `--days -1` (CommandError), first."""
    overdue = ToolCall.objects.create(
        tool_name="t", principal="user:1", flavor="session", params_digest="0" * 64, status="input_required",
        expires_at=timezone.now() - timedelta(minutes=5),
    )
    with pytest.raises(CommandError):
        call_command("mcp_cleanup", "--days", days, stdout=io.StringIO())
    overdue.refresh_from_db()
    assert overdue.status == "input_required"


@pytest.mark.django_db
def test_days_reaching_back_before_the_year_1_keep_every_finished_call() -> None:
    """`--days 1000000`: a cutoff before datetime.min (OverflowError) means that no call ended that long ago."""
    done = ToolCall.objects.create(tool_name="t", principal="user:1", flavor="session", params_digest="0" * 64, status="completed")
    ToolCall.objects.filter(id=done.id).update(updated_at=timezone.now() - timedelta(days=400))
    out = io.StringIO()
    call_command("mcp_cleanup", "--days", "1000000", stdout=out)
    assert ToolCall.objects.filter(id=done.id).exists()
    assert "Deleted 0 finished call(s)" in out.getvalue(), out.getvalue()


# -- 3. idle-session cleanup leaves an open listening stream subscribed to nothing ------------------------------


@pytest.mark.django_db(transaction=True)
async def test_cleanup_does_not_leave_an_open_stream_listening_to_a_deleted_session() -> None:
    """A client holding the session's GET stream open (listening for resource updates) sends no request for a
    day. mcp_cleanup deletes the session and its subscriptions, but the stream stays open with keep-alives: the
    client believes it is subscribed and silently hears nothing more. DELETE ends the session's streams
    (notifications.end_streams); the idle purge does not, and an open stream does not count as use either.
    Either keep a session with an open stream, or end its streams so the client reconnects, gets 404 and
    starts a new session."""
    session = await open_session()
    await sync_to_async(ResourceSubscription.objects.create)(session_id=session, uri="inventory://products/WID-001")
    stream = Stream("GET", post_headers(version=HANDSHAKE, session=session, extra={"accept": "text/event-stream"}))
    await asyncio.wait_for(stream.got.wait(), 5)
    assert any(m["type"] == "http.response.start" and m["status"] == 200 for m in stream.sent), stream.sent
    when = timezone.now() - timedelta(seconds=DAY + 60)
    await sync_to_async(McpSession.objects.filter(id=session).update)(last_seen_at=when)
    sessions.clear()
    await sync_to_async(call_command)("mcp_cleanup", stdout=io.StringIO())
    kept = await sync_to_async(McpSession.objects.filter(id=session).exists)()
    if not kept:
        try:
            await asyncio.wait_for(asyncio.shield(stream.task), 3)
        except asyncio.TimeoutError:
            pass
    stream.gone.set()
    ended = stream.task.done()
    await asyncio.wait_for(stream.task, 20)
    assert kept or ended, "the session and its subscriptions were deleted while its stream stayed open"


# -- 4. idle-session cleanup leaves the session's waiting calls live (DELETE ends them) --------------------------


@pytest.mark.django_db(transaction=True)
async def test_idle_session_cleanup_ends_the_session_s_waiting_calls(settings: object) -> None:
    """tests/test_http_spec_edges.py::test_deleting_the_session_ends_its_call_waiting_for_input: once the
    session is gone nobody can answer its calls, so they must not stay input_required until CALL_TTL. The same
    holds when the session ends because it was idle (SESSION_IDLE_SECONDS shorter than CALL_TTL)."""
    settings.MCP_TOOLS = {**settings.MCP_TOOLS, "SESSION_IDLE_SECONDS": 3600}  # type: ignore[attr-defined]
    session = await open_session({"elicitation": {}})
    call = await sync_to_async(ToolCall.objects.create)(
        tool_name="test_elicitation", principal=f"session:{session}", flavor="session", params_digest="0" * 64,
        session_id=session, status="input_required", expires_at=timezone.now() + timedelta(hours=20),
    )
    when = timezone.now() - timedelta(hours=2)
    await sync_to_async(McpSession.objects.filter(id=session).update)(last_seen_at=when)
    sessions.clear()
    await sync_to_async(call_command)("mcp_cleanup", stdout=io.StringIO())
    assert not await sync_to_async(McpSession.objects.filter(id=session).exists)()
    await sync_to_async(call.refresh_from_db)()
    assert call.status not in ("input_required", "working"), call.status


@pytest.mark.django_db(transaction=True)
async def test_a_client_listening_on_its_get_stream_keeps_its_session(settings: object) -> None:
    """A client that only listens (its GET stream open, no request) uses its session: the stream records
    that now and then (at most 24 times per SESSION_IDLE_SECONDS, as requests do), and the idle purge keeps it."""
    from mcp_tools.registry import make_tool, registry

    async def cleanup_review_probe() -> str:
        """A tool registered while the stream is open: the stream tells the client the list changed."""
        return "probe"

    settings.MCP_TOOLS = {**settings.MCP_TOOLS, "SESSION_IDLE_SECONDS": 24}  # type: ignore[attr-defined]  # recorded every second
    session = await open_session()
    stream = Stream("GET", post_headers(version=HANDSHAKE, session=session, extra={"accept": "text/event-stream"}))
    try:
        await asyncio.wait_for(stream.got.wait(), 5)
        await sync_to_async(McpSession.objects.filter(id=session).update)(last_seen_at=timezone.now() - timedelta(hours=1))
        await asyncio.sleep(1.1)
        with registry.registered_temporarily(make_tool(cleanup_review_probe)):
            await stream.wait_for(lambda m: m.get("method") == "notifications/tools/list_changed")
        for _ in range(40):
            seen = await sync_to_async(McpSession.objects.values_list("last_seen_at", flat=True).get)(id=session)
            if timezone.now() - seen < timedelta(seconds=10):
                break
            await asyncio.sleep(0.05)
        sessions.clear()
        await sync_to_async(call_command)("mcp_cleanup", stdout=io.StringIO())
        assert await sync_to_async(McpSession.objects.filter(id=session).exists)(), "a listening client's session was purged"
    finally:
        stream.gone.set()
        await asyncio.wait_for(stream.task, 20)


@pytest.mark.django_db
def test_old_replay_events_are_purged_in_batches() -> None:
    """StreamEvent.purge_older_than deletes the events older than its cutoff a batch at a time, oldest first."""
    from mcp_tools.models import StreamEvent

    events = [StreamEvent.objects.create(session_id="s", stream_id="x", payload=str(n)) for n in range(7)]
    StreamEvent.objects.filter(id__in=[e.id for e in events[:5]]).update(created_at=timezone.now() - timedelta(days=2))
    assert StreamEvent.objects.purge_older_than(DAY, batch=2) == 5
    assert sorted(StreamEvent.objects.values_list("payload", flat=True)) == ["5", "6"]
