"""2026-07-28 multi-round-trip requests under attack, on the demo ``deploy`` tool.

``deploy`` asks the user for ``target`` ({env: staging|production}), then the
client's model for ``verdict``, then writes one AuditLog row (``ctx.once``).
Every forged, stale, foreign or ill-fitting continuation must get a clear
-32602 and change nothing: the call's round and status, its journal rows and
the audit log stay as they were.
"""

from __future__ import annotations

import asyncio
import time
import types
from typing import Any
from unittest import mock

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.core import signing
from django.test import override_settings

from demo_site.inventory.models import AuditLog
from mcp_tools import ToolContext
from mcp_tools.server import tokens
from mcp_tools.engine.context import SyncToolContext
from mcp_tools.models import CallStep, ToolCall
from mcp_tools.registry import make_tool, registry
from mcp_tools.transports.http import McpEndpoint
from tests.asgi_client import AsgiResponse, call_modern

pytestmark = pytest.mark.django_db(transaction=True)

APP = McpEndpoint()
CAPS = {"elicitation": {"form": {}}, "sampling": {}}
TARGET = {"action": "accept", "content": {"env": "staging", "confirm": True}}
VERDICT = {"role": "assistant", "content": {"type": "text", "text": "yes"}, "model": "test-model"}
INVALID_STATE = "Invalid or expired requestState"


# -- helpers ----------------------------------------------------------------------------------


async def call(
    name: str = "deploy",
    arguments: dict[str, Any] | None = None,
    *,
    state: Any = ...,
    responses: dict[str, Any] | None = None,
    token: str | None = None,
    method: str = "tools/call",
) -> AsgiResponse:
    params: dict[str, Any] = {"name": name, "arguments": {"service": "x"} if arguments is None else arguments}
    if state is not ...:
        params["requestState"] = state
    if responses is not None:
        params["inputResponses"] = responses
    return await call_modern(APP, method, params, token=token, capabilities=CAPS)


def result_of(response: AsgiResponse) -> dict[str, Any]:
    assert response.status == 200, response.body
    body = response.json()
    assert "error" not in body, body
    return body["result"]


def assert_refused(response: AsgiResponse, message: str = INVALID_STATE) -> dict[str, Any]:
    assert response.status == 200, response.body
    body = response.json()
    assert "result" not in body, body
    assert body["error"]["code"] == -32602, body
    assert message in body["error"]["message"]
    return body["error"]


def _snapshot() -> dict[str, Any]:
    return {
        "calls": sorted((str(c.id), c.round, c.status, c.last_answers_digest) for c in ToolCall.objects.all()),
        "steps": sorted((str(s.call_id), s.seq, s.key, s.status, repr(s.response)) for s in CallStep.objects.all()),
        "audit": AuditLog.objects.count(),
    }


async def snapshot() -> dict[str, Any]:
    return await sync_to_async(_snapshot)()


async def start(service: str = "x", token: str | None = None) -> str:
    """Round 0 of a deploy: returns the requestState that asks for ``target``."""
    result = result_of(await call(arguments={"service": service}, token=token))
    assert result["resultType"] == "input_required"
    assert list(result["inputRequests"]) == ["target"]
    assert result["inputRequests"]["target"]["method"] == "elicitation/create"
    return result["requestState"]


async def to_round_1(service: str = "x", token: str | None = None) -> tuple[str, str, dict[str, Any]]:
    """Answer ``target``: returns (round-0 state, round-1 state, round-1 result)."""
    state0 = await start(service, token)
    result = result_of(await call(arguments={"service": service}, state=state0, responses={"target": TARGET}, token=token))
    assert list(result["inputRequests"]) == ["verdict"]
    return state0, result["requestState"], result


def create_user_token(username: str) -> str:
    from django.contrib.auth.models import User
    from rest_framework.authtoken.models import Token

    return Token.objects.create(user=User.objects.create_user(username, password="pw")).key


def _flip(token: str, index: int) -> str:
    original = token[index]
    replacement = "A" if original != "A" else "B"
    return token[:index] + replacement + token[index + 1 :]


# -- the happy path, for reference ---------------------------------------------------------------


async def test_deploy_completes_over_three_rounds_with_one_audit_row() -> None:
    _, state1, _ = await to_round_1()
    call_row = await sync_to_async(ToolCall.objects.get)()
    assert (call_row.round, call_row.status, call_row.flavor) == (1, "input_required", "mrtr")
    done = result_of(await call(state=state1, responses={"verdict": VERDICT}))
    assert done["resultType"] == "complete"
    assert done["structuredContent"] == {"service": "x", "env": "staging", "verdict": "yes", "audit_id": done["structuredContent"]["audit_id"]}
    after = await snapshot()
    assert after["audit"] == 1
    assert [c[1:3] for c in after["calls"]] == [(2, "completed")]
    assert [(s[1], s[2], s[3]) for s in after["steps"]] == [(0, "target", "done"), (1, "verdict", "done"), (2, "audit", "done")]


# -- tampered and malformed requestState ------------------------------------------------------------

POSITIONS = {
    "start": lambda token: 0,
    "second": lambda token: 1,
    "middle": lambda token: len(token) // 2,
    "payload-end": lambda token: token.index(":") - 1,
    "timestamp": lambda token: token.index(":") + 1,
    "signature": lambda token: token.rindex(":") + 5,
    "end": lambda token: len(token) - 1,
}


@pytest.mark.parametrize("where", list(POSITIONS))
async def test_tampered_request_state_is_refused_without_state_change(where: str) -> None:
    state0 = await start()
    tampered = _flip(state0, POSITIONS[where](state0))
    assert tampered != state0
    before = await snapshot()
    assert_refused(await call(state=tampered, responses={"target": TARGET}))
    assert await snapshot() == before
    # The genuine token still works afterwards.
    assert result_of(await call(state=state0, responses={"target": TARGET}))["resultType"] == "input_required"


MALFORMED: dict[str, Any] = {
    "truncated-by-one": lambda token: token[:-1],
    "truncated-half": lambda token: token[: len(token) // 2],
    "signature-dropped": lambda token: token.rsplit(":", 1)[0],
    "extended": lambda token: token + "A",
    "empty": lambda token: "",
    "whitespace": lambda token: " ",
    "int": lambda token: 12345,
    "bool": lambda token: True,
    "list": lambda token: [token],
    "object": lambda token: {"c": "x", "r": 0},
    "huge": lambda token: token * 200,
    "unsigned-payload": lambda token: signing.b64_encode(b'{"c":"x","r":0}').decode(),
}


@pytest.mark.parametrize("kind", list(MALFORMED))
async def test_malformed_request_state_is_refused_without_state_change(kind: str) -> None:
    state0 = await start()
    before = await snapshot()
    assert_refused(await call(state=MALFORMED[kind](state0), responses={"target": TARGET}))
    assert await snapshot() == before


async def test_request_state_signed_with_another_key_is_refused() -> None:
    state0 = await start()
    payload = tokens.unseal("request", state0)
    forged = signing.dumps(payload, key="attacker-" + "k" * 60, salt="mcp_tools.request", compress=True)
    before = await snapshot()
    assert_refused(await call(state=forged, responses={"target": TARGET}))
    assert await snapshot() == before


async def test_token_of_another_purpose_is_refused() -> None:
    """A saga token (same key, other salt) carrying the very same payload is no requestState."""
    state0 = await start()
    saga_token = tokens.seal("saga", tokens.unseal("request", state0))
    before = await snapshot()
    assert_refused(await call(state=saga_token, responses={"target": TARGET}))
    assert await snapshot() == before


async def test_request_state_with_forged_round_is_refused_even_when_properly_signed() -> None:
    """Defence in depth: even a validly sealed token for a round the call is not in changes nothing."""
    state0 = await start()
    future = tokens.seal("request", {**tokens.unseal("request", state0), "r": 5})
    before = await snapshot()
    assert_refused(await call(state=future, responses={"target": TARGET}))
    assert await snapshot() == before


# -- expiry -----------------------------------------------------------------------------------


def _later(seconds: float) -> Any:
    real = time.time
    return mock.patch.object(signing, "time", types.SimpleNamespace(time=lambda: real() + seconds))


async def test_expired_request_state_is_refused_without_state_change() -> None:
    with override_settings(MCP_TOOLS={**settings.MCP_TOOLS, "TOKEN_TTL": 60}):
        state0 = await start()
        before = await snapshot()
        with _later(61):
            assert_refused(await call(state=state0, responses={"target": TARGET}))
        assert await snapshot() == before
        with _later(55):  # still inside the TTL: the same token is accepted
            assert result_of(await call(state=state0, responses={"target": TARGET}))["resultType"] == "input_required"


async def test_request_state_of_an_expired_call_is_refused() -> None:
    state0 = await start()
    await sync_to_async(lambda: ToolCall.objects.update(expires_at=ToolCall.objects.get().created_at))()
    steps_before = (await snapshot())["steps"]
    assert_refused(await call(state=state0, responses={"target": TARGET}))
    after = await snapshot()
    assert after["steps"] == steps_before
    # The round did not move; the row is marked expired (also when the token carried the journal).
    assert [c[1:3] for c in after["calls"]] == [(0, "expired")]
    assert after["audit"] == 0


# -- replay -----------------------------------------------------------------------------------


async def test_replayed_state_with_different_answers_after_advance_is_refused() -> None:
    state0, _, round1 = await to_round_1()
    before = await snapshot()
    production = {"action": "accept", "content": {"env": "production", "confirm": True}}
    assert_refused(await call(state=state0, responses={"target": production}))
    assert await snapshot() == before
    # An identical retry of the round is answered with the identical outcome, and changes nothing either.
    assert result_of(await call(state=state0, responses={"target": TARGET})) == round1
    assert await snapshot() == before


async def test_replayed_state_after_completion_with_other_verdict_is_refused() -> None:
    _, state1, _ = await to_round_1()
    done = result_of(await call(state=state1, responses={"verdict": VERDICT}))
    before = await snapshot()
    other = {**VERDICT, "content": {"type": "text", "text": "no"}}
    assert_refused(await call(state=state1, responses={"verdict": other}))
    assert await snapshot() == before
    assert result_of(await call(state=state1, responses={"verdict": VERDICT})) == done
    assert (await snapshot())["audit"] == 1


async def test_state_without_answers_asks_again_without_advancing() -> None:
    state0 = await start()
    before = await snapshot()
    again = result_of(await call(state=state0))
    assert list(again["inputRequests"]) == ["target"]
    assert await snapshot() == before


async def test_resent_answer_for_an_earlier_round_cannot_rewrite_history() -> None:
    """Keys answered in an earlier round may be resent (stateless clients do); the journal's answer wins."""
    _, state1, _ = await to_round_1()
    production = {"action": "accept", "content": {"env": "production", "confirm": True}}
    done = result_of(await call(state=state1, responses={"target": production, "verdict": VERDICT}))
    assert done["structuredContent"]["env"] == "staging"
    target_answer = await sync_to_async(lambda: CallStep.objects.get(key="target").response)()
    assert target_answer == TARGET


# -- binding: principal, arguments, tool, method ---------------------------------------------------


async def test_state_used_by_another_user_is_refused() -> None:
    alice = await sync_to_async(create_user_token)("alice")
    bob = await sync_to_async(create_user_token)("bob")
    state0 = await start(token=alice)
    row = await sync_to_async(ToolCall.objects.select_related("user").get)()
    assert row.user.username == "alice" and row.principal == f"user:{row.user_id}"
    before = await snapshot()
    assert_refused(await call(state=state0, responses={"target": TARGET}, token=bob))
    assert_refused(await call(state=state0, responses={"target": TARGET}))  # anonymous
    assert await snapshot() == before
    assert result_of(await call(state=state0, responses={"target": TARGET}, token=alice))["resultType"] == "input_required"


async def test_anonymous_state_used_by_a_user_is_refused() -> None:
    carol = await sync_to_async(create_user_token)("carol")
    state0 = await start()
    before = await snapshot()
    assert_refused(await call(state=state0, responses={"target": TARGET}, token=carol))
    assert await snapshot() == before


async def test_state_for_other_arguments_is_refused() -> None:
    state0 = await start("x")
    before = await snapshot()
    assert_refused(await call(arguments={"service": "y"}, state=state0, responses={"target": TARGET}))
    assert await snapshot() == before


@pytest.mark.parametrize(
    ("name", "arguments"),
    [("echo", {"text": "x"}), ("test_input_required_result_tampered_state", {}), ("slow_count", {"n": 1})],
)
async def test_state_for_another_tool_is_refused(name: str, arguments: dict[str, Any]) -> None:
    state0 = await start()
    before = await snapshot()
    assert_refused(await call(name, arguments, state=state0, responses={"target": TARGET}))
    assert await snapshot() == before


async def test_state_used_with_another_method_is_refused() -> None:
    state0 = await start()
    before = await snapshot()
    response = await call_modern(
        APP, "prompts/get", {"name": "restock_advice", "arguments": {"sku": "A"}, "requestState": state0, "inputResponses": {"target": TARGET}},
        capabilities=CAPS,
    )
    assert_refused(response)
    assert await snapshot() == before


# -- answers that do not fit -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "responses",
    [{"bogus": TARGET}, {"verdict": VERDICT}],
    ids=["never-asked", "asked-only-later"],
)
async def test_input_responses_for_keys_not_asked_are_ignored_and_change_nothing(responses: dict[str, Any]) -> None:
    """2026-07-28, MRTR error handling: "If additional, unexpected parameters are provided in the
    InputResponses object, the server SHOULD ignore any information it does not recognize or need."
    (They were refused with -32602 before.) Ignored means never journaled: an answer sent before its
    question was asked does not answer it later either."""
    state0 = await start()
    before = await snapshot()
    again = result_of(await call(state=state0, responses=responses))
    assert again["resultType"] == "input_required" and set(again["inputRequests"]) == {"target"}, again
    assert await snapshot() == before
    asked = result_of(await call(state=again["requestState"], responses={"target": TARGET}))
    assert set(asked["inputRequests"]) == {"verdict"}, asked  # the early verdict was not kept


async def test_a_valid_answer_with_unknown_keys_beside_it_advances_the_round() -> None:
    state0 = await start()
    asked = result_of(await call(state=state0, responses={"target": TARGET, "bogus": {"anything": 1}}))
    assert asked["resultType"] == "input_required" and set(asked["inputRequests"]) == {"verdict"}, asked
    done = result_of(await call(state=asked["requestState"], responses={"verdict": VERDICT, "bogus": None}))
    assert done.get("isError") is not True and done["resultType"] == "complete", done
    assert await sync_to_async(AuditLog.objects.count)() == 1


@pytest.mark.parametrize(
    "answer",
    [
        {"action": "accept", "content": {"env": "moon", "confirm": True}},
        {"action": "accept", "content": {"confirm": True}},
        {"action": "accept", "content": {}},
        {"action": "accept"},
        {"action": "accept", "content": {"env": "staging", "confirm": "yes"}},
        {"action": "accept", "content": {"env": 1}},
        {"action": "accept", "content": "staging"},
        {"action": "approve", "content": {"env": "staging"}},
        {"content": {"env": "staging"}},
        "staging",
        None,
    ],
    ids=["env-not-in-enum", "env-missing", "empty-content", "no-content", "confirm-not-bool", "env-not-string",
         "content-not-object", "unknown-action", "no-action", "not-an-object", "null"],
)
async def test_elicitation_answer_failing_the_requested_schema_is_refused(answer: Any) -> None:
    state0 = await start()
    before = await snapshot()
    error = assert_refused(await call(state=state0, responses={"target": answer}), "Invalid input response for 'target'")
    assert error["data"] == {"key": "target"}
    assert await snapshot() == before


@pytest.mark.parametrize(
    "answer",
    [{"role": "user", "content": {"type": "text", "text": "yes"}}, {"role": "assistant"}, {"role": "assistant", "content": {"text": "no type"}},
     {"role": "assistant", "content": {"type": "bogus"}, "model": "m"},
     {"role": "assistant", "content": {"type": "image", "data": "!!not base64!!", "mimeType": "image/png"}, "model": "m"}],
    ids=["user-role", "no-content", "block-without-type", "unknown-block-type", "image-not-base64"],
)
async def test_sampling_answer_failing_the_request_is_refused(answer: Any) -> None:
    _, state1, _ = await to_round_1()
    before = await snapshot()
    assert_refused(await call(state=state1, responses={"verdict": answer}), "Invalid input response for 'verdict'")
    assert await snapshot() == before


async def test_input_responses_not_an_object_is_refused() -> None:
    state0 = await start()
    before = await snapshot()
    response = await call_modern(
        APP, "tools/call", {"name": "deploy", "arguments": {"service": "x"}, "requestState": state0, "inputResponses": [TARGET]}, capabilities=CAPS
    )
    assert_refused(response, '"inputResponses" must be an object')
    assert await snapshot() == before


# -- concurrency: identical retries of one round ------------------------------------------------------

N = 8


async def test_concurrent_identical_retries_advance_once_and_answer_identically() -> None:
    state0 = await start()
    answers = await asyncio.gather(*(call(state=state0, responses={"target": TARGET}) for _ in range(N)))
    results = [result_of(r) for r in answers]
    assert all(r == results[0] for r in results), "every retry of the round gets the identical outcome"
    assert list(results[0]["inputRequests"]) == ["verdict"]
    after = await snapshot()
    assert [c[1:3] for c in after["calls"]] == [(1, "input_required")]  # exactly one advance
    assert sorted((s[2], s[3]) for s in after["steps"]) == [("target", "done"), ("verdict", "pending")]

    state1 = results[0]["requestState"]
    finals = [result_of(r) for r in await asyncio.gather(*(call(state=state1, responses={"verdict": VERDICT}) for _ in range(N)))]
    assert all(r == finals[0] for r in finals)
    assert finals[0]["resultType"] == "complete"
    done = await snapshot()
    assert done["audit"] == 1, "the side effect ran exactly once"
    assert [c[1:3] for c in done["calls"]] == [(2, "completed")]
    assert sorted(s[2] for s in done["steps"]) == ["audit", "target", "verdict"]
    audit = await sync_to_async(AuditLog.objects.get)()
    assert finals[0]["structuredContent"]["audit_id"] == audit.pk
    assert audit.detail == {"service": "x", "env": "staging", "verdict": "yes"}


async def test_concurrent_retries_with_conflicting_answers_one_wins_the_rest_refused() -> None:
    state0 = await start()
    production = {"action": "accept", "content": {"env": "production", "confirm": True}}
    variants = [TARGET if i % 2 == 0 else production for i in range(N)]
    responses = await asyncio.gather(*(call(state=state0, responses={"target": v}) for v in variants))
    won = [(v, r.json()["result"]) for v, r in zip(variants, responses) if "result" in r.json()]
    lost = [r for r in responses if "error" in r.json()]
    assert won and len(won) + len(lost) == N
    winner = won[0][0]
    assert all(v == winner for v, _ in won), "only retries identical to the winning answer succeed"
    assert all(result == won[0][1] for _, result in won)
    for response in lost:
        assert_refused(response)
    after = await snapshot()
    assert [c[1] for c in after["calls"]] == [1]
    target_step = await sync_to_async(lambda: CallStep.objects.get(key="target").response)()
    assert target_step == winner


# -- sync handlers get blocking context methods --------------------------------------------------

SEEN: dict[str, Any] = {}


def sync_confirm(ctx: ToolContext, item: str) -> str:
    """A sync tool that asks, then writes once."""
    SEEN["ctx"] = type(ctx)
    answer = ctx.elicit("Confirm?", {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}, key="confirm")
    SEEN["answer"] = answer
    audit_id = ctx.once("write", lambda: AuditLog.objects.create(actor="sync", action=f"sync:{item}").pk)
    SEEN["audit_id"] = audit_id
    return f"{item}: ok={answer['ok']} audit={audit_id}"


async def test_sync_tool_context_methods_block_and_return_values() -> None:
    SEEN.clear()
    with registry.registered_temporarily(make_tool(sync_confirm)):
        first = result_of(await call("sync_confirm", {"item": "bolt"}))
        assert SEEN["ctx"] is SyncToolContext
        assert list(first["inputRequests"]) == ["confirm"]
        done = result_of(await call("sync_confirm", {"item": "bolt"}, state=first["requestState"], responses={"confirm": {"action": "accept", "content": {"ok": True}}}))
    assert SEEN["answer"] == {"ok": True}  # a plain value, not an awaitable
    assert isinstance(SEEN["audit_id"], int)
    assert done["content"] == [{"type": "text", "text": f"bolt: ok=True audit={SEEN['audit_id']}"}]
    assert await sync_to_async(AuditLog.objects.filter(action="sync:bolt").count)() == 1


# -- a handler that asks different steps on replay -------------------------------------------------

RUNS = {"count": 0}


async def drifting(ctx: ToolContext) -> str:
    """Asks for a step whose key changes on every run: not deterministic."""
    RUNS["count"] += 1
    await ctx.elicit("Pick", {"type": "object", "properties": {"v": {"type": "string"}}}, key=f"ask-{RUNS['count']}")
    return "unreachable"


async def test_non_deterministic_handler_fails_the_call_with_a_clear_error() -> None:
    RUNS["count"] = 0
    with registry.registered_temporarily(make_tool(drifting)):
        first = result_of(await call("drifting", {}))
        assert list(first["inputRequests"]) == ["ask-1"]
        second = result_of(await call("drifting", {}, state=first["requestState"], responses={"ask-1": {"action": "accept", "content": {"v": "a"}}}))
    assert second["isError"] is True
    assert "NonDeterministicHandler" in second["content"][0]["text"]
    assert "ask-2" in second["content"][0]["text"]
    row = await sync_to_async(ToolCall.objects.get)()
    assert row.status == "failed"
