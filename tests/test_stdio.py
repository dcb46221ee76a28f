"""The stdio transport (``manage.py mcp_stdio``) driven by the official MCP client."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import mcp_types as t
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
async def test_stdio_client_lists_calls_and_answers_elicitation(django_db_setup: None) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["manage.py", "mcp_stdio"],
        cwd=str(ROOT),
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "tests.server_settings", "PYTHONPATH": str(ROOT)},
    )
    asked: list[str] = []

    async def on_elicit(ctx: object, request: t.ElicitRequestParams) -> t.ElicitResult:
        asked.append(request.message)
        return t.ElicitResult(action="accept", content={"name": "Ada"})

    async with Client(stdio_client(params), mode="legacy", elicitation_callback=on_elicit) as client:
        tools = await client.list_tools()
        assert "echo" in [tool.name for tool in tools.tools]
        echoed = await client.call_tool("echo", {"text": "over stdio"})
        assert echoed.content[0].text == "over stdio"
        greeted = await client.call_tool("test_input_required_result_elicitation", {})
        assert asked == ["What is your name?"]
        assert "Ada" in greeted.content[0].text
