"""``resources/subscribe`` holds at most ``SESSION_MAX_SUBSCRIPTIONS`` subscriptions per 2025-11-25
session (docs/settings.md, docs/protocol.md). Before the limit one session could store a row in the
subscription table for every URI a template matches, unboundedly many."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from mcp_tools import resource
from mcp_tools.conf import problem
from mcp_tools.models import ResourceSubscription
from mcp_tools.registry import registry
from tests.test_resources_review import _in_memory_layer, legacy, open_session  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)
TEMPLATE = "limit-subs://items/{name}"


@pytest.fixture(autouse=True)
def items(settings: Any) -> Iterator[None]:
    settings.MCP_TOOLS = {**settings.MCP_TOOLS, "SESSION_MAX_SUBSCRIPTIONS": 2}

    def item(name: str) -> str:
        return name

    resource(TEMPLATE)(item)
    try:
        yield
    finally:
        registry.unregister_resource(TEMPLATE)


def uri(name: str) -> str:
    return f"limit-subs://items/{name}"


async def subscribed(session: str) -> set[str]:
    return {row async for row in ResourceSubscription.objects.filter(session_id=session).values_list("uri", flat=True)}


async def test_a_session_past_its_subscription_limit_is_refused_and_stores_nothing() -> None:
    session = await open_session()
    for name in ("a", "b", "a"):  # subscribing again to one it holds does not count twice
        answer = await legacy(session, "resources/subscribe", {"uri": uri(name)})
        assert answer.get("result") == {}, answer
    refused = await legacy(session, "resources/subscribe", {"uri": uri("c")})
    assert refused["error"] == {"code": -32602, "data": {"limit": 2}, "message": (
        "This session is subscribed to 2 resources, the most it may be; unsubscribe from one first")}, refused
    assert await subscribed(session) == {uri("a"), uri("b")}
    # At the limit, a URI it holds is still answered as subscribed.
    assert "result" in await legacy(session, "resources/subscribe", {"uri": uri("b")})
    # The limit is per session: another session subscribes as usual.
    other = await open_session()
    assert "result" in await legacy(other, "resources/subscribe", {"uri": uri("c")})
    # Unsubscribing frees a place.
    assert "result" in await legacy(session, "resources/unsubscribe", {"uri": uri("a")})
    assert "result" in await legacy(session, "resources/subscribe", {"uri": uri("c")})
    assert await subscribed(session) == {uri("b"), uri("c")}


@pytest.mark.parametrize("value", [0, -1, 1.5, "10", True, None])
def test_the_limit_is_a_positive_integer(value: Any) -> None:
    assert problem("SESSION_MAX_SUBSCRIPTIONS", value) is not None
    assert problem("SESSION_MAX_SUBSCRIPTIONS", 1) is None
