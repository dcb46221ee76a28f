"""The process's cache of 2025-11-25 sessions holds the sessions used within its TTL, not every one.

Entries past ``SESSION_CACHE_SECONDS`` were never dropped (only replaced when their own session came
back), so a process kept up to 10,000 sessions with their capabilities (up to 16 KiB of JSON each,
~24 times that as Python objects): a soak review grew a daphne process by ~390 KB per session.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from mcp_tools.server import sessions
from tests.asgi_client import handshake_message, post_headers, post_json
from tests.test_resources_review import APP, open_session

pytestmark = pytest.mark.django_db(transaction=True)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """The sessions module's clock, and only its own: patching ``time.monotonic`` itself froze the
    event loop's clock too (asyncio reads it), so no timer of any task fired while the test ran or
    while its loop closed, and one PostgreSQL + Redis run hung at this file's teardown."""
    clock = Clock()
    monkeypatch.setattr(sessions, "time", SimpleNamespace(monotonic=clock))
    sessions.clear()
    yield clock
    sessions.clear()


async def ping(session: str) -> None:
    r = await post_json(APP, handshake_message("ping"), post_headers(version="2025-11-25", session=session))
    assert r.status == 200, r.body


async def test_sessions_past_the_cache_ttl_leave_the_cache(clock: Clock, settings: Any) -> None:
    settings.MCP_TOOLS = {**getattr(settings, "MCP_TOOLS", {}), "SESSION_CACHE_SECONDS": 1.0}
    sessions.clear()
    old = [await open_session() for _ in range(20)]
    for session in old:
        await ping(session)
    assert set(old) <= set(sessions._cache)
    clock.now += 5  # every entry is past its time
    newer = await open_session()
    await ping(newer)
    assert list(sessions._cache) == [newer]


async def test_a_refreshed_session_stays_and_the_expired_ones_before_it_go(clock: Clock, settings: Any) -> None:
    settings.MCP_TOOLS = {**getattr(settings, "MCP_TOOLS", {}), "SESSION_CACHE_SECONDS": 1.0}
    sessions.clear()
    first, second, third = [await open_session() for _ in range(3)]
    await ping(first)
    clock.now += 0.6
    await ping(second)
    clock.now += 0.6  # first is past its time, second is not
    await ping(first)  # read again: goes to the end of the cache's order
    assert list(sessions._cache) == [second, first]
    clock.now += 0.6  # second past its time; first (refreshed) not
    await ping(third)
    assert list(sessions._cache) == [first, third]
