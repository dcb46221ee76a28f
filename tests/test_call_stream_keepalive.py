"""A 2025-11-25 session call's SSE stream that waits (for the client's answer, for a worker) sends
``: keep-alive`` comments, as the standalone GET stream and ``subscriptions/listen`` do.

docs/protocol.md gives the reason: without one, the official client's read timeout (300 s) or a
proxy's idle timeout closes an idle stream. A call waiting minutes for a human to answer its
``elicitation/create`` is such a stream; it used to send nothing while it waited, on its POST
response stream and on a stream resumed with ``Last-Event-ID`` alike.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from mcp_tools.transports import http
from tests.asgi_client import HANDSHAKE, post_headers, post_json
from tests.test_http_spec_edges import APP, Stream, _in_memory_layer, asking, open_session  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)

ANSWER = {"action": "accept", "content": {"username": "u", "email": "e@x.org"}}


@pytest.fixture
def short_keepalive(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http, "KEEPALIVE_SECONDS", 0.05)


async def keep_alives_after(stream: Stream, start: int, count: int = 2) -> None:
    """Wait until ``stream`` has sent ``count`` keep-alive comments past character ``start`` of its body."""
    async def loop() -> None:
        while stream.text()[start:].count(http.KEEPALIVE_COMMENT.decode()) < count:
            assert not stream.task.done(), f"stream ended: {stream.text()!r}"
            stream.got.clear()
            await stream.got.wait()
    await asyncio.wait_for(loop(), 10)


async def test_a_call_waiting_for_the_clients_answer_keeps_its_stream_alive(short_keepalive: None) -> None:
    headers, stream, _, asked = await asking(1)
    await keep_alives_after(stream, len(stream.text()))  # the user takes their time
    assert (await post_json(APP, {"jsonrpc": "2.0", "id": asked["id"], "result": ANSWER}, headers)).status == 202
    _, final = await stream.wait_for(lambda m: m.get("id") == 1)
    await asyncio.wait_for(stream.task, 10)
    assert "result" in final and not final["result"].get("isError"), final
    assert stream.text().endswith("\n\n") and stream.sent[-1] == {"type": "http.response.body", "body": b""}


async def test_a_resumed_stream_waiting_for_the_clients_answer_keeps_alive(short_keepalive: None) -> None:
    headers, first, event_id, asked = await asking(2)
    assert event_id is not None
    first.gone.set()
    await asyncio.wait_for(first.task, 10)
    resumed = Stream("GET", {**headers, "accept": "text/event-stream", "last-event-id": event_id})
    await keep_alives_after(resumed, 0)
    assert (await post_json(APP, {"jsonrpc": "2.0", "id": asked["id"], "result": ANSWER}, headers)).status == 202
    _, final = await resumed.wait_for(lambda m: m.get("id") == 2)
    resumed.gone.set()
    await asyncio.wait_for(resumed.task, 10)
    assert "result" in final and not final["result"].get("isError"), final
