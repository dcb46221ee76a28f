import json, asyncio
from typing import Any
import pytest
from mcp_tools import ToolContext
from mcp_tools.registry import make_tool, registry
from tests.asgi_client import HANDSHAKE, MODERN, call_modern, post_headers, post_json, request
from tests.test_http_spec_edges import APP, Stream, _in_memory_layer, open_session  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)

async def progress_then_ask(ctx: ToolContext) -> str:
    """progress, ask, progress"""
    await ctx.report_progress(1, 3, "one")
    await ctx.log("info", "before ask")
    answer = await ctx.elicit("Name?", {"type": "object", "properties": {"name": {"type": "string"}}}, key="name")
    await ctx.report_progress(2, 3, "two")
    return str(answer.get("name"))

async def test_probe():
    with registry.registered_temporarily(make_tool(progress_then_ask)):
        session = await open_session({"elicitation": {}})
        await post_json(APP, {"jsonrpc": "2.0", "id": 1, "method": "logging/setLevel", "params": {"level": "debug"}}, post_headers(version=HANDSHAKE, session=session))
        call = {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "progress_then_ask", "arguments": {}, "_meta": {"progressToken": "p"}}}
        stream = Stream("POST", post_headers(version=HANDSHAKE, session=session), json.dumps(call).encode())
        _, ask = await stream.wait_for(lambda m: m.get("method") == "elicitation/create")
        r = await post_json(APP, {"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"name": "x"}}}, post_headers(version=HANDSHAKE, session=session))
        print("answer", r.status)
        _, final = await stream.wait_for(lambda m: m.get("id") == 5)
        stream.gone.set()
        for e in stream.events():
            print(e)
        # modern
        first = await call_modern(APP, "tools/call", {"name": "progress_then_ask", "arguments": {}, "_meta": {"progressToken": "q", "io.modelcontextprotocol/logLevel": "debug"}}, capabilities={"elicitation": {}})
        print("modern1", first.body)
