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
from typing import Any
from unittest import mock

import pytest
from asgiref.sync import sync_to_async

from mcp_tools import ToolContext, store
from mcp_tools.models import ToolCall
from mcp_tools.registry import make_tool, registry
from mcp_tools.server import core, tokens
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
    assert await core.end_call(str(tokens.unseal("request", state1)["c"]), "cancelled")
    before = await snapshot()
    result = result_of(await call(state=state1, responses={"verdict": VERDICT}))
    assert result["isError"] is True and "cancelled" in result["content"][0]["text"]
    assert await snapshot() == before  # no audit row, no answer recorded


async def test_a_carried_token_of_a_cancelled_call_gets_the_cancelled_answer_and_changes_nothing() -> None:
    state0 = await start()
    call_id = str(tokens.unseal("request", state0)["c"])
    assert await core.end_call(call_id, "cancelled")
    before = await snapshot()
    result = result_of(await call(state=state0, responses={"target": TARGET}))
    assert result["isError"] is True
    assert "cancelled" in result["content"][0]["text"]
    assert await snapshot() == before


async def test_a_carried_token_with_unknown_keys_is_judged_against_the_row() -> None:
    state0 = await start()
    call_id = str(tokens.unseal("request", state0)["c"])
    before = await snapshot()
    assert_refused(await call(state=state0, responses={"nope": TARGET}), "keys this call never asked for")
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
