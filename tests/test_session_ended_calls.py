"""A 2025-11-25 session call that ended (cancelled, expired) while a stream waited on it, or before a
stream was resumed, answers as a live stream answers it: a tool error saying so (``core.ended_answer``),
not ``-32602`` (``session.follow``)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from mcp_tools.models import ToolCall
from mcp_tools.server import background, core
from tests.asgi_client import post_headers, post_json
from tests.test_background_review import APP, open_session, queued  # noqa: F401
from tests.test_http_spec_edges import HANDSHAKE, Stream, _in_memory_layer  # noqa: F401
from tests.test_http_spec_edges import open_session as open_session_with

pytestmark = pytest.mark.django_db(transaction=True)


async def deferred_call(queued: list[str]) -> str:
    """The id of the one call handed to the (test) worker queue, once the stream's request has deferred it."""
    for _ in range(100):
        if queued:
            break
        await asyncio.sleep(0.05)
    [call_id] = queued
    return call_id


def only_final(messages: list[dict[str, Any]]) -> dict[str, Any]:
    finals = [m for m in messages if "result" in m or "error" in m]
    assert len(finals) == 1, finals
    return finals[0]


def assert_cancelled_tool_result(message: dict[str, Any]) -> None:
    assert "error" not in message, message
    result = message["result"]
    assert result["isError"] is True and result["content"][0]["text"] == "The call was cancelled before it finished.", result


async def test_2025_elicitation_call_cancelled_then_resumed_with_last_event_id() -> None:
    session = await open_session_with({"elicitation": {}})
    headers = post_headers(version=HANDSHAKE, session=session)
    call = {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "test_elicitation", "arguments": {"message": "hi"}}}
    s = Stream("POST", headers, json.dumps(call).encode())
    event_id, _ = await s.wait_for(lambda m: m.get("method") == "elicitation/create")
    r = await post_json(APP, {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5}}, headers)
    assert r.status == 202
    await asyncio.wait_for(s.task, 10)
    assert not any("result" in m or "error" in m for _, m in s.events())  # no response after a cancel
    row = await sync_to_async(ToolCall.objects.get)()
    assert row.status == "cancelled"
    resumed = Stream("GET", {**headers, "accept": "text/event-stream", "last-event-id": event_id})
    await asyncio.wait_for(resumed.task, 10)
    assert_cancelled_tool_result(only_final([m for _, m in resumed.events()]))


async def test_2025_background_call_cancelled_then_resumed_with_last_event_id(queued: list[str]) -> None:  # noqa: F811
    session = await open_session_with({"elicitation": {"form": {}}})
    headers = post_headers(version=HANDSHAKE, session=session)
    call = {"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "confirm_delete", "arguments": {}}}
    s = Stream("POST", headers, json.dumps(call).encode())
    call_id = await deferred_call(queued)
    await background.run_in_worker(call_id, "w")  # asks on the worker: the stream carries elicitation/create
    event_id, _ = await s.wait_for(lambda m: m.get("method") == "elicitation/create")
    r = await post_json(APP, {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 6}}, headers)
    assert r.status == 202
    await asyncio.wait_for(s.task, 10)
    row = await sync_to_async(ToolCall.objects.get)(id=call_id)
    assert row.status == "cancelled"
    resumed = Stream("GET", {**headers, "accept": "text/event-stream", "last-event-id": event_id})
    await asyncio.wait_for(resumed.task, 10)
    assert_cancelled_tool_result(only_final([m for _, m in resumed.events()]))


async def test_2025_background_call_cancelled_by_operator_while_its_stream_waits(queued: list[str]) -> None:  # noqa: F811
    """An operator's cancel of a session background call whose POST stream waits for it (``session.follow``)."""
    session = await open_session()
    headers = post_headers(version=HANDSHAKE, session=session)
    call = {"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "slow_compute", "arguments": {"seconds": 30}}}
    s = Stream("POST", headers, json.dumps(call).encode())
    call_id = await deferred_call(queued)
    await asyncio.sleep(0.2)
    assert await core.end_call(call_id, "cancelled")
    await asyncio.wait_for(s.task, 10)
    assert_cancelled_tool_result(json.loads(s.text()))
