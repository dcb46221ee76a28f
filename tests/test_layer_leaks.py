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
from tests.asgi_client import HANDSHAKE, handshake_message, post_headers, request
from tests.test_http_spec_edges import Stream, open_session

pytestmark = pytest.mark.django_db(transaction=True)
APP = McpEndpoint()


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
    tasks = list(broadcast._listeners.values())
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    broadcast._listeners.clear()
    await layer.flush()


async def settle() -> None:
    for _ in range(30):
        await asyncio.sleep(0.01)


def hh(session: str) -> dict[str, str]:
    return post_headers(version=HANDSHAKE, session=session)


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
