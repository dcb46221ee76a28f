"""``notifications/cancelled`` stops the running handler, in the same process or (with a shared layer) another."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest

from tests.clients import LegacySession, http_client, iter_sse
from tests.conftest import LiveServer

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]
SHARED_LAYER = bool(os.environ.get("REDIS_URL"))


async def cancel_slow_count(session: LegacySession, run_on: str, cancel_on: str) -> list[dict[str, Any]]:
    """Start a 5-second ``slow_count`` on ``run_on``, cancel it through ``cancel_on``; return what the stream carried."""
    seen: list[dict[str, Any]] = []
    params = {"name": "slow_count", "arguments": {"n": 100}, "_meta": {"progressToken": "p"}}
    async with session.stream("tools/call", params, url=run_on) as (request_id, response):
        messages = iter_sse(response)
        seen.append(await anext(messages))  # the first progress notification: the handler is running
        cancelled = await session.send(
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": request_id, "reason": "test"}},
            url=cancel_on,
        )
        assert cancelled.status_code == 202
        async with asyncio.timeout(4):
            async for message in messages:
                seen.append(message)
    return seen


def cancel_targets() -> list[str]:
    return ["same-process", "other-process"] if SHARED_LAYER else ["same-process"]


@pytest.mark.parametrize("where", cancel_targets())
async def test_cancelled_notification_stops_the_handler(start_server: type[LiveServer], where: str) -> None:
    server_a = start_server().start()
    server_b = start_server(server="uvicorn").start() if where == "other-process" else server_a
    async with http_client() as http:
        session = await LegacySession.open(http, server_a.url)
        seen = await cancel_slow_count(session, server_a.url, server_b.url)
    progress = [m for m in seen if m.get("method") == "notifications/progress"]
    assert progress, seen
    assert progress[-1]["params"]["progress"] < 100, "the handler ran to completion"
    assert not any("result" in m for m in seen), "a cancelled request must not produce a result"
