"""The 2025-11-25 Streamable HTTP session transport, as a review of it found it should behave.

Each test failed before its fix: the protocol version header on GET and DELETE and against the
session's negotiated version, a second ``initialize`` in a live session, progress tokens of the wrong
type, one standalone stream per session (each notification once, on one stream, also with a shared
channel layer), a resumed standalone stream that goes on, and DELETE ending the session's stream.
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.layers import InMemoryChannelLayer

import mcp_tools
from mcp_tools import store
from mcp_tools.interprocess import broadcast, notifications
from mcp_tools.models import McpSession
from tests.asgi_client import HANDSHAKE, handshake_message, post_headers, post_json, request
from tests.test_http_spec_edges import APP, Stream, open_session, _in_memory_layer  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)
URI = "test://static-text"


async def _until(condition: Callable[[], bool], timeout: float = 5.0) -> bool:
    """Wait (at most ``timeout``) until ``condition()`` holds; whether it does."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


def _updates(stream: Stream) -> list[tuple[str | None, Any]]:
    return [(i, m) for i, m in stream.events() if m.get("method") == "notifications/resources/updated"]


def _status(stream: Stream) -> int | None:
    return stream.sent[0]["status"] if stream.sent else None


def _primed(stream: Stream) -> bool:
    return "id: " in stream.text()


async def _subscribed_session() -> dict[str, str]:
    session = await open_session()
    headers = post_headers(version=HANDSHAKE, session=session)
    r = await post_json(APP, handshake_message("resources/subscribe", {"uri": URI}), headers)
    assert r.json().get("result") == {}, r.body
    return {**headers, "accept": "text/event-stream"}


async def _close(*streams: Stream) -> None:
    for s in streams:
        s.gone.set()
    await asyncio.wait_for(asyncio.gather(*(s.task for s in streams)), 10)


async def _get_status(headers: dict[str, str]) -> int | None:
    s = Stream("GET", headers)
    await _until(lambda: bool(s.sent))
    await _close(s)
    return _status(s)


# MCP-Protocol-Version ---------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["GET", "DELETE"])
async def test_get_and_delete_with_an_unsupported_protocol_version_are_400(method: str) -> None:
    """transports: an invalid or unsupported MCP-Protocol-Version MUST be answered 400, whatever the method."""
    session = await open_session()
    headers = {**post_headers(version="1999-01-01", session=session), "accept": "text/event-stream"}
    status = await _get_status(headers) if method == "GET" else (await request(APP, "DELETE", headers=headers)).status
    assert status == 400
    assert await sync_to_async(McpSession.objects.filter(id=session).exists)()


async def test_a_version_header_other_than_the_negotiated_one_is_400() -> None:
    """The session negotiated 2025-11-25: a request that declares another (supported) version is refused;
    one without the header is served as the session's version."""
    session = await open_session()
    r = await post_json(APP, handshake_message("ping", request_id=1), post_headers(version="2025-03-26", session=session))
    assert r.status == 400
    assert r.json()["error"]["code"] == -32600
    headers = {**post_headers(version="2025-06-18", session=session), "accept": "text/event-stream"}
    assert await _get_status(headers) == 400
    assert (await request(APP, "DELETE", headers=headers)).status == 400
    assert await sync_to_async(McpSession.objects.filter(id=session).exists)()
    # Without the header (the spec's fallback), the requests are served as the session's version.
    r = await post_json(APP, handshake_message("ping", request_id=2), post_headers(version=None, session=session))
    assert r.status == 200 and r.json()["result"] == {}
    headerless = {**post_headers(version=None, session=session), "accept": "text/event-stream"}
    assert await _get_status(headerless) == 200
    assert (await request(APP, "DELETE", headers=headerless)).status == 204


# initialize ---------------------------------------------------------------------------------------
async def test_initialize_with_a_session_id_is_an_invalid_request() -> None:
    """lifecycle: initialization is the first interaction of a session; a new session starts with an
    initialize that carries no Mcp-Session-Id."""
    session = await open_session()
    before = await sync_to_async(McpSession.objects.count)()
    again = handshake_message("initialize", {"protocolVersion": HANDSHAKE, "capabilities": {}}, request_id=2)
    r = await post_json(APP, again, post_headers(version=HANDSHAKE, session=session))
    assert r.status == 400
    assert r.json()["error"]["code"] == -32600 and r.json()["id"] == 2
    assert r.header("mcp-session-id") is None
    assert await sync_to_async(McpSession.objects.count)() == before


# progress tokens ----------------------------------------------------------------------------------
def _progress(r: Any) -> list[Any]:
    messages = r.sse_messages() if r.content_type.startswith("text/event-stream") else []
    return [m for m in messages if m.get("method") == "notifications/progress"]


@pytest.mark.parametrize("token", [{"a": 1}, [1], True])
async def test_a_progress_token_that_is_not_a_string_or_a_number_is_ignored(token: Any) -> None:
    """schema: ProgressToken is a string or a number. Another value is no token: no progress is sent."""
    session = await open_session()
    msg = handshake_message("tools/call", {"name": "test_tool_with_progress", "arguments": {}, "_meta": {"progressToken": token}})
    r = await post_json(APP, msg, post_headers(version=HANDSHAKE, session=session))
    assert _progress(r) == []
    good = handshake_message("tools/call", {"name": "test_tool_with_progress", "arguments": {}, "_meta": {"progressToken": 7}})
    progress = _progress(await post_json(APP, good, post_headers(version=HANDSHAKE, session=session)))
    assert progress and all(m["params"]["progressToken"] == 7 for m in progress)


# one standalone stream per session ----------------------------------------------------------------
async def test_a_newer_get_stream_takes_over_and_each_notification_goes_on_one_stream() -> None:
    """transports: the server MUST NOT broadcast a message across streams. The newer stream of a
    session takes over (a reconnecting client is never refused); the older one ends."""
    headers = await _subscribed_session()
    older = Stream("GET", headers)
    assert await _until(lambda: _primed(older))
    newer = Stream("GET", headers)
    assert await _until(lambda: _primed(newer))
    assert await _until(older.task.done)
    assert _status(older) == _status(newer) == 200
    await mcp_tools.notify_resource_updated(URI)
    assert await _until(lambda: len(_updates(newer)) == 1)
    assert _updates(older) == []
    assert not newer.task.done()
    await _close(older, newer)


def test_across_processes_the_newest_stream_wins() -> None:
    """A stream in another process hears of a newer one through the session's group (its stamp)."""
    now = time.time()
    mine = (now, "b")
    opened = {"type": notifications.END["type"], "opened": [now + 1, "a"]}
    assert notifications.ends_stream(opened, mine)
    assert not notifications.ends_stream({**opened, "opened": [now - 1, "z"]}, mine)
    assert not notifications.ends_stream({**opened, "opened": list(mine)}, mine)  # its own
    assert notifications.ends_stream({**opened, "opened": None}, mine)  # the session ended
    assert not notifications.ends_stream({"type": "mcp.resource.updated", "uri": URI}, mine)


async def test_with_a_shared_layer_a_stream_gets_each_notification_once(monkeypatch: Any) -> None:
    """With a shared layer (channels-redis) the notification goes through the session's group only,
    which reaches this process's stream too: it is not also put on the stream directly."""
    monkeypatch.setattr(broadcast, "_shared", [InMemoryChannelLayer()])  # a layer that counts as shared
    headers = await _subscribed_session()
    s = Stream("GET", headers)
    assert await _until(lambda: _primed(s))
    await mcp_tools.notify_resource_updated(URI)
    assert await _until(lambda: len(_updates(s)) >= 1)
    await asyncio.sleep(0.3)  # room for a second copy to arrive
    assert len(_updates(s)) == 1
    await _close(s)


class _ListeningStream(Stream):
    """A stream that tells when the endpoint waits for its client to leave: a resumed standalone
    stream does so once it is registered and has told the updates it missed (``missed_since``)."""

    def __init__(self, method: str, headers: dict[str, str]) -> None:
        self.listening = asyncio.Event()
        super().__init__(method, headers)

    async def receive(self) -> dict[str, Any]:
        if not self.body:
            self.listening.set()
        return await super().receive()


async def test_a_resumed_standalone_stream_goes_on_under_the_same_stream_id() -> None:
    """transports: resumption applies however the stream was opened (POST or GET). The official
    client reconnects its GET stream with Last-Event-ID: after the replay it stays the standalone stream."""
    headers = await _subscribed_session()
    first = Stream("GET", headers)
    assert await _until(lambda: _primed(first))
    priming = first.text().split("\n")[0][3:].strip()
    await _close(first)
    resumed = _ListeningStream("GET", {**headers, "last-event-id": priming})
    assert await _until(lambda: ": resumed" in resumed.text())
    # Not while the stream still reads the updates it missed: an update noted on the subscription before
    # that read, and published once the stream had sent what it read, is told twice (a hint, harmless),
    # as a whole run on a loaded machine once did.
    await asyncio.wait_for(resumed.listening.wait(), 10)
    await mcp_tools.notify_resource_updated(URI)
    assert await _until(lambda: len(_updates(resumed)) == 1), resumed.text()
    assert not resumed.task.done()
    event_id = _updates(resumed)[0][0]
    assert event_id is not None
    original = await store.stream_of_event(int(priming))
    assert original is not None and await store.stream_of_event(int(event_id)) == original
    await _close(resumed)


async def test_delete_ends_the_session_s_get_stream() -> None:
    headers = {**post_headers(version=HANDSHAKE, session=await open_session()), "accept": "text/event-stream"}
    s = Stream("GET", headers)
    assert await _until(lambda: _primed(s))
    assert (await request(APP, "DELETE", headers=headers)).status == 204
    assert await _until(s.task.done)
    assert s.sent[-1] == {"type": "http.response.body", "body": b""}  # the response ended, not dropped
    await _close(s)
