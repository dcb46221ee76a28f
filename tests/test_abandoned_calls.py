"""A foreground call whose server stopped under it, that no client can resume, is ended by the sweep.

A 2026-07-28 call cut off by a server shutdown (uvicorn cancels the handler and closes the loop: the
shielded write of ``cancelled`` never runs) stayed ``working`` for ``CALL_TTL`` (a day): its client had
gone, nothing could resume it, and the admin showed it running. The sweep, the cleanup task and
``mcp_cleanup`` now end it ``cancelled``, as a closed 2026-07-28 stream ends its call. A call a client
can still come back to is left alone: a 2025-11-25 session's (a resumed stream takes it over), and a
2026-07-28 round its client's answers started (a retry of that request takes it over) while its
token lives.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.core.management import call_command
from django.utils import timezone

from mcp_tools import ToolContext, tasks
from mcp_tools.managers import ABANDONED_MESSAGE
from mcp_tools.models import ToolCall

pytestmark = pytest.mark.django_db(transaction=True)


def _call(*, flavor: str = "mrtr", status: str = "working", round_number: int = 0, background: bool = False,
          untouched: float = 120.0, expires_in: float = 3600.0, session_id: str = "") -> ToolCall:
    """A live call row as its process left it, last touched ``untouched`` seconds ago."""
    row = ToolCall.objects.create(tool_name="deploy", principal="anonymous", flavor=flavor, params_digest="0" * 64,
                                  status=status, round=round_number, background=background, session_id=session_id,
                                  expires_at=timezone.now() + timedelta(seconds=expires_in))
    ToolCall.objects.filter(pk=row.pk).update(updated_at=timezone.now() - timedelta(seconds=untouched))
    return row


def _status(row: ToolCall) -> str:
    return ToolCall.objects.values_list("status", flat=True).get(pk=row.pk)


async def hang(ctx: ToolContext) -> str:
    """Runs until stopped."""
    await asyncio.Event().wait()
    return "never"


async def test_a_2026_call_its_server_stopped_under_is_cancelled_by_the_sweep(settings: Any) -> None:
    """The repro: a 2026-07-28 call whose process was stopped mid-call without writing its end."""
    from mcp_tools import store
    from mcp_tools.registry import make_tool, registry
    from tests.test_call_state import wait_for_row
    from tests.test_mrtr_security import call

    async def never_written(*args: Any, **kwargs: Any) -> bool:
        return False  # the loop closed before the shielded write ran

    settings.MCP_TOOLS = {**settings.MCP_TOOLS, "SLOW_CALL_SECONDS": 0.01}
    with registry.registered_temporarily(make_tool(hang)):
        running = asyncio.ensure_future(call("hang", {}))
        row = await wait_for_row("hang", "working")
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(store, "end_call", never_written)
            running.cancel()  # the server's shutdown
            await asyncio.gather(running, return_exceptions=True)
    assert (await sync_to_async(ToolCall.objects.values("status", "flavor", "background").get)(pk=row["id"])) == {
        "status": "working", "flavor": "mrtr", "background": False}
    # Still touched lately (as a running handler's row is): nothing ends it.
    assert (await sync_to_async(tasks.sweep)())["cancelled"] == 0
    # Untouched for twenty CANCEL_POLL_SECONDS and at least a minute: nobody runs it.
    await sync_to_async(ToolCall.objects.filter(pk=row["id"]).update)(updated_at=timezone.now() - timedelta(seconds=61))
    out = StringIO()
    await sync_to_async(call_command)("mcp_cleanup", "--dry-run", stdout=out)
    assert "would expire 0 call(s), cancel 1 abandoned call(s)" in out.getvalue()
    assert (await sync_to_async(tasks.sweep)())["cancelled"] == 1
    ended = await sync_to_async(ToolCall.objects.values("status", "status_message", "finished_at").get)(pk=row["id"])
    assert ended["status"] == "cancelled" and ended["status_message"] == ABANDONED_MESSAGE and ended["finished_at"] is not None


@pytest.mark.parametrize(("fields", "ends"), [
    ({}, True),  # a 2026-07-28 call's first round: no token names it
    ({"flavor": "saga"}, True),
    ({"flavor": "stdio"}, True),  # its client went with the process
    ({"flavor": "direct"}, True),
    ({"round_number": 1, "untouched": 7200.0}, True),  # the token that could retry the round expired (TOKEN_TTL)
    ({"round_number": 1}, False),  # a retry of the round's request, with its live token, takes it over
    ({"flavor": "saga", "round_number": 2}, False),
    ({"flavor": "session"}, False),  # a stream resumed with Last-Event-ID takes it over
    ({"flavor": "task"}, False),
    ({"background": True}, False),  # the lease sweep's
    ({"status": "input_required"}, False),  # waits for its client, until CALL_TTL
    ({"untouched": 0.0}, False),  # its handler runs
    # Three polls untouched is not enough (a diff review: the touches are timers of the handler's event
    # loop, which a blocking call in any tool of that process holds up; the live call was cancelled).
    ({"untouched": 30.0}, False),
    # A call of a 2025-11-25 session recorded with another flavor (a resume token's page): resumable.
    ({"flavor": "direct", "session_id": "s" * 32}, False),
])
def test_only_calls_no_client_can_come_back_to_are_cancelled(fields: dict[str, Any], ends: bool) -> None:
    row = _call(**fields)
    out = StringIO()
    call_command("mcp_cleanup", stdout=out)
    assert f"cancelled {int(ends)} abandoned call(s)" in out.getvalue()
    assert _status(row) == ("cancelled" if ends else fields.get("status", "working"))


def test_an_abandoned_call_past_its_expiry_ends_expired_and_the_cleanup_task_reports_both() -> None:
    overdue = _call(expires_in=-1)
    abandoned = _call()
    report = tasks.cleanup()
    assert (report["expired_calls"], report["cancelled_calls"]) == (1, 1)
    assert (_status(overdue), _status(abandoned)) == ("expired", "cancelled")


def test_without_row_polls_no_call_is_told_abandoned(settings: Any) -> None:
    settings.MCP_TOOLS = {**settings.MCP_TOOLS, "CANCEL_POLL_SECONDS": 0}  # no handler touches its row
    row = _call(untouched=86000.0)
    assert tasks.sweep()["cancelled"] == 0
    assert _status(row) == "working"


async def test_a_round_a_retry_can_take_over_survives_the_sweep_and_the_retry_runs_it() -> None:
    """Round 1 advanced by the client's answers, its process died: the sweep leaves it for the retry."""
    from mcp_tools.engine.journal import digest
    from tests.test_mrtr_security import TARGET, call, result_of, start

    state0 = await start()

    def die_after_advancing() -> None:
        row = ToolCall.objects.get()
        row.steps.filter(key="target").update(status="done", response=TARGET)
        ToolCall.objects.filter(pk=row.pk).update(round=1, status="working", last_answers_digest=digest({"target": TARGET}),
                                                  last_outcome=None)
        ToolCall.objects.filter(pk=row.pk).update(updated_at=timezone.now() - timedelta(seconds=60))

    await sync_to_async(die_after_advancing)()
    assert (await sync_to_async(tasks.sweep)())["cancelled"] == 0
    retried = result_of(await call(arguments={"service": "x"}, state=state0, responses={"target": TARGET}))
    assert retried["resultType"] == "input_required" and list(retried["inputRequests"]) == ["verdict"]
