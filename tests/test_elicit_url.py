"""URL-mode elicitation (``ctx.elicit_url``) over 2026-07-28 multi-round-trip requests.

2026-07-28 removed the ``elicitationId`` of URL-mode requests (its changelog, item 11); 2025-11-25
requires one. A review found every 2026-07-28 request (and a saga's step over 2026-07-28) sent one.
"""

from __future__ import annotations

from typing import Any

import pytest

from mcp_tools import ToolContext
from mcp_tools.registry import make_tool, registry
from tests.asgi_client import call_modern

pytestmark = pytest.mark.django_db(transaction=True)
URL_CAPABLE = {"elicitation": {"form": {}, "url": {}}}


async def connect_account(ctx: ToolContext) -> str:
    """Send the user to a page to link their account."""
    await ctx.elicit_url("Link your account", "https://example.com/link?state=abc", key="link")
    return "linked"


@pytest.fixture
def app():  # type: ignore[no-untyped-def]
    from demo_site.asgi import application

    with registry.registered_temporarily(make_tool(connect_account)):
        yield application


async def first_round(app) -> dict:  # type: ignore[no-untyped-def]
    response = await call_modern(app, "tools/call", {"name": "connect_account", "arguments": {}}, capabilities=URL_CAPABLE)
    return response.json()["result"]


async def test_url_elicitation_asks_in_url_mode_and_completes_on_accept(app) -> None:  # type: ignore[no-untyped-def]
    first = await first_round(app)
    assert first["resultType"] == "input_required"
    request = first["inputRequests"]["link"]
    assert request["method"] == "elicitation/create"
    assert request["params"] == {"mode": "url", "message": "Link your account", "url": "https://example.com/link?state=abc"}
    second = await call_modern(app, "tools/call", {"name": "connect_account", "arguments": {},
                                                   "requestState": first["requestState"],
                                                   "inputResponses": {"link": {"action": "accept"}}}, capabilities=URL_CAPABLE)
    assert second.json()["result"]["content"] == [{"type": "text", "text": "linked"}]


async def test_url_elicitation_declined_is_an_error_result(app) -> None:  # type: ignore[no-untyped-def]
    first = await first_round(app)
    second = await call_modern(app, "tools/call", {"name": "connect_account", "arguments": {},
                                                   "requestState": first["requestState"],
                                                   "inputResponses": {"link": {"action": "decline"}}}, capabilities=URL_CAPABLE)
    result = second.json()["result"]
    assert result["isError"] is True
    assert "declined" in result["content"][0]["text"]


async def test_url_elicitation_needs_the_url_capability(app) -> None:  # type: ignore[no-untyped-def]
    response = await call_modern(app, "tools/call", {"name": "connect_account", "arguments": {}},
                                 capabilities={"elicitation": {"form": {}}})
    assert response.status == 400
    error = response.json()["error"]
    assert error["code"] == -32021
    assert error["data"] == {"requiredCapabilities": {"elicitation": {"url": {}}}}


async def connect_with_own_id(ctx: ToolContext) -> str:
    await ctx.elicit_url("Link your account", "https://example.com/link?id=mine", elicitation_id="mine", key="link")
    return "linked"


@pytest.mark.parametrize("handler", [connect_account, connect_with_own_id])
def test_a_2026_request_has_no_elicitation_id_and_a_2025_one_has_one(handler: Any) -> None:
    """2025-11-25's ``ElicitRequestURLParams`` requires ``elicitationId``; 2026-07-28's has none."""
    from tests.test_engine_corners import first_request

    modern = first_request(handler, URL_CAPABLE, "2026-07-28")
    assert "elicitationId" not in modern, modern
    legacy = first_request(handler, URL_CAPABLE, "2025-11-25")
    assert legacy["elicitationId"] == ("mine" if handler is connect_with_own_id else legacy["elicitationId"])
    assert len(legacy["elicitationId"]) == (4 if handler is connect_with_own_id else 32), "the handler's, else a new unique one"


async def test_a_saga_step_over_2026_has_no_elicitation_id(app) -> None:  # type: ignore[no-untyped-def]
    started = await call_modern(app, "tools/callSaga", {"name": "connect_account", "arguments": {}}, capabilities=URL_CAPABLE)
    (step,) = started.json()["result"]["steps"]
    assert step["params"] == {"mode": "url", "message": "Link your account", "url": "https://example.com/link?state=abc"}


@pytest.mark.parametrize("handler", [connect_with_own_id, connect_account], ids=["handler-id", "fresh-id"])
def test_a_2026_step_journaled_by_an_earlier_release_replays_and_completes(handler: Any) -> None:
    """A call in flight across the upgrade: the step an earlier release journaled with an id (the
    handler's, in the step's digest; or a fresh one, out of it) is still the handler's step on replay."""
    from asgiref.sync import async_to_sync

    from mcp_tools.engine import Completed, Invocation, run
    from mcp_tools.engine.journal import Journal, Step, digest
    from tests.test_engine_corners import StubRuntime

    own = handler is connect_with_own_id
    asked = {"mode": "url", "message": "Link your account",
             "url": "https://example.com/link?id=mine" if own else "https://example.com/link?state=abc"}
    if own:
        asked["elicitationId"] = "mine"
    step_digest = digest(["elicit", {"method": "elicitation/create", "params": asked}])
    request = {"method": "elicitation/create", "params": asked if own else {**asked, "elicitationId": "0" * 32}}
    journal = Journal([Step(seq=0, kind="elicit", key="link", digest=step_digest, request=request,
                            status="done", response={"action": "accept"})])
    inv = Invocation(fn=handler, is_async=True, kwargs={}, context_param="ctx", principal=None, protocol_version="2026-07-28",
                     client_capabilities=URL_CAPABLE, runtime=StubRuntime(), journal=journal)  # type: ignore[arg-type]
    outcome = async_to_sync(run)(inv)
    assert isinstance(outcome, Completed), outcome
    assert outcome.value == "linked"
