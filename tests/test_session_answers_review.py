"""Review: client responses to elicitation/create in a 2025-11-25 session (answers arrive as POSTed JSON-RPC
responses). Each test asserts the correct behaviour and fails on the current code."""
from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from mcp_tools import ToolContext
from mcp_tools.models import ToolCall
from mcp_tools.registry import make_tool, registry
from tests.asgi_client import HANDSHAKE, post_headers, post_json
from tests.test_http_spec_edges import APP, Stream, _in_memory_layer, open_session  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)
SCHEMA = {"type": "object", "properties": {"age": {"type": "integer", "maximum": 150}}, "required": ["age"]}


async def ask_age(ctx: ToolContext) -> str:
    """Form elicitation with a range."""
    answer = await ctx.elicit("Age?", SCHEMA, key="age")
    return str(answer["age"])


async def ask_name(ctx: ToolContext) -> str:
    """Form elicitation."""
    answer = await ctx.elicit("Name?", {"type": "object", "properties": {"name": {"type": "string"}}}, key="name")
    return str(answer.get("name"))


@pytest.fixture(autouse=True)
def tools():  # type: ignore[no-untyped-def]
    with registry.registered_temporarily(make_tool(ask_age), make_tool(ask_name)):
        yield


async def _asked(session: str, tool: str) -> tuple[Stream, dict[str, Any]]:
    call = {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": tool, "arguments": {}}}
    stream = Stream("POST", post_headers(version=HANDSHAKE, session=session), json.dumps(call).encode())
    try:
        _, ask = await stream.wait_for(lambda m: m.get("method") == "elicitation/create" or "result" in m or "error" in m)
    except AssertionError:  # no SSE stream: the whole answer came as one JSON body
        ask = json.loads(stream.text())
    return stream, ask


async def test_form_elicitation_is_not_sent_to_a_session_that_declared_url_mode_only() -> None:
    """2025-11-25 elicitation: "Servers MUST NOT send elicitation requests with modes that are not supported
    by the client"; {"url": {}} is URL mode only. Expected: the call fails with -32021 (missing capability)."""
    session = await open_session({"elicitation": {"url": {}}})
    stream, first = await _asked(session, "ask_name")
    stream.gone.set()
    assert first.get("method") != "elicitation/create", f"form elicitation sent to a url-only client: {first}"
    assert first["error"]["code"] == -32021 and first["error"]["data"] == {"requiredCapabilities": {"elicitation": {"form": {}}}}, first




