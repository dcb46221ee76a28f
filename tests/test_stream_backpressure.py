"""A client that keeps its notification stream open but stops reading holds a bounded part of the
server's memory, however many notifications come: the 2025-11-25 standalone GET stream and the
2026-07-28 ``subscriptions/listen`` stream keep at most one notification per list kind or resource
URI, and at most ``notifications.OUTBOX_LIMIT`` of them; the stream's end is never dropped.

The stalled client is the in-process app's ``send`` that does not return (uvicorn's does not while
the socket's buffer is full); each test failed before the fix, whose queues grew one entry per
notification.
"""
from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async

import mcp_tools
from mcp_tools.interprocess import notifications
from mcp_tools.models import ResourceSubscription
from mcp_tools.registry import registry
from tests.asgi_client import HANDSHAKE, modern_message, post_headers, request
from tests.test_http_spec_edges import APP, Stream, _in_memory_layer, open_session  # noqa: F401
from tests.test_session_transport_review import _until

pytestmark = pytest.mark.django_db(transaction=True)
URIS = [f"test://template/{i}/data" for i in range(300)]
#: What a stream may hold: the limit, plus one list change per kind (tools, prompts, resources).
BOUND = getattr(notifications, "OUTBOX_LIMIT", 256) + 3
UPDATED = "notifications/resources/updated"


class StalledStream(Stream):
    """A stream whose client stops reading after ``reads`` sends: the next one waits until it reads again."""

    def __init__(self, method: str, headers: dict[str, str], body: bytes = b"", *, reads: int) -> None:
        self.reads = reads
        self.stalled = asyncio.Event()  # a send waits
        self.reading = asyncio.Event()  # the client reads again
        super().__init__(method, headers, body)

    async def send(self, message: dict[str, Any]) -> None:
        if len(self.sent) >= self.reads and not self.reading.is_set():
            self.stalled.set()
            await self.reading.wait()
        await super().send(message)


async def _flood() -> None:
    """Many list changes and resource updates, most of them again and again."""
    for _ in range(500):
        for kind in ("tools", "prompts", "resources"):
            registry._changed(kind)  # what registering or removing a tool, prompt or resource does
    for uri in URIS:
        await mcp_tools.notify_resource_updated(uri)
    for _ in range(5):
        for uri in URIS[:20]:
            await mcp_tools.notify_resource_updated(uri)


def _notifications(stream: Stream) -> list[tuple[str, str | None]]:
    return [(m["method"], m.get("params", {}).get("uri")) for _, m in stream.events() if "/list_changed" in m["method"] or m["method"] == UPDATED]


async def test_a_standalone_stream_whose_client_stopped_reading_holds_a_bounded_queue_and_still_ends() -> None:
    session = await open_session()
    await sync_to_async(ResourceSubscription.objects.bulk_create)([ResourceSubscription(session_id=session, uri=uri) for uri in URIS])
    headers = {**post_headers(version=HANDSHAKE, session=session), "accept": "text/event-stream"}
    stream = StalledStream("GET", headers, reads=2)  # the response's start and the priming event
    try:
        assert await _until(lambda: session in notifications._streams and len(stream.sent) == 2)
        await _flood()
        await asyncio.wait_for(stream.stalled.wait(), 10)
        (queue,) = notifications._streams[session]
        assert queue.qsize() <= BOUND, f"{queue.qsize()} notifications held for a client that does not read"
        # The session ends while the client does not read: the stream's end is not lost to the bound.
        assert (await request(APP, "DELETE", headers=headers)).status == 204
        stream.reading.set()
        await asyncio.wait_for(asyncio.shield(stream.task), 30)
    finally:
        stream.gone.set()
        stream.reading.set()
        await asyncio.wait_for(stream.task, 10)
    sent = _notifications(stream)
    assert len(sent) == len(set(sent)), "a notification waiting went out twice"
    assert {method for method, uri in sent if uri is None} == {f"notifications/{k}/list_changed" for k in ("tools", "prompts", "resources")}
    assert not stream.sent[-1].get("more_body")  # ended


async def test_a_listen_stream_whose_client_stopped_reading_holds_a_bounded_queue() -> None:
    params = {"notifications": {"toolsListChanged": True, "resourceSubscriptions": URIS}}
    body = json.dumps(modern_message("subscriptions/listen", params, request_id="sub-1")).encode()
    stream = StalledStream("POST", post_headers(extra={"mcp-method": "subscriptions/listen"}), body, reads=2)  # start, acknowledgement
    try:
        await stream.wait_for(lambda m: m.get("method") == "notifications/subscriptions/acknowledged")
        await _flood()
        await asyncio.wait_for(stream.stalled.wait(), 10)
        (queue,) = notifications._listeners_by_uri[URIS[0]]
        held = queue.qsize()
        assert held <= BOUND, f"{held} notifications held for a client that does not read"
        # Reading again, the client gets each waiting notification once (and the one its send held), tagged.
        stream.reading.set()
        assert await _until(lambda: len(_notifications(stream)) == held + 1)
    finally:
        stream.gone.set()
        stream.reading.set()
        await asyncio.wait_for(stream.task, 10)
    assert URIS[0] not in notifications._listeners_by_uri
    sent = _notifications(stream)
    assert len(sent) == len(set(sent)), "a notification waiting went out twice"
    assert ("notifications/tools/list_changed", None) in sent
    assert all(m["params"]["_meta"] == {"io.modelcontextprotocol/subscriptionId": "sub-1"} for _, m in stream.events()
               if m.get("method") == UPDATED or "/list_changed" in m.get("method", ""))


async def test_an_outbox_coalesces_drops_past_its_limit_and_never_drops_its_end() -> None:
    outbox = notifications.Outbox(limit=2)
    changed = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    updated = [{"jsonrpc": "2.0", "method": UPDATED, "params": {"uri": f"u{i}"}} for i in range(3)]
    for message in (updated[0], changed, updated[0], updated[1], updated[2], changed):
        outbox.put(message)
    assert outbox.qsize() == 2  # u0 and the list change; u1 and u2 past the limit, the repeats coalesced
    outbox.end()
    outbox.put(updated[1])  # after the end: nothing more goes out
    assert [await outbox.get() for _ in range(3)] == [updated[0], changed, notifications.END]
    assert await outbox.get() is notifications.END
