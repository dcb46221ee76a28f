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


async def test_the_database_connection_a_request_thread_opened_is_closed_when_the_request_ends() -> None:
    """A connection left in an ended thread would stay open (PostgreSQL then refuses to drop the
    test database: "being accessed by other users")."""
    used: list[Any] = []

    def count_products() -> int:
        """Count the products."""
        from django.db import connections

        used.append(connections["default"])  # this thread's (django.db.connection would be a proxy)
        return Product.objects.count()

    with registry.registered_temporarily(make_tool(count_products)):
        assert text_of(await call_modern(APP, "tools/call", {"name": "count_products", "arguments": {}})) == "0"
    [connection] = used
    assert connection.connection is None


async def test_a_request_that_runs_no_sync_code_starts_no_thread(monkeypatch: pytest.MonkeyPatch) -> None:
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
        assert text_of(await call_modern(APP, "tools/call", {"name": "sync_echo", "arguments": {"text": "sync"}})) == "sync"
    assert len(made) == 1
    for _ in range(100):  # the thread ends right after closing its connections
        if not any(thread.name.startswith("mcp-tools-request") for thread in threading.enumerate()):
            break
        await asyncio.sleep(0.02)
    else:
        pytest.fail("the request's thread did not end")
