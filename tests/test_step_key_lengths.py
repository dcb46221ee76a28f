"""Journal step keys fit their column (``CallStep.key``, 128 characters) on every database.

PostgreSQL refuses (or, with a cast, cuts) a longer key, SQLite keeps it whole: a handler's long
``ctx.once`` key replayed on one database and failed with ``NonDeterministicHandler`` on the other.
A key the handler gives is now refused where it is given (``ValueError`` naming the limit); a key the
engine builds from parts (a sampling answer's ``tool_use`` id, a model action's tool name) is fitted
to the column, with a digest of the whole past the limit, the same on every replay.
"""
from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from mcp_tools import ToolContext
from mcp_tools.models import CallStep
from mcp_tools.registry import make_tool, registry
from mcp_tools.transports.http import McpEndpoint
from tests.asgi_client import call_modern

pytestmark = pytest.mark.django_db(transaction=True)

APP = McpEndpoint()
CAPS = {"elicitation": {"form": {}, "url": {}}, "sampling": {"tools": {}}, "roots": {}}
SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
YES = {"action": "accept", "content": {"ok": True}}
LONG = "charge-customer-" + "x" * 150
#: CallStep.key's length (checked below against the model and the engine's constant).
LIMIT = 128


async def rpc(params: dict[str, Any]) -> dict[str, Any]:
    response = await call_modern(APP, "tools/call", params, capabilities=CAPS)
    assert response.status == 200, (response.status, response.body)
    body = response.json()
    assert "error" not in body, body
    result: dict[str, Any] = body["result"]
    return result


async def journaled_keys() -> list[str]:
    return await sync_to_async(lambda: list(CallStep.objects.order_by("call__created_at", "seq").values_list("key", flat=True)))()


def test_the_limit_is_the_columns() -> None:
    from mcp_tools.engine.journal import STEP_KEY_MAX_LENGTH

    assert CallStep._meta.get_field("key").max_length == STEP_KEY_MAX_LENGTH == LIMIT


# -- a key the handler gives: refused past the limit, where it is given ------------------------

async def long_keys(ctx: ToolContext) -> list[str]:
    refused = []
    for step in (
        lambda: ctx.once(LONG, lambda: 1),
        lambda: ctx.elicit("Go?", SCHEMA, key=LONG),
        lambda: ctx.elicit_url("Go", "https://example.com/go", key=LONG),
        lambda: ctx.list_roots(key=LONG),
        lambda: ctx.sample_step("hi", key=LONG),
        lambda: ctx.sample("hi", key=LONG),
        lambda: ctx.elicit("Go?", SCHEMA, key=""),
    ):
        try:
            await step()
        except ValueError as exc:
            refused.append(str(exc))
    # The longest key allowed is journaled whole and replays on every database.
    await ctx.once("k" * LIMIT, lambda: 1)
    await ctx.elicit("Done?", SCHEMA, key="confirm")
    return refused


def sync_long_key(ctx: ToolContext) -> str:
    try:
        ctx.once(LONG, lambda: 1)
    except ValueError as exc:
        return str(exc)
    return "journaled"


async def test_a_step_key_past_the_limit_is_refused_where_it_is_given() -> None:
    with registry.registered_temporarily(make_tool(long_keys)):
        params = {"name": "long_keys", "arguments": {}}
        first = await rpc(params)
        assert list(first["inputRequests"]) == ["confirm"], first
        second = await rpc({**params, "requestState": first["requestState"], "inputResponses": {"confirm": YES}})
    assert second.get("isError") is not True, second
    refused = second["structuredContent"]["result"]
    assert len(refused) == 7, refused
    assert all("1 to 128 characters" in message for message in refused), refused
    assert f"has {len(LONG)}" in refused[0], refused
    assert await journaled_keys() == ["k" * LIMIT, "confirm"]


async def test_a_sync_handlers_long_once_key_is_refused() -> None:
    with registry.registered_temporarily(make_tool(sync_long_key)):
        result = await rpc({"name": "sync_long_key", "arguments": {}})
    assert "1 to 128 characters" in result["content"][0]["text"], result


def test_check_step_key() -> None:
    from mcp_tools.engine.journal import check_step_key

    assert check_step_key("k" * 128) == "k" * 128
    for bad in ("", "k" * 129):
        with pytest.raises(ValueError, match="1 to 128 characters"):
            check_step_key(bad)
    with pytest.raises(TypeError):
        check_step_key(5)
