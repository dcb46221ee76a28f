"""The database connections the server's sync code opens follow Django's rules: closed as
``CONN_MAX_AGE`` says, and never left to fail once the database dropped them.

A review counted PostgreSQL backends (``pg_stat_activity``) and found connections that nothing
ever closed or checked: permission checks in the loop's default executor, a Celery worker's
sync code in asgiref's shared thread, idle request threads past ``CONN_MAX_AGE``. The tests that
count backends or terminate them run on PostgreSQL only; none depends on timing (they poll
until what they count settles, within a generous bound).
"""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import timedelta
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import SyncToAsync, sync_to_async
from django.contrib.auth.models import User
from django.db import connections
from django.utils import timezone

from demo_site.inventory.models import Product
from mcp_tools import ToolContext, store, tasks
from mcp_tools.store import hop
from mcp_tools.registry import make_tool, registry
from mcp_tools.server import background, core, sessions, threads
from mcp_tools.server.auth import Principal
from mcp_tools.transports.http import McpEndpoint
from tests.asgi_client import HANDSHAKE, call_modern, handshake_message, modern_message, post_headers, post_json, request
from tests.clients import create_user_with_token
from tests.conftest import free_port
from tests.test_http_spec_edges import open_session

pytestmark = pytest.mark.django_db(transaction=True)
APP = McpEndpoint()
on_postgresql = pytest.mark.skipif(connections["default"].vendor != "postgresql", reason="counts PostgreSQL backends")


# -- helpers ------------------------------------------------------------------------------

def admin() -> Any:
    """A connection of our own to the PostgreSQL server, outside Django (it sees every backend)."""
    import psycopg

    settings = connections["default"].settings_dict
    return psycopg.connect(host=settings["HOST"], port=settings["PORT"] or 5432, user=settings["USER"],
                           password=settings["PASSWORD"] or None, dbname="postgres", autocommit=True)


def backends(query_like: str) -> set[int]:
    """The test database's backends whose last statement looks like ``query_like``."""
    return {pid for pid, _ in statements(query_like)}


def statements(query_like: str, *, older_than: float = 0.0) -> set[tuple[int, Any]]:
    """``(pid, state_change)`` of the backends :func:`backends` returns (of those that started more
    than ``older_than`` seconds ago). Taken when a test begins, it tells the statements earlier
    tests left as a backend's last (a thread that outlives its test, such as asgiref's shared one
    or the loop's default executor, keeps its connection as that test's ``CONN_MAX_AGE`` said)
    from the ones run since."""
    with admin() as server:
        rows = server.execute(
            "SELECT pid, state_change FROM pg_stat_activity WHERE datname = %s AND query LIKE %s "
            "AND backend_start <= now() - make_interval(secs => %s)",
            (connections["default"].settings_dict["NAME"], query_like, older_than)).fetchall()
    return {(pid, changed) for pid, changed in rows}


def since(earlier: set[tuple[int, Any]], query_like: str, *, older_than: float = 0.0) -> set[int]:
    """The backends whose last statement looks like ``query_like`` and ran since ``earlier`` was taken."""
    return {pid for pid, changed in statements(query_like, older_than=older_than) if (pid, changed) not in earlier}


def settled(read: Callable[[], Any], *, until: Callable[[Any], bool] = lambda _: False, bound: float = 30.0) -> Any:
    """What ``read()`` returns once it stopped changing for 2 s, or as soon as ``until`` holds
    (connections close in threads of their own, after the answers went out). The bound is
    generous: it only ends a test that would otherwise wait forever."""
    last, since, deadline = read(), time.monotonic(), time.monotonic() + bound
    while time.monotonic() < deadline and not until(last):
        time.sleep(0.1)
        now = read()
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since > 2:
            break
    return last


def terminate(pids: set[int]) -> None:
    """What a PostgreSQL restart, a failover or ``idle_session_timeout`` does to idle connections
    (waiting until each backend is gone: its FATAL error sent, its socket closed)."""
    with admin() as server:
        for pid in pids:
            server.execute("SELECT pg_terminate_backend(%s, 30000)", (pid,))


def backend_pid() -> int:
    """The PostgreSQL backend of the calling thread's connection (of the store's thread, through ``store.db``)."""
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return int(cursor.fetchone()[0])


@pytest.fixture
def checked_long_ago(monkeypatch: pytest.MonkeyPatch) -> None:
    """The store's threads health-check a connection at most once per HEALTH_CHECK_SECONDS (1 s): made
    endless, a connection the server closed after its check is found by nothing else."""
    monkeypatch.setattr(hop, "HEALTH_CHECK_SECONDS", float("inf"))


def close_kept_connections() -> None:
    """Close the connections earlier tests left in the idle request threads and in the thread
    asgiref shares: a connection keeps the ``CONN_MAX_AGE`` it was opened with."""
    threads.close_idle_threads()
    SyncToAsync.single_thread_executor.submit(connections.close_all).result()


@pytest.fixture
def no_persistent_connections() -> Iterator[None]:
    """``CONN_MAX_AGE = 0``, Django's default: no connection outlives its request."""
    configured = connections.settings["default"]["CONN_MAX_AGE"]
    close_kept_connections()
    connections.settings["default"]["CONN_MAX_AGE"] = 0
    yield
    connections.settings["default"]["CONN_MAX_AGE"] = configured
    close_kept_connections()


# -- permission checks --------------------------------------------------------------------

async def gated() -> str:
    """A tool that needs a permission."""
    return "ok"


async def gated_calls(token: str, n: int) -> list[dict[str, Any]]:
    answers = await asyncio.gather(*[call_modern(APP, "tools/call", {"name": "gated", "arguments": {}}, token=token) for _ in range(n)])
    return [a.json() for a in answers]


@pytest.fixture
def checking_connections(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The connection (Django's wrapper, per thread) of the thread each permission check ran in."""
    used: list[Any] = []
    has_perms = Principal.has_perms

    def recording(self: Principal, perms: Any) -> bool:
        granted = has_perms(self, perms)
        used.append(connections["default"])
        return granted

    monkeypatch.setattr(Principal, "has_perms", recording)
    return used


async def test_a_permission_checks_connection_is_closed_at_its_requests_end_with_conn_max_age_0(
        no_persistent_connections: None, checking_connections: list[Any]) -> None:
    used = checking_connections
    token = await sync_to_async(create_user_with_token)("perm-closed", ("inventory.view_product",))
    with registry.registered_temporarily(make_tool(gated, permissions=["inventory.view_product"])):
        listed = (await call_modern(APP, "tools/list", {}, token=token)).json()
        called = (await call_modern(APP, "tools/call", {"name": "gated", "arguments": {}}, token=token)).json()
    assert "gated" in [t["name"] for t in listed["result"]["tools"]]
    assert called["result"]["content"][0]["text"] == "ok"
    assert used, "no permission was checked"
    left_open = [c for c in used if c.connection is not None]
    assert not left_open, "a permission check's connection outlived its request"


async def test_a_permission_check_outside_a_request_closes_its_connection_with_conn_max_age_0(
        no_persistent_connections: None, checking_connections: list[Any]) -> None:
    used = checking_connections
    await sync_to_async(create_user_with_token)("perm-outside", ("inventory.view_product",))
    user = await User.objects.aget(username="perm-outside")
    # A task no request runs (no RequestThread around it): the loop's default executor.
    assert await core.permitted(Principal(user, f"user:{user.pk}"), ("inventory.view_product",))
    assert len(used) == 1 and used[0].connection is None, "the check's connection outlived it"


@on_postgresql
async def test_permission_checks_leave_no_connection_open_with_conn_max_age_0(no_persistent_connections: None) -> None:
    token = await sync_to_async(create_user_with_token)("perm-count", ("inventory.view_product",))
    # Connections an earlier test left behind (Django's own per-request threads under ASGI keep
    # theirs until they are collected) are not this test's: only new ones count.
    earlier = await asyncio.to_thread(backends, "%auth_permission%")
    with registry.registered_temporarily(make_tool(gated, permissions=["inventory.view_product"])):
        assert all(b["result"]["content"][0]["text"] == "ok" for b in await gated_calls(token, 20))
    left = await asyncio.to_thread(settled, lambda: backends("%auth_permission%") - earlier, until=lambda pids: not pids)
    assert left == set(), f"{len(left)} connections left open by finished requests with CONN_MAX_AGE = 0"


@on_postgresql
async def test_permission_checks_work_after_the_database_dropped_idle_connections(no_persistent_connections: None) -> None:
    token = await sync_to_async(create_user_with_token)("perm-dropped", ("inventory.view_product",))
    with registry.registered_temporarily(make_tool(gated, permissions=["inventory.view_product"])):
        assert all(b["result"]["content"][0]["text"] == "ok" for b in await gated_calls(token, 20))
        await asyncio.to_thread(terminate, backends("%auth_permission%"))
        answers = await gated_calls(token, 20)
    failed = [a for a in answers if "error" in a]
    assert failed == [], f"{len(failed)} of 20 calls failed: {failed[:1]}"


# -- a Celery worker's rounds, and tasks that outlive their request ----------------------

@pytest.fixture
def queued(monkeypatch: pytest.MonkeyPatch, settings: Any) -> list[str]:
    """Call ids handed to the (simulated) broker; the test runs the Celery task's body itself.
    An in-memory channel layer: the round runs on the worker's own loop, and a Redis layer's
    connections belong to the loop that opened them."""
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    sent: list[str] = []
    monkeypatch.setattr(background, "send", lambda call_id, tool, task_id: sent.append(call_id))
    return sent


def count_products_later() -> int:
    """Count the products, on a worker."""
    worker_connections.append(connections["default"])
    return Product.objects.count()


#: The connection (Django's wrapper, per thread) of the thread each run of count_products_later ran in.
worker_connections: list[Any] = []


async def run_on_worker(session: str) -> tuple[str, Any]:
    """Start a background call of count_products_later and run its round as the Celery task does."""
    created = await post_json(APP, handshake_message("tools/call", {"name": "count_products_later", "arguments": {}, "task": {}}),
                              post_headers(version=HANDSHAKE, session=session))
    call_id = created.json()["result"]["task"]["taskId"]
    await asyncio.to_thread(tasks.run_call, call_id)  # the task's body, in a thread of its own as on a worker
    row, _ = await store.load_call(call_id)
    return row.status, row.result


async def test_a_workers_sync_tool_closes_its_connection_after_the_round_with_conn_max_age_0(
        queued: list[str], no_persistent_connections: None) -> None:
    worker_connections.clear()
    with registry.registered_temporarily(make_tool(count_products_later, background=True)):
        assert (await run_on_worker(await open_session()))[0] == "completed"
    assert len(worker_connections) == 1
    assert worker_connections[0].connection is None, "the round's connection outlived it"


async def test_sync_code_of_a_task_that_outlived_its_request_closes_its_connection_with_conn_max_age_0(
        no_persistent_connections: None) -> None:
    started, release = asyncio.Event(), asyncio.Event()

    def count() -> tuple[int, Any]:
        return Product.objects.count(), connections["default"]

    async def later() -> Any:
        started.set()
        await release.wait()
        return (await sync_to_async(count)())[1]

    async with threads.RequestThread():
        outliving = asyncio.ensure_future(later())
        await started.wait()
    release.set()  # the request is over: the task's sync code runs in the thread the process shares
    used = await outliving
    assert used.connection is None, "the task's connection outlived its sync code"


@on_postgresql
async def test_a_worker_runs_rounds_after_the_database_dropped_idle_connections(
        queued: list[str], no_persistent_connections: None) -> None:
    products = '%FROM "inventory_product"%'
    earlier = await asyncio.to_thread(statements, products)  # not this test's: see statements()
    with registry.registered_temporarily(make_tool(count_products_later, background=True)):
        session = await open_session()
        assert (await run_on_worker(session))[0] == "completed"
        left = await asyncio.to_thread(settled, lambda: since(earlier, products), until=lambda pids: not pids)
        assert left == set(), f"{len(left)} connection(s) left open after the round with CONN_MAX_AGE = 0"
        await asyncio.to_thread(terminate, since(earlier, products))
        status, result = await run_on_worker(session)
    assert status == "completed", result


@on_postgresql
async def test_a_store_call_goes_on_after_the_server_closed_the_store_threads_connection(checked_long_ago: None) -> None:
    """A restart or failover closes the store thread's idle connection; its next job opens a new one
    (the socket the server closed is readable: no SELECT 1), instead of failing with "server closed
    the connection unexpectedly" until a health check comes round."""
    first = await store.db(backend_pid)()
    await asyncio.to_thread(terminate, {first})
    second = await store.db(backend_pid)()
    assert second != first


async def reports_around_a_restart(ctx: ToolContext) -> str:
    """Reports progress, the database's server drops the store thread's connection, reports again."""
    await ctx.once("open", lambda: EFFECTS.append("open"))
    await ctx.report_progress(1, 2)
    await asyncio.to_thread(terminate, {await store.db(backend_pid)()})
    await ctx.report_progress(2, 2)
    return "done"


#: The ctx.once effects the tools of these tests ran.
EFFECTS: list[str] = []


@on_postgresql
async def test_a_background_call_goes_on_after_the_server_closed_the_store_threads_connection(
        queued: list[str], checked_long_ago: None) -> None:
    EFFECTS.clear()
    with registry.registered_temporarily(make_tool(reports_around_a_restart, background=True)):
        session = await open_session()
        created = await post_json(APP, handshake_message("tools/call", {"name": "reports_around_a_restart", "arguments": {}, "task": {}}),
                                  post_headers(version=HANDSHAKE, session=session))
        call_id = created.json()["result"]["task"]["taskId"]
        await asyncio.to_thread(tasks.run_call, call_id)
        row, _ = await store.load_call(call_id)
    assert (row.status, row.result["content"][0]["text"], row.progress) == ("completed", "done", 2), row.result
    assert EFFECTS == ["open"]


async def reports_twice(ctx: ToolContext) -> str:
    """Opens something once, then reports progress twice."""
    await ctx.once("open", lambda: EFFECTS.append("open"))
    await ctx.report_progress(1, 2)
    await ctx.report_progress(2, 2)
    return "done"


async def test_a_workers_call_whose_store_cannot_reach_the_database_is_taken_over_not_failed(
        queued: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The store fails under a running handler (the database dropped the connection mid-statement):
    the worker's run ends writing nothing (the call is not the handler's failure), the sweep takes the
    call over once its lease ran out, and the next run completes it from the journal."""
    from django.db import OperationalError

    from mcp_tools.models import ToolCall

    EFFECTS.clear()
    record_progress = store.record_progress
    failures = [OperationalError("server closed the connection unexpectedly")]

    async def fails_once(*args: Any, **kwargs: Any) -> bool:
        if failures:
            raise failures.pop()
        return bool(await record_progress(*args, **kwargs))

    monkeypatch.setattr(store, "record_progress", fails_once)
    with registry.registered_temporarily(make_tool(reports_twice, background=True)):
        session = await open_session()
        created = await post_json(APP, handshake_message("tools/call", {"name": "reports_twice", "arguments": {}, "task": {}}),
                                  post_headers(version=HANDSHAKE, session=session))
        call_id = created.json()["result"]["task"]["taskId"]
        with pytest.raises(OperationalError):
            await asyncio.to_thread(tasks.run_call, call_id)
        row, _ = await store.load_call(call_id)
        assert (row.status, row.result, bool(row.worker)) == ("working", None, True)
        await sync_to_async(lambda: ToolCall.objects.filter(id=call_id).update(
            lease_expires_at=timezone.now() - timedelta(seconds=1)))()  # the lease ran out
        queued.clear()
        assert (await sync_to_async(background.sweep)())["requeued"] == 1
        assert queued == [call_id]
        await asyncio.to_thread(tasks.run_call, call_id)
        row, _ = await store.load_call(call_id)
    assert (row.status, row.result["content"][0]["text"], row.lost_workers) == ("completed", "done", 1), row.result
    assert EFFECTS == ["open"], "a journaled ctx.once effect ran again"


# -- a database that cannot be reached ---------------------------------------------------

@pytest.fixture
def unreachable_database(tmp_path: Path) -> Iterator[Callable[[], Awaitable[None]]]:
    """Call it and every new connection fails, as when the database is down or at
    ``max_connections``: PostgreSQL or MySQL/MariaDB on a port nothing listens on, SQLite in a folder
    that does not exist."""
    settings = connections.settings["default"]
    saved = {key: settings[key] for key in ("CONN_MAX_AGE", "PORT", "NAME")}
    settings["CONN_MAX_AGE"] = 0  # nothing kept: each request connects again, and fails

    async def refuse() -> None:
        threads.close_idle_threads()
        await store.close_connections()
        sessions.clear()  # the session is read from the database, not from this process's cache
        if connections["default"].vendor == "sqlite":
            settings["NAME"] = str(tmp_path / "missing" / "db.sqlite3")
        else:
            settings["PORT"] = str(free_port())

    yield refuse
    settings.update(saved)


def assert_unavailable(answer: Any, request_id: Any) -> None:
    assert answer.status == 503, (answer.status, answer.body)
    assert answer.header("retry-after") == "5"
    body = answer.json()
    assert body["id"] == request_id and body["error"]["code"] == -32603, body
    assert b"Traceback" not in answer.body


@pytest.mark.parametrize("method", ["ping", "tools/list", "tools/call"])
async def test_a_2025_request_gets_503_with_its_id_when_the_database_cannot_be_reached(
        unreachable_database: Callable[[], Awaitable[None]], method: str) -> None:
    session = await open_session()
    await unreachable_database()
    params = {"name": "echo", "arguments": {"text": "x"}} if method == "tools/call" else {}
    answer = await post_json(APP, handshake_message(method, params, request_id=7), post_headers(version=HANDSHAKE, session=session))
    assert_unavailable(answer, 7)


async def test_a_2026_request_with_credentials_gets_503_with_its_id_when_the_database_cannot_be_reached(
        unreachable_database: Callable[[], Awaitable[None]]) -> None:
    token = await sync_to_async(create_user_with_token)("db-gone", ())
    await unreachable_database()
    # A call that runs no SQL of its own: the caller's authentication (a DRF token) is what fails.
    message = modern_message("tools/call", {"name": "echo", "arguments": {"text": "x"}}, request_id=8)
    answer = await post_json(APP, message, post_headers(token=token, extra={"mcp-method": "tools/call", "mcp-name": "echo"}))
    assert_unavailable(answer, 8)


@pytest.mark.parametrize("method", ["GET", "DELETE"])
async def test_a_session_stream_or_end_gets_503_when_the_database_cannot_be_reached(
        unreachable_database: Callable[[], Awaitable[None]], method: str) -> None:
    session = await open_session()
    await unreachable_database()
    answer = await request(APP, method, headers={**post_headers(version=HANDSHAKE, session=session), "accept": "text/event-stream"})
    assert_unavailable(answer, None)


# -- idle request threads ----------------------------------------------------------------

MAX_AGE = 1


@pytest.fixture
def short_conn_max_age() -> Iterator[None]:
    configured = connections.settings["default"]["CONN_MAX_AGE"]
    close_kept_connections()
    connections.settings["default"]["CONN_MAX_AGE"] = MAX_AGE
    yield
    connections.settings["default"]["CONN_MAX_AGE"] = configured
    close_kept_connections()


async def burst_then_light_traffic(burst: int) -> list[Any]:
    """``burst`` sync tool calls at once (each in a request thread of its own), a pause past
    ``CONN_MAX_AGE``, then calls one at a time. The connections (Django's wrappers) the burst used."""
    release, used = threading.Event(), []

    def burst_count() -> int:
        """Count the products, once everyone has started."""
        n = Product.objects.count()
        used.append(connections["default"])
        release.wait(30)
        return n

    def count_products() -> int:
        """Count the products."""
        return Product.objects.count()

    with registry.registered_temporarily(make_tool(burst_count), make_tool(count_products)):
        calls = [asyncio.ensure_future(call_modern(APP, "tools/call", {"name": "burst_count", "arguments": {}})) for _ in range(burst)]
        while len(used) < burst and not any(c.done() for c in calls):
            await asyncio.sleep(0.05)
        release.set()
        assert all(r.status == 200 and "error" not in r.json() for r in await asyncio.gather(*calls))
        await asyncio.sleep(MAX_AGE + 0.5)  # the burst's threads idle longer than CONN_MAX_AGE
        for _ in range(3):
            assert (await call_modern(APP, "tools/call", {"name": "count_products", "arguments": {}})).status == 200
    return used


async def test_idle_request_threads_close_their_connections_past_conn_max_age(short_conn_max_age: None) -> None:
    used = await burst_then_light_traffic(threads.MAX_IDLE_THREADS)
    assert len(used) == threads.MAX_IDLE_THREADS
    # The stale threads close their connections in their own threads, after the requests.
    still_open = await asyncio.to_thread(settled, lambda: sum(c.connection is not None for c in used), until=lambda n: n == 0)
    assert still_open == 0, f"{still_open} idle request threads kept their connections past CONN_MAX_AGE = {MAX_AGE}"


@on_postgresql
async def test_no_backend_outlives_conn_max_age_in_an_idle_request_thread(short_conn_max_age: None) -> None:
    products = '%FROM "inventory_product"%'
    earlier = await asyncio.to_thread(statements, products)  # not this test's: see statements()
    await burst_then_light_traffic(20)

    def older_than_max_age() -> int:
        return len(since(earlier, products, older_than=MAX_AGE + 0.5))

    stale = await asyncio.to_thread(settled, older_than_max_age, until=lambda n: n == 0)
    assert stale == 0, f"{stale} connections open past CONN_MAX_AGE = {MAX_AGE} s, in idle request threads"


@pytest.mark.parametrize("max_age", [0, None])
async def test_idle_request_threads_wait_however_long_with_conn_max_age_0_or_none(max_age: int | None) -> None:
    """0 leaves an idle thread no connection to close; None keeps connections for good."""
    configured = connections.settings["default"]["CONN_MAX_AGE"]
    close_kept_connections()
    connections.settings["default"]["CONN_MAX_AGE"] = max_age
    try:
        await burst_then_light_traffic(4)
        assert len(threads._idle) >= 4  # the burst's threads (light traffic reuses one and gives it back)
    finally:
        connections.settings["default"]["CONN_MAX_AGE"] = configured
        close_kept_connections()


# -- how many connections a process uses, as documented ---------------------------------

def test_the_docs_say_how_many_connections_a_process_uses() -> None:
    """README once said the ORM was reached "from one store thread per process", while each
    concurrent sync request holds a connection of its own and idle threads keep theirs."""
    root = Path(__file__).resolve().parent.parent
    architecture = (root / "docs" / "architecture.md").read_text()
    section = architecture.split("## Database connections per process", 1)[1].split("\n## ", 1)[0]
    assert f"up to {threads.MAX_IDLE_THREADS} (`MAX_IDLE_THREADS`)" in section
    assert f"max(*N*, {threads.MAX_IDLE_THREADS})" in section and "max_connections" in section
    readme = (root / "README.md").read_text()
    assert "one store thread per process" not in readme
    assert "Database connections per process" in readme


def _oauth_toolkit_settings() -> dict[str, Any]:
    from django.conf import settings

    conf = {key: value for key, value in settings.MCP_TOOLS.items() if key != "OAUTH"}
    conf.update(ALLOW_ANONYMOUS=False, OAUTH={"AUTHORIZATION_SERVERS": ["/o"], "SCOPES_SUPPORTED": ["mcp"],
                                             "TOKEN_VERIFIER": "mcp_tools.contrib.oauth_toolkit.OAuthToolkitVerifier"})
    return conf


async def test_a_token_lookup_in_a_database_that_cannot_be_reached_is_503_not_invalid_token(
        unreachable_database: Callable[[], Awaitable[None]]) -> None:
    """The django-oauth-toolkit verifier reads its tokens through the ORM: with the database down the
    client must retry (503), not be told its token is invalid (401, and start its OAuth flow over)."""
    from django.test import override_settings

    with override_settings(MCP_TOOLS=_oauth_toolkit_settings()):
        await unreachable_database()
        answer = await call_modern(APP, "tools/list", {}, headers={"authorization": "Bearer some-token"})
    assert answer.status == 503 and answer.header("retry-after") == "5", (answer.status, answer.body)


async def test_a_statement_the_database_refuses_is_a_500_on_every_database_not_a_retry() -> None:
    """A missing table (a deploy before migrate) is SQLite's OperationalError and PostgreSQL's
    ProgrammingError: both a 500, not 503 "try again" on one of them."""
    from django.db import connection

    session = await open_session()

    def rename(old: str, new: str) -> None:
        with connection.cursor() as cursor:
            cursor.execute(f"ALTER TABLE {old} RENAME TO {new}")

    await sync_to_async(rename)("mcp_tools_mcpsession", "mcp_tools_mcpsession_away")
    try:
        sessions.clear()
        threads.close_idle_threads()
        await store.close_connections()
        answer = await post_json(APP, handshake_message("ping", {}, request_id=3), post_headers(version=HANDSHAKE, session=session))
    finally:
        await sync_to_async(rename)("mcp_tools_mcpsession_away", "mcp_tools_mcpsession")
    assert answer.status == 500 and answer.header("retry-after") is None, (connection.vendor, answer.status, answer.body)


def _sqlite_error(code: int, message: str) -> Exception:
    """Django's OperationalError for a SQLite error of ``code``, as the backend raises it (its cause kept)."""
    import sqlite3

    from django.db import OperationalError

    cause = sqlite3.OperationalError(message)
    cause.sqlite_errorcode = code  # type: ignore[attr-defined]
    error = OperationalError(message)
    error.__cause__ = cause
    return error


@pytest.mark.parametrize("code, message, unreachable", [
    (5, "database is locked", True), (6, "database table is locked", True), (262, "database table is locked", True),
    (10, "disk I/O error", True), (13, "database or disk is full", True), (14, "unable to open database file", True),
    (1, "no such table: mcp_tools_mcpsession", False), (1, "no such column: x", False),
])
def test_sqlite_errors_that_mean_the_database_cannot_be_used(code: int, message: str, unreachable: bool) -> None:
    assert store.database_unreachable(_sqlite_error(code, message)) is unreachable
