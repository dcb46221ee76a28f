"""``resources/subscribe``: a change behind a resource reaches the subscribed session's GET stream."""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from tests.clients import LegacySession, create_products, create_user_with_token, http_client
from tests.conftest import LiveServer

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]
SHARED_LAYER = bool(os.environ.get("REDIS_URL"))


async def next_stream_message(lines: Any) -> dict[str, Any]:
    async with asyncio.timeout(10):
        async for line in lines:
            if line.startswith("data: ") and line[6:].strip():
                return json.loads(line[6:])
    raise AssertionError("the stream ended")


@pytest.mark.parametrize("where", ["same-process", "other-process"] if SHARED_LAYER else ["same-process"])
async def test_subscribed_session_hears_of_a_restock(start_server: type[LiveServer], where: str) -> None:
    await create_products()
    token = await sync_to_async(create_user_with_token)("stocker", ("inventory.change_product",))
    server_a = start_server().start()
    server_b = start_server(server="uvicorn").start() if where == "other-process" else server_a
    async with http_client(token) as http:
        watcher = await LegacySession.open(http, server_a.url)
        assert await watcher.request("resources/subscribe", {"uri": "inventory://products/WID-001"}) == {}
        assert await watcher.request("resources/subscribe", {"uri": "inventory://products/WID-002"}) == {}
        assert await watcher.request("resources/unsubscribe", {"uri": "inventory://products/WID-002"}) == {}
        headers = {"Accept": "text/event-stream", "Mcp-Session-Id": watcher.session_id, "MCP-Protocol-Version": "2025-11-25"}
        async with http.stream("GET", server_a.url, headers=headers) as stream:
            assert stream.status_code == 200
            lines = stream.aiter_lines()
            actor = await LegacySession.open(http, server_b.url)
            for sku in ("WID-002", "WID-001"):  # WID-002 was unsubscribed: only WID-001 is heard of
                await actor.request("tools/call", {"name": "restock", "arguments": {"sku": sku, "quantity": 1}})
            message = await next_stream_message(lines)
    assert message == {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "inventory://products/WID-001"}}


async def test_subscribing_to_an_unknown_resource_is_refused(live_server_url: str) -> None:
    async with http_client() as http:
        session = await LegacySession.open(http, live_server_url)
        response, message = await session.post("resources/subscribe", {"uri": "nowhere://nothing"})
    assert message["error"]["code"] == -32002  # 2025-11-25: its spec's "Resource not found" code
    assert message["error"]["data"] == {"uri": "nowhere://nothing"}


@pytest.mark.parametrize("where", ["same-process", "other-process"] if SHARED_LAYER else ["same-process"])
async def test_listen_stream_hears_of_its_resource_subscriptions(start_server: type[LiveServer], where: str) -> None:
    """2026-07-28 ``subscriptions/listen`` with ``resourceSubscriptions``: updates of those URIs only, tagged."""
    from tests.clients import ModernClient, modern_headers, modern_meta

    await create_products()
    token = await sync_to_async(create_user_with_token)("listener", ("inventory.change_product",))
    server_a = start_server().start()
    server_b = start_server(server="uvicorn").start() if where == "other-process" else server_a
    params = {"notifications": {"resourceSubscriptions": ["inventory://products/GAD-001"]}, "_meta": modern_meta()}
    body = {"jsonrpc": "2.0", "id": "listen-1", "method": "subscriptions/listen", "params": params}
    async with http_client(token) as http:
        async with http.stream("POST", server_a.url, json=body, headers=modern_headers("subscriptions/listen", params)) as stream:
            assert stream.status_code == 200
            lines = stream.aiter_lines()
            ack = await next_stream_message(lines)
            assert ack["method"] == "notifications/subscriptions/acknowledged"
            actor = ModernClient(http, server_b.url)
            for sku in ("WID-001", "GAD-001"):  # only GAD-001 was asked for
                await actor.request("tools/call", {"name": "restock", "arguments": {"sku": sku, "quantity": 1}})
            update = await next_stream_message(lines)
    assert update == {
        "jsonrpc": "2.0",
        "method": "notifications/resources/updated",
        "params": {"uri": "inventory://products/GAD-001", "_meta": {"io.modelcontextprotocol/subscriptionId": "listen-1"}},
    }
