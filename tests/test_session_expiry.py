"""A 2025-11-25 session unused for ``SESSION_IDLE_SECONDS`` ends: its next request gets 404 and
``mcp_cleanup`` deletes it. Before, only a DELETE ended a session, so every anonymous ``initialize``
left a row for good (a review found it)."""

from __future__ import annotations

import asyncio
import io
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.core.management import call_command
from django.utils import timezone

from mcp_tools.models import McpSession, ResourceSubscription
from mcp_tools.server import sessions
from tests.asgi_client import HANDSHAKE, handshake_message, post_headers, post_json
from tests.test_http_spec_edges import APP, open_session, _in_memory_layer  # noqa: F401
from tests.test_session_transport_review import Stream, _close, _primed, _until

pytestmark = pytest.mark.django_db(transaction=True)
DAY = 24 * 3600


async def last_used(session: str, seconds_ago: float) -> None:
    when = timezone.now() - timedelta(seconds=seconds_ago)
    await sync_to_async(McpSession.objects.filter(id=session).update)(last_seen_at=when)
    sessions.clear()  # as another process would: it reads the table


async def ping(session: str) -> int:
    response = await post_json(APP, handshake_message("ping"), post_headers(version=HANDSHAKE, session=session))
    return response.status


async def test_a_session_unused_past_the_limit_ends_at_its_next_request() -> None:
    session = await open_session()
    await last_used(session, DAY + 60)
    assert await ping(session) == 404
    assert not await sync_to_async(McpSession.objects.filter(id=session).exists)()


async def test_a_session_in_use_is_kept_alive_with_a_write_now_and_then() -> None:
    session = await open_session()
    await last_used(session, 2 * 3600)  # past a 24th of the limit: written again
    assert await ping(session) == 200
    seen = await sync_to_async(lambda: McpSession.objects.get(id=session).last_seen_at)()
    assert timezone.now() - seen < timedelta(minutes=5)
    await last_used(session, 60)  # recently written: not written again
    assert await ping(session) == 200
    assert await sync_to_async(lambda: McpSession.objects.get(id=session).last_seen_at)() < timezone.now() - timedelta(seconds=50)


async def test_mcp_cleanup_deletes_idle_sessions_with_their_subscriptions(settings: object) -> None:
    idle, busy = await open_session(), await open_session()
    await sync_to_async(ResourceSubscription.objects.create)(session_id=idle, uri="inventory://products")
    await last_used(idle, DAY + 60)
    out = io.StringIO()
    await sync_to_async(call_command)("mcp_cleanup", "--dry-run", stdout=out)
    assert "would delete 1 session(s)" in out.getvalue()
    await sync_to_async(call_command)("mcp_cleanup", stdout=out)
    assert "Deleted 1 session(s)" in out.getvalue()
    assert await sync_to_async(lambda: sorted(McpSession.objects.values_list("id", flat=True)))() == [busy]
    assert not await sync_to_async(ResourceSubscription.objects.exists)()
    assert await ping(busy) == 200


async def test_no_limit_keeps_sessions(settings: object) -> None:
    settings.MCP_TOOLS = {**settings.MCP_TOOLS, "SESSION_IDLE_SECONDS": None}  # type: ignore[attr-defined]
    session = await open_session()
    await last_used(session, 365 * DAY)
    assert await ping(session) == 200


async def test_an_expired_session_s_open_stream_ends_when_its_expiry_is_found() -> None:
    """A session found expired ends as a DELETE ends it: its standalone GET stream ends too
    (before, the stream stayed open on a session that no longer existed)."""
    session = await open_session()
    headers = {**post_headers(version=HANDSHAKE, session=session), "accept": "text/event-stream"}
    stream = Stream("GET", headers)
    assert await _until(lambda: _primed(stream))
    await last_used(session, DAY + 60)
    assert await ping(session) == 404
    assert await _until(stream.task.done)
    assert stream.sent[-1] == {"type": "http.response.body", "body": b""}  # ended, not dropped
    await _close(stream)


@pytest.mark.parametrize("limit", [0, -60, "1d"])
async def test_an_idle_limit_that_is_no_positive_number_ends_no_session(limit: object) -> None:
    """SESSION_IDLE_SECONDS = 0 (or less) ended every session at its next request, each 404 sending
    the client to start a new one that ended the same way; "1d" was a ValueError per request. Such a
    value is refused (mcp_tools.E005; a 500 naming the setting here), and ends no session."""
    from django.conf import settings
    from django.test import override_settings

    session = await open_session()
    with override_settings(MCP_TOOLS={**settings.MCP_TOOLS, "SESSION_IDLE_SECONDS": limit}):
        sessions.clear()
        assert await ping(session) == 500
        assert await sync_to_async(McpSession.objects.filter(id=session).exists)()
    sessions.clear()
    assert await ping(session) == 200


async def test_a_client_listening_on_its_stream_keeps_a_short_lived_session() -> None:
    """Found by a review of the 2025-11-25 era: with ``SESSION_IDLE_SECONDS`` under the 15 s keep-alive, a client
    listening on its open GET stream lost its session (its next request 404): the stream recorded the session
    in use only once per keep-alive pass. docs/settings.md: a client listening on its GET stream uses it."""
    from django.conf import settings
    from django.test import override_settings

    with override_settings(MCP_TOOLS={**settings.MCP_TOOLS, "SESSION_IDLE_SECONDS": 1.5}):
        sessions.clear()
        session = await open_session()
        stream = Stream("GET", {**post_headers(version=HANDSHAKE, session=session), "accept": "text/event-stream"})
        assert await _until(lambda: _primed(stream))
        await asyncio.sleep(3.5)  # more than twice the limit, listening
        sessions.clear()  # another process would read the table
        assert await ping(session) == 200
        await _close(stream)


async def test_a_quiet_standalone_stream_is_primed_again_so_its_resume_id_stays_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by a review of resources and subscriptions: a GET stream with nothing to say sends comments, which
    carry no event id, so its client's Last-Event-ID stayed the priming event; ``mcp_cleanup`` deletes events
    older than ``CALL_TTL``, and the next reconnect got 400 (the official client then stopped listening). A
    quiet stream sends a new priming event now and then (here every keep-alive)."""
    from mcp_tools.transports import http

    monkeypatch.setattr(http, "KEEPALIVE_SECONDS", 0.05)
    monkeypatch.setattr(http, "REPRIME_SECONDS", 0.0, raising=False)
    session = await open_session()
    stream = Stream("GET", {**post_headers(version=HANDSHAKE, session=session), "accept": "text/event-stream"})
    assert await _until(lambda: stream.text().count("id: ") >= 3)
    ids = [int(line[4:]) for line in stream.text().splitlines() if line.startswith("id: ")]
    assert ids == sorted(ids) and len(set(ids)) == len(ids), ids
    resumed = Stream("GET", {**post_headers(version=HANDSHAKE, session=session), "accept": "text/event-stream", "last-event-id": str(ids[-1])})
    assert await _until(lambda: _primed(resumed) or resumed.task.done())
    assert not resumed.task.done(), resumed.text()  # resumed (400 would have ended it)
    await _close(resumed)
    await _close(stream)


async def test_a_request_that_runs_longer_than_the_idle_limit_keeps_its_session() -> None:
    """Left alone by earlier sessions, seen with ``SESSION_IDLE_SECONDS=1.5``: a session whose only request ran
    for 3.5 s expired under it (its next request 404, ``mcp_cleanup`` ended it and the call with it), since only
    a request's start recorded the session in use. A running request uses its session, as a listening GET
    stream does (docs/settings.md)."""
    import mcp_tools
    from django.conf import settings
    from django.test import override_settings

    from mcp_tools.registry import registry
    @mcp_tools.tool(name="s38_long_wait")
    async def long_wait() -> str:
        await asyncio.sleep(3.5)
        return "done"

    try:
        with override_settings(MCP_TOOLS={**settings.MCP_TOOLS, "SESSION_IDLE_SECONDS": 1.5}):
            sessions.clear()
            session = await open_session()
            running = asyncio.ensure_future(post_json(APP, handshake_message("tools/call", {"name": "s38_long_wait", "arguments": {}}), post_headers(version=HANDSHAKE, session=session)))
            await asyncio.sleep(2.5)  # past the limit since the request began
            await sync_to_async(call_command)("mcp_cleanup", stdout=io.StringIO())
            answer = await running
            assert answer.json()["result"]["content"][0]["text"] == "done", answer.body
            sessions.clear()  # another process would read the table
            assert await ping(session) == 200
    finally:
        registry.unregister_tool("s38_long_wait")


async def test_requests_that_run_at_once_write_their_session_at_most_24_times_per_idle_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by the review of this session's fixes: since a running request records its session in use
    (1f4372c), each waiting request of a session wrote ``last_seen_at`` every 24th of the limit, whatever the
    others did: five requests at once, five times the writes docs/settings.md bounds ("written at most 24
    times in this span"). Counted as the rows each UPDATE of a session changed, however it is written."""
    import mcp_tools
    from django.conf import settings
    from django.db.models.query import QuerySet
    from django.test import override_settings

    from mcp_tools.registry import registry

    writes: list[int] = []
    update = QuerySet.update

    def counted(self: QuerySet, **kwargs: object) -> int:
        changed = update(self, **kwargs)
        if self.model is McpSession and "last_seen_at" in kwargs:
            writes.append(changed)
        return changed

    monkeypatch.setattr(QuerySet, "update", counted)

    @mcp_tools.tool(name="s38_busy_wait")
    async def busy_wait() -> str:
        await asyncio.sleep(1.2)
        return "done"

    try:
        # A 24th of the limit: 0.1 s. In 1.2 s the session may be written about 12 times, not 5 x 12.
        with override_settings(MCP_TOOLS={**settings.MCP_TOOLS, "SESSION_IDLE_SECONDS": 2.4}):
            sessions.clear()
            session = await open_session()
            headers = post_headers(version=HANDSHAKE, session=session)
            calls = [post_json(APP, handshake_message("tools/call", {"name": "s38_busy_wait", "arguments": {}}), headers)
                     for _ in range(5)]
            answers = await asyncio.gather(*calls)
        assert [answer.json()["result"]["content"][0]["text"] for answer in answers] == ["done"] * 5
        assert sum(writes) <= 12 + 4, writes  # and a few of the requests' starts
    finally:
        registry.unregister_tool("s38_busy_wait")
