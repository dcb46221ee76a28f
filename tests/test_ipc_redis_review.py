"""Server processes on channels-redis, each test on a redis-server of its own: group expiry, outages, fan-out.

Each test starts its own throwaway ``redis-server`` on a free port (it stops, restarts and
configures it as no shared Redis may be), so these need the ``redis-server`` program, not
``REDIS_URL``. Without it they skip, except under ``MCP_TOOLS_TEST_SERVICES=1`` (CI's
PostgreSQL + Redis run, whose machine has it), where they fail. The servers run on
``tests/redis_server_settings.py``: a short ``group_expiry`` makes a day of uptime last seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from tests.clients import (
    LegacySession, ModernClient, create_products, create_user_with_token, http_client, iter_sse, modern_headers, modern_meta,
)
from tests.conftest import ROOT, SERVICES, LiveServer, free_port

pytestmark = [
    pytest.mark.live,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not SERVICES and shutil.which("redis-server") is None,
                       reason="redis-server is not installed (under MCP_TOOLS_TEST_SERVICES=1 this fails instead)"),
]

#: ``group_expiry`` of the servers in the expiry tests (channels-redis's default is 86400).
EXPIRY = 2
UPDATED = "notifications/resources/updated"


class OwnRedis:
    """A private redis-server (no persistence: a restart comes back empty, as after a failover)."""

    def __init__(self) -> None:
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = ROOT / "tests" / f".redis-{self.port}.log"

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> OwnRedis:
        cmd = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        log = open(self.log_path, "ab")  # noqa: SIM115 - closed with the process
        self.process = subprocess.Popen(cmd, cwd=ROOT / "tests", stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(16).startswith(b"+PONG"):
                        return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"redis-server did not start: {self.log_path.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)

    def restart(self) -> None:
        self.stop()
        self.start()

    def server_env(self, **extra: str) -> dict[str, str]:
        """The environment of a live server on this Redis."""
        return {"REDIS_URL": self.url, "DJANGO_SETTINGS_MODULE": "tests.redis_server_settings", **extra}


@pytest.fixture
def own_redis() -> Iterator[OwnRedis]:
    redis = OwnRedis().start()
    try:
        yield redis
    finally:
        redis.stop()
        Path(redis.log_path).unlink(missing_ok=True)


class Messages:
    """The JSON-RPC messages of an open SSE stream, read by a task of their own as they arrive: a test
    may wait for the next one with a timeout (cancelling a read of the stream itself would end it)."""

    def __init__(self, response: Any) -> None:
        self.queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self.reader = asyncio.ensure_future(self._read(response))

    async def _read(self, response: Any) -> None:
        try:
            async for message in iter_sse(response):
                self.queue.put_nowait(message)
        finally:
            self.queue.put_nowait(None)  # the stream ended

    async def next(self, timeout: float) -> dict[str, Any] | None:
        """The next message, or None if none came within ``timeout`` (or the stream ended)."""
        try:
            return await asyncio.wait_for(self.queue.get(), timeout)
        except TimeoutError:
            return None

    async def until_ended(self, timeout: float) -> list[dict[str, Any]]:
        """Every message up to the end of the stream (which must end within ``timeout``)."""
        seen = []
        async with asyncio.timeout(timeout):
            while (message := await self.queue.get()) is not None:
                seen.append(message)
        return seen

    def close(self) -> None:
        self.reader.cancel()


@contextlib.asynccontextmanager
async def messages_of(response: Any) -> AsyncIterator[Messages]:
    messages = Messages(response)
    try:
        yield messages
    finally:
        messages.close()


def standalone_headers(session: LegacySession) -> dict[str, str]:
    return {"Accept": "text/event-stream", "Mcp-Session-Id": session.session_id, "MCP-Protocol-Version": "2025-11-25"}


async def restocker(prefix: str) -> str:
    """A user allowed to restock, and their token (products created)."""
    await create_products()
    return await sync_to_async(create_user_with_token)(f"{prefix}{time.monotonic_ns()}", ("inventory.change_product",))


def two_servers(start_server: type[LiveServer], redis: OwnRedis, **env: str) -> tuple[LiveServer, LiveServer]:
    """A (daphne) and B (uvicorn), on ``redis``."""
    return (start_server(env=redis.server_env(**env)).start(),
            start_server(server="uvicorn", env=redis.server_env(**env)).start())


async def watcher_and_actor(http: Any, server_a: LiveServer, server_b: LiveServer, uri: str) -> tuple[LegacySession, LegacySession]:
    """A session on A subscribed to ``uri``, and one on B (to change the resource)."""
    watcher = await LegacySession.open(http, server_a.url)
    assert await watcher.request("resources/subscribe", {"uri": uri}) == {}
    return watcher, await LegacySession.open(http, server_b.url)


@contextlib.asynccontextmanager
async def listening(http: Any, server: LiveServer, uri: str) -> AsyncIterator[Messages]:
    """A 2026-07-28 ``subscriptions/listen`` stream for ``uri``'s updates, acknowledged."""
    params = {"notifications": {"resourceSubscriptions": [uri]}, "_meta": modern_meta()}
    body = {"jsonrpc": "2.0", "id": "listen-1", "method": "subscriptions/listen", "params": params}
    async with http.stream("POST", server.url, json=body, headers=modern_headers("subscriptions/listen", params)) as stream, \
            messages_of(stream) as messages:
        assert stream.status_code == 200
        ack = await messages.next(10)
        assert ack is not None and ack["method"] == "notifications/subscriptions/acknowledged"
        yield messages


async def restock(client: LegacySession | ModernClient, sku: str) -> None:
    await client.request("tools/call", {"name": "restock", "arguments": {"sku": sku, "quantity": 1}})


async def until_heard(messages: Messages, uri: str, actor: LegacySession | ModernClient, seconds: float = 20) -> dict[str, Any] | None:
    """Restock until the stream hears of ``uri``'s update (the listeners join again a little after Redis is back)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        await restock(actor, uri.rsplit("/", 1)[1])
        message = await messages.next(1.5)
        while message is not None and message.get("params", {}).get("uri") != uri:
            message = await messages.next(0.5)
        if message is not None:
            return message
    return None


# -- group_expiry: channels-redis drops a group member that long after it joined -------------------------


async def test_get_stream_still_hears_updates_after_group_expiry(own_redis: OwnRedis, start_server: type[LiveServer]) -> None:
    """A standalone GET stream lives as long as its client keeps it (keep-alives every 15 s): one older
    than ``group_expiry`` (a day by default) still hears of an update made in another process."""
    token = await restocker("expiry-get")
    server_a, server_b = two_servers(start_server, own_redis, MCP_TESTS_GROUP_EXPIRY=str(EXPIRY))
    uri = "inventory://products/WID-001"
    async with http_client(token) as http:
        watcher, actor = await watcher_and_actor(http, server_a, server_b, uri)
        async with http.stream("GET", server_a.url, headers=standalone_headers(watcher)) as stream, messages_of(stream) as messages:
            assert stream.status_code == 200
            await asyncio.sleep(EXPIRY + 1.5)  # the stream (and A's process-wide listeners) joined longer ago than group_expiry
            await restock(actor, "WID-001")
            heard = await messages.next(10)
    assert heard is not None, "a GET stream older than group_expiry no longer hears of updates"
    assert heard["method"] == UPDATED and heard["params"]["uri"] == uri


async def test_cancel_from_another_process_after_group_expiry(own_redis: OwnRedis, start_server: type[LiveServer]) -> None:
    """A's cancellation listener joined ``mcp_tools.cancel`` at its first call; past ``group_expiry``
    a ``notifications/cancelled`` POSTed to B still stops the handler running on A."""
    server_a, server_b = two_servers(start_server, own_redis, MCP_TESTS_GROUP_EXPIRY=str(EXPIRY))
    async with http_client() as http:
        session = await LegacySession.open(http, server_a.url)
        await session.request("tools/call", {"name": "echo", "arguments": {"text": "A listens from now on"}})
        await asyncio.sleep(EXPIRY + 1.5)  # A has listened longer than group_expiry
        params = {"name": "slow_count", "arguments": {"n": 100}, "_meta": {"progressToken": "p"}}
        async with session.stream("tools/call", params) as (request_id, response), messages_of(response) as messages:
            assert await messages.next(10) is not None  # running
            cancelled = await session.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                            "params": {"requestId": request_id, "reason": "test"}}, url=server_b.url)
            assert cancelled.status_code == 202
            seen = await messages.until_ended(20)
    assert not any("result" in m for m in seen), "the handler ran to completion: the cancel sent to B never reached A"


async def test_listen_stream_hears_its_own_process_s_updates_after_group_expiry(own_redis: OwnRedis, start_server: type[LiveServer]) -> None:
    """2026-07-28 ``subscriptions/listen`` on A, the update made on A too: with a shared layer it goes only
    through ``mcp_tools.resource_updates``, which A joined once. Past ``group_expiry`` A still hears it."""
    token = await restocker("expiry-listen")
    server_a = start_server(env=own_redis.server_env(MCP_TESTS_GROUP_EXPIRY=str(EXPIRY))).start()
    uri = "inventory://products/GAD-001"
    async with http_client(token) as http:
        async with listening(http, server_a, uri) as messages:
            await asyncio.sleep(EXPIRY + 1.5)  # A's listener joined the group longer ago than group_expiry
            await restock(ModernClient(http, server_a.url), "GAD-001")
            update = await messages.next(10)
    assert update is not None, "the listen stream never heard of the update made in its own process"
    assert update["params"]["uri"] == uri


# -- Redis restarts: the listeners join again --------------------------------------------------------------


async def test_get_stream_hears_updates_again_once_redis_is_back(own_redis: OwnRedis, start_server: type[LiveServer]) -> None:
    """A session's GET stream on A, open across a Redis restart, hears of a later update made on B.

    The stream keeps sending keep-alives, so the client has no reason to reconnect: deaf from
    then on, it would never hear of a resource update again.
    """
    token = await restocker("restart-get")
    server_a, server_b = two_servers(start_server, own_redis)
    uri = "inventory://products/WID-001"
    async with http_client(token) as http:
        watcher, actor = await watcher_and_actor(http, server_a, server_b, uri)
        async with http.stream("GET", server_a.url, headers=standalone_headers(watcher)) as stream, messages_of(stream) as messages:
            assert stream.status_code == 200
            assert await until_heard(messages, uri, actor, 10) is not None  # the path works before the outage
            own_redis.restart()  # the connections drop, and the new Redis is empty (no group has members)
            heard = await until_heard(messages, uri, actor)
    assert heard is not None, "the GET stream stayed open (keep-alives) but never heard of an update after Redis came back"
    assert heard["method"] == UPDATED


async def test_cancel_reaches_a_call_that_started_before_a_redis_restart(own_redis: OwnRedis, start_server: type[LiveServer]) -> None:
    """A handler runs on A; Redis restarts; once it is back, the client's ``notifications/cancelled``
    lands on B, and A's cancellation listener, listening again, stops the handler.

    The call gets no row (``SLOW_CALL_SECONDS`` is longer than it runs): the row's checks, another
    way a cancel reaches a handler, would hide a listener that stopped for good."""
    server_a, server_b = two_servers(start_server, own_redis, MCP_TESTS_SLOW_CALL_SECONDS="60")
    async with http_client() as http:
        session = await LegacySession.open(http, server_a.url)
        params = {"name": "slow_count", "arguments": {"n": 100}, "_meta": {"progressToken": "p"}}
        async with session.stream("tools/call", params) as (request_id, response), messages_of(response) as messages:
            assert await messages.next(10) is not None  # running on A, whose cancellation listener joined the group
            own_redis.restart()
            # Cancelled until the handler stops (B's first publish may meet a dead pooled connection, and
            # A joins again within a second or so); it would count to 100 in 5 s.
            while not messages.reader.done():
                cancelled = await session.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                                "params": {"requestId": request_id, "reason": "test"}}, url=server_b.url)
                assert cancelled.status_code == 202
                await asyncio.wait({messages.reader}, timeout=0.5)
            seen = await messages.until_ended(0.1)
    assert not any("result" in m for m in seen), "the handler ran to completion: the cancel sent to B after Redis came back never reached A"


async def test_get_stream_opens_while_redis_is_down_and_hears_updates_once_it_is_back(own_redis: OwnRedis, start_server: type[LiveServer]) -> None:
    """A GET that opens the standalone stream while Redis is down (connection refused) is not a 500:
    the stream opens (POSTed calls go on without the layer too), and hears of updates made in
    another process once Redis is back, without the client reconnecting."""
    token = await restocker("down-get")
    server_a, server_b = two_servers(start_server, own_redis)
    uri = "inventory://products/WID-001"
    async with http_client(token) as http:
        watcher, actor = await watcher_and_actor(http, server_a, server_b, uri)
        own_redis.stop()
        assert await watcher.request("ping", {}) == {}
        async with http.stream("GET", server_a.url, headers=standalone_headers(watcher)) as stream, messages_of(stream) as messages:
            body = b"" if stream.status_code == 200 else await stream.aread()
            assert stream.status_code == 200, f"GET answered {stream.status_code} {body[:200]!r} while Redis was down"
            own_redis.start()
            heard = await until_heard(messages, uri, actor)
    assert heard is not None, "the stream opened while Redis was down never heard of an update once it was back"


# -- notifications/cancelled of a call that waits for input, its stream held by another process ------------


async def test_cancel_in_one_process_of_a_call_waiting_on_another_s_stream_ends_it_once(own_redis: OwnRedis, start_server: type[LiveServer]) -> None:
    """The call waits for input on its stream in A; the client's cancel lands on B. B cancels A's handler
    through the layer and, finding the call waiting, ends it too (the call of a closed stream has no
    handler anywhere): whichever ends it first, A's stream ends without carrying the call on."""
    server_a, server_b = two_servers(start_server, own_redis)
    async with http_client() as http:
        session = await LegacySession.open(http, server_a.url)
        params = {"name": "deploy", "arguments": {"service": "cancel-elsewhere"}}
        async with session.stream("tools/call", params) as (request_id, response), messages_of(response) as messages:
            elicit = await messages.next(15)
            assert elicit is not None and elicit["method"] == "elicitation/create"
            cancelled = await session.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                            "params": {"requestId": request_id, "reason": "test"}}, url=server_b.url)
            assert cancelled.status_code == 202
            after = await messages.until_ended(10)
        statuses = await sync_to_async(_statuses, thread_sensitive=True)(session.session_id)
    assert statuses == ["cancelled"]
    # No response is due to a cancelled request; one saying the call was cancelled is harmless.
    assert all(m.get("id") == request_id and m["result"]["isError"] for m in after), after


def _statuses(session_id: str) -> list[str]:
    from mcp_tools.models import ToolCall

    return list(ToolCall.objects.filter(session_id=session_id).values_list("status", flat=True))


# -- resource updates: one message per process, each subscribed stream hears it once ---------------------


async def test_each_subscribed_stream_hears_an_update_once_past_the_layer_s_capacity(own_redis: OwnRedis, start_server: type[LiveServer]) -> None:
    """More sessions subscribed to one resource than the layer's ``capacity``, their GET streams on A;
    the resource changes on B. All of A's channels share one channels-redis inbox, which drops what
    comes past ``capacity``: one message per subscribed session left most of them unheard (a
    ``capacity`` of 3 here stands for the default 100 and a few hundred sessions). Each hears it once."""
    sessions_count = 50
    token = await restocker("fan-out")
    server_a, server_b = two_servers(start_server, own_redis, MCP_TESTS_CAPACITY="3")
    uri = "inventory://products/WID-001"
    async with http_client(token) as http, contextlib.AsyncExitStack() as streams:
        watchers = []
        for _ in range(sessions_count):
            watcher, actor = await watcher_and_actor(http, server_a, server_b, uri)
            stream = await streams.enter_async_context(http.stream("GET", server_a.url, headers=standalone_headers(watcher)))
            assert stream.status_code == 200  # registered: it hears what is sent from now on
            watchers.append(await streams.enter_async_context(messages_of(stream)))
        await restock(actor, "WID-001")
        heard: list[list[dict[str, Any]]] = [[] for _ in watchers]

        async def take(index: int, timeout: float) -> None:
            """What the stream hears until one message is the update, or none came within ``timeout``."""
            while (message := await watchers[index].next(timeout)) is not None:
                heard[index].append(message)
                if message.get("params", {}).get("uri") == uri:
                    return

        await asyncio.gather(*(take(i, 20) for i in range(sessions_count)))
        await asyncio.gather(*(take(i, 1) for i in range(sessions_count)))  # room for a second copy to arrive
    counts = [sum(1 for m in messages if m.get("params", {}).get("uri") == uri) for messages in heard]
    assert counts.count(0) == 0, f"{counts.count(0)} of {sessions_count} subscribed streams never heard of the update"
    assert max(counts) == 1, f"streams heard of the update {sorted(set(counts))} times"


async def test_listen_stream_hears_its_own_process_s_update_while_redis_is_down(own_redis: OwnRedis, start_server: type[LiveServer]) -> None:
    """``subscriptions/listen`` on A, the update made on A while Redis is down: the publish fails, and
    A's own streams are told directly (as a 2025-11-25 session's stream on A is)."""
    token = await restocker("down-listen")
    server_a = start_server(env=own_redis.server_env()).start()
    uri = "inventory://products/GAD-001"
    async with http_client(token) as http:
        async with listening(http, server_a, uri) as messages:
            own_redis.stop()
            await restock(ModernClient(http, server_a.url), "GAD-001")
            update = await messages.next(10)
    assert update is not None, "the listen stream never heard of an update made in its own process while Redis was down"
    assert update["params"]["uri"] == uri
