"""Code that runs outside a tool call (a completer) failing the ways a tool's handler may, and a stdio
cancel naming a request by a value that only hashes like its id: each request gets its answer.

A completer's own ``sys.exit()`` came out of the HTTP endpoint (a tool's is a tool error since
core.execute catches it, tests/test_handler_exits.py); over stdio a completer's own ``CancelledError``
got no reply at all (HTTP answers -32603), and ``"requestId": true`` cancelled request 1.
"""
from __future__ import annotations

import asyncio
import io
import json
from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser

from mcp_tools import ToolContext, prompt
from mcp_tools.protocol import jsonrpc
from mcp_tools.registry import make_tool, registry
from mcp_tools.server.auth import Principal
from mcp_tools.transports.http import McpEndpoint
from mcp_tools.transports.stdio import StdioServer
from tests.asgi_client import call_modern

pytestmark = pytest.mark.django_db(transaction=True)

COMPLETE = {"ref": {"type": "ref/prompt", "name": "failing_completion"}, "argument": {"name": "city", "value": "Ber"}}


def _prompt_with_completer(completer: Any) -> None:
    def failing_completion(city: str) -> str:
        """A prompt whose argument's completer fails."""
        return city

    prompt(name="failing_completion", completions={"city": completer})(failing_completion)


def _stdio() -> tuple[StdioServer, io.BytesIO]:
    out = io.BytesIO()
    return StdioServer(Principal(user=AnonymousUser(), id="anonymous"), io.BytesIO(), out), out


def _written(out: io.BytesIO) -> list[Any]:
    return [json.loads(line) for line in out.getvalue().splitlines() if line.strip()]


async def _answer(out: io.BytesIO, request_id: Any) -> dict[str, Any]:
    for _ in range(500):
        for message in _written(out):
            if message.get("id") == request_id:
                return message  # type: ignore[no-any-return]
        await asyncio.sleep(0.01)
    raise AssertionError(f"request {request_id} got no answer: {_written(out)}")


async def test_a_completer_that_exits_is_an_internal_error_over_http() -> None:
    def completer(value: str, arguments: dict[str, Any]) -> list[str]:
        raise SystemExit("usage: cities [-h]")  # argparse's way out

    _prompt_with_completer(completer)
    try:
        response = await call_modern(McpEndpoint(), "completion/complete", COMPLETE)
    finally:
        registry.unregister_prompt("failing_completion")
    assert response.json()["error"] == {"code": -32603, "message": "Internal error"}, response.body
    assert b"usage" not in response.body


async def test_a_completer_raising_its_own_cancelled_error_is_answered_over_stdio() -> None:
    async def completer(value: str, arguments: dict[str, Any]) -> list[str]:
        await asyncio.sleep(0)
        raise asyncio.CancelledError("a library's timeout")

    _prompt_with_completer(completer)
    server, out = _stdio()
    try:
        await server.handle(jsonrpc.parse_body(json.dumps(
            {"jsonrpc": "2.0", "id": 7, "method": "completion/complete", "params": COMPLETE}).encode()))
        answer = await _answer(out, 7)
    finally:
        registry.unregister_prompt("failing_completion")
    assert answer["error"] == {"code": -32603, "message": "Internal error"}, answer


async def _until_released(ctx: ToolContext) -> str:
    await RELEASE.wait()
    return "done"

RELEASE = asyncio.Event()


@pytest.mark.parametrize("named", [True, 1.0])
async def test_a_stdio_cancel_naming_a_value_equal_to_the_id_but_not_an_id_stops_nothing(named: Any) -> None:
    global RELEASE
    RELEASE = asyncio.Event()
    server, out = _stdio()
    with registry.registered_temporarily(make_tool(_until_released, name="until_released")):
        await server.handle(jsonrpc.parse_body(
            b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"until_released","arguments":{}}}'))
        for _ in range(500):
            if 1 in server.running:
                break
            await asyncio.sleep(0.01)
        await server.handle(jsonrpc.parse_body(json.dumps(
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": named}}).encode()))
        RELEASE.set()
        answer = await _answer(out, 1)
    assert answer["result"]["content"] == [{"type": "text", "text": "done"}], answer
