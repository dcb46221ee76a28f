"""A run whose final write loses to another run's outcome answers that outcome.

Identical retries get the identical answer (docs/durable-calls.md): when a retry took over a
round it found abandoned and finished the call, the run it took over from (alive after all)
answers what the row holds, not "The call was completed before it finished.". Its final write
(``core.finish``) loses the compare-and-set, or the row's watch stops its handler first.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import override_settings
from django.utils import timezone

from mcp_tools import ToolContext
from mcp_tools.models import ToolCall
from mcp_tools.registry import make_tool, registry
from mcp_tools.store import sync_calls
from tests.asgi_client import call_modern

pytestmark = pytest.mark.django_db(transaction=True)

#: The events by which ``finish_late`` and the test take turns (made in each test's loop).
_gate: dict[str, asyncio.Event] = {}
GO = {"type": "object", "properties": {"go": {"type": "boolean"}}}
OTHER_RUNS_ANSWER = {"content": [{"type": "text", "text": "the other run's answer"}], "isError": False}


async def finish_late(ctx: ToolContext) -> str:
    """Ask, run an effect (the round is this run's from there), then wait until the test lets go."""
    await ctx.elicit("Go?", GO, key="go")
    await ctx.once("effect", str, "done")
    _gate["running"].set()
    await _gate["release"].wait()
    return "this run's answer"


async def _answer_after_another_run_finished(settings: Any, poll: float, release: bool) -> dict[str, Any]:
    """Answer ``finish_late``'s round; while its handler waits, another run (the test) completes the
    call with :data:`OTHER_RUNS_ANSWER`; then the handler is let go (``release``) or left to the
    row's watch, which finds the call ended. What the client got."""
    from demo_site.asgi import application

    _gate.update(running=asyncio.Event(), release=asyncio.Event())
    form = {"elicitation": {"form": {}}}
    with registry.registered_temporarily(make_tool(finish_late)), \
            override_settings(MCP_TOOLS={**settings.MCP_TOOLS, "CANCEL_POLL_SECONDS": poll}):
        first = (await call_modern(application, "tools/call", {"name": "finish_late", "arguments": {}}, capabilities=form)).json()
        params = {"name": "finish_late", "arguments": {}, "requestState": first["result"]["requestState"],
                  "inputResponses": {"go": {"action": "accept", "content": {"go": True}}}}
        answering = asyncio.ensure_future(call_modern(application, "tools/call", params, capabilities=form))
        try:
            await _gate["running"].wait()
            row = await sync_to_async(ToolCall.objects.get)(tool_name="finish_late")
            assert await sync_to_async(sync_calls.save_round)(
                row.id, row.round, [], status="completed", result=OTHER_RUNS_ANSWER, finished_at=timezone.now(),
                last_outcome={"round": row.round, "answer": OTHER_RUNS_ANSWER})
            if release:
                _gate["release"].set()
            answer = (await answering).json()
        finally:
            _gate["release"].set()
    return answer


async def test_a_run_whose_final_write_loses_to_another_runs_outcome_answers_that_outcome(settings: Any) -> None:
    """Identical retries get the identical answer (docs/durable-calls.md): not "The call was
    completed before it finished." for the one whose final write came second."""
    answer = await _answer_after_another_run_finished(settings, poll=0, release=True)
    assert answer["result"]["content"] == OTHER_RUNS_ANSWER["content"], answer
    assert not answer["result"].get("isError"), answer


async def test_a_run_stopped_because_another_run_completed_the_call_answers_that_outcome(settings: Any) -> None:
    """The row's watch stops a handler whose call ended elsewhere; one that another run completed
    answers that run's outcome, as its identical retry did."""
    answer = await _answer_after_another_run_finished(settings, poll=0.05, release=False)
    assert answer["result"]["content"] == OTHER_RUNS_ANSWER["content"], answer
    assert not answer["result"].get("isError"), answer
