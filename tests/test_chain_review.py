"""Tool chaining found wanting by a review: the client against servers that answer badly, and
the server's ``_meta.nextTool`` (sent only when the caller could make that call, docs/protocol.md)."""

from __future__ import annotations

import asyncio
import datetime
import decimal
import uuid

import jsonschema
import mcp_types as t
import pytest
from asgiref.sync import sync_to_async
from mcp import Client
from mcp.server import Server
from pydantic import BaseModel

from mcp_tools import ToolContext
from mcp_tools.client import ChainError, ToolListFailed, call_tool_chain
from mcp_tools.registry import make_tool, registry
from mcp_tools.registry.results import ToolResult
from tests.asgi_client import call_modern
from tests.clients import create_user_with_token

MODES = ["legacy", "2026-07-28"]


# -- the client: ``call_tool_chain`` must stop with a ChainError, not hang or crash ----------


def bad_server(*, endless_cursor: bool = False, new_cursors: bool = False, broken_schema: bool = False) -> Server:
    """Tool ``a`` chains to ``b``; tools/list is broken in the way asked."""
    listings = 0

    async def list_tools(ctx, params):  # type: ignore[no-untyped-def]
        nonlocal listings
        listings += 1
        schema = {"type": "object", "properties": {"n": {"type": "int"}}} if broken_schema else {"type": "object"}
        tools = [t.Tool(name="a", input_schema={"type": "object"}), t.Tool(name="b", input_schema=schema)]
        # A server that answers every page with the same cursor, or a new one each time: the listing never ends.
        cursor = "same-again" if endless_cursor else f"page-{listings}" if new_cursors else None
        return t.ListToolsResult(tools=tools, next_cursor=cursor)

    async def call_tool(ctx, params):  # type: ignore[no-untyped-def]
        if params.name == "a":
            return t.CallToolResult(content=[t.TextContent(text="a")], _meta={"nextTool": {"tool": "b", "arguments": {"n": 1}}})
        return t.CallToolResult(content=[t.TextContent(text="b")])

    return Server("bad", on_list_tools=list_tools, on_call_tool=call_tool)


@pytest.mark.parametrize("mode", MODES)
async def test_a_tools_list_that_pages_forever_stops_the_chain(mode: str) -> None:
    # list_input_schemas followed nextCursor with no bound and no repeated-cursor check:
    # one bad server hung the helper for good (only the outer wait_for ends it here).
    async with Client(bad_server(endless_cursor=True), mode=mode) as client:
        with pytest.raises(ChainError):
            await asyncio.wait_for(call_tool_chain(client, "a"), timeout=10)


@pytest.mark.parametrize("mode", MODES)
async def test_a_tools_list_with_a_new_cursor_on_every_page_stops_the_chain(mode: str) -> None:
    async with Client(bad_server(new_cursors=True), mode=mode) as client:
        with pytest.raises(ToolListFailed, match="more than 100 pages"):
            await asyncio.wait_for(call_tool_chain(client, "a"), timeout=10)


@pytest.mark.parametrize("mode", MODES)
async def test_a_broken_input_schema_is_a_chain_error(mode: str) -> None:
    # The next tool's inputSchema is not valid JSON Schema ("int" is no type): the helper must
    # refuse the hop with a ChainError, not leak jsonschema's UnknownType/SchemaError.
    async with Client(bad_server(broken_schema=True), mode=mode) as client:
        with pytest.raises(ChainError):
            await call_tool_chain(client, "a")


# -- the server: a hint goes out only if it fits the next tool's advertised inputSchema ------


async def suggests_bad_order() -> ToolResult:
    # shop.orders.create advertises "number" as a string and no "bogus" field.
    return ToolResult(content=["make an order"], next_tool=("shop.orders.create", {"number": 12345, "total": "lots", "bogus": True}))


def takes_nothing(note: str = "") -> str:
    return "ok"


async def suggests_null_arguments() -> ToolResult:
    return ToolResult(content=["next"], next_tool=("takes_nothing", None))  # type: ignore[arg-type]


async def _call(name: str, token: str | None = None) -> dict:
    from demo_site.asgi import application

    response = await call_modern(application, "tools/call", {"name": name, "arguments": {}}, token=token)
    assert response.status == 200
    return response.json()["result"]


@pytest.mark.django_db(transaction=True)
async def test_a_hint_whose_arguments_break_the_next_tools_schema_is_dropped() -> None:
    from demo_site.asgi import application

    token = await sync_to_async(create_user_with_token)("clerk", ("shop.add_order", "shop.view_order"))
    with registry.registered_temporarily(make_tool(suggests_bad_order)):
        result = await _call("suggests_bad_order", token)
        listed = (await call_modern(application, "tools/list", {}, token=token)).json()["result"]["tools"]
    schema = next(tool["inputSchema"] for tool in listed if tool["name"] == "shop.orders.create")
    hint = result.get("_meta", {}).get("nextTool")
    if hint is not None:  # kept: then it must at least fit the schema the server advertises for that tool
        errors = [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(hint.get("arguments", {}))]
        assert errors == [], f"nextTool sent with arguments its tool refuses: {errors}"
    assert "nextTool" not in result.get("_meta", {})  # these arguments break it: dropped
    assert result["content"] == [{"type": "text", "text": "make an order"}]


def on_day(day: datetime.date) -> str:
    return day.isoformat()


async def suggests_a_day() -> ToolResult:
    return ToolResult(content=["next"], next_tool=("on_day", {"day": datetime.date(2025, 1, 2)}))


@pytest.mark.django_db(transaction=True)
async def test_a_hint_is_checked_in_its_wire_form() -> None:
    # The client reads the date as its ISO string, which fits {"type": "string", "format": "date"}.
    with registry.registered_temporarily(make_tool(on_day), make_tool(suggests_a_day)):
        result = await _call("suggests_a_day")
    assert result["_meta"]["nextTool"] == {"tool": "on_day", "arguments": {"day": "2025-01-02"}}


def on_when(when: datetime.datetime, amount: decimal.Decimal, ref: uuid.UUID) -> str:
    return f"{when.isoformat()} {amount} {ref}"


WHEN = {"when": datetime.datetime(2025, 1, 2, 3, 4, tzinfo=datetime.timezone.utc), "amount": decimal.Decimal("1.50"), "ref": uuid.UUID(int=5)}


class Go(BaseModel):
    go: bool


async def asks_then_suggests(ctx: ToolContext) -> ToolResult:
    await ctx.elicit("Go on?", schema=Go, key="go")
    return ToolResult(content=["next"], next_tool=("on_when", WHEN))


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("flavor", ["mrtr", "saga"])
async def test_a_hint_with_dates_decimals_and_uuids_ends_a_call_that_has_a_row(flavor: str) -> None:
    """Such a hint went out of a call without a row, but a call that asked something first (so has a
    row, as a background or slow call does) answered -32603 and stayed waiting: the row's JSON
    column could not hold the hint's Python values."""
    from demo_site.asgi import application

    from mcp_tools.models import ToolCall

    caps = {"elicitation": {"form": {}}}
    go = {"action": "accept", "content": {"go": True}}
    params = {"name": "asks_then_suggests", "arguments": {}}
    with registry.registered_temporarily(make_tool(on_when), make_tool(asks_then_suggests)):
        if flavor == "mrtr":
            first = (await call_modern(application, "tools/call", params, capabilities=caps)).json()["result"]
            body = (await call_modern(application, "tools/call", {**params, "requestState": first["requestState"],
                                                                  "inputResponses": {"go": go}}, capabilities=caps)).json()
        else:
            first = (await call_modern(application, "tools/callSaga", params, capabilities=caps)).json()["result"]
            body = (await call_modern(application, "tools/resumeSaga", {"sagaToken": first["sagaToken"], "completedSteps": [
                {"stepId": "go", "result": go}]}, capabilities=caps)).json()
        assert "result" in body, body
        hint = body["result"]["_meta"]["nextTool"]
        assert hint == {"tool": "on_when", "arguments": {"when": "2025-01-02 03:04:00+00:00", "amount": "1.50",
                                                         "ref": "00000000-0000-0000-0000-000000000005"}}, hint
        row = await sync_to_async(ToolCall.objects.get)()
        assert (row.status, row.result["_meta"]["nextTool"]) == ("completed", hint)
        followed = (await call_modern(application, "tools/call", {"name": "on_when", "arguments": hint["arguments"]})).json()
    assert followed["result"]["content"] == [{"type": "text", "text": "2025-01-02T03:04:00+00:00 1.50 00000000-0000-0000-0000-000000000005"}]


@pytest.mark.django_db(transaction=True)
async def test_a_hint_is_sent_in_the_seed_shape() -> None:
    # Seed 001: nextTool {tool: string, arguments?: Record<string, any>}; null is no object
    # (and mcp_tools.client refuses such a hint as malformed).
    with registry.registered_temporarily(make_tool(takes_nothing), make_tool(suggests_null_arguments)):
        result = await _call("suggests_null_arguments")
    hint = result.get("_meta", {}).get("nextTool")
    if hint is not None:
        assert isinstance(hint.get("arguments", {}), dict), hint
    assert hint == {"tool": "takes_nothing"}  # no arguments: the key is left out
