"""``logging/setLevel`` reaches the requests already running, not only those that start after it.

Spec 2025-11-25 server/utilities/logging: the client sets "the minimum log level" with
``logging/setLevel``, and the server sends what is at or above it. The level was copied into each
request's context when it began: a call that logs in a loop went on sending ``info`` after the
client asked for ``error`` only, and so did a call going on after the client answered its
elicitation. Over HTTP and over stdio alike.
"""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Iterator
from typing import Any

import pytest

from mcp_tools import ToolContext
from mcp_tools.protocol import jsonrpc
from mcp_tools.registry import make_tool, registry
from mcp_tools.server.auth import ANONYMOUS
from mcp_tools.transports.stdio import StdioServer
from tests.asgi_client import HANDSHAKE, post_headers, post_json
from tests.test_http_spec_edges import APP, Stream, _in_memory_layer, open_session  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)

NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}}


class Gate:
    def __init__(self) -> None:
        self.release = asyncio.Event()


@pytest.fixture
def gate() -> Iterator[Gate]:
    held = Gate()

    async def log_loop(ctx: ToolContext) -> str:
        """Log at info, wait until released, then log at info and at error."""
        await ctx.log("info", "before")
        await held.release.wait()
        await ctx.log("info", "after, info")
        await ctx.log("error", "after, error")
        return "logged"

    async def ask_then_log(ctx: ToolContext) -> str:
        """Ask a name, then log at info and at error."""
        answer = await ctx.elicit("Name?", NAME_SCHEMA)
        await ctx.log("info", "after, info")
        await ctx.log("error", "after, error")
        return f"hello {answer['name']}"

    with registry.registered_temporarily(make_tool(log_loop), make_tool(ask_then_log)):
        yield held


def logged(messages: list[dict[str, Any]]) -> list[Any]:
    return [m["params"]["data"] for m in messages if m.get("method") == "notifications/message"]


def call(request_id: Any, name: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": name, "arguments": {}}}


SET_ERROR = {"jsonrpc": "2.0", "id": "level", "method": "logging/setLevel", "params": {"level": "error"}}


# -- HTTP (2025-11-25 session) ------------------------------------------------------------------------

async def test_set_level_reaches_a_call_that_is_logging(gate: Gate) -> None:
    session = await open_session()
    headers = post_headers(version=HANDSHAKE, session=session)
    stream = Stream("POST", headers, json.dumps(call(1, "log_loop")).encode())
    await stream.wait_for(lambda m: m.get("method") == "notifications/message")
    assert (await post_json(APP, SET_ERROR, headers)).status == 200
    gate.release.set()
    _, final = await stream.wait_for(lambda m: m.get("id") == 1)
    await asyncio.wait_for(stream.task, 10)
    assert final["result"]["content"][0]["text"] == "logged", final
    assert logged([m for _, m in stream.events()]) == ["before", "after, error"]


async def test_set_level_reaches_a_call_going_on_after_its_elicitation(gate: Gate) -> None:
    session = await open_session({"elicitation": {}})
    headers = post_headers(version=HANDSHAKE, session=session)
    stream = Stream("POST", headers, json.dumps(call(2, "ask_then_log")).encode())
    _, ask = await stream.wait_for(lambda m: m.get("method") == "elicitation/create")
    assert (await post_json(APP, SET_ERROR, headers)).status == 200
    answer = {"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"name": "x"}}}
    assert (await post_json(APP, answer, headers)).status == 202
    _, final = await stream.wait_for(lambda m: m.get("id") == 2)
    await asyncio.wait_for(stream.task, 10)
    assert final["result"]["content"][0]["text"] == "hello x", final
    assert logged([m for _, m in stream.events()]) == ["after, error"]


# -- stdio ------------------------------------------------------------------------------------------

class Output:
    """What the stdio server writes, one message a line; ``new`` is set at each."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.new = asyncio.Event()
        self.closed = False

    def write(self, data: bytes) -> int:
        self.messages.extend(json.loads(line) for line in data.splitlines() if line.strip())
        self.new.set()
        return len(data)

    def flush(self) -> None:
        pass

    async def wait_for(self, predicate: Any) -> dict[str, Any]:
        async def loop() -> dict[str, Any]:
            while True:
                for message in self.messages:
                    if predicate(message):
                        return message
                self.new.clear()
                await self.new.wait()
        return await asyncio.wait_for(loop(), 10)


async def test_set_level_reaches_a_call_that_is_logging_over_stdio(gate: Gate) -> None:
    out = Output()
    server = StdioServer(ANONYMOUS, io.BytesIO(), out)  # type: ignore[arg-type]

    async def send(message: dict[str, Any]) -> None:
        await server.handle(jsonrpc.parse_body(json.dumps(message).encode()))

    await send({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    await send(call(1, "log_loop"))
    await out.wait_for(lambda m: m.get("method") == "notifications/message")
    await send(SET_ERROR)
    await out.wait_for(lambda m: m.get("id") == "level")
    gate.release.set()
    final = await out.wait_for(lambda m: m.get("id") == 1)
    assert final["result"]["content"][0]["text"] == "logged", final
    assert logged(out.messages) == ["before", "after, error"]
