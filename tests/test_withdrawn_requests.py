"""When a 2025-11-25 session call ends while a request of the server's waits for the client's answer,
the client is told: ``notifications/cancelled`` for that request, on the call's stream, before the
call's own answer.

Spec 2025-11-25 basic/utilities/cancellation: "Either side can send a cancellation notification";
its receiver SHOULD stop processing the request (the official SDK ends the elicitation callback, and
its dialog). An operator's cancel, an expiry (``CALL_TTL``, the admin) or the session's ``DELETE``
ended the call and answered ``tools/call``, and never named the pending ``elicitation/create``
(``mcp_tools:<call>:<seq>``): the user's dialog stayed open for an answer nobody would take.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from mcp_tools import ToolContext
from mcp_tools.models import ToolCall
from mcp_tools.registry import make_tool, registry
from mcp_tools.server import core
from mcp_tools.server.flavors.session import parse_step_request_id
from tests.asgi_client import HANDSHAKE, modern_message, post_headers, post_json, request
from tests.test_background_review import queued  # noqa: F401
from tests.test_http_spec_edges import APP, Stream, _in_memory_layer, asking, open_session  # noqa: F401
from tests.test_resumed_requests_sent_once import waiting  # noqa: F401
from tests.test_session_ended_calls import deferred_call

pytestmark = pytest.mark.django_db(transaction=True)


async def end(how: str, call_id: str, headers: dict[str, str]) -> str:
    """End the call as ``how`` says; the status it ends with."""
    if how == "delete":
        assert (await request(APP, "DELETE", headers={k: v for k, v in headers.items() if k != "content-type"})).status == 204
        return "cancelled"
    status = "expired" if how == "expire" else "cancelled"
    assert await core.end_call(call_id, status, "Ended by an operator.")
    return status


def told(stream: Stream, request_id: int) -> list[dict[str, Any]]:
    """What the stream carried after its request to the client: cancellations, then the call's answer."""
    return [m for _, m in stream.events() if m.get("method") == "notifications/cancelled" or m.get("id") == request_id]


def expected(asked: dict[str, Any], status: str, request_id: int) -> list[dict[str, Any]]:
    text = "The call expired before it finished." if status == "expired" else f"The call was {status} before it finished."
    return [
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": asked["id"], "reason": text}},
        {"jsonrpc": "2.0", "id": request_id, "result": {"content": [{"type": "text", "text": text}], "isError": True}},
    ]


@pytest.mark.parametrize("how", ["cancel", "expire", "delete"])
async def test_a_call_ended_while_it_asks_withdraws_its_request_on_its_stream(how: str) -> None:
    headers, stream, event_id, asked = await asking(3)
    parsed = parse_step_request_id(asked["id"])
    assert parsed is not None and event_id is not None
    status = await end(how, parsed[0], headers)
    await stream.wait_for(lambda m: m.get("id") == 3)
    await asyncio.wait_for(stream.task, 10)
    assert told(stream, 3) == expected(asked, status, 3)
    if how != "delete":
        # Kept in the stream's event log: a client resuming after the request hears of it too.
        replay = Stream("GET", {**headers, "accept": "text/event-stream", "last-event-id": event_id})
        await asyncio.wait_for(replay.task, 10)
        assert told(replay, 3) == expected(asked, status, 3)


async def test_a_resumed_stream_withdraws_the_request_it_carried_when_the_call_ends(waiting: asyncio.Event) -> None:  # noqa: F811
    headers, first, event_id, asked = await asking(4)
    parsed = parse_step_request_id(asked["id"])
    assert parsed is not None and event_id is not None
    first.gone.set()
    await asyncio.wait_for(first.task, 10)
    waiting.clear()
    resumed = Stream("GET", {**headers, "accept": "text/event-stream", "last-event-id": event_id})
    await asyncio.wait_for(waiting.wait(), 10)  # the resumed stream follows the call, which waits
    assert await core.end_call(parsed[0], "cancelled", "Ended by an operator.")
    await resumed.wait_for(lambda m: m.get("id") == 4)
    resumed.gone.set()
    await asyncio.wait_for(resumed.task, 10)
    assert told(resumed, 4) == expected(asked, "cancelled", 4)


async def test_a_call_the_client_cancels_says_so_not_its_last_progress_message() -> None:
    """The row of a call the client's ``notifications/cancelled`` ended holds a reason, as an operator's
    cancel and a cancel of a resumed stream write one: it kept its last progress message ("halfway")."""
    async def halfway_then_ask(ctx: ToolContext) -> str:
        """Report progress with a message, then ask."""
        await ctx.report_progress(1, 2, "halfway")
        answer = await ctx.elicit("Name?", {"type": "object", "properties": {"name": {"type": "string"}}})
        return str(answer)

    with registry.registered_temporarily(make_tool(halfway_then_ask)):
        session = await open_session({"elicitation": {}})
        headers = post_headers(version=HANDSHAKE, session=session)
        call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                "params": {"name": "halfway_then_ask", "arguments": {}, "_meta": {"progressToken": "p"}}}
        stream = Stream("POST", headers, json.dumps(call).encode())
        _, asked = await stream.wait_for(lambda m: m.get("method") == "elicitation/create")
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7, "reason": "gave up"}}
        assert (await post_json(APP, cancel, headers)).status == 202
        await asyncio.wait_for(stream.task, 10)
    parsed = parse_step_request_id(asked["id"])
    assert parsed is not None
    row = await sync_to_async(ToolCall.objects.get)(id=parsed[0])
    assert (row.status, row.status_message) == ("cancelled", "The client cancelled the request")


async def test_a_held_2026_background_call_its_client_closes_says_the_client_cancelled_it(queued: list[str]) -> None:  # noqa: F811
    """docs/durable-calls.md: a closed 2026-07-28 response stream cancels its held background call, and the
    row's status message says "The client cancelled the request", not the worker's last progress message."""
    message = modern_message("tools/call", {"name": "slow_compute", "arguments": {"seconds": 30}}, capabilities={})
    held = Stream("POST", post_headers(extra={"mcp-method": "tools/call", "mcp-name": "slow_compute"}), json.dumps(message).encode())
    call_id = await deferred_call(queued)
    await sync_to_async(ToolCall.objects.filter(id=call_id).update)(status_message="halfway", progress=1)
    held.gone.set()  # 2026-07-28: closing the stream is the client's cancel
    await asyncio.wait_for(held.task, 10)
    row = await sync_to_async(ToolCall.objects.get)(id=call_id)
    assert (row.status, row.status_message) == ("cancelled", "The client cancelled the request")
