"""Under ``include("mcp_tools.urls")``, a client that leaves before the first byte of the answer
cancels the call, as it does on the endpoint served directly."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest

from mcp_tools.registry import make_tool, registry
from mcp_tools.transports.http import McpEndpoint
from tests.asgi_client import http_scope, modern_message, post_headers, receive_then_disconnect

pytestmark = pytest.mark.django_db(transaction=True)

_started = threading.Event()
_ended = threading.Event()
_outcome: list[str] = []


async def url_include_wait() -> str:
    _started.set()
    try:
        for _ in range(200):  # at most 10 s: a handler the client's leaving does not stop finishes
            await asyncio.sleep(0.05)
        _outcome.append("finished")
        return "finished"
    except asyncio.CancelledError:
        _outcome.append("cancelled")
        raise
    finally:
        _ended.set()


@pytest.mark.parametrize("path", ["/mcp-via-django", "/mcp"])
async def test_a_client_gone_before_the_first_byte_cancels_the_call(settings: Any, path: str) -> None:
    """Django's ASGIHandler cancels the view when the client disconnects; the view then must stop the
    endpoint it runs (2026-07-28: closing the stream cancels the request). It left it running: its
    receive() waited on an event only the streaming answer set."""
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    from django.core.asgi import get_asgi_application

    app = get_asgi_application() if path != "/mcp" else McpEndpoint()
    _started.clear()
    _ended.clear()
    _outcome.clear()
    message = modern_message("tools/call", {"name": "url_include_wait", "arguments": {}})
    headers = post_headers(extra={"mcp-method": "tools/call", "mcp-name": "url_include_wait"})
    gone = asyncio.Event()
    receive = receive_then_disconnect(json.dumps(message).encode(), gone)

    async def send(event: dict[str, Any]) -> None:
        pass

    scope = http_scope("POST", path, headers)
    loop = asyncio.get_running_loop()
    with registry.registered_temporarily(make_tool(url_include_wait)):
        served = asyncio.ensure_future(app(scope, receive, send))
        assert await loop.run_in_executor(None, _started.wait, 10)
        gone.set()  # the client goes away before any byte of the answer
        await asyncio.wait_for(served, 20)
        await loop.run_in_executor(None, _ended.wait, 20)  # the handler ends, cancelled or not
    assert _outcome == ["cancelled"], f"the handler ran on after its client left ({_outcome})"
