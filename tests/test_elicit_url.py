"""URL-mode elicitation (``ctx.elicit_url``) over 2026-07-28 multi-round-trip requests."""

from __future__ import annotations

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
    params = dict(request["params"])
    elicitation_id = params.pop("elicitationId")
    assert params == {"mode": "url", "message": "Link your account", "url": "https://example.com/link?state=abc"}
    assert len(elicitation_id) == 32, "a new unique id per elicitation (the spec's), not the step key"
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
