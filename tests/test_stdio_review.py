"""stdio, resource templates and the test client: what a review found, each failing before its mend.

A reply holding a lone surrogate silenced stdio for the rest of the session (and was an HTTP 500);
``notifications/cancelled`` with a list or object id ended the stdio server; stdio advertised resource
subscriptions it never delivered; ``mcp_stdio`` served as an inactive user; template variables came
percent-encoded and RFC 6570 operators crashed at import; ``McpTestClient`` sent non-ASCII names raw.
"""

from __future__ import annotations

import io
import json
import sys
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import CommandError

import mcp_tools
from mcp_tools.server.auth import ANONYMOUS
from mcp_tools.testing import McpTestClient
from mcp_tools.transports.stdio import StdioServer

pytestmark = pytest.mark.django_db(transaction=True)

INIT = {"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
PING_3 = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "ping"})


async def serve_lines(lines: list[str]) -> list[dict[str, Any]]:
    reader = io.BytesIO("".join(line + "\n" for line in lines).encode())
    writer = io.BytesIO()
    await StdioServer(ANONYMOUS, reader, writer, grace=2).serve()
    return [json.loads(line) for line in writer.getvalue().splitlines() if line.strip()]


def answered(written: list[dict[str, Any]], request_id: Any) -> dict[str, Any]:
    [reply] = [m for m in written if m.get("id") == request_id and ("result" in m or "error" in m)]
    return reply


@pytest.mark.parametrize("bad_id", [[1], {"a": 1}])
async def test_cancelled_with_a_list_or_object_request_id_is_ignored(bad_id: Any) -> None:
    written = await serve_lines([json.dumps(INIT), json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                                                "params": {"requestId": bad_id}}), PING_3])
    assert answered(written, 3)["result"] == {}


@pytest.mark.parametrize("request_line", [
    '{"jsonrpc": "2.0", "id": "\\ud800", "method": "ping"}',  # in the id
    '{"jsonrpc": "2.0", "id": 2, "method": "x\\ud800"}',  # in the method (echoed by the error)
    '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"a\\ud800b"}}}',  # in the arguments (refused with its id)
])
async def test_a_lone_surrogate_in_a_reply_is_escaped_and_later_replies_still_go_out(request_line: str) -> None:
    written = await serve_lines([json.dumps(INIT), request_line, PING_3])
    assert answered(written, 3)["result"] == {}
    request = json.loads(request_line)
    assert answered(written, request["id"]), "the request itself was answered too"


def lone_surrogate() -> str:
    """A tool whose result holds a lone surrogate (a client may no longer send one, a tool can make one)."""
    return "a\ud800b"


async def test_a_lone_surrogate_in_an_http_reply_is_no_500() -> None:
    from demo_site.asgi import application
    from mcp_tools.registry import make_tool, registry
    from tests.asgi_client import call_modern

    with registry.registered_temporarily(make_tool(lone_surrogate)):
        response = await call_modern(application, "tools/call", {"name": "lone_surrogate", "arguments": {}})
    assert response.status == 200
    assert "\\ud800" in response.body.decode(), "written as the JSON escape it came as"
    assert response.json()["result"]["content"][0]["text"] == "a\ud800b"


async def test_stdio_advertises_no_subscriptions_and_refuses_them() -> None:
    written = await serve_lines([json.dumps(INIT), json.dumps({"jsonrpc": "2.0", "id": 2, "method": "resources/subscribe",
                                                                "params": {"uri": "inventory://products"}})])
    capabilities = answered(written, "init")["result"]["capabilities"]
    assert capabilities["resources"] == {} and capabilities["tools"] == {} and capabilities["prompts"] == {}
    assert answered(written, 2)["error"]["code"] == -32601


def test_mcp_stdio_refuses_an_inactive_user(monkeypatch: pytest.MonkeyPatch) -> None:
    get_user_model().objects.create_user("gone", password="x", is_active=False)
    served: list[Any] = []

    class FakeServer:
        def __init__(self, principal: Any, **kwargs: Any) -> None:
            served.append(principal)

        async def serve(self) -> None:
            return None

    monkeypatch.setattr("mcp_tools.transports.stdio.StdioServer", FakeServer)
    with pytest.raises(CommandError, match="inactive"):
        call_command("mcp_stdio", user="gone")
    assert not served


async def test_template_variables_are_percent_decoded() -> None:
    """RFC 6570: a client expands test://template/{id}/data with id="a b/c" as test://template/a%20b%2Fc/data."""
    written = await serve_lines([json.dumps(INIT), json.dumps({"jsonrpc": "2.0", "id": 2, "method": "resources/read",
                                                                "params": {"uri": "test://template/a%20b%2Fc/data"}})])
    assert json.loads(answered(written, 2)["result"]["contents"][0]["text"])["id"] == "a b/c"


def test_an_rfc_6570_operator_template_is_refused_with_a_clear_error() -> None:
    with pytest.raises(ImproperlyConfigured, match=r"\{\?q\} is not supported"):
        mcp_tools.resource("search://items{?q}", name="search_items")(lambda q="": "x")


async def test_the_test_client_reads_a_resource_whose_uri_is_not_ascii() -> None:
    result = await McpTestClient().request("resources/read", {"uri": "test://template/café/data"})
    assert json.loads(result["contents"][0]["text"])["id"] == "café"


async def test_a_second_request_with_the_id_of_one_in_flight_is_refused_and_the_first_runs_once() -> None:
    import asyncio

    from mcp_tools.registry import make_tool, registry

    started: list[int] = []

    async def take_a_while() -> str:
        """Answer after a moment."""
        started.append(1)
        await asyncio.sleep(0.3)
        return "done"

    call = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "take_a_while", "arguments": {}}})
    with registry.registered_temporarily(make_tool(take_a_while)):
        written = await serve_lines([json.dumps(INIT), call, call, PING_3])
    replies = [m for m in written if m.get("id") == 7]
    assert [("error" in m, m.get("error", {}).get("code")) for m in replies] == [(True, -32600), (False, None)]
    assert replies[1]["result"]["content"] == [{"type": "text", "text": "done"}]
    assert started == [1]
    assert answered(written, 3)["result"] == {}


async def test_a_line_past_the_body_limit_is_refused_and_the_next_one_served() -> None:
    """As HTTP answers 413 past ``MAX_BODY_BYTES``: before, stdio read a line of any length whole and parsed it."""
    from django.conf import settings
    from django.test import override_settings

    huge = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "x" * 5000}}})
    with override_settings(MCP_TOOLS={**settings.MCP_TOOLS, "MAX_BODY_BYTES": 1000}):
        written = await serve_lines([json.dumps(INIT), huge, PING_3, "x" * 3000])  # the last one: cut off by the input's end
    refusals = [m for m in written if m.get("id") is None]
    assert [m["error"] for m in refusals] == [{"code": -32600, "message": "Message larger than 1000 bytes"}] * 2, written
    assert answered(written, 3) == {"jsonrpc": "2.0", "id": 3, "result": {}}
    assert not [m for m in written if m.get("id") == 2], "the long request was not served"


def ping_line_of(size: int) -> str:
    """A ping of exactly ``size`` bytes of JSON."""
    base = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "ping", "params": {"_meta": {"pad": ""}}})
    line = base.replace('"pad": ""', '"pad": "' + "x" * (size - len(base)) + '"')
    assert len(line.encode()) == size
    return line


@pytest.mark.parametrize("line_end", ["\n", "\r\n"])
async def test_a_message_of_exactly_the_body_limit_is_served_whatever_its_line_end(line_end: str) -> None:
    """As an HTTP body of that length is. With CRLF, the limit's bytes and the CR filled the bounded read."""
    from django.conf import settings
    from django.test import override_settings

    writer = io.BytesIO()
    raw = (json.dumps(INIT) + line_end + ping_line_of(1000) + line_end).encode()
    with override_settings(MCP_TOOLS={**settings.MCP_TOOLS, "MAX_BODY_BYTES": 1000}):
        await StdioServer(ANONYMOUS, io.BytesIO(raw), writer, grace=2).serve()
    written = [json.loads(line) for line in writer.getvalue().splitlines() if line.strip()]
    assert answered(written, 3) == {"jsonrpc": "2.0", "id": 3, "result": {}}, written


@pytest.mark.parametrize("limit", [sys.maxsize, 10**30])
async def test_a_body_limit_past_what_a_read_takes_still_serves(limit: int) -> None:
    """Found by the stdio review: ``MAX_BODY_BYTES = sys.maxsize`` (meant as "no limit") passes the check
    (a positive integer), and the reader thread's ``readline(limit + 2)`` raised OverflowError at the
    first line: mcp_stdio logged a traceback and ended at once, serving nothing."""
    from django.conf import settings
    from django.test import override_settings

    writer = io.BytesIO()
    raw = (json.dumps(INIT) + "\n" + PING_3 + "\n").encode()
    with override_settings(MCP_TOOLS={**settings.MCP_TOOLS, "MAX_BODY_BYTES": limit}):
        await StdioServer(ANONYMOUS, io.BytesIO(raw), writer, grace=2).serve()
    written = [json.loads(line) for line in writer.getvalue().splitlines() if line.strip()]
    assert answered(written, 3) == {"jsonrpc": "2.0", "id": 3, "result": {}}, written
