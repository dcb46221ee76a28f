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

import mcp_tools
from demo_site.shop.models import Customer
from mcp_tools import ToolContext
from mcp_tools.models import CallStep
from mcp_tools.modeltools import unregister_model_action
from mcp_tools.registry import make_tool, registry
from mcp_tools.transports.http import McpEndpoint
from tests.asgi_client import call_modern
from tests.test_model_tools_bad_input import call, seed

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


# -- a key the engine builds: fitted to the column, the same on every replay --------------------

def test_derived_step_key() -> None:
    from mcp_tools.engine.journal import derived_step_key

    assert derived_step_key("sample-0", 1, "toolu_01") == "sample-0.1.toolu_01"  # fits: as it always was
    one, other = derived_step_key("s", 0, "a" * 200), derived_step_key("s", 0, "a" * 199 + "b")
    assert len(one) == len(other) == LIMIT and one != other
    assert one == derived_step_key("s", 0, "a" * 200)
    assert one.startswith("s.0.aaa")


async def lookup(query: str) -> str:
    """Looks something up."""
    return f"found {query}"


async def agent(ctx: ToolContext) -> str:
    result = await ctx.sample("find it", tools=["lookup"], key="k" * LIMIT)
    return result.text


def tool_uses(*ids: str) -> dict[str, Any]:
    blocks = [{"type": "tool_use", "id": use_id, "name": "lookup", "input": {"query": str(n)}} for n, use_id in enumerate(ids)]
    return {"role": "assistant", "model": "m", "stopReason": "toolUse", "content": blocks}


async def test_a_long_tool_use_id_and_a_long_sampling_key_fit_the_journal() -> None:
    """The client's tool_use ids (of any length) and the next turn's key stay within the column;
    two ids alike in their first 150 characters keep two steps, and the model is answered with
    the ids it sent."""
    ids = ("toolu_" + "a" * 150 + "1", "toolu_" + "a" * 150 + "2")
    with registry.registered_temporarily(make_tool(agent), make_tool(lookup)):
        params = {"name": "agent", "arguments": {}}
        first = await rpc(params)
        (key,) = first["inputRequests"]
        second = await rpc({**params, "requestState": first["requestState"], "inputResponses": {key: tool_uses(*ids)}})
        (key2,) = second["inputRequests"]
        results = second["inputRequests"][key2]["params"]["messages"][-1]["content"]
        assert [(r["toolUseId"], r["content"][0]["text"]) for r in results] == [(ids[0], "found 0"), (ids[1], "found 1")]
        final = {"role": "assistant", "model": "m", "stopReason": "endTurn", "content": {"type": "text", "text": "it is found"}}
        third = await rpc({**params, "requestState": second["requestState"], "inputResponses": {key2: final}})
    assert third.get("isError") is not True, third
    assert third["content"][0]["text"] == "it is found", third
    keys = await journaled_keys()
    assert len(keys) == 4 and len(set(keys)) == 4, keys
    assert all(len(k) <= LIMIT for k in keys), [len(k) for k in keys]
    assert key == "k" * LIMIT and key2 in keys, (key, key2)


async def test_a_confirmed_model_action_with_a_long_name_applies_once() -> None:
    """A model action's change is journaled under ``<tool name>.apply``: a tool name of up to 128
    characters made it longer than the column."""
    tokens, customers = await sync_to_async(seed)()
    name = "review.customers." + "r" * 108
    assert len(name) == 125

    def relabel(self: Customer, label: str) -> None:
        self.name = label
        self.save(update_fields=["name"])

    Customer.relabel = relabel  # type: ignore[attr-defined]
    action = mcp_tools.register_model_action(Customer, "relabel", name=name, confirm=True, permissions=["shop.view_customer"])
    try:
        arguments = {"id": customers["ada@example.com"], "label": "Ada L."}
        asked = await call(name, arguments, tokens["clerk"])
        state = asked["result"]["requestState"]
        done = await call(name, arguments, tokens["clerk"], requestState=state,
                          inputResponses={"confirm": {"action": "accept", "content": {"confirm": True}}})
    finally:
        unregister_model_action(action)
        del Customer.relabel  # type: ignore[attr-defined]
    assert done["result"].get("isError") is not True, done
    assert await sync_to_async(lambda: Customer.objects.get(pk=customers["ada@example.com"]).name)() == "Ada L."
    keys = await journaled_keys()
    assert keys[0] == "confirm" and len(keys) == 2 and len(keys[1]) <= LIMIT and keys[1].startswith(name[:90]), keys
