"""Sagas and the durable engine: what a review of them found, each failing before its mend.

A failed ``ctx.once`` the handler caught broke its next round; an async ``once`` started after a
committed cancel; a lambda returning a coroutine was journaled unrun; ``tools/callSaga`` of a tool on
a worker answered an internal error; a resent ``resumeSaga`` with a step error was refused, and one
mixing an error with an unknown step id was accepted; a sampling block's text of the wrong type
failed the call instead of being refused; a ``ctx.once`` step another run had journaled as failed
read as the value None.
"""
from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from mcp_tools import ToolContext
from mcp_tools.engine.journal import digest
from mcp_tools.models import CallStep, ToolCall
from mcp_tools.registry import make_tool, registry
from mcp_tools.store import sync_calls
from mcp_tools.transports.http import McpEndpoint
from tests.asgi_client import call_modern

pytestmark = pytest.mark.django_db(transaction=True)

APP = McpEndpoint()
CAPS = {"elicitation": {"form": {}}, "sampling": {"tools": {}}}
SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
YES = {"action": "accept", "content": {"ok": True}}
EFFECTS: list[str] = []


async def rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
    response = await call_modern(APP, method, params, capabilities=CAPS)
    assert response.status == 200, (response.status, response.body)
    return response.json()


def result_of(body: dict[str, Any]) -> dict[str, Any]:
    assert "error" not in body, body
    return body["result"]


async def rows() -> list[tuple[str, int]]:
    return await sync_to_async(lambda: list(ToolCall.objects.values_list("status", "round")))()


# -- A: a ctx.once whose effect raised, caught by the handler, breaks the next round -------------

def boom() -> None:
    raise RuntimeError("payment gateway down")


async def tolerant(ctx: ToolContext) -> str:
    """Tries an effect, tolerates its failure, then asks the user."""
    try:
        await ctx.once("charge", boom)
        charged = True
    except RuntimeError:
        charged = False
    answer = await ctx.elicit("Continue?", SCHEMA, key="go")
    return f"charged={charged} ok={answer['ok']}"


async def test_a_failed_once_caught_by_the_handler_does_not_break_replay() -> None:
    with registry.registered_temporarily(make_tool(tolerant)):
        first = result_of(await rpc("tools/call", {"name": "tolerant", "arguments": {}}))
        assert list(first["inputRequests"]) == ["go"], first
        second = result_of(await rpc("tools/call", {"name": "tolerant", "arguments": {}, "requestState": first["requestState"],
                                                    "inputResponses": {"go": YES}}))
    # Expected: the call goes on (the failed effect was never journaled, so it is not a step).
    assert second.get("isError") is not True, second
    assert "ok=True" in second["content"][0]["text"]


# -- A2: the same, with a retry loop and a second question (duplicate seq) ----------------------

ATTEMPTS = {"n": 0}


def flaky() -> int:
    ATTEMPTS["n"] += 1
    if ATTEMPTS["n"] == 1:
        raise RuntimeError("transient")
    return ATTEMPTS["n"]


async def retrying(ctx: ToolContext) -> str:
    for _ in range(3):
        try:
            value = await ctx.once("charge", flaky)
            break
        except RuntimeError:
            continue
    a = await ctx.elicit("First?", SCHEMA, key="first")
    b = await ctx.elicit("Second?", SCHEMA, key="second")
    return f"value={value} a={a['ok']} b={b['ok']}"


async def test_a2_retry_loop_around_once_then_two_questions() -> None:
    ATTEMPTS["n"] = 0
    with registry.registered_temporarily(make_tool(retrying)):
        first = result_of(await rpc("tools/call", {"name": "retrying", "arguments": {}}))
        assert list(first["inputRequests"]) == ["first"], first
        second = result_of(await rpc("tools/call", {"name": "retrying", "arguments": {}, "requestState": first["requestState"],
                                                    "inputResponses": {"first": YES}}))
        assert list(second.get("inputRequests", {})) == ["second"], second
        third = result_of(await rpc("tools/call", {"name": "retrying", "arguments": {}, "requestState": second["requestState"],
                                                   "inputResponses": {"second": YES}}))
    assert third.get("isError") is not True, third
    assert third["content"][0]["text"] == "value=2 a=True b=True"
    assert ATTEMPTS["n"] == 2


# -- B: a saga whose handler defers to a worker ------------------------------------------------

async def deferring(ctx: ToolContext) -> str:
    await ctx.defer()
    return "done on a worker"


async def test_b_callsaga_of_a_deferring_handler_answers_cleanly() -> None:
    with registry.registered_temporarily(make_tool(deferring)):
        body = await rpc("tools/callSaga", {"name": "deferring", "arguments": {}})
    # Expected: a result (e.g. an isError result as resumeSaga gives), never an internal error.
    assert "error" not in body, body


# -- C: resumeSaga with a step error plus a result for a step never asked ----------------------

async def two_questions(ctx: ToolContext) -> str:
    try:
        await ctx.elicit("One?", SCHEMA, key="one")
    except Exception as exc:  # StepFailed
        return f"failed: {type(exc).__name__}"
    return "answered"


async def test_c_resumesaga_refuses_unknown_step_ids_even_with_a_step_error() -> None:
    with registry.registered_temporarily(make_tool(two_questions)):
        first = result_of(await rpc("tools/callSaga", {"name": "two_questions", "arguments": {}}))
        assert first["state"] == "suspended", first
        # Without an error entry, an unknown stepId is refused (-32602)...
        strict = await rpc("tools/resumeSaga", {"sagaToken": first["sagaToken"], "completedSteps": [
            {"stepId": "one", "result": YES}, {"stepId": "never-asked", "result": {"x": 1}}]})
        assert strict.get("error", {}).get("code") == -32602, strict
        # ...but with a step error, the same unknown stepId is silently accepted.
        mixed = await rpc("tools/resumeSaga", {"sagaToken": first["sagaToken"], "completedSteps": [
            {"stepId": "one", "error": {"code": -1, "message": "closed"}}, {"stepId": "never-asked", "result": {"x": 1}}]})
    assert mixed.get("error", {}).get("code") == -32602, mixed


# -- D: ctx.once with a callable that returns a coroutine (async effect not awaited) -----------

async def send_mail(to: str) -> str:
    EFFECTS.append(to)
    return f"sent to {to}"


async def mailer(ctx: ToolContext, to: str) -> str:
    receipt = await ctx.once("mail", lambda: send_mail(to))
    return str(receipt)


async def test_d_once_with_a_lambda_returning_a_coroutine_is_refused_clearly(caplog: pytest.LogCaptureFixture) -> None:
    """It cannot be awaited in the store's transaction: a clear error, and nothing journaled (it was
    the coroutine's repr, the mail never sent)."""
    EFFECTS.clear()
    with registry.registered_temporarily(make_tool(mailer)):
        body = result_of(await rpc("tools/call", {"name": "mailer", "arguments": {"to": "a@example.com"}}))
    assert body["isError"] is True
    assert "pass the async function itself" in caplog.text
    assert EFFECTS == []
    assert await sync_to_async(lambda: list(CallStep.objects.values_list("status", flat=True)))() == []


# -- E: an async ctx.once effect starts although the call was cancelled --------------------------


E_EFFECTS: list[str] = []


async def async_effect() -> str:
    E_EFFECTS.append("async")
    return "sent"


def sync_effect() -> str:
    E_EFFECTS.append("sync")
    return "sent"


async def cancelled_meanwhile(ctx: ToolContext, use_async: bool) -> str:
    await ctx.once("first", lambda: 1)  # gives the call its row
    # Another process (the admin, a task cancel) commits a cancel of this call now; this
    # process's watch has not polled yet.
    await sync_to_async(sync_calls.end_call)(ctx.call_id, "cancelled")
    await ctx.once("mail", async_effect if use_async else sync_effect)
    return "done"


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
async def test_e_once_effect_does_not_start_after_a_committed_cancel(use_async: bool) -> None:
    E_EFFECTS.clear()
    with registry.registered_temporarily(make_tool(cancelled_meanwhile)):
        body = await rpc("tools/call", {"name": "cancelled_meanwhile", "arguments": {"use_async": use_async}})
    # docs/durable-calls.md "Stopping a call": an effect does not start once a cancel has committed.
    assert E_EFFECTS == [], (E_EFFECTS, body)
    assert await rows() == [("cancelled", 0)]


# -- F: a resumeSaga with a step error, retried after its round's owner died, never recovers ----



async def asks_once(ctx: ToolContext) -> str:
    try:
        await ctx.elicit("One?", SCHEMA, key="one")
    except Exception as exc:
        return f"failed: {type(exc).__name__}"
    return "answered"


@pytest.mark.parametrize("with_error", [False, True], ids=["result", "error"])
async def test_f_identical_retry_takes_over_a_dead_round(with_error: bool) -> None:
    error = {"code": -1, "message": "closed"}
    entry = {"stepId": "one", "error": error} if with_error else {"stepId": "one", "result": YES}
    answers_digest = digest({"one": {"__error__": error}}) if with_error else digest({"one": YES})
    with registry.registered_temporarily(make_tool(asks_once)):
        first = result_of(await rpc("tools/callSaga", {"name": "asks_once", "arguments": {}}))

        def died_after_advancing() -> None:
            # What store.advance leaves when the process that claimed the round dies before its outcome.
            call = ToolCall.objects.get()
            CallStep.objects.filter(call=call, seq=0).update(
                status="failed" if with_error else "done", error=error if with_error else None, response=None if with_error else YES)
            ToolCall.objects.filter(id=call.id).update(round=1, status="working", last_answers_digest=answers_digest,
                                                       last_outcome=None, updated_at=timezone.now() - timedelta(hours=1))

        await sync_to_async(died_after_advancing)()
        body = await rpc("tools/resumeSaga", {"sagaToken": first["sagaToken"], "completedSteps": [entry]})
    assert "error" not in body, body
    assert body["result"]["content"][0]["text"] == ("failed: StepFailed" if with_error else "answered")


# -- G: an identical retry of a resumeSaga that reported a step error is refused ------------------

@pytest.mark.parametrize("with_error", [False, True], ids=["result", "error"])
async def test_g_replayed_resume_with_a_step_error_gets_the_same_answer(with_error: bool) -> None:
    entry = {"stepId": "one", "error": {"code": -1, "message": "closed"}} if with_error else {"stepId": "one", "result": YES}
    with registry.registered_temporarily(make_tool(asks_once)):
        first = result_of(await rpc("tools/callSaga", {"name": "asks_once", "arguments": {}}))
        final = await rpc("tools/resumeSaga", {"sagaToken": first["sagaToken"], "completedSteps": [entry]})
        assert "result" in final, final
        # The client lost the answer and resends the very same request (cf. test_saga_replayed_resume_is_idempotent).
        again = await rpc("tools/resumeSaga", {"sagaToken": first["sagaToken"], "completedSteps": [entry]})
    assert again.get("result") == final["result"], again


# -- S: sampling with tools: forbidden, unknown, bad arguments, past the budget ------------------

S_RAN: list[str] = []


def wipe(table: str) -> str:
    """Deletes a table."""
    S_RAN.append(f"wipe:{table}")
    return "wiped"


def add(a: int, b: int) -> int:
    """Adds."""
    S_RAN.append("add")
    return a + b


WIPE = make_tool(wipe, permissions=("auth.delete_user",))
ADD = make_tool(add)


async def agent(ctx: ToolContext) -> str:
    result = await ctx.sample("help", tools=[WIPE, ADD], max_tool_calls=3)
    return f"{result.text}|calls={result.tool_calls}"


def uses(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks), "model": "m", "stopReason": "toolUse"}


async def test_s_sampling_tool_uses_are_checked_and_limited() -> None:
    S_RAN.clear()
    with registry.registered_temporarily(make_tool(agent)):
        params = {"name": "agent", "arguments": {}}
        first = result_of(await rpc("tools/call", params))
        (key,) = first["inputRequests"]
        answer = uses(
            {"type": "tool_use", "id": "u1", "name": "wipe", "input": {"table": "users"}},
            {"type": "tool_use", "id": "u2", "name": "nope", "input": {}},
            {"type": "tool_use", "id": "u3", "name": "add", "input": {"a": "x"}},
        )
        second = result_of(await rpc("tools/call", {**params, "requestState": first["requestState"], "inputResponses": {key: answer}}))
        assert S_RAN == [], S_RAN
        (key2,) = second["inputRequests"]
        results = second["inputRequests"][key2]["params"]["messages"][-1]["content"]
        assert [r["isError"] for r in results] == [True, True, True], results
        more = uses({"type": "tool_use", "id": "u4", "name": "add", "input": {"a": 1, "b": 2}})
        third = result_of(await rpc("tools/call", {**params, "requestState": second["requestState"], "inputResponses": {key2: more}}))
    assert third.get("isError") is True, third  # 4 tool calls > max_tool_calls=3
    assert S_RAN == [], S_RAN
    assert await rows() == [("failed", 2)]


# -- B2: tools/callSaga of a background tool ---------------------------------------------------

async def slow_report(n: int) -> str:
    return f"report {n}"


async def test_b2_callsaga_of_a_background_tool_answers_cleanly() -> None:
    with registry.registered_temporarily(make_tool(slow_report, background=True)):
        body = await rpc("tools/callSaga", {"name": "slow_report", "arguments": {"n": 1}})
    assert "error" not in body, body


# -- A3: the row left behind by A2's failure ---------------------------------------------------

async def test_a3_row_after_the_duplicate_seq_failure() -> None:
    ATTEMPTS["n"] = 0
    with registry.registered_temporarily(make_tool(retrying)):
        first = result_of(await rpc("tools/call", {"name": "retrying", "arguments": {}}))
        params = {"name": "retrying", "arguments": {}, "requestState": first["requestState"], "inputResponses": {"first": YES}}
        second = await rpc("tools/call", params)
        again = await rpc("tools/call", params)
    state = await rows()
    assert "error" not in second and "error" not in again, (second, again, state)


# -- H: a sampling answer whose text block has no string text passes the answer check ---------

async def summarise(ctx: ToolContext) -> str:
    result = await ctx.sample("Summarise", key="sum")
    return result.text


async def test_h_sampling_answer_with_a_non_string_text_is_refused() -> None:
    with registry.registered_temporarily(make_tool(summarise)):
        params = {"name": "summarise", "arguments": {}}
        first = result_of(await rpc("tools/call", params))
        bad = {"role": "assistant", "content": {"type": "text", "text": 5}, "model": "m"}
        body = await rpc("tools/call", {**params, "requestState": first["requestState"], "inputResponses": {"sum": bad}})
        state = await rows()
    # Expected (answers.py: "checked against the request it answers before it reaches the journal"):
    # -32602 naming the key, and the call still waiting for a valid answer.
    assert body.get("error", {}).get("code") == -32602, (body, state)
    assert state == [("input_required", 0)], state


# -- I: resumeSaga (step error) of a cancelled saga --------------------------------------------

async def test_i_resume_with_error_of_a_cancelled_saga() -> None:
    with registry.registered_temporarily(make_tool(asks_once)):
        first = result_of(await rpc("tools/callSaga", {"name": "asks_once", "arguments": {}}))
        call_id = await sync_to_async(lambda: str(ToolCall.objects.get().id))()
        await sync_to_async(sync_calls.end_call)(call_id, "cancelled")
        body = await rpc("tools/resumeSaga", {"sagaToken": first["sagaToken"], "completedSteps": [
            {"stepId": "one", "error": {"code": -1, "message": "closed"}}]})
        ok = await rpc("tools/resumeSaga", {"sagaToken": first["sagaToken"], "completedSteps": [{"stepId": "one", "result": YES}]})
    assert ok["result"]["isError"] is True and "cancelled" in ok["result"]["content"][0]["text"], ok
    assert body.get("result") == ok["result"], body
    assert await rows() == [("cancelled", 0)]


# -- G: a ctx.once step another run journaled as failed, between this run's load and its effect ---

CHARGED: list[str] = []


def charge_card() -> str:
    CHARGED.append("charged")
    return "charged"


async def charge_after_another_run(ctx: ToolContext, async_effect: bool) -> str:
    """Its first step makes the row; then another run of the call (simulated) journals step 1 as failed."""
    from mcp_tools.engine.journal import Step

    async def charge_card_async() -> str:
        return charge_card()

    await ctx.once("prepare", lambda: "ready")
    if not CHARGED:  # the first run only: the other run's entry is there for every replay
        CHARGED.append("the other run")
        await sync_to_async(sync_calls.record_failed_once)(
            ctx.call_id, Step(seq=1, kind="once", key="charge", digest=""), ValueError("card declined"))
    try:
        await ctx.once("charge", charge_card_async if async_effect else charge_card)
    except ValueError as exc:  # the class and message the other run journaled
        outcome = f"declined: {exc}"
    else:
        outcome = "charged"
    answer = await ctx.elicit(f"{outcome}. Continue?", SCHEMA, key="go")  # the next round replays the failed step
    return f"{outcome} ok={answer['ok']}"


@pytest.mark.parametrize("async_effect", [False, True])
async def test_a_once_step_another_run_journaled_as_failed_fails_here_and_on_replay(async_effect: bool) -> None:
    CHARGED.clear()
    arguments = {"async_effect": async_effect}
    with registry.registered_temporarily(make_tool(charge_after_another_run)):
        first = result_of(await rpc("tools/call", {"name": "charge_after_another_run", "arguments": arguments}))
        assert first["inputRequests"]["go"]["params"]["message"] == "declined: card declined. Continue?", first
        second = result_of(await rpc("tools/call", {"name": "charge_after_another_run", "arguments": arguments,
                                                    "requestState": first["requestState"], "inputResponses": {"go": YES}}))
    assert second["content"][0]["text"] == "declined: card declined ok=True", second
    assert CHARGED == ["the other run"], "the effect never ran here"


# -- H: a client's integer past 64 bits, replayed from a journal carried in requestState ---------

BIG = 2**70 + 1
NUMBER = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


async def ask_a_number_then_go_on(ctx: ToolContext) -> str:
    first = await ctx.elicit("A number?", NUMBER, key="a")
    await ctx.elicit("Continue?", SCHEMA, key="b")
    return repr(first["n"])


async def test_a_carried_journal_replays_the_clients_big_integer_as_it_was_answered() -> None:
    """The token's reader kept it exact (orjson reads it as a rounded float): the same answer
    whether the round's journal came in the token or from the row."""
    name = "ask_a_number_then_go_on"
    with registry.registered_temporarily(make_tool(ask_a_number_then_go_on)):
        one = result_of(await rpc("tools/call", {"name": name, "arguments": {}}))
        two = result_of(await rpc("tools/call", {"name": name, "arguments": {}, "requestState": one["requestState"],
                                                 "inputResponses": {"a": {"action": "accept", "content": {"n": BIG}}}}))
        three = result_of(await rpc("tools/call", {"name": name, "arguments": {}, "requestState": two["requestState"],
                                                   "inputResponses": {"b": YES}}))
    assert three["content"][0]["text"] == repr(BIG), three
