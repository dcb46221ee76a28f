"""Bad input found on review: each gets a clear -32602 and changes nothing."""

from __future__ import annotations

import io
from typing import Any

import pytest

from mcp_tools.server.auth import ANONYMOUS
from mcp_tools.protocol import jsonrpc
from mcp_tools.transports.http import McpEndpoint
from mcp_tools.transports.stdio import StdioServer
from tests.asgi_client import call_modern

pytestmark = pytest.mark.django_db(transaction=True)
REF = {"type": "ref/prompt", "name": "restock_advice"}


@pytest.mark.parametrize("context", ["not an object", {"arguments": "nope"}, {"arguments": [1, 2]}])
async def test_completion_with_a_malformed_context_is_invalid_params(context: Any) -> None:
    response = await call_modern(McpEndpoint(), "completion/complete",
                                 {"ref": REF, "argument": {"name": "sku", "value": "W"}, "context": context})
    assert response.status == 200
    assert response.json()["error"]["code"] == -32602


async def test_stdio_refused_log_level_keeps_the_previous_one() -> None:
    out = io.BytesIO()
    server = StdioServer(ANONYMOUS, reader=io.BytesIO(), writer=out)
    bad = jsonrpc.classify({"jsonrpc": "2.0", "id": 1, "method": "logging/setLevel", "params": {"level": "loud"}})
    await server.run(bad)
    assert b'"code":-32602' in out.getvalue()
    assert server.log_level == "info"
    good = jsonrpc.classify({"jsonrpc": "2.0", "id": 2, "method": "logging/setLevel", "params": {"level": "error"}})
    await server.run(good)
    assert server.log_level == "error"
