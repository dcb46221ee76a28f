"""A 2025-11-25 call waiting for its client's answer, whose poll finds the database unreachable, pauses its
stream for the client's resume instead of ending the request.

Found by a durability review (every connection of the database terminated every 0.2 s): ``tools/call``
ended with -32603 "Internal error" while its row stayed ``input_required`` with the question pending, so
the admin showed a call waiting for an answer its client would never send (until the session was
deleted, or CALL_TTL). Now the connection ends with an SSE ``retry`` and no response, and the client's
``Last-Event-ID`` resume goes on with the call.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from django.db import OperationalError

from mcp_tools import ToolContext
from mcp_tools.interprocess import wakeups
from mcp_tools.registry import make_tool, registry
from mcp_tools.server.flavors import session as session_flavor
from tests.asgi_client import HANDSHAKE, post_headers, post_json
from tests.test_http_spec_edges import APP, Stream, _in_memory_layer, open_session  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)
NAME = {"type": "object", "properties": {"name": {"type": "string"}}}


async def ask_a_name(ctx: ToolContext) -> str:
    answer = await ctx.elicit("Your name?", schema=NAME, key="name")
    return f"hello {answer['name']}"


async def test_a_poll_that_finds_the_database_unreachable_pauses_the_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    with registry.registered_temporarily(make_tool(ask_a_name)):
        session = await open_session({"elicitation": {}})
        headers = post_headers(version=HANDSHAKE, session=session)
        call = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "ask_a_name", "arguments": {}}}
        stream = Stream("POST", headers, json.dumps(call).encode())
        _, asked = await stream.wait_for(lambda m: m.get("method") == "elicitation/create")
        call_id = asked["id"].split(":")[1]
        real_load = session_flavor.store.load_call

        async def unreachable(*args: Any, **kwargs: Any) -> Any:
            monkeypatch.setattr(session_flavor.store, "load_call", real_load)  # once
            raise OperationalError("the connection is closed")

        monkeypatch.setattr(session_flavor.store, "load_call", unreachable)
        await wakeups.notify(call_id)  # the wait polls again
        await asyncio.wait_for(stream.task, 10)
        assert "retry: " in stream.text() and not [m for _, m in stream.events() if m.get("id") == 9], stream.text()
        last_id = [event_id for event_id, _ in stream.events() if event_id][-1]

        resumed = Stream("GET", {**headers, "accept": "text/event-stream", "last-event-id": last_id})
        await asyncio.sleep(0.3)
        answered = await post_json(APP, {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {"name": "Ann"}}}, headers)
        assert answered.status == 202, answered.body
        _, result = await resumed.wait_for(lambda m: m.get("id") == 9)
    assert result["result"]["content"][0]["text"] == "hello Ann", result
