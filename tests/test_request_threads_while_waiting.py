"""A request that waits (an open stream, a call waiting for the client's answer) holds no request thread.

A soak review on PostgreSQL found every open 2025-11-25 stream holding the request thread its DRF
authentication (a token lookup) took, with that thread's database connection, for as long as the
stream stayed open: a standalone GET stream for its session's life (a day by default), a POST
waiting for an elicitation's answer for as long as the human took. The official client opens a
GET stream per session, so 30 idle clients held 30 threads and 30 connections (``CONN_MAX_AGE``
made no difference), and with a role ``CONNECTION LIMIT`` of 20 every new request got 503.
Now a request gives its thread back (its connections closed as Django closes them at a request's
end) before it settles into such a wait, and a later sync call of the same request takes one again.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connections

import mcp_tools
from mcp_tools.registry.registry import registry
from mcp_tools.server import threads
from tests.asgi_client import HANDSHAKE, handshake_message, modern_message, post_headers, post_json
from tests.test_http_spec_edges import APP, Stream, _in_memory_layer  # noqa: F401  (the autouse fixture)
from tests.test_keepalive import _until

pytestmark = pytest.mark.django_db(transaction=True)

#: Requests held open at once.
HELD = 4


@pytest.fixture(autouse=True)
def drf_tokens(settings: Any) -> Iterator[None]:
    """Callers say who they are with a DRF token: each request's lookup of it runs in its request
    thread, on that thread's connection; ``CONN_MAX_AGE = 0`` (Django's default), so a thread that
    is given back keeps no connection either."""
    conf = {key: value for key, value in settings.MCP_TOOLS.items() if key not in ("OAUTH", "AUTHENTICATION_CLASSES")}
    settings.MCP_TOOLS = {**conf, "ALLOW_ANONYMOUS": False,
                          "AUTHENTICATION_CLASSES": ["rest_framework.authentication.TokenAuthentication"]}
    configured = connections.settings["default"]["CONN_MAX_AGE"]
    connections.settings["default"]["CONN_MAX_AGE"] = 0  # what a new connection reads (the demo's is 60)
    threads.close_idle_threads()
    try:
        yield
    finally:
        connections.settings["default"]["CONN_MAX_AGE"] = configured
        threads.close_idle_threads()


def drf_credentials() -> str:
    from django.contrib.auth.models import User
    from rest_framework.authtoken.models import Token

    user = User.objects.create_user(username="waiting-streams", password="x")
    return f"Token {Token.objects.create(user=user).key}"


def busy_request_threads() -> int:
    """Request threads that are not idle: a request holds each (or it is ending)."""
    alive = sum(1 for thread in threading.enumerate() if thread.name.startswith("mcp-tools-request") and thread.is_alive())
    with threads._idle_lock:
        return alive - len(threads._idle)


#: ``(pid, state_change)`` of this database's other connections when the test began: connections
#: earlier tests left in threads that outlive them (a kept connection of the loop's default executor
#: whose last statement was a token lookup of theirs: CI failed on one so) are not this test's.
_before: set[tuple[int, Any]] = set()


def _other_connections() -> list[tuple[int, Any, str]]:
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT pid, state_change, query FROM pg_stat_activity WHERE datname = current_database() "
                       "AND pid <> pg_backend_pid()")
        return [(int(pid), changed, str(query)) for pid, changed, query in cursor.fetchall()]


def remember_other_connections() -> None:
    _before.clear()
    if connections["default"].vendor == "postgresql":
        _before.update((pid, changed) for pid, changed, _ in _other_connections())


def token_lookup_connections() -> int:
    """PostgreSQL: this database's connections whose last statement, run since the test began, was a
    DRF token lookup (a request thread's); on another database, 0."""
    if connections["default"].vendor != "postgresql":
        return 0
    return sum(1 for pid, changed, query in _other_connections()
               if '"authtoken_token"' in query and (pid, changed) not in _before)


lookups = sync_to_async(token_lookup_connections)


async def lookups_end(timeout: float = 5.0) -> bool:
    """Whether the token lookups' connections are gone within ``timeout``: polled, since a backend
    whose client closed its connection leaves pg_stat_activity only once its process has exited
    (on a busy machine, after the request thread was already idle: a local run failed on it so)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while await lookups() != 0:
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


async def open_session(authorization: str) -> dict[str, str]:
    initialize = handshake_message("initialize", {"protocolVersion": HANDSHAKE, "capabilities": {"elicitation": {}},
                                                  "clientInfo": {"name": "t", "version": "1"}})
    r = await post_json(APP, initialize, post_headers(version=None, extra={"authorization": authorization}))
    assert r.status == 200, r.body
    session = r.header("mcp-session-id")
    assert session
    return post_headers(version=HANDSHAKE, session=session, extra={"authorization": authorization})


async def get_stream(headers: dict[str, str]) -> Stream:
    stream = Stream("GET", {**headers, "accept": "text/event-stream"})
    await asyncio.wait_for(stream.got.wait(), 10)
    assert await _until(lambda: "id: " in stream.text(), 10)  # primed: in the wait for notifications
    return stream


async def elicitation_call(headers: dict[str, str], request_id: int) -> Stream:
    call = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": "test_elicitation", "arguments": {"message": "hi"}}}
    stream = Stream("POST", headers, json.dumps(call).encode())
    await stream.wait_for(lambda m: m.get("method") == "elicitation/create")  # and now waits for the answer
    return stream


async def listen_stream(authorization: str) -> Stream:
    message = modern_message("subscriptions/listen", {"notifications": {"toolsListChanged": True}})
    stream = Stream("POST", post_headers(extra={"mcp-method": "subscriptions/listen", "authorization": authorization}),
                    json.dumps(message).encode())
    await stream.wait_for(lambda m: m.get("method") == "notifications/subscriptions/acknowledged")
    return stream


def list_change() -> None:
    """A tool comes and goes: ``notifications/tools/list_changed`` for every stream that listens."""
    mcp_tools.tool(name="waiting_streams_passing_tool")(lambda: "x")
    registry.unregister_tool("waiting_streams_passing_tool")


async def close(streams: list[Stream]) -> None:
    for stream in streams:
        stream.gone.set()
    await asyncio.wait_for(asyncio.gather(*(stream.task for stream in streams)), 10)


@pytest.mark.parametrize("kind", ["get", "elicitation", "listen"])
async def test_waiting_requests_hold_no_request_thread_nor_connection(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    authorization = await sync_to_async(drf_credentials)()
    await sync_to_async(remember_other_connections)()
    streams: list[Stream] = []
    sessions: list[dict[str, str]] = []
    try:
        for i in range(HELD):
            if kind == "get":
                sessions.append(await open_session(authorization))
                streams.append(await get_stream(sessions[-1]))
            elif kind == "elicitation":
                sessions.append(await open_session(authorization))
                streams.append(await elicitation_call(sessions[-1], 100 + i))
            else:  # subscriptions/listen (2026-07-28)
                streams.append(await listen_stream(authorization))
        assert all(not stream.task.done() for stream in streams)
        # Each authenticated its caller in a request thread; none keeps it while it waits (a thread
        # goes back to the idle ones once it has closed its connections, in that thread: polled).
        assert await _until(lambda: busy_request_threads() == 0, 5), \
            f"{busy_request_threads()} request threads held by {HELD} waiting {kind} requests"
        assert await lookups_end(), f"{await lookups()} database connections held by {HELD} waiting {kind} requests"

        # The waits end as they would have, and what a request runs after one takes a thread again.
        if kind == "elicitation":
            first = streams[0]
            asked = next(m for _, m in first.events() if m.get("method") == "elicitation/create")
            answer = {"jsonrpc": "2.0", "id": asked["id"],
                      "result": {"action": "accept", "content": {"username": "u", "email": "e@x.org"}}}
            r = await post_json(APP, answer, sessions[0])
            assert r.status == 202, r.body
            _, final = await first.wait_for(lambda m: "result" in m or "error" in m)
            assert final["id"] == 100 and "action=accept" in final["result"]["content"][0]["text"], final
        else:
            # Before a notification goes out, each stream authenticates its caller again (a token
            # lookup), in a thread it takes then.
            taken: list[Any] = []
            borrow, new_thread = threads._borrow, threads._new_thread
            monkeypatch.setattr(threads, "_borrow", lambda: taken.append(borrow()) or taken[-1])
            monkeypatch.setattr(threads, "_new_thread", lambda: taken.append(new_thread()) or taken[-1])
            list_change()
            for stream in streams:
                await stream.wait_for(lambda m: m.get("method") == "notifications/tools/list_changed")
            assert len([pool for pool in taken if pool is not None]) == HELD
        assert await _until(lambda: busy_request_threads() == 0, 5), f"{busy_request_threads()} request threads held"
        assert await lookups_end(), f"{await lookups()} database connections held after the notifications"
    finally:
        await close(streams)

