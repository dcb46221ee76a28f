"""A review of the interprocess fixes found it: notifications/cancelled for a 2025-11-25 call whose round runs on a resumed stream (GET Last-Event-ID).

Default configuration (in-memory layer, one server process): nothing Redis-specific.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from tests.clients import LegacySession, http_client, iter_sse, iter_sse_events

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


def _statuses(session_id: str) -> list[str]:
    from mcp_tools.models import ToolCall

    return list(ToolCall.objects.filter(session_id=session_id).values_list("status", flat=True))


async def test_cancel_stops_a_round_running_on_a_resumed_stream(live_server_url: str) -> None:
    """The call asks for input; its POST stream drops; the client resumes it with Last-Event-ID and
    answers, so the resumed stream runs the next round (a 5 s count). The client then sends
    notifications/cancelled for the request.

    The spec (2025-11-25 cancellation): the receiver SHOULD stop processing the cancelled request;
    docs/protocol.md: notifications/cancelled "stops the handler"; docs/durable-calls.md: "Whatever
    stops a call marks its row cancelled at once: the client (notifications/cancelled)". 8d414d2
    leaves "a round that started meanwhile ... to the broadcast, as a running handler is", but the
    round a resumed stream runs is registered nowhere: nobody stops it.
    """
    async with http_client() as http:
        session = await LegacySession.open(http, live_server_url)
        params = {"name": "confirm_then_count", "arguments": {"n": 100}, "_meta": {"progressToken": "p"}}
        async with session.stream("tools/call", params) as (request_id, response):
            async with asyncio.timeout(15):
                async for event_id, elicit in iter_sse_events(response):
                    if elicit is not None and elicit.get("method") == "elicitation/create":
                        break
        assert event_id is not None and elicit is not None
        await asyncio.sleep(0.5)  # the server has noticed the closed stream: the call waits to be resumed

        seen: list[dict[str, Any]] = []
        async with session.resume(event_id) as resumed:
            assert resumed.status_code == 200
            # The request the client received before its stream dropped is not sent again on the
            # resumed stream (it saw that event): the client answers the one it has.
            answered = await session.send({"jsonrpc": "2.0", "id": elicit["id"],
                                           "result": {"action": "accept", "content": {"ok": True}}})
            assert answered.status_code == 202, answered.text
            # The resumed stream now runs the answered round (a 5 s count; a resumed stream
            # relays no progress, so the test waits): the client cancels the request.
            await asyncio.sleep(1.0)
            assert await sync_to_async(_statuses, thread_sensitive=True)(session.session_id) == ["working"]
            cancel = await session.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                         "params": {"requestId": request_id, "reason": "user gave up"}})
            assert cancel.status_code == 202
            cancelled_at = time.monotonic()
            async with asyncio.timeout(20):
                async for message in iter_sse(resumed):
                    seen.append(message)
                    if message.get("id") == request_id:
                        break
        statuses = await sync_to_async(_statuses, thread_sensitive=True)(session.session_id)
    assert cancelled_at is not None, seen
    results = [m for m in seen if m.get("id") == request_id and "result" in m]
    assert not any("counted to" in str(m["result"]) for m in results), (
        f"the cancelled call ran to completion on the resumed stream: {results}; row {statuses}")
    assert statuses == ["cancelled"], statuses
