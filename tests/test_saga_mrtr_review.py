"""Client input to sagas (seed 000) and 2026-07-28 rounds that cannot be taken: a clear protocol
error and nothing changed; a round that cannot go on ends its call as the client is told.

Each test failed before its fix (a review of the saga and MRTR flavors): a step error of any shape
was taken (and ended the call), a step named twice or with both a result and an error was taken
silently, an identical retry after a failed step was refused, a resumed saga whose handler deferred
left its call working with nobody to run it; NaN or 1e400 in an answer was an internal error; an
invalid answer sent in advance, after an effect, left the call working.
"""
from __future__ import annotations

import datetime
import decimal
import json
import uuid
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from pydantic import BaseModel

from mcp_tools import StepFailed, ToolContext, ToolResult
from mcp_tools.models import ToolCall
from mcp_tools.registry import make_tool, registry
from mcp_tools.transports.http import McpEndpoint
from tests.asgi_client import call_modern, modern_message, post_headers, request
from tests.test_mrtr_security import TARGET, call, result_of, snapshot, start

pytestmark = pytest.mark.django_db(transaction=True)
APP = McpEndpoint()
CAPS = {"elicitation": {"form": {}}, "sampling": {}}
PRODUCTION = {"action": "accept", "content": {"env": "production", "confirm": True}}
EFFECTS: list[int] = []


class Q(BaseModel):
    name: str


def effect() -> int:
    EFFECTS.append(1)
    return len(EFFECTS)


async def fallback(ctx: ToolContext) -> str:
    """Catches a failed step ``a`` (saga step error) and goes on with ``b``."""
    try:
        name = (await ctx.elicit("first?", schema=Q, key="a")).name
    except StepFailed:
        name = "default"
    b = await ctx.elicit("second?", schema=Q, key="b")
    n = await ctx.once("effect", effect)
    return f"{name}-{b.name}-{n}"


async def elicit_then_defer(ctx: ToolContext) -> str:
    q = await ctx.elicit("name?", schema=Q, key="q")
    await ctx.once("effect", effect)
    await ctx.defer()
    return q.name


async def rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
    response = await call_modern(APP, method, params, capabilities=CAPS)
    assert response.status == 200, response.body
    return response.json()


async def deploy_token() -> str:
    first = await rpc("tools/callSaga", {"name": "deploy", "arguments": {"service": "x"}})
    return first["result"]["sagaToken"]


@pytest.mark.parametrize("error", [42, "oops", [], {"code": "x"}, {"message": 5}],
                         ids=["number", "string", "array", "code-not-int-no-message", "message-not-string"])
async def test_step_error_of_wrong_shape_is_refused_and_changes_nothing(error: Any) -> None:
    """Seed 000: ``SagaStepResult.error`` is ``{code: number; message: string; data?}``."""
    token = await deploy_token()
    before = await snapshot()
    answer = await rpc("tools/resumeSaga", {"sagaToken": token, "completedSteps": [{"stepId": "target", "error": error}]})
    assert answer.get("error", {}).get("code") == -32602, answer
    assert await snapshot() == before


@pytest.mark.parametrize("steps", [
    [{"stepId": "target", "result": TARGET}, {"stepId": "target", "result": PRODUCTION}],
    [{"stepId": "target", "result": TARGET, "error": {"code": -1, "message": "m"}}],
], ids=["a-step-twice", "result-and-error"])
async def test_completed_steps_that_contradict_themselves_are_refused(steps: list[dict[str, Any]]) -> None:
    """One entry per step, with a result or an error: before, the last entry or the error silently won."""
    token = await deploy_token()
    before = await snapshot()
    answer = await rpc("tools/resumeSaga", {"sagaToken": token, "completedSteps": steps})
    assert answer.get("error", {}).get("code") == -32602, answer
    assert await snapshot() == before


@pytest.mark.parametrize("taken", [
    {"stepId": "target", "result": PRODUCTION},
    {"stepId": "target", "error": {"code": -1, "message": "the user closed the dialog"}},
], ids=["another-answer", "an-error-for-an-answered-step"])
async def test_a_history_that_contradicts_a_step_already_taken_is_refused(taken: dict[str, Any]) -> None:
    """Found by a review of the 2026 era: a resume whose full history changed an answer an earlier round
    took (``target`` answered staging, sent again as production) was taken silently, and the call went
    on with staging while the client believed it had changed the answer."""
    first = await rpc("tools/callSaga", {"name": "deploy", "arguments": {"service": "x"}})
    second = await rpc("tools/resumeSaga", {"sagaToken": first["result"]["sagaToken"],
                                            "completedSteps": [{"stepId": "target", "result": TARGET}]})
    assert [s["stepId"] for s in second["result"]["steps"]] == ["verdict"], second
    before = await snapshot()
    verdict = {"stepId": "verdict", "result": {"role": "assistant", "content": {"type": "text", "text": "yes"}, "model": "m"}}
    answer = await rpc("tools/resumeSaga", {"sagaToken": second["result"]["sagaToken"], "completedSteps": [taken, verdict]})
    assert answer.get("error", {}).get("code") == -32602, answer
    assert answer["error"]["data"] == {"stepIds": ["target"]}, answer
    assert await snapshot() == before
    same = await rpc("tools/resumeSaga", {"sagaToken": second["result"]["sagaToken"],
                                          "completedSteps": [{"stepId": "target", "result": TARGET}, verdict]})
    assert same["result"].get("isError") is not True and "state" not in same["result"], same  # the true history goes on


async def test_identical_retry_with_a_failed_step_in_the_history_gets_the_identical_answer() -> None:
    with registry.registered_temporarily(make_tool(fallback)):
        first = (await rpc("tools/callSaga", {"name": "fallback", "arguments": {}}))["result"]
        history: list[dict[str, Any]] = [{"stepId": "a", "error": {"code": -1, "message": "closed"}}]
        second = (await rpc("tools/resumeSaga", {"sagaToken": first["sagaToken"], "completedSteps": history}))["result"]
        assert [s["stepId"] for s in second["steps"]] == ["b"]
        history.append({"stepId": "b", "result": {"action": "accept", "content": {"name": "bob"}}})
        final = await rpc("tools/resumeSaga", {"sagaToken": second["sagaToken"], "completedSteps": history})
        assert final["result"]["content"][0]["text"] == "default-bob-1"
        again = await rpc("tools/resumeSaga", {"sagaToken": second["sagaToken"], "completedSteps": history})
        assert again == {**final, "id": again["id"]}  # the same answer, not an invalid token


async def test_a_resumed_saga_whose_handler_defers_leaves_no_call_working() -> None:
    with registry.registered_temporarily(make_tool(elicit_then_defer)):
        first = (await rpc("tools/callSaga", {"name": "elicit_then_defer", "arguments": {}}))["result"]
        answer = await rpc("tools/resumeSaga", {"sagaToken": first["sagaToken"], "completedSteps": [
            {"stepId": "q", "result": {"action": "accept", "content": {"name": "a"}}}]})
        assert answer["result"]["isError"] is True  # the saga cannot follow a worker: told so
        statuses = await sync_to_async(lambda: list(ToolCall.objects.values_list("status", flat=True)))()
        assert statuses == ["failed"], statuses  # ended as the client was told


async def charge_then_defer(ctx: ToolContext) -> str:
    """Runs only as a task (``task_support="required"``): an effect, a question, then the worker."""
    n = await ctx.once("effect", effect)
    await ctx.elicit("name?", schema=Q, key="q")
    await ctx.defer()
    return f"charged {n}"


@pytest.mark.parametrize("era", ["2026", "2026-with-tasks", "2025"])
@pytest.mark.parametrize("arguments", [{}, {"unexpected": 1}], ids=["valid-arguments", "invalid-arguments"])
async def test_a_tool_that_runs_only_as_a_task_is_refused_by_call_saga_before_it_runs(era: str, arguments: dict[str, Any]) -> None:
    """tools/call refuses a taskSupport="required" tool before anything runs; tools/callSaga ran it (a call
    row, its effect, its question) and then failed it at ctx.defer(). A saga is never a task, whatever the
    client declared: -32602, and nothing changed."""
    from mcp_tools.server.flavors.tasks import EXTENSION
    from tests.asgi_client import HANDSHAKE, post_json
    from tests.test_http_spec_edges import open_session

    EFFECTS.clear()
    with registry.registered_temporarily(make_tool(charge_then_defer, task_support="required")):
        params = {"name": "charge_then_defer", "arguments": arguments}
        before = await snapshot()
        if era == "2025":
            headers = post_headers(version=HANDSHAKE, session=await open_session({"elicitation": {"form": {}}}))
            response = await post_json(APP, {"jsonrpc": "2.0", "id": 1, "method": "tools/callSaga", "params": params}, headers)
        else:
            caps = {**CAPS, "extensions": {EXTENSION: {}}} if era == "2026-with-tasks" else CAPS
            response = await call_modern(APP, "tools/callSaga", params, capabilities=caps)
        body = response.json()
        assert response.status == 200 and body.get("error", {}).get("code") == -32602, (response.status, body)
        assert "runs only as a task" in body["error"]["message"], body
        assert await snapshot() == before
        assert EFFECTS == []


# -- 2026-07-28 rounds ---------------------------------------------------------------------------

class Amount(BaseModel):
    amount: float


async def elicit_amount(ctx: ToolContext) -> str:
    return repr((await ctx.elicit("amount?", schema=Amount, key="a")).amount)


async def effect_then_elicit(ctx: ToolContext) -> str:
    await ctx.once("effect", effect)
    return repr((await ctx.elicit("amount?", schema=Amount, key="a")).amount)


async def post_raw(name: str, params: dict[str, Any], replace: tuple[str, str]) -> dict[str, Any]:
    body = json.dumps(modern_message("tools/call", {"name": name, **params}, capabilities=CAPS)).replace(*replace).encode()
    response = await request(APP, "POST", headers=post_headers(extra={"mcp-method": "tools/call", "mcp-name": name}), body=body)
    assert response.status in (200, 400), response.body
    return response.json()


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "1e400"])
async def test_a_number_no_json_column_stores_in_an_answer_is_a_parse_error(literal: str) -> None:
    with registry.registered_temporarily(make_tool(elicit_amount)):
        first = (await call_modern(APP, "tools/call", {"name": "elicit_amount", "arguments": {}}, capabilities=CAPS)).json()
        before = await snapshot()
        answer = await post_raw("elicit_amount", {
            "arguments": {}, "requestState": first["result"]["requestState"],
            "inputResponses": {"a": {"action": "accept", "content": {"amount": "__X__"}}}}, ('"__X__"', literal))
        assert answer["error"]["code"] == -32700, answer
        assert await snapshot() == before


async def test_a_number_no_json_column_stores_in_an_unchecked_field_of_a_sampling_answer_is_a_parse_error() -> None:
    state0 = await start()
    state1 = result_of(await call(state=state0, responses={"target": TARGET}))["requestState"]
    before = await snapshot()
    verdict = {"role": "assistant", "content": {"type": "text", "text": "yes"}, "model": "m", "_meta": {"score": "__X__"}}
    answer = await post_raw("deploy", {"arguments": {"service": "x"}, "requestState": state1,
                                       "inputResponses": {"verdict": verdict}}, ('"__X__"', "NaN"))
    assert answer["error"]["code"] == -32700, answer
    assert await snapshot() == before


async def test_an_invalid_answer_sent_in_advance_after_an_effect_leaves_no_call_working() -> None:
    with registry.registered_temporarily(make_tool(effect_then_elicit)):
        answer = (await call_modern(APP, "tools/call", {
            "name": "effect_then_elicit", "arguments": {},
            "inputResponses": {"a": {"action": "accept", "content": {"amount": "nope"}}}}, capabilities=CAPS)).json()
        assert answer["error"]["code"] == -32602
        statuses = await sync_to_async(lambda: list(ToolCall.objects.values_list("status", flat=True)))()
        assert statuses == ["failed"], statuses  # not working forever: the client has no requestState to go on with


async def once_then_ask(ctx: ToolContext) -> str:
    n = await ctx.once("e1", effect)
    q = await ctx.elicit("name?", schema=Q, key="q")
    return f"{q.name}-{n}"


async def test_a_history_naming_a_once_step_is_refused_as_one_never_asked() -> None:
    """Found by a review of the 2026-07-28 era: ``completedSteps`` naming ``e1``, a ``ctx.once`` key, was taken
    (an unknown id is refused), which told the client the server's own step keys."""
    EFFECTS.clear()
    with registry.registered_temporarily(make_tool(once_then_ask)):
        first = (await rpc("tools/callSaga", {"name": "once_then_ask", "arguments": {}}))["result"]
        assert [s["stepId"] for s in first["steps"]] == ["q"], first
        q = {"stepId": "q", "result": {"action": "accept", "content": {"name": "ann"}}}
        answer = await rpc("tools/resumeSaga", {"sagaToken": first["sagaToken"], "completedSteps": [{"stepId": "e1", "result": {"x": 1}}, q]})
        assert answer.get("error", {}).get("code") == -32602 and answer["error"]["data"] == {"stepIds": ["e1"]}, answer
        done = (await rpc("tools/resumeSaga", {"sagaToken": first["sagaToken"], "completedSteps": [q]}))["result"]
        assert done["content"][0]["text"] == "ann-1", done


WHEN = datetime.datetime(2025, 1, 2, 3, 4, tzinfo=datetime.timezone.utc)


async def ask_then_hand_built(ctx: ToolContext, where: str = "meta") -> ToolResult:
    q = await ctx.elicit("name?", schema=Q, key="q")
    if where == "meta":
        return ToolResult(content=[q.name], meta={"generated_at": WHEN, "batch": uuid.UUID(int=7)})
    return ToolResult(content=[q.name], structured_content={"at": WHEN, "total": decimal.Decimal("2.50")})


@pytest.mark.parametrize("flavor", ["saga", "mrtr"])
@pytest.mark.parametrize("where", ["meta", "structured"])
async def test_a_hand_built_result_with_dates_ends_a_call_that_asked_as_one_that_did_not(flavor: str, where: str) -> None:
    """Found by the seeds review: a ``ToolResult`` whose ``_meta`` or ``structuredContent`` holds a datetime,
    UUID or Decimal went out (as their text) from a call without a row, but a saga's or MRTR call's last
    round, which closes the row, answered -32603 and left the call waiting (the row's JSON column took no
    datetime). Every call answers it alike, and the row keeps what the client got."""
    params = {"name": "ask_then_hand_built", "arguments": {"where": where}}
    q = {"action": "accept", "content": {"name": "ann"}}
    with registry.registered_temporarily(make_tool(ask_then_hand_built)):
        if flavor == "saga":
            first = (await rpc("tools/callSaga", params))["result"]
            answer = await rpc("tools/resumeSaga", {"sagaToken": first["sagaToken"], "completedSteps": [{"stepId": "q", "result": q}]})
        else:
            first = (await rpc("tools/call", params))["result"]
            answer = await rpc("tools/call", {**params, "requestState": first["requestState"], "inputResponses": {"q": q}})
        assert "result" in answer, answer
        result = answer["result"]
        if where == "meta":
            assert {k: result["_meta"][k] for k in ("generated_at", "batch")} == {
                "generated_at": "2025-01-02 03:04:00+00:00", "batch": "00000000-0000-0000-0000-000000000007"}, result
        else:
            assert result["structuredContent"] == {"at": "2025-01-02 03:04:00+00:00", "total": "2.50"}, result
        row = await sync_to_async(ToolCall.objects.get)()
        assert row.status == "completed", row.status
        assert {k: v for k, v in row.result.items() if k != "_meta"} == {k: v for k, v in result.items() if k not in ("_meta", "resultType")}
