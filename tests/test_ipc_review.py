"""Between processes without Redis: ``notifications/cancelled`` for a call that waits for input
with no stream open, and resource updates when the channel layer fails.

The tests that need a real Redis (group expiry, restarts, fan-out past ``capacity``) are in
tests/test_ipc_redis_review.py.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from asgiref.sync import sync_to_async

from tests.clients import LegacySession, accept_target, http_client, iter_sse, iter_sse_events

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


def _statuses(session_id: str) -> list[str]:
    from mcp_tools.models import ToolCall

    return list(ToolCall.objects.filter(session_id=session_id).values_list("status", flat=True))


async def until_statuses(session_id: str, wanted: list[str], seconds: float = 10) -> list[str]:
    """The statuses of the session's calls once they are ``wanted``, or as they are at the deadline."""
    deadline = time.monotonic() + seconds
    while True:
        statuses = await sync_to_async(_statuses, thread_sensitive=True)(session_id)
        if statuses == wanted or time.monotonic() > deadline:
            return statuses
        await asyncio.sleep(0.05)


async def test_cancel_of_a_call_waiting_for_input_whose_stream_closed_ends_it(live_server_url: str) -> None:
    """The client drops the call's stream (the call stays resumable), then cancels the request.

    The spec: the receiver SHOULD stop processing the cancelled request. No handler runs the
    call any more (it waits for a resumption), so the cancel must end the call itself: an answer
    sent afterwards and a resumed stream must not carry it on (docs/durable-calls.md: a stream
    resumed after its call ended, "however it ended (the client's cancel, ...)", is told so).
    """
    async with http_client() as http:
        session = await LegacySession.open(http, live_server_url)
        async with session.stream("tools/call", {"name": "deploy", "arguments": {"service": "cancel-closed"}}) as (request_id, response):
            async with asyncio.timeout(15):
                async for event_id, elicit in iter_sse_events(response):
                    if elicit is not None:
                        break
        assert elicit is not None and elicit["method"] == "elicitation/create" and event_id is not None
        assert await until_statuses(session.session_id, ["input_required"]) == ["input_required"]
        # The server notices the closed stream at once (http.disconnect); this leaves it room to have,
        # so that the cancel below finds no handler (it would end the call anyway, the other way).
        await asyncio.sleep(0.5)

        cancelled = await session.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                        "params": {"requestId": request_id, "reason": "user gave up"}})
        assert cancelled.status_code == 202
        statuses = await until_statuses(session.session_id, ["cancelled"])

        # What the client would see if anything carried the call on now.
        await session.send({"jsonrpc": "2.0", "id": elicit["id"], "result": accept_target("production")})
        async with session.resume(event_id) as resumed:
            async with asyncio.timeout(10):
                messages = iter_sse(resumed)
                after = await anext(messages)
                if after.get("method") == "notifications/cancelled":
                    # The elicitation the client still holds is withdrawn before the call's answer.
                    assert after["params"]["requestId"] == elicit["id"], after
                    after = await anext(messages)
    assert statuses == ["cancelled"], f"the cancelled call is still {statuses}; a resumed stream then carried {after}"
    assert after.get("method") != "sampling/createMessage", f"the cancelled call went on: {after}"
    assert after["id"] == request_id and after["result"]["isError"] is True, after
