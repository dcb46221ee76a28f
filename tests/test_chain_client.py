"""``mcp_tools.client.call_tool_chain`` against servers that send bad chains, with the official client in both eras.

Our own server never sends a hint naming a hidden tool or invalid arguments
(``tests/test_chaining.py``), so the client's own defences are tested against
the ``mcp`` SDK's in-process server, whose tools return whatever ``_meta`` we
give them. The shop's real chain is followed end to end in
``tests/test_model_tools.py``.
"""

from __future__ import annotations

from typing import Any

import mcp_types as t
import pytest
from mcp import Client
from mcp.server import MCPServer

from mcp_tools.client import ChainCycle, ChainTooDeep, InvalidChainArguments, UnknownChainedTool, call_tool_chain

MODES = ["legacy", "2026-07-28"]


def hop(text: str, tool: str | None = None, **arguments: Any) -> t.CallToolResult:
    meta = {"nextTool": {"tool": tool, "arguments": arguments}} if tool else None
    return t.CallToolResult(content=[t.TextContent(text=text)], _meta=meta)


def chaining_server(calls: list[str]) -> MCPServer:
    server = MCPServer("chains")

    @server.tool()
    def ping(n: int) -> t.CallToolResult:
        calls.append(f"ping {n}")
        return hop("ping", "pong", n=n)

    @server.tool()
    def pong(n: int) -> t.CallToolResult:
        calls.append(f"pong {n}")
        return hop("pong", "ping", n=n)  # back to ping with the same arguments: a loop

    @server.tool()
    def count(n: int) -> t.CallToolResult:
        calls.append(f"count {n}")
        return hop("count", "count", n=n + 1)  # never repeats, never ends

    @server.tool()
    def to_hidden() -> t.CallToolResult:
        calls.append("to_hidden")
        return hop("to_hidden", "not_listed", x=1)

    @server.tool()
    def to_bad_arguments() -> t.CallToolResult:
        calls.append("to_bad_arguments")
        return hop("to_bad_arguments", "handoff", customer_id="twelve", urgency="whenever")

    @server.tool()
    def handoff(customer_id: int, urgency: str) -> str:
        calls.append("handoff")
        return "ticket opened"

    @server.tool()
    def start(customer_id: int) -> t.CallToolResult:
        calls.append("start")
        return hop("start", "handoff", customer_id=customer_id, urgency="high")

    return server


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


async def test_a_chain_is_followed_to_its_end(mode: str) -> None:
    calls: list[str] = []
    async with Client(chaining_server(calls), mode=mode) as client:
        chain = await call_tool_chain(client, "start", {"customer_id": 12})
    assert chain.tools == ["start", "handoff"]
    assert chain.steps[1].arguments == {"customer_id": 12, "urgency": "high"}
    assert chain.result.content[0].text == "ticket opened"
    assert calls == ["start", "handoff"]


async def test_a_looping_chain_is_stopped_by_cycle_detection(mode: str) -> None:
    calls: list[str] = []
    async with Client(chaining_server(calls), mode=mode) as client:
        with pytest.raises(ChainCycle) as stopped:
            await call_tool_chain(client, "ping", {"n": 1})
    assert calls == ["ping 1", "pong 1"]  # the second ping was never sent
    assert stopped.value.chain.tools == ["ping", "pong"]
    assert "ping -> pong -> ping" in str(stopped.value)


async def test_a_chain_longer_than_the_depth_limit_stops(mode: str) -> None:
    calls: list[str] = []
    async with Client(chaining_server(calls), mode=mode) as client:
        with pytest.raises(ChainTooDeep) as default:
            await call_tool_chain(client, "count", {"n": 0})
        assert calls == [f"count {n}" for n in range(5)]
        assert len(default.value.chain.steps) == 5
        calls.clear()
        with pytest.raises(ChainTooDeep):
            await call_tool_chain(client, "count", {"n": 0}, max_depth=2)
        assert calls == ["count 0", "count 1"]


async def test_a_hop_to_a_tool_not_listed_is_refused(mode: str) -> None:
    calls: list[str] = []
    async with Client(chaining_server(calls), mode=mode) as client:
        with pytest.raises(UnknownChainedTool) as refused:
            await call_tool_chain(client, "to_hidden")
    assert calls == ["to_hidden"]
    assert refused.value.hop == {"tool": "not_listed", "arguments": {"x": 1}}


async def test_invalid_arguments_for_the_next_tool_are_refused_before_calling_it(mode: str) -> None:
    calls: list[str] = []
    async with Client(chaining_server(calls), mode=mode) as client:
        with pytest.raises(InvalidChainArguments) as refused:
            await call_tool_chain(client, "to_bad_arguments")
    assert calls == ["to_bad_arguments"]  # handoff never ran
    assert refused.value.errors == ["customer_id: 'twelve' is not of type 'integer'"]
