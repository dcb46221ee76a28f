"""A notification stream whose request task is cancelled (a server stopping, an ASGI server
dropping the connection, a test's timeout) leaves no task of its own pending.

Found by CI: the fuzzer's GETs (cut after 0.5 s) left each stream's ``Outbox.get()`` task pending,
which the garbage collector later destroyed ("Task was destroyed but it is pending!"). Both tests
failed before the fix: the getter was cancelled on every path out of the loop but this one.
"""
from __future__ import annotations

import asyncio
import json

import pytest

from mcp_tools.interprocess import notifications
from tests.asgi_client import HANDSHAKE, modern_message, post_headers
from tests.test_http_spec_edges import Stream, open_session
from tests.test_session_transport_review import _until

pytestmark = pytest.mark.django_db(transaction=True)


def _waiting_getters() -> list[asyncio.Task[object]]:
    return [task for task in asyncio.all_tasks() if getattr(task.get_coro(), "__qualname__", "") == "Outbox.get"]


async def _cancel(stream: Stream) -> None:
    stream.task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await stream.task
    await asyncio.sleep(0)  # a cancelled task ends on its next step


async def test_a_cancelled_standalone_get_stream_leaves_no_waiting_getter() -> None:
    session = await open_session()
    stream = Stream("GET", {**post_headers(version=HANDSHAKE, session=session), "accept": "text/event-stream"})
    assert await _until(lambda: session in notifications._streams and len(stream.sent) >= 2)
    assert await _until(lambda: bool(_waiting_getters()))  # the stream waits for a notification
    await _cancel(stream)
    assert _waiting_getters() == []
    assert session not in notifications._streams


async def test_a_cancelled_listen_stream_leaves_no_waiting_getter() -> None:
    uri = "test://template/1/data"
    body = json.dumps(modern_message("subscriptions/listen", {"notifications": {"resourceSubscriptions": [uri]}}, request_id="sub-1")).encode()
    stream = Stream("POST", post_headers(extra={"mcp-method": "subscriptions/listen"}), body)
    assert await _until(lambda: uri in notifications._listeners_by_uri and len(stream.sent) >= 2)
    assert await _until(lambda: bool(_waiting_getters()))
    await _cancel(stream)
    assert _waiting_getters() == []
    assert uri not in notifications._listeners_by_uri
