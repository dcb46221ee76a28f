"""Tool chaining found wanting by a review: the client against servers that answer badly."""

from __future__ import annotations

import asyncio

import mcp_types as t
import pytest
from mcp import Client
from mcp.server import Server

from mcp_tools.client import ChainError, ToolListFailed, call_tool_chain

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
