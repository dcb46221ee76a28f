"""Sagas (``tools/callSaga`` / ``tools/resumeSaga``) over raw HTTP against a live server, round by round."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.clients import LegacySession, ModernClient, accept_target, audit_rows, http_client, model_says

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


@pytest.fixture
async def session(live_server_url: str) -> AsyncIterator[LegacySession]:
    async with http_client() as http:
        yield await LegacySession.open(http, live_server_url)


def assert_suspended(result: dict[str, Any], step_type: str, step_id: str) -> dict[str, Any]:
    assert result["state"] == "suspended", result
    assert isinstance(result["sagaToken"], str) and result["sagaToken"]
    assert [(s["type"], s["stepId"]) for s in result["steps"]] == [(step_type, step_id)], result["steps"]
    return result["steps"][0]


async def test_saga_deploy_round_by_round(session: LegacySession) -> None:
    first = await session.request("tools/callSaga", {"name": "deploy", "arguments": {"service": "saga-api"}})
    step = assert_suspended(first, "elicitation", "target")
    assert "saga-api" in step["params"]["message"]
    assert set(step["params"]["requestedSchema"]["properties"]) >= {"env", "confirm"}
    assert await audit_rows("saga-api") == []

    history = [{"stepId": "target", "result": accept_target("production")}]
    second = await session.request("tools/resumeSaga", {"sagaToken": first["sagaToken"], "completedSteps": history})
    step = assert_suspended(second, "sampling", "verdict")
    assert "production" in step["params"]["messages"][0]["content"]["text"]
    assert second["sagaToken"] != first["sagaToken"]
    assert await audit_rows("saga-api") == []

    history.append({"stepId": "verdict", "result": model_says("yes")})
    final = await session.request("tools/resumeSaga", {"sagaToken": second["sagaToken"], "completedSteps": history})
    assert "state" not in final
    assert final.get("isError") is not True, final
    structured = final["structuredContent"]
    assert {k: structured[k] for k in ("service", "env", "verdict")} == {"service": "saga-api", "env": "production", "verdict": "yes"}
    rows = await audit_rows("saga-api")
    assert len(rows) == 1
    assert rows[0]["id"] == structured["audit_id"]
    assert rows[0]["detail"] == {"service": "saga-api", "env": "production", "verdict": "yes"}


async def test_saga_on_the_2026_wire(live_server_url: str) -> None:
    async with http_client() as http:
        client = ModernClient(http, live_server_url)
        first = await client.request("tools/callSaga", {"name": "deploy", "arguments": {"service": "saga-modern"}})
        assert_suspended(first, "elicitation", "target")
        history = [{"stepId": "target", "result": accept_target("staging")}]
        second = await client.request("tools/resumeSaga", {"sagaToken": first["sagaToken"], "completedSteps": history})
        assert_suspended(second, "sampling", "verdict")
        history.append({"stepId": "verdict", "result": model_says("looks safe")})
        final = await client.request("tools/resumeSaga", {"sagaToken": second["sagaToken"], "completedSteps": history})
    assert final["structuredContent"]["env"] == "staging"
    assert final["structuredContent"]["verdict"] == "looks safe"
    assert len(await audit_rows("saga-modern")) == 1


async def test_saga_step_error_gives_error_result(session: LegacySession) -> None:
    first = await session.request("tools/callSaga", {"name": "deploy", "arguments": {"service": "saga-err"}})
    assert_suspended(first, "elicitation", "target")
    completed = [{"stepId": "target", "error": {"code": -1, "message": "the user closed the dialog"}}]
    result = await session.request("tools/resumeSaga", {"sagaToken": first["sagaToken"], "completedSteps": completed})
    assert "state" not in result, result
    assert result["isError"] is True
    assert result["content"][0]["type"] == "text" and result["content"][0]["text"]
    assert await audit_rows("saga-err") == []


async def test_saga_tampered_token_is_refused(session: LegacySession) -> None:
    first = await session.request("tools/callSaga", {"name": "deploy", "arguments": {"service": "saga-tamper"}})
    token = first["sagaToken"]
    middle = len(token) // 2
    tampered = token[:middle] + ("A" if token[middle] != "A" else "B") + token[middle + 1:]
    completed = [{"stepId": "target", "result": accept_target()}]
    for bad in (tampered, token + "x", "not-a-token"):
        response, message = await session.post("tools/resumeSaga", {"sagaToken": bad, "completedSteps": completed})
        assert "error" in message, (bad, message)
        assert message["error"]["code"] == -32602
    # The genuine token still works after the refused attempts.
    second = await session.request("tools/resumeSaga", {"sagaToken": token, "completedSteps": completed})
    assert_suspended(second, "sampling", "verdict")
    assert await audit_rows("saga-tamper") == []


async def test_saga_replayed_resume_is_idempotent(session: LegacySession) -> None:
    """A client that lost the final answer and resends the same resumeSaga gets the same result; no second side effect."""
    first = await session.request("tools/callSaga", {"name": "deploy", "arguments": {"service": "saga-replay"}})
    history = [{"stepId": "target", "result": accept_target("staging")}]
    second = await session.request("tools/resumeSaga", {"sagaToken": first["sagaToken"], "completedSteps": history})
    history.append({"stepId": "verdict", "result": model_says("yes")})
    final = await session.request("tools/resumeSaga", {"sagaToken": second["sagaToken"], "completedSteps": history})
    again = await session.request("tools/resumeSaga", {"sagaToken": second["sagaToken"], "completedSteps": history})
    assert again == final
    assert len(await audit_rows("saga-replay")) == 1

    # The same token with a different answer is not a replay: refused.
    changed = [history[0], {"stepId": "verdict", "result": model_says("no")}]
    _, message = await session.post("tools/resumeSaga", {"sagaToken": second["sagaToken"], "completedSteps": changed})
    assert message["error"]["code"] == -32602


async def test_saga_unknown_step_and_invalid_answer(session: LegacySession) -> None:
    first = await session.request("tools/callSaga", {"name": "deploy", "arguments": {"service": "saga-bad"}})
    token = first["sagaToken"]
    _, unknown = await session.post("tools/resumeSaga", {"sagaToken": token, "completedSteps": [
        {"stepId": "target", "result": accept_target()}, {"stepId": "nonsense", "result": {}}]})
    assert unknown["error"]["code"] == -32602
    _, invalid = await session.post("tools/resumeSaga", {"sagaToken": token, "completedSteps": [
        {"stepId": "target", "result": {"action": "accept", "content": {"env": "moon"}}}]})
    assert invalid["error"]["code"] == -32602
    assert "target" in invalid["error"]["message"]
    # Neither refusal consumed the round: a valid answer still advances the saga.
    second = await session.request("tools/resumeSaga", {"sagaToken": token, "completedSteps": [{"stepId": "target", "result": accept_target()}]})
    assert_suspended(second, "sampling", "verdict")
