"""A round taken over from a run that was only stalled, not gone: both runs reach the round's write.

A retry (2026-07-28) or a resumed stream (2025-11-25) takes a round over when its row went untouched
for three ``CANCEL_POLL_SECONDS``: its run's process died, or only stalled (a sync call blocking the
event loop, a paused VM). When the first run goes on, both write the round's next question: the
second writer's new step met the first's in the (call, seq) unique index, an ``IntegrityError``,
and its request was answered -32603 "Internal error" (the docs: identical retries get the identical
answer). The loser now answers with the winner's stored outcome; effects ran once either way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from mcp_tools import ToolContext, store
from mcp_tools.registry import make_tool, registry
from tests.asgi_client import call_modern

pytestmark = pytest.mark.django_db(transaction=True)

CAPS = {"elicitation": {"form": {}}}
YES = {"type": "object", "properties": {"yes": {"type": "boolean"}}}
EFFECTS: list[str] = []
RUNS: list[int] = []
GATES: list[asyncio.Event] = []


def effect() -> str:
    EFFECTS.append("ran")
    return "done"


async def stall_then_ask(ctx: ToolContext) -> str:
    """Asks, runs its effect once, waits on the test's gate for this run, then asks again."""
    await ctx.elicit("First?", YES, key="first")
    await ctx.once("effect", effect)
    run = len(RUNS)
    RUNS.append(run)
    await GATES[run].wait()
    second = await ctx.elicit("Second?", YES, key="second")
    return f"second: {second.get('yes')}"


@pytest.fixture
def tool(settings: Any) -> Iterator[None]:
    settings.MCP_TOOLS = {**settings.MCP_TOOLS, "CANCEL_POLL_SECONDS": 0.05}
    EFFECTS.clear()
    RUNS.clear()
    GATES[:] = [asyncio.Event(), asyncio.Event()]
    with registry.registered_temporarily(make_tool(stall_then_ask)):
        yield


async def call(params: dict[str, Any]) -> dict[str, Any]:
    from demo_site.asgi import application

    body = (await call_modern(application, "tools/call", {"name": "stall_then_ask", "arguments": {}, **params}, capabilities=CAPS)).json()
    return body


async def until(predicate: Any) -> None:
    for _ in range(500):
        if predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("timed out")


@pytest.mark.parametrize("first_to_write", ["taker", "stalled"])
async def test_both_runs_of_a_taken_over_round_answer_with_the_first_writers_outcome(
    tool: None, monkeypatch: pytest.MonkeyPatch, first_to_write: str,
) -> None:
    first = (await call({}))["result"]
    answered = {"requestState": first["requestState"], "inputResponses": {"first": {"action": "accept", "content": {"yes": True}}}}
    stalled = asyncio.ensure_future(call(answered))
    await until(lambda: RUNS == [0])  # the round is claimed, its effect done; the run waits
    touch_live = store.touch_live

    async def stalled_touch(call_id: str) -> bool:  # the run's process stalls: its row goes untouched
        return True

    monkeypatch.setattr(store, "touch_live", stalled_touch)
    taker = asyncio.ensure_future(call(answered))  # an identical retry, past three CANCEL_POLL_SECONDS
    await until(lambda: RUNS == [0, 1])  # it took the round over: the effect is replayed, not run
    monkeypatch.setattr(store, "touch_live", touch_live)
    order = [(GATES[1], taker), (GATES[0], stalled)]
    if first_to_write == "stalled":
        order.reverse()
    answers = []
    for gate, request in order:
        gate.set()
        answers.append(await asyncio.wait_for(request, 10))
    won, lost = answers
    assert "result" in won and won["result"]["resultType"] == "input_required", won
    assert lost == {**won, "id": lost["id"]}, lost  # before: -32603 "Internal error" (an IntegrityError)
    assert EFFECTS == ["ran"]
