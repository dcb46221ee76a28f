"""361d675: an answer that does not fit its elicitation is refused and "the request keeps waiting for a
corrected answer"; over HTTP the client hears of it (400). Over stdio the refusal is only logged
(StdioServer.handle ignores accept_client_response's error): the client is never told, nothing asks
again, and its tools/call hangs until the grace period / CALL_TTL. Before, the step failed and the
call answered at once."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from mcp_tools import ToolContext
from mcp_tools.registry import make_tool, registry
from mcp_tools.server.auth import ANONYMOUS
from mcp_tools.transports.stdio import StdioServer

pytestmark = pytest.mark.django_db(transaction=True)

SCHEMA = {"type": "object", "properties": {"age": {"type": "integer", "maximum": 150}}, "required": ["age"]}


async def ask_age_stdio(ctx: ToolContext) -> str:
    """Form elicitation with a range."""
    answer = await ctx.elicit("Age?", SCHEMA, key="age")
    return str(answer["age"])


class Lines:
    """A binary writer that keeps each line written."""

    closed = False

    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []
        self._buffer = b""
        self.lock = threading.Lock()

    def write(self, data: bytes) -> int:
        with self.lock:
            self._buffer += data
            *complete, self._buffer = self._buffer.split(b"\n")
            self.lines += [json.loads(line) for line in complete if line.strip()]
        return len(data)

    def flush(self) -> None:
        pass


async def wait_for(out: Lines, predicate: Any, timeout: float) -> dict[str, Any] | None:
    for _ in range(int(timeout / 0.05)):
        with out.lock:
            found = [m for m in out.lines if predicate(m)]
        if found:
            return found[0]
        await asyncio.sleep(0.05)
    return None


@contextlib.asynccontextmanager
async def asked_for_age() -> AsyncIterator[tuple[Callable[[dict[str, Any]], None], Lines, dict[str, Any]]]:
    """A stdio server whose ``tools/call`` (id 2) of ``ask_age_stdio`` waits for its elicitation:
    yields how to send a line, what the server wrote, and the ``elicitation/create`` it sent."""
    read_fd, write_fd = os.pipe()
    reader, feed = os.fdopen(read_fd, "rb"), os.fdopen(write_fd, "wb")
    out = Lines()

    def send(message: dict[str, Any]) -> None:
        feed.write(json.dumps(message).encode() + b"\n")
        feed.flush()

    with registry.registered_temporarily(make_tool(ask_age_stdio)):
        server = StdioServer(ANONYMOUS, reader, out, grace=1)
        serving = asyncio.ensure_future(server.serve())
        try:
            send({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {"form": {}}}, "clientInfo": {"name": "t", "version": "1"}}})
            send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "ask_age_stdio", "arguments": {}}})
            ask = await wait_for(out, lambda m: m.get("method") == "elicitation/create", 10)
            assert ask is not None, out.lines
            yield send, out, ask
        finally:
            feed.close()
            await asyncio.wait_for(serving, 15)


async def test_an_answer_refused_over_stdio_does_not_leave_the_call_hanging_unannounced() -> None:
    async with asked_for_age() as (send, out, ask):
        send({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"age": 999}}})
        # The client is told: an answer to its tools/call (an error), or the question asked again.
        told = await wait_for(out, lambda m: m.get("id") == 2 or (m.get("method") == "elicitation/create" and m is not ask), 5)
    assert told is not None, f"the refused answer left the call waiting, silently: {out.lines}"


async def test_a_response_whose_error_is_no_error_object_is_refused_over_stdio_and_the_call_keeps_waiting() -> None:
    """The stdio transport reads a line with the same jsonrpc.classify(): an "error" without an integer
    "code" and a string "message" is an Invalid Request (-32600, no id) there too, not a failed step;
    the call still takes the valid answer that follows."""
    async with asked_for_age() as (send, out, ask):
        send({"jsonrpc": "2.0", "id": ask["id"], "error": {"code": "x", "message": "m"}})
        refused = await wait_for(out, lambda m: "error" in m and m.get("id") is None, 5)
        send({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"age": 42}}})
        final = await wait_for(out, lambda m: m.get("id") == 2, 10)
    assert refused is not None and refused["error"]["code"] == -32600, out.lines
    assert final is not None and "result" in final, out.lines
    assert final["result"]["content"][0]["text"] == "42", final
