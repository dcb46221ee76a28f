"""6ebe482: the idle-session purge now ends the purged sessions' calls cancelled. A request in flight
does not count as use of the session (last_seen_at is written when a request starts), so a call still
running and streaming to its connected client on the POST's SSE stream, for longer than
SESSION_IDLE_SECONDS, is cancelled under that client by mcp_cleanup (before, it finished and its
result went out on the open stream)."""

from __future__ import annotations

import asyncio
import io
import json
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.core.management import call_command
from django.utils import timezone

from mcp_tools.models import McpSession, ToolCall
from mcp_tools.registry import make_tool, registry
from mcp_tools.server import sessions
from tests.asgi_client import HANDSHAKE, handshake_message, post_headers
from tests.test_http_spec_edges import Stream, _in_memory_layer, open_session  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)

release = asyncio.Event()


async def long_job() -> str:
    """Runs until released (a long export)."""
    await release.wait()
    return "exported"


async def test_the_idle_purge_does_not_cancel_a_call_its_connected_client_is_waiting_for(settings: Any) -> None:
    settings.MCP_TOOLS = {**settings.MCP_TOOLS, "SESSION_IDLE_SECONDS": 3600, "RECORD_ALL_CALLS": True}
    release.clear()
    with registry.registered_temporarily(make_tool(long_job)):
        session = await open_session()
        body = json.dumps(handshake_message("tools/call", {"name": "long_job", "arguments": {}})).encode()
        stream = Stream("POST", post_headers(version=HANDSHAKE, session=session), body)
        try:
            for _ in range(100):
                if await sync_to_async(ToolCall.objects.filter(tool_name="long_job", status="working").exists)():
                    break
                await asyncio.sleep(0.05)
            # The export has run for two hours with its client connected; no other request meanwhile.
            await sync_to_async(McpSession.objects.filter(id=session).update)(last_seen_at=timezone.now() - timedelta(hours=2))
            sessions.clear()
            await sync_to_async(call_command)("mcp_cleanup", stdout=io.StringIO())
            await asyncio.sleep(1.5)  # CANCEL_POLL_SECONDS: a handler learns of an end of its row elsewhere
            release.set()
            await asyncio.wait_for(stream.task, 10)
        finally:
            release.set()
            stream.gone.set()
    text = stream.text()
    results = [data for _, data in stream.events() if "result" in data] or [json.loads(text)]
    assert results[-1]["result"].get("content") == [{"type": "text", "text": "exported"}], text
    statuses = await sync_to_async(lambda: list(ToolCall.objects.filter(tool_name="long_job").values_list("status", flat=True)))()
    assert statuses == ["completed"], statuses
