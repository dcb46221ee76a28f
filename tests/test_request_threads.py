"""Each request's thread-sensitive sync code runs in a thread of its own (``server/threads.py``).

Before, the MCP endpoint and stdio ran every request's thread-sensitive sync code (sync tools,
resources, completers, DRF authentication, OAuth verifiers) in the one thread asgiref gives a
process outside a ``ThreadSensitiveContext``: one slow sync tool held every other request's.
(stdio, in a real process: tests/test_stdio_defects.py.)
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from demo_site.inventory.models import Product
from mcp_tools.registry import make_tool, registry
from mcp_tools.server import threads
from mcp_tools.transports.http import McpEndpoint
from tests.asgi_client import call_modern

pytestmark = pytest.mark.django_db(transaction=True)

APP = McpEndpoint()


def text_of(response: Any) -> str:
    assert response.status == 200, response.body
    return str(response.json()["result"]["content"][0]["text"])


async def test_a_slow_sync_tool_does_not_hold_up_another_requests_sync_tool() -> None:
    release = threading.Event()

    def hold() -> str:
        """Run until released."""
        release.wait(20)
        return "released"

    def quick() -> str:
        """Answer at once."""
        return "quick"

    with registry.registered_temporarily(make_tool(hold), make_tool(quick)):
        slow = asyncio.ensure_future(call_modern(APP, "tools/call", {"name": "hold", "arguments": {}}))
        try:
            await asyncio.sleep(0.2)  # hold() runs
            assert text_of(await asyncio.wait_for(call_modern(APP, "tools/call", {"name": "quick", "arguments": {}}), 5)) == "quick"
            assert not slow.done()
        finally:
            release.set()
        assert text_of(await slow) == "released"


@pytest.fixture(autouse=True)
def _no_idle_threads() -> Any:
    threads.close_idle_threads()
    yield
    threads.close_idle_threads()


def count_products_tool(used: list[Any]) -> Any:
    def count_products() -> int:
        """Count the products."""
        from django.db import connections

        used.append(connections["default"])  # this thread's (django.db.connection would be a proxy)
        return Product.objects.count()

    return make_tool(count_products)


async def test_with_conn_max_age_0_a_request_thread_closes_its_connection_when_the_request_ends() -> None:
    """As Django does at a request's end: with CONN_MAX_AGE = 0 (its default) no connection outlives
    the request (one left in a thread would also keep PostgreSQL from dropping the test database)."""
    from django.db import connections

    configured = connections.settings["default"]["CONN_MAX_AGE"]
    connections.settings["default"]["CONN_MAX_AGE"] = 0  # what a new connection reads (the demo's is 60)
    used: list[Any] = []
    try:
        with registry.registered_temporarily(count_products_tool(used)):
            assert text_of(await call_modern(APP, "tools/call", {"name": "count_products", "arguments": {}})) == "0"
    finally:
        connections.settings["default"]["CONN_MAX_AGE"] = configured
    [connection] = used
    assert connection.connection is None


async def test_a_later_request_reuses_an_idle_thread_and_its_connection() -> None:
    """With CONN_MAX_AGE > 0 (the demo's 60 s) a request's thread waits for the next request and
    keeps its connection, as Django keeps one per thread: no new thread, no new connection."""
    used: list[Any] = []
    with registry.registered_temporarily(count_products_tool(used)):
        for _ in range(2):
            assert text_of(await call_modern(APP, "tools/call", {"name": "count_products", "arguments": {}})) == "0"
    first, second = used
    assert first is second and first.connection is not None
    threads.close_idle_threads()  # ends them, closing their connections
    assert first.connection is None


async def test_a_request_that_runs_no_sync_code_starts_no_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    # Request threads of earlier tests still running a job their request gave up on end after it:
    # not this test's.
    earlier = set(threading.enumerate())
    made: list[Any] = []

    class CountedPool(threads.ThreadPoolExecutor):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(threads, "ThreadPoolExecutor", CountedPool)
    assert text_of(await call_modern(APP, "tools/call", {"name": "echo", "arguments": {"text": "async"}})) == "async"
    assert made == []

    def sync_echo(text: str) -> str:
        """Echo, in a thread."""
        return text

    with registry.registered_temporarily(make_tool(sync_echo)):
        for _ in range(3):
            assert text_of(await call_modern(APP, "tools/call", {"name": "sync_echo", "arguments": {"text": "sync"}})) == "sync"
    assert len(made) == 1  # one thread, reused by the later requests
    threads.close_idle_threads()
    assert not any(thread.name.startswith("mcp-tools-request") for thread in set(threading.enumerate()) - earlier)


async def test_the_requests_executor_is_made_by_its_first_sync_call_and_serves_its_tasks() -> None:
    """The request's context holds its executor, made by the first thread-sensitive call (none for a
    request that runs no sync code, and no entry in asgiref's table for any): that call, a later one
    and one from a task the request started all run in the request's one thread."""
    from asgiref.sync import SyncToAsync, sync_to_async

    entries = len(SyncToAsync.context_to_thread_executor)
    async with threads.RequestThread():
        context = SyncToAsync.thread_sensitive_context.get()
        assert isinstance(context, threads._RequestContext) and context.running_executor() is None
        first = await sync_to_async(threading.get_ident)()
        executor = context.running_executor()
        assert executor is not None
        second = await sync_to_async(threading.get_ident)()
        from_task = await asyncio.ensure_future(sync_to_async(threading.get_ident)())
        assert context.running_executor() is executor
        assert len(SyncToAsync.context_to_thread_executor) == entries
    assert first == second == from_task != threading.get_ident()
    assert threading.get_ident() != SyncToAsync.single_thread_executor.submit(threading.get_ident).result() != first
