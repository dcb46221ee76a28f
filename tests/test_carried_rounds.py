"""A requestState that carries its call's journal (issue 9): the answering round reads no row.

When a call suspends with a journal of client steps only (elicitation, sampling,
roots: no ``ctx.once`` value, which the token must not reveal) that fits in a short
token, the sealed ``requestState`` also carries those steps. The answering round
replays from them and writes with the usual compare-and-set; only when that
compare-and-set finds the row elsewhere (answered already, cancelled, expired) does
the request read the row and answer as it always did. These tests pin both halves
on the demo ``deploy`` tool (``target`` elicitation, ``verdict`` sampling, one
``ctx.once`` audit row) and on small tools of their own.
"""

from __future__ import annotations

import asyncio
import contextlib
import types
from typing import Any
from unittest import mock

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.test import override_settings

from mcp_tools import ToolContext, store
from mcp_tools.models import CallStep, ToolCall
from mcp_tools.registry import make_tool, registry
from mcp_tools.server import core, tokens
from mcp_tools.server.flavors import session
from tests.test_mrtr_security import TARGET, VERDICT, assert_refused, call, result_of, snapshot, start

pytestmark = pytest.mark.django_db(transaction=True)


def counting_loads() -> Any:
    """Patch the store's ``load_call`` with a spy that still loads."""
    return mock.patch.object(store, "load_call", side_effect=store.load_call)


async def test_tokens_carry_the_journal_of_client_steps_with_their_answers() -> None:
    state0 = await start()
    carried = tokens.unseal("request", state0)["j"]
    assert [(seq, kind, key, status) for seq, kind, key, _, _, status, _, _ in carried] == [(0, "elicit", "target", "pending")]
    assert carried[0][4]["method"] == "elicitation/create"
    # Round 1's journal: the answered ``target`` (the client's own answer) and the pending ``verdict``.
    result = result_of(await call(state=state0, responses={"target": TARGET}))
    carried = tokens.unseal("request", result["requestState"])["j"]
    assert [(seq, key, status, response) for seq, _, key, _, _, status, response, _ in carried] == [
        (0, "target", "done", TARGET), (1, "verdict", "pending", None)]


async def test_answering_a_carried_round_reads_no_row_and_writes_the_round() -> None:
    state0 = await start()
    with counting_loads() as load:
        result = result_of(await call(state=state0, responses={"target": TARGET}))
    assert load.call_count == 0
    assert list(result["inputRequests"]) == ["verdict"]
    after = await snapshot()
    assert [c[1:3] for c in after["calls"]] == [(1, "input_required")]
    assert [(s[1], s[2], s[3]) for s in after["steps"]] == [(0, "target", "done"), (1, "verdict", "pending")]
    # The next round runs its ``ctx.once`` effect from a carried journal too (claimed first), and completes.
    with counting_loads() as load:
        done = result_of(await call(state=result["requestState"], responses={"verdict": VERDICT}))
    assert load.call_count == 0
    assert done["structuredContent"]["env"] == "staging"
    after = await snapshot()
    assert after["audit"] == 1
    assert [c[1:3] for c in after["calls"]] == [(2, "completed")]
    assert [(s[1], s[2], s[3]) for s in after["steps"]] == [(0, "target", "done"), (1, "verdict", "done"), (2, "audit", "done")]


async def test_an_identical_retry_of_a_carried_round_gets_the_identical_answer() -> None:
    state0 = await start()
    first = result_of(await call(state=state0, responses={"target": TARGET}))
    before = await snapshot()
    with counting_loads() as load:
        again = result_of(await call(state=state0, responses={"target": TARGET}))
    assert again == first  # the same requestState too: the one stored with the round
    assert load.call_count == 1  # the compare-and-set lost; the row answered
    assert await snapshot() == before


async def test_concurrent_retries_of_a_carried_round_advance_it_once() -> None:
    state0 = await start()
    results = await asyncio.gather(*(call(state=state0, responses={"target": TARGET}) for _ in range(5)))
    answers = [result_of(r) for r in results]
    assert all(a == answers[0] for a in answers)
    after = await snapshot()
    assert [c[1:3] for c in after["calls"]] == [(1, "input_required")]
    assert [(s[1], s[3]) for s in after["steps"]] == [(0, "done"), (1, "pending")]


async def test_concurrent_retries_of_a_carried_round_with_an_effect_run_it_once() -> None:
    state0 = await start()
    state1 = result_of(await call(state=state0, responses={"target": TARGET}))["requestState"]
    assert "j" in tokens.unseal("request", state1)
    results = [result_of(r) for r in await asyncio.gather(*(call(state=state1, responses={"verdict": VERDICT}) for _ in range(5)))]
    assert all(r == results[0] for r in results)
    after = await snapshot()
    assert after["audit"] == 1
    assert [c[1:3] for c in after["calls"]] == [(2, "completed")]


async def test_a_carried_round_whose_effect_finds_the_call_cancelled_runs_no_effect() -> None:
    state0 = await start()
    state1 = result_of(await call(state=state0, responses={"target": TARGET}))["requestState"]
    assert "j" in tokens.unseal("request", state1)  # the carried path runs first
    assert await core.end_call(str(tokens.unseal("request", state1)["c"]), "cancelled")
    before = await snapshot()
    with counting_loads() as load:
        result = result_of(await call(state=state1, responses={"verdict": VERDICT}))
    assert load.call_count == 1  # its claim lost before the effect; the row answered
    assert result["isError"] is True and "cancelled" in result["content"][0]["text"]
    assert await snapshot() == before  # no audit row, no answer recorded


async def test_a_carried_token_of_a_cancelled_call_gets_the_cancelled_answer_and_changes_nothing() -> None:
    state0 = await start()
    call_id = str(tokens.unseal("request", state0)["c"])
    assert "j" in tokens.unseal("request", state0)  # the carried path runs first
    assert await core.end_call(call_id, "cancelled")
    before = await snapshot()
    with counting_loads() as load:
        result = result_of(await call(state=state0, responses={"target": TARGET}))
    assert load.call_count == 1  # its compare-and-set lost; the row answered
    assert result["isError"] is True
    assert "cancelled" in result["content"][0]["text"]
    assert await snapshot() == before


async def test_a_carried_token_with_unknown_keys_is_judged_against_the_row() -> None:
    state0 = await start()
    call_id = str(tokens.unseal("request", state0)["c"])
    before = await snapshot()
    # Nothing it asked is answered: the row's question again (unknown keys are ignored, as the spec says).
    again = result_of(await call(state=state0, responses={"nope": TARGET}))
    assert again["resultType"] == "input_required" and set(again["inputRequests"]) == {"target"}, again
    assert await snapshot() == before
    # Cancelled meanwhile: the row's answer (cancelled) wins over the key complaint, as without a carried journal.
    assert await core.end_call(call_id, "cancelled")
    result = result_of(await call(state=state0, responses={"nope": TARGET}))
    assert result["isError"] is True and "cancelled" in result["content"][0]["text"]


async def confirm_after_once(ctx: ToolContext, item: str) -> str:
    """Record something, then ask: the journal holds an effect, so the token carries nothing."""
    noted = await ctx.once("note", str.upper, item)
    answer = await ctx.elicit(f"Keep {noted}?", schema={"type": "object", "properties": {"ok": {"type": "boolean"}}}, key="keep")
    return f"{noted} {answer['ok']}"


async def long_question(ctx: ToolContext, size: int) -> str:
    """Ask a question too long to carry in a token."""
    answer = await ctx.elicit("?" * size, schema={"type": "object", "properties": {"ok": {"type": "boolean"}}}, key="long")
    return str(answer["ok"])


@pytest.mark.parametrize("tool, arguments, key", [
    (confirm_after_once, {"item": "bolt"}, "keep"),
    (long_question, {"size": 3000}, "long"),
])
async def test_rounds_whose_journal_cannot_be_carried_read_the_row(tool: Any, arguments: dict[str, Any], key: str) -> None:
    name = tool.__name__
    with registry.registered_temporarily(make_tool(tool)):
        first = result_of(await call(name, arguments))
        assert "j" not in tokens.unseal("request", first["requestState"])
        assert len(first["requestState"]) < 4096
        with counting_loads() as load:
            done = result_of(await call(name, arguments, state=first["requestState"],
                                        responses={key: {"action": "accept", "content": {"ok": True}}}))
        assert load.call_count == 1
    assert done["content"][0]["text"] in ("BOLT True", "True")


async def test_a_short_question_is_carried_and_completes() -> None:
    with registry.registered_temporarily(make_tool(long_question)):
        first = result_of(await call("long_question", {"size": 10}))
        assert [row[2] for row in tokens.unseal("request", first["requestState"])["j"]] == ["long"]
        with counting_loads() as load:
            done = result_of(await call("long_question", {"size": 10}, state=first["requestState"],
                                        responses={"long": {"action": "accept", "content": {"ok": False}}}))
        assert load.call_count == 0
    assert done["content"][0]["text"] == "False"
    row = await sync_to_async(ToolCall.objects.get)()
    assert (row.status, row.round) == ("completed", 1)


# -- what a carried round must not do that the row-reading path would not (review of issue 9) --------

PROD = {"action": "accept", "content": {"env": "production", "confirm": True}}
OK = {"action": "accept", "content": {"ok": True}}
YES_NO = {"type": "object", "properties": {"ok": {"type": "boolean"}}}


async def test_a_session_response_for_a_multi_round_trip_call_is_refused() -> None:
    """A 2025-11-25 session may not answer a step of a call that takes its answers with a requestState."""
    state0 = await start()
    payload = tokens.unseal("request", state0)
    rc = types.SimpleNamespace(principal=types.SimpleNamespace(id=payload["p"]), session_id="another-session")
    await session.accept_client_response({"jsonrpc": "2.0", "id": f"mcp_tools:{payload['c']}:0", "result": PROD}, rc)
    steps = (await snapshot())["steps"]
    assert [(s[1], s[3]) for s in steps] == [(0, "pending")]
    done = result_of(await call(state=state0, responses={"target": TARGET}))
    assert list(done["inputRequests"]) == ["verdict"]
    row_answer = await sync_to_async(lambda: CallStep.objects.get(call_id=payload["c"], seq=0).response)()
    assert row_answer == TARGET


async def test_a_round_whose_step_was_answered_meanwhile_writes_nothing() -> None:
    """Only an advance may change a journal; a round whose carried copy is out of date must lose."""
    state0 = await start()
    call_id = str(tokens.unseal("request", state0)["c"])
    await sync_to_async(store.sync_calls.answer_step)(call_id, 0, "done", PROD, None)  # some other writer
    before = await snapshot()
    await call(state=state0, responses={"target": TARGET})
    after = await snapshot()
    assert after == before  # still round 0, the other writer's answer, no audit row
    assert await sync_to_async(store.sync_calls.advance)(call_id, 0, {0: ("done", TARGET, None)}, "digest") is False


EFFECT_RUNS: list[int] = []


async def slow_effect() -> int:
    EFFECT_RUNS.append(1)
    await asyncio.sleep(1.0)
    return len(EFFECT_RUNS)


async def go_slowly(ctx: ToolContext) -> str:
    """Ask, then run a slow async effect."""
    await ctx.elicit("Go?", schema=YES_NO, key="go")
    runs = await ctx.once("effect", slow_effect)
    return f"ran {runs}"


async def test_a_late_retry_while_the_round_runs_its_effect_does_not_run_it_again() -> None:
    """The late retry must not displace the running request's watch (which keeps the row alive)."""
    EFFECT_RUNS.clear()
    with override_settings(MCP_TOOLS={**settings.MCP_TOOLS, "CANCEL_POLL_SECONDS": 0.1}), \
            registry.registered_temporarily(make_tool(go_slowly)):
        state0 = result_of(await call("go_slowly", {}))["requestState"]
        first = asyncio.ensure_future(call("go_slowly", {}, state=state0, responses={"go": OK}))
        while not EFFECT_RUNS:
            await asyncio.sleep(0.01)
        late = await call("go_slowly", {}, state=state0, responses={"go": OK})  # the client timed out and retried
        results = [result_of(await first), result_of(late)]
    assert EFFECT_RUNS == [1]
    assert [r["content"][0]["text"] for r in results] == ["ran 1", "ran 1"]


async def two_questions(ctx: ToolContext) -> str:
    """Ask, think a while, ask again."""
    await ctx.elicit("First?", schema=YES_NO, key="first")
    await asyncio.sleep(0.4)
    await ctx.elicit("Second?", schema=YES_NO, key="second")
    return "done"


async def test_a_late_retry_that_is_cancelled_does_not_end_the_call() -> None:
    with registry.registered_temporarily(make_tool(two_questions)):
        state0 = result_of(await call("two_questions", {}))["requestState"]
        asked = result_of(await call("two_questions", {}, state=state0, responses={"first": OK}))
        assert list(asked["inputRequests"]) == ["second"]
        late = asyncio.ensure_future(call("two_questions", {}, state=state0, responses={"first": OK}))
        await asyncio.sleep(0.2)  # the late retry replays, in the handler's sleep
        late.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await late
        row = await sync_to_async(ToolCall.objects.get)()
        assert (row.round, row.status) == (1, "input_required")
        # A cancel of the request that holds the current round still ends the call.
        current = asyncio.ensure_future(call("two_questions", {}, state=asked["requestState"], responses={"second": OK}))
        await asyncio.sleep(0.1)
        assert not current.done()
        current.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await current
    row = await sync_to_async(ToolCall.objects.get)()
    assert (row.round, row.status) == (1, "cancelled")


async def test_overlapping_watches_of_one_call_neither_displaces_the_other() -> None:
    """Two runs watching one call's row (a retry overlapping the run it retries): closing one keeps the other."""
    from mcp_tools.interprocess import cancellation

    first = asyncio.ensure_future(asyncio.sleep(10))
    second = asyncio.ensure_future(asyncio.sleep(10))
    watch_first = cancellation.CallWatch("call-x", first)
    watch_second = cancellation.CallWatch("call-x", second)
    watch_second.close()
    await cancellation.stop_call("call-x")  # an operator's cancel reaches the run still watching
    with contextlib.suppress(asyncio.CancelledError):
        await first
    assert first.cancelled()
    assert not second.done()
    second.cancel()
    watch_first.close()
    assert "call-x" not in cancellation._calls
