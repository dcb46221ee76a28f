"""Review of resources, prompts, completion and capabilities (both eras). Each test fails on the
current code for the reason its docstring gives."""
from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from mcp_tools import prompt, resource
from mcp_tools.interprocess import notifications
from mcp_tools.models import ResourceSubscription
from mcp_tools.registry import registry
from mcp_tools.transports.http import McpEndpoint
from tests.asgi_client import HANDSHAKE, call_modern, handshake_message, modern_message, post_headers, post_json
from tests.clients import create_user_with_token

pytestmark = pytest.mark.django_db(transaction=True)
APP = McpEndpoint()


@pytest.fixture(autouse=True)
def _in_memory_layer(settings: Any) -> None:
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


async def open_session(token: str | None = None) -> str:
    message = handshake_message("initialize", {"protocolVersion": HANDSHAKE, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}})
    r = await post_json(APP, message, post_headers(version=None, token=token))
    assert r.status == 200, r.body
    return r.header("mcp-session-id")


async def legacy(session: str, method: str, params: dict[str, Any], token: str | None = None) -> dict[str, Any]:
    r = await post_json(APP, handshake_message(method, params), post_headers(version=HANDSHAKE, session=session, token=token))
    assert r.status == 200, r.body
    return r.json()


async def discover_capabilities() -> dict[str, Any]:
    r = await call_modern(APP, "server/discover", {})
    return r.json()["result"]["capabilities"]


# -- 1. 2026-07-28: log messages are sent, but the logging capability is not declared -------------------

async def test_discover_declares_logging_since_log_messages_are_sent() -> None:
    """2026-07-28 logging.mdx, Capabilities: "Servers that emit log message notifications MUST declare
    the `logging` capability". The server emits notifications/message for a request whose _meta has
    io.modelcontextprotocol/logLevel, yet server/discover leaves `logging` out."""
    message = modern_message("tools/call", {"name": "test_tool_with_logging", "arguments": {},
                                            "_meta": {"io.modelcontextprotocol/logLevel": "info"}})
    r = await post_json(APP, message, post_headers(extra={"mcp-method": "tools/call", "mcp-name": "test_tool_with_logging"}))
    sent = [m.get("method") for m in r.sse_messages()]
    assert "notifications/message" in sent, sent  # the server does emit log messages in this era
    assert "logging" in await discover_capabilities()


# -- 2. 2026-07-28: resourceSubscriptions are honoured, but resources.subscribe is not declared ---------

async def test_discover_declares_resource_subscribe_since_listen_honours_resource_subscriptions() -> None:
    """2026-07-28 resources.mdx, Capabilities: `subscribe` says "whether the server supports
    resource-specific update notifications for resources requested through subscriptions/listen using
    the resourceSubscriptions filter". The server honours that filter (tests/test_resource_updates.py,
    docs/protocol.md) but server/discover advertises only listChanged, so a client that checks the
    capability before subscribing never subscribes."""
    caps = await discover_capabilities()
    assert caps["resources"].get("subscribe") is True, caps["resources"]
