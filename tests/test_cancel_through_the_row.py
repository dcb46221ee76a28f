"""A client's ``notifications/cancelled`` received by another process, with no shared channel layer (the
embedded in-memory default) or while it is down, reaches the process running the handler through the
call's row: that process stops the request as the client's own cancel stops it, sending no response.

Found by a review of the 2025 era (two servers on one SQLite file): the cancel POSTed to the process
running the call ended its POST with 202 and no body, while the same cancel POSTed to the other process
made the call's POST answer a "cancelled before it finished" result, which the spec says a receiver of
the cancel SHOULD not send. An operator's cancel, read from the row the same way, still answers.

Process B is played here by what it does to the row (``store.end_call`` with the client's reason, the
fallback of ``session.cancel_request`` when no handler of its own runs the request).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.test import override_settings

from mcp_tools import ToolContext
from mcp_tools.models import ToolCall
from mcp_tools.registry import make_tool, registry
from mcp_tools.server.core import CLIENT_CANCELLED
from mcp_tools.store import sync_calls
from tests.asgi_client import HANDSHAKE, post_headers
from tests.test_http_spec_edges import APP, Stream, open_session

pytestmark = pytest.mark.django_db(transaction=True)
RAN: list[str] = []


async def waits_quietly(ctx: ToolContext) -> str:
    await ctx.once("start", lambda: 1)  # the call has its row at once
    for _ in range(200):
        await asyncio.sleep(0.025)
    RAN.append("finished")
    return "finished"


async def reports_progress(ctx: ToolContext) -> str:
    await ctx.once("start", lambda: 1)
    for i in range(200):
        await ctx.report_progress(i, 200)
        await asyncio.sleep(0.025)
    RAN.append("finished")
    return "finished"


async def run_and_end(tool: Any, message: str) -> Stream:
    """Start ``tool`` on a session's POST, end its row as another process would with ``message``, and
    return the POST once it is over."""
    session = await open_session()
    body = {"jsonrpc": "2.0", "id": 41, "method": "tools/call", "params": {"name": tool.__name__, "arguments": {}}}
    stream = Stream("POST", post_headers(version=HANDSHAKE, session=session), json.dumps(body).encode())
    for _ in range(200):
        row = await sync_to_async(lambda: ToolCall.objects.filter(tool_name=tool.__name__).values_list("id", "round").first())()
        if row is not None:
            break
        await asyncio.sleep(0.02)
    assert row is not None, "the call never got its row"
    assert await sync_to_async(sync_calls.end_call)(row[0], "cancelled", message, row[1])
    await asyncio.wait_for(stream.task, 10)
    return stream


def answers_of(stream: Stream) -> list[dict[str, Any]]:
    """The answers to request 41 the POST carried: its JSON body, or its SSE events."""
    text = stream.text().strip()
    if text.startswith("{"):
        return [message for message in [json.loads(text)] if message.get("id") == 41]
    return [data for _, data in stream.events() if data.get("id") == 41]


@pytest.mark.parametrize("tool", [waits_quietly, reports_progress], ids=["row-check", "progress-report"])
async def test_the_clients_cancel_read_from_the_row_sends_no_response(tool: Any) -> None:
    RAN.clear()
    with override_settings(MCP_TOOLS={**settings.MCP_TOOLS, "CANCEL_POLL_SECONDS": 0.1}), \
            registry.registered_temporarily(make_tool(tool)):
        stream = await run_and_end(tool, CLIENT_CANCELLED)
    assert RAN == [], "the handler ran to its end"
    assert answers_of(stream) == [], stream.text()


async def test_an_operators_cancel_read_from_the_row_is_still_answered() -> None:
    RAN.clear()
    with override_settings(MCP_TOOLS={**settings.MCP_TOOLS, "CANCEL_POLL_SECONDS": 0.1}), \
            registry.registered_temporarily(make_tool(waits_quietly)):
        stream = await run_and_end(waits_quietly, "Cancelled by an operator")
    assert RAN == []
    answers = answers_of(stream)
    assert len(answers) == 1 and answers[0]["result"]["isError"] is True, stream.text()


async def test_a_cancelled_request_that_had_not_streamed_gets_an_event_stream_with_no_response() -> None:
    """Found by a diff review: a request cancelled before anything streamed was answered 202 with no
    content type; the 2025-11-25 transport answers a request with an event stream or JSON (202 is for
    notifications and responses). The client's cancel still gets no response: the stream closes empty."""
    from tests.asgi_client import post_json

    RAN.clear()
    with registry.registered_temporarily(make_tool(waits_quietly)):
        session = await open_session()
        headers = post_headers(version=HANDSHAKE, session=session)
        body = {"jsonrpc": "2.0", "id": 41, "method": "tools/call", "params": {"name": "waits_quietly", "arguments": {}}}
        stream = Stream("POST", headers, json.dumps(body).encode())
        await asyncio.sleep(0.3)
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 41}}
        assert (await post_json(APP, cancel, headers)).status == 202  # the notification itself
        await asyncio.wait_for(stream.task, 10)
    start = next(m for m in stream.sent if m["type"] == "http.response.start")
    assert start["status"] == 200 and (b"content-type", b"text/event-stream") in start["headers"], start
    assert answers_of(stream) == [] and RAN == [], stream.text()
