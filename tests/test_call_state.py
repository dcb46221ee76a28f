"""Call state you can trust: whatever stops a call marks its row at once, and status changes never overwrite each other.

The live tests run the demo in a real server process and drive it with the
official client or raw HTTP; the admin acts from this process. Nothing but the
database is shared between them (the in-memory channel layer), so they also
prove that cancellation needs no Redis.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import Client as DjangoClient
from django.urls import reverse

from mcp_tools import ToolContext
from mcp_tools.models import ToolCall
from mcp_tools.store import sync_calls
from tests.clients import LegacySession, http_client, modern_headers, modern_meta, sdk_client
from tests.conftest import LiveServer

ROW_TIMEOUT = 15


def _row_of(tool: str, status: str | None = None) -> dict[str, Any] | None:
    rows = ToolCall.objects.filter(tool_name=tool).order_by("-created_at")
    if status is not None:
        rows = rows.filter(status=status)
    return rows.values("id", "status", "progress", "result").first()


async def wait_for_row(tool: str, status: str | None = None) -> dict[str, Any]:
    """The newest row of ``tool`` (in ``status``), once the server has written it."""
    deadline = time.monotonic() + ROW_TIMEOUT
    while time.monotonic() < deadline:
        row = await sync_to_async(_row_of)(tool, status)
        if row is not None:
            return row
        await asyncio.sleep(0.1)
    raise AssertionError(f"no {tool} row in status {status} after {ROW_TIMEOUT}s: {await sync_to_async(_row_of)(tool)}")


def _admin_cancel(call_id: Any) -> int:
    from django.contrib.auth.models import User

    admin_user = User.objects.filter(username="operator").first() or User.objects.create_superuser("operator", "op@example.com", "pw")
    browser = DjangoClient()
    browser.force_login(admin_user)
    response = browser.post(
        reverse("admin:mcp_tools_toolcall_changelist"), {"action": "cancel_calls", "_selected_action": [str(call_id)]}
    )
    return response.status_code


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_admin_cancel_stops_a_running_call_in_another_process(start_server: type[LiveServer], mode: str) -> None:
    """The operator cancels a running ``slow_count``: the handler stops, the client is told, the row stays cancelled."""
    server = start_server().start()
    progress_seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        progress_seen.append(progress)

    async with sdk_client(server.url, mode) as client:
        call = asyncio.ensure_future(client.call_tool("slow_count", {"n": 100}, progress_callback=on_progress))
        row = await wait_for_row("slow_count", "working")  # written after SLOW_CALL_SECONDS
        assert await sync_to_async(_admin_cancel)(row["id"]) == 302
        result = await asyncio.wait_for(call, 20)

    assert result.is_error, result
    assert "cancelled" in result.content[0].text, result
    final = await sync_to_async(_row_of)("slow_count")
    assert final is not None and final["status"] == "cancelled"
    if mode == "legacy":  # 2026-07-28 progress arrives on the same stream too, but the SDK may not surface it
        assert progress_seen, "the handler ran and reported progress"
    assert max(progress_seen, default=0) < 100, "the handler counted on after the cancel"
    assert final["result"] is None, "no result may be recorded for a cancelled call"


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
async def test_client_cancel_marks_the_row_cancelled_at_once(start_server: type[LiveServer]) -> None:
    server = start_server().start()
    async with http_client() as http:
        session = await LegacySession.open(http, server.url)
        params = {"name": "slow_count", "arguments": {"n": 100}}
        async with session.stream("tools/call", params) as (request_id, _response):
            await wait_for_row("slow_count", "working")
            cancelled = await session.send(
                {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": request_id}}
            )
            assert cancelled.status_code == 202
            row = await wait_for_row("slow_count", "cancelled")
    assert row["status"] == "cancelled"


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
async def test_a_closed_2026_stream_cancels_its_call(start_server: type[LiveServer]) -> None:
    server = start_server().start()
    # A progress token makes the response a stream at once (headers before the call ends).
    params = {"name": "slow_count", "arguments": {"n": 100}, "_meta": modern_meta(progressToken="p")}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    async with http_client() as http:
        async with http.stream("POST", server.url, json=body, headers=modern_headers("tools/call", params)):
            await wait_for_row("slow_count", "working")
        # The response stream is closed here, with the call still running.
        row = await wait_for_row("slow_count", "cancelled")
    assert row["status"] == "cancelled"


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
async def test_a_closed_2025_stream_is_not_a_cancellation(start_server: type[LiveServer]) -> None:
    """2025-11-25: disconnection is not cancellation; a call waiting for input stays resumable."""
    server = start_server().start()
    async with http_client() as http:
        session = await LegacySession.open(http, server.url)
        async with session.stream("tools/call", {"name": "deploy", "arguments": {"service": "api"}}):
            await wait_for_row("deploy", "input_required")
        await asyncio.sleep(1)
    row = await wait_for_row("deploy")
    assert row["status"] == "input_required"


# -- status changes are compare-and-set ------------------------------------------------------


def _live_call(status: str = "working", round_number: int = 0) -> ToolCall:
    return ToolCall.objects.create(tool_name="race", principal="user:1", flavor="mrtr", params_digest="0" * 64,
                                   status=status, round=round_number)


@pytest.mark.django_db
def test_a_cancel_after_completion_loses_and_changes_nothing() -> None:
    call = _live_call()
    assert sync_calls.save_round(call.id, 0, [], status="completed", result={"content": []})
    assert ToolCall.objects.end(call.id, "cancelled") is False
    call.refresh_from_db()
    assert (call.status, call.result) == ("completed", {"content": []})


@pytest.mark.django_db
def test_a_completion_after_cancel_loses_and_changes_nothing() -> None:
    call = _live_call()
    assert ToolCall.objects.end(call.id, "cancelled", "by ops")
    assert sync_calls.save_round(call.id, 0, [], status="completed", result={"content": []}) is False
    call.refresh_from_db()
    assert (call.status, call.result, call.status_message) == ("cancelled", None, "by ops")
    assert sync_calls.record_progress(call.id, 5, 10, "late") is False


@pytest.mark.django_db
def test_a_stale_round_cannot_overwrite_a_newer_one() -> None:
    call = _live_call(status="working", round_number=3)
    assert sync_calls.save_round(call.id, 2, [], status="completed") is False
    call.refresh_from_db()
    assert (call.status, call.round) == ("working", 3)


@pytest.mark.django_db
def test_end_refuses_statuses_it_does_not_own_and_ignores_garbage_ids() -> None:
    call = _live_call()
    with pytest.raises(ValueError):
        ToolCall.objects.end(call.id, "completed")
    assert ToolCall.objects.end("not-a-uuid", "cancelled") is False


@pytest.mark.django_db(transaction=True)
def test_concurrent_completion_and_cancel_end_in_exactly_one_terminal_state() -> None:
    outcomes: list[tuple[str, bool, str]] = []
    for _ in range(10):
        call = _live_call(status="input_required")
        barrier = threading.Barrier(2)
        won: dict[str, bool] = {}

        def complete(call_id: Any = call.id) -> None:
            barrier.wait()
            won["complete"] = sync_calls.save_round(call_id, 0, [], status="completed", result={"ok": 1})

        def cancel(call_id: Any = call.id) -> None:
            barrier.wait()
            won["cancel"] = ToolCall.objects.end(call_id, "cancelled")

        threads = [threading.Thread(target=complete), threading.Thread(target=cancel)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        call.refresh_from_db()
        outcomes.append((call.status, won["complete"], str(won["cancel"])))
        assert won["complete"] != won["cancel"], "exactly one of the two must win"
        assert call.status == ("completed" if won["complete"] else "cancelled")
        assert (call.result is not None) == won["complete"]
    from django.db import connections

    connections.close_all()


# -- a round whose process died is run again by the client's retry --------------------------


@pytest.mark.django_db(transaction=True)
async def test_a_round_advanced_by_a_process_that_died_is_run_again_by_the_retry() -> None:
    """The owner advanced round 1 with the answers, then died before any outcome: the row is
    'working' and untouched. The client's identical retry takes the round over (instead of
    'still being processed' until CALL_TTL) and gets the round's real answer."""
    from datetime import timedelta

    from django.utils import timezone

    from mcp_tools.engine.journal import digest
    from tests.test_mrtr_security import TARGET, call, result_of, start

    state0 = await start()

    def die_after_advancing() -> None:
        row = ToolCall.objects.get()
        row.steps.filter(key="target").update(status="done", response=TARGET)
        ToolCall.objects.filter(pk=row.pk).update(
            round=1, status="working", last_answers_digest=digest({"target": TARGET}), last_outcome=None,
        )
        ToolCall.objects.filter(pk=row.pk).update(updated_at=timezone.now() - timedelta(seconds=60))

    await sync_to_async(die_after_advancing)()
    retried = result_of(await call(arguments={"service": "x"}, state=state0, responses={"target": TARGET}))
    assert retried["resultType"] == "input_required" and list(retried["inputRequests"]) == ["verdict"]
    row = await sync_to_async(ToolCall.objects.values("status", "round").get)()
    assert row == {"status": "input_required", "round": 1}
    # The same retry again gets the very same answer (now recorded with the round).
    again = result_of(await call(arguments={"service": "x"}, state=state0, responses={"target": TARGET}))
    assert again["inputRequests"] == retried["inputRequests"]


@pytest.mark.django_db(transaction=True)
async def test_a_round_whose_owner_is_alive_is_not_taken_over() -> None:
    from mcp_tools.store import sync_calls

    row = await sync_to_async(_live_call)(status="working", round_number=1)
    await sync_to_async(ToolCall.objects.filter(pk=row.pk).update)(last_answers_digest="d" * 64)
    # Freshly touched (as the owner's CallWatch does every CANCEL_POLL_SECONDS): no takeover.
    assert await sync_to_async(sync_calls.touch_live)(row.pk) is True
    assert await sync_to_async(sync_calls.take_over_round)(row.pk, 1, "d" * 64, 3.0) is False


# -- one cancel delivered twice (the row poll and the channel layer's broadcast) -----------------------


async def count_slowly(ctx: ToolContext) -> str:
    """Report progress until stopped."""
    for i in range(200):
        await asyncio.sleep(0.02)
        await ctx.report_progress(i, 200)
    return "done"


@pytest.mark.django_db(transaction=True)
async def test_a_cancel_that_reaches_the_handler_twice_still_answers_the_client() -> None:
    """An operator's cancel reaches the running handler twice: its process's row poll finds the
    row ended, then the broadcast of the same cancel arrives while the handler is writing its
    answer. The second must not kill the request (the client would wait for an answer forever)."""
    from django.conf import settings
    from django.test import override_settings

    from mcp_tools import store
    from mcp_tools.interprocess import cancellation
    from mcp_tools.registry import make_tool, registry
    from tests.test_mrtr_security import call, result_of

    real_status = store.call_status
    again: list[str] = []

    async def status_then_the_broadcast(call_id: str) -> Any:
        row = await real_status(call_id)
        if not again:
            again.append(call_id)
            cancellation._on_cancel({"call_id": call_id})  # the same cancel, by its second way in
        await asyncio.sleep(0)
        return row

    with override_settings(MCP_TOOLS={**settings.MCP_TOOLS, "SLOW_CALL_SECONDS": 0.01}), \
            registry.registered_temporarily(make_tool(count_slowly)):
        running = asyncio.ensure_future(call("count_slowly", {}))
        row = await wait_for_row("count_slowly", "working")
        assert await sync_to_async(ToolCall.objects.end)(row["id"], "cancelled")  # the operator's cancel
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(store, "call_status", status_then_the_broadcast)
            cancellation._on_cancel({"call_id": str(row["id"])})  # the first way in
            response = await asyncio.wait_for(running, 10)
    assert again == [str(row["id"])]
    result = result_of(response)
    assert result["isError"] is True
    assert "cancelled before it finished" in result["content"][0]["text"]
    assert (await sync_to_async(_row_of)("count_slowly"))["status"] == "cancelled"
