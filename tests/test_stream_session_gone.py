"""A 2025-11-25 standalone stream ends once its session is gone, even when no message said so (a process
of an older release ended the session; a layer outage lost the message): the stream's periodic look
at its session (sessions.keep_in_use) is the backstop."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from mcp_tools.models import McpSession
from mcp_tools.server import sessions
from tests.asgi_client import HANDSHAKE, post_headers
from tests.test_http_spec_edges import Stream, _in_memory_layer, open_session  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


async def _stream_ends_when_its_session_row_goes() -> None:
    session = await open_session()
    stream = Stream("GET", post_headers(version=HANDSHAKE, session=session, extra={"accept": "text/event-stream"}))
    try:
        await asyncio.wait_for(stream.got.wait(), 5)
        # Gone as another process of an older release deletes it: the row only, no message here.
        await sync_to_async(McpSession.objects.filter(id=session).delete)()
        await asyncio.wait_for(asyncio.shield(stream.task), 20)  # the server ends the stream
    finally:
        stream.gone.set()
        await asyncio.wait_for(stream.task, 10)


async def test_keep_in_use_says_when_the_session_is_gone(settings: Any) -> None:
    settings.MCP_TOOLS = {**settings.MCP_TOOLS, "SESSION_IDLE_SECONDS": 24}  # look every second
    session = await open_session()
    assert await sessions.keep_in_use(session, 0.0) is not None
    await sync_to_async(McpSession.objects.filter(id=session).delete)()
    assert await sessions.keep_in_use(session, 0.0) is None


async def test_a_stream_whose_session_row_is_gone_without_a_message_ends(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from mcp_tools.transports import http

    settings.MCP_TOOLS = {**settings.MCP_TOOLS, "SESSION_IDLE_SECONDS": 24}  # look every second
    monkeypatch.setattr(http, "KEEPALIVE_SECONDS", 0.2)
    await _stream_ends_when_its_session_row_goes()


async def test_without_an_idle_limit_a_stream_still_looks_at_its_session(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """SESSION_IDLE_SECONDS = None keeps sessions until the client deletes them, and records no use: the
    stream still looks at its row (every GONE_CHECK_SECONDS), so it ends once the row is gone."""
    from mcp_tools.transports import http

    settings.MCP_TOOLS = {**settings.MCP_TOOLS, "SESSION_IDLE_SECONDS": None}
    monkeypatch.setattr(http, "KEEPALIVE_SECONDS", 0.05)
    monkeypatch.setattr(sessions, "GONE_CHECK_SECONDS", 0.1)
    await _stream_ends_when_its_session_row_goes()
