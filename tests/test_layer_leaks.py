"""What the interprocess layer leaves behind in a long-running process on channels-redis.

A channel that stops receiving while messages published to its groups are still on their way
leaves them in channels-redis's per-process ``receive_buffer`` for good (channels-redis #384):
every answered input round (a wakeup) and every standalone stream that ended (an END) did.
These run on the local Redis (db 12, a random prefix), as production has it, and skip without it.
"""
from __future__ import annotations

import asyncio
import json
import socket
import uuid
from typing import Any

import pytest

from mcp_tools.interprocess import broadcast, wakeups
from mcp_tools.transports.http import McpEndpoint
from tests.asgi_client import HANDSHAKE, handshake_message, post_headers, post_json, request
from tests.test_http_spec_edges import Stream, open_session

pytestmark = pytest.mark.django_db(transaction=True)
APP = McpEndpoint()
CYCLES = 30


def _redis_up() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", 6379), timeout=0.5):
            return True
    except OSError:
        return False


needs_redis = pytest.mark.skipif(not _redis_up(), reason="needs Redis on 127.0.0.1:6379")


@pytest.fixture
async def redis_layer(settings: Any) -> Any:
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer",
                                           "CONFIG": {"hosts": ["redis://127.0.0.1:6379/12"], "prefix": "leak" + uuid.uuid4().hex[:8]}}}
    from channels.layers import get_channel_layer

    layer = get_channel_layer()
    yield layer
    # The process's receivers on this layer stop before it is flushed (those of earlier tests' loops have).
    loop = asyncio.get_running_loop()
    tasks = [task for task in [*broadcast._listeners.values(), *(process.task for process in broadcast._process_channels.values())]
             if task.get_loop() is loop]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    broadcast._listeners.clear()
    broadcast._process_channels.clear()
    await layer.flush()


async def settle() -> None:
    for _ in range(30):
        await asyncio.sleep(0.01)


def hh(session: str) -> dict[str, str]:
    return post_headers(version=HANDSHAKE, session=session)


def buffered(layer: Any) -> dict[str, int]:
    """The layer's per-channel receive buffers, by the type of the first message held (``<empty>``: none)."""
    found: dict[str, int] = {}
    for queue in layer.receive_buffer.values():
        items = list(getattr(queue, "_queue", []))
        kind = items[0].get("type", "?") if items else "<empty>"
        found[kind] = found.get(kind, 0) + 1
    return found


async def buffers_grown_by(layer: Any, cycle: Any) -> int:
    """How many receive buffers the layer holds more after :data:`CYCLES` runs of ``cycle`` (one run first, as a warm-up)."""
    await cycle()
    await settle()
    before = len(layer.receive_buffer)
    for _ in range(CYCLES):
        await cycle()
    await settle()
    return len(layer.receive_buffer) - before


async def answered_elicitation() -> None:
    session = await open_session({"elicitation": {}})
    call = handshake_message("tools/call", {"name": "test_elicitation", "arguments": {"message": "hi"}})
    stream = Stream("POST", hh(session), json.dumps(call).encode())
    _, asked = await stream.wait_for(lambda m: m.get("method") == "elicitation/create")
    await asyncio.sleep(0.05)  # the stream is waiting for the answer
    answer = {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {"username": "u", "email": "e@x.org"}}}
    assert (await post_json(APP, answer, hh(session))).status == 202
    await stream.wait_for(lambda m: m.get("id") == call["id"] and "result" in m)
    await asyncio.wait_for(stream.task, 10)
    stream.gone.set()
    assert (await request(APP, "DELETE", headers=hh(session))).status == 204


@needs_redis
async def test_answered_elicitations_leave_no_wakeups_in_the_layer(redis_layer: Any) -> None:
    """Every answered 2025-11-25 round leaves one 'mcp.wakeup' message, for a channel nobody reads any more,
    in channels-redis's per-process receive_buffer: wakeups.notify publishes to the call's group while the
    waiting stream (same process) wakes by the local event, leaves wakeups.listening and cancels its reader
    before the message is read; the next receive of any listener of the process files it under the dead channel."""
    grown = await buffers_grown_by(redis_layer, answered_elicitation)
    assert grown <= 3, f"{CYCLES} answered calls left {grown} receive buffers behind: {buffered(redis_layer)}"


async def takeover() -> None:
    session = await open_session()
    first = Stream("GET", {**hh(session), "accept": "text/event-stream"})
    await asyncio.wait_for(first.got.wait(), 5)
    await asyncio.sleep(0.05)  # a stream that has been open a while
    second = Stream("GET", {**hh(session), "accept": "text/event-stream"})  # the client reconnects
    await asyncio.wait_for(first.task, 10)
    await asyncio.wait_for(second.got.wait(), 5)
    await asyncio.sleep(0.05)
    assert (await request(APP, "DELETE", headers=hh(session))).status == 204  # ends the second stream
    await asyncio.wait_for(second.task, 10)
    first.gone.set()
    second.gone.set()


@needs_redis
async def test_standalone_streams_that_end_leave_no_stream_end_messages_in_the_layer(redis_layer: Any) -> None:
    """A standalone GET stream that a newer one takes over, or whose session is DELETEd, ends on the local END
    (notifications.open_stream / end_streams put it on the queue, then publish it to the session's group);
    its relay (broadcast.follow) is cancelled before it read the published copy, which then stays forever in
    channels-redis's receive_buffer under the relay's dead channel."""
    grown = await buffers_grown_by(redis_layer, takeover)
    assert grown <= 3, f"{CYCLES} sessions (a reconnect and a DELETE each) left {grown} receive buffers behind: {buffered(redis_layer)}"


@needs_redis
async def test_a_stream_dropped_while_its_call_joins_the_wakeup_group_leaves_no_wakeup_event(redis_layer: Any) -> None:
    """wakeups.listening registers the call's asyncio.Event in the module's _events, then awaits the layer
    (new_channel, group_add) before its try/finally: a cancel there (the client drops the stream, or sends
    notifications/cancelled, right after elicitation/create) skips the clean-up, and the entry stays for the
    life of the process, one per such call."""
    joining = asyncio.Event()
    joined: set[str] = set()
    real_group_add = redis_layer.group_add

    async def slow_group_add(group: str, channel: str) -> None:
        if group.startswith("mcp_tools.call."):
            joined.add(group.removeprefix("mcp_tools.call."))
            joining.set()
            await asyncio.Event().wait()  # a slow Redis round trip: only the cancel ends it
        await real_group_add(group, channel)

    redis_layer.group_add = slow_group_add
    try:
        for _ in range(3):
            joining.clear()
            session = await open_session({"elicitation": {}})
            call = handshake_message("tools/call", {"name": "test_elicitation", "arguments": {"message": "hi"}})
            stream = Stream("POST", hh(session), json.dumps(call).encode())
            await stream.wait_for(lambda m: m.get("method") == "elicitation/create")
            await asyncio.wait_for(joining.wait(), 10)
            stream.gone.set()  # the client goes away
            await asyncio.wait_for(stream.task, 10)
            assert (await request(APP, "DELETE", headers=hh(session))).status == 204
    finally:
        redis_layer.group_add = real_group_add
    await settle()
    assert len(joined) == 3
    left = {call: events for call, events in wakeups._events.items() if call in joined}
    assert not left, f"left behind: {left!r}"


@needs_redis
async def test_a_listener_cancelled_as_the_process_joins_its_group_leaves_the_group(redis_layer: Any) -> None:
    """A stream dropped while the process's channel joins its call's group (here: a cancel after 0 to 11
    turns of the loop, so at each point of the add) ends, and the channel leaves the group. redis-py may
    swallow a cancel that comes as Redis answers: the channel's membership then went on, so the stream's
    clean-up, which waits for it to be over, hung (and its handler with it)."""
    for turns in range(12):
        group = wakeups.group_name(f"joining-{turns}")
        listener = asyncio.ensure_future(_listen_for_a_while(group))
        for _ in range(turns):
            await asyncio.sleep(0)
        listener.cancel()
        await asyncio.wait_for(asyncio.wait({listener}), 10)
        members = await redis_layer.connection(redis_layer.consistent_hash(group)).zcard(redis_layer._group_key(group))
        assert members == 0, f"cancelled after {turns} turns, the process's channel stayed in {group}"


async def _listen_for_a_while(group: str) -> None:
    async with broadcast.subscribed(group, lambda message: None):
        await asyncio.sleep(30)
