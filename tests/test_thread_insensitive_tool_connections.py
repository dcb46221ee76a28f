"""A sync tool registered with ``thread_sensitive=False`` gets Django's connection rules too.

Such a tool runs in the event loop's default executor, not the request's thread, so no request
start or end ever reached the connection it opened there: with ``CONN_MAX_AGE = 0`` it was never
closed, and once the database dropped it (a restart, an idle timeout) the thread kept it and the
tool failed on it at every later call, whatever ``CONN_HEALTH_CHECKS`` said. Each test failed
before the tool ran between the rules of a request's start and end.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from django.db import connections

from demo_site.inventory.models import Product
from mcp_tools import ToolContext
from mcp_tools.registry import make_tool, registry
from mcp_tools.transports.http import McpEndpoint
from tests.asgi_client import call_modern
from tests.test_database_connections import admin

pytestmark = pytest.mark.django_db(transaction=True)
APP = McpEndpoint()
on_postgresql = pytest.mark.skipif(connections["default"].vendor != "postgresql", reason="terminates a PostgreSQL backend")

#: The connection (Django's per-thread wrapper) each run of the tool used, and its backend's pid.
USED: list[tuple[Any, int | None]] = []


def count_products() -> int:
    """Count the products, in whatever thread asgiref gives a thread-insensitive tool."""
    count = Product.objects.count()
    wrapper = connections["default"]
    USED.append((wrapper, wrapper.connection.info.backend_pid if wrapper.vendor == "postgresql" else None))
    return count


@pytest.fixture
async def one_executor_thread() -> AsyncIterator[ThreadPoolExecutor]:
    """The loop's default executor (where asgiref runs ``thread_sensitive=False`` code) as one new
    thread: it holds no connection yet, and every run of the tool takes the same thread."""
    loop = asyncio.get_running_loop()
    previous = getattr(loop, "_default_executor", None)
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tool-executor")
    loop.set_default_executor(pool)
    USED.clear()
    with registry.registered_temporarily(make_tool(count_products, thread_sensitive=False)):
        yield pool
    pool.submit(connections.close_all).result()
    pool.shutdown()
    loop._default_executor = previous  # type: ignore[attr-defined]


@pytest.fixture
def connection_settings() -> Iterator[dict[str, Any]]:
    """The default database's settings as every thread's new connection reads them (restored after)."""
    settings = connections.settings["default"]
    kept = {key: settings[key] for key in ("CONN_MAX_AGE", "CONN_HEALTH_CHECKS")}
    yield settings
    settings.update(kept)


async def call_tool() -> dict[str, Any]:
    body: dict[str, Any] = (await call_modern(APP, "tools/call", {"name": "count_products", "arguments": {}})).json()
    return body


async def test_the_tools_connection_is_closed_after_the_call_without_persistent_connections(
    one_executor_thread: ThreadPoolExecutor, connection_settings: dict[str, Any],
) -> None:
    connection_settings["CONN_MAX_AGE"] = 0
    body = await call_tool()
    assert body["result"]["structuredContent"] == {"result": 0}, body
    (wrapper, _), = USED
    assert wrapper.connection is None, "the tool's connection stayed open with CONN_MAX_AGE = 0"


@on_postgresql
async def test_a_dropped_connection_is_not_reused_by_the_next_call(
    one_executor_thread: ThreadPoolExecutor, connection_settings: dict[str, Any],
) -> None:
    connection_settings.update(CONN_MAX_AGE=600, CONN_HEALTH_CHECKS=True)
    assert "error" not in (await call_tool())
    (wrapper, pid), = USED
    assert wrapper.connection is not None  # kept, as CONN_MAX_AGE says
    with admin() as server:  # the database drops it (a restart, an idle timeout)
        server.execute("SELECT pg_terminate_backend(%s)", (pid,))
    body = await call_tool()
    assert body["result"]["structuredContent"] == {"result": 0}, body
    assert USED[1][1] != pid  # a new connection: the dropped one was health-checked and replaced


# -- the same tool, run by ctx.sample for the client's model -------------------------------------

async def counting_agent(ctx: ToolContext) -> str:
    """Lets the client's model count the products."""
    result = await ctx.sample("How many products?", tools=["count_products"])
    return result.text


async def test_the_tools_connection_is_closed_after_a_run_for_the_clients_model(
    one_executor_thread: ThreadPoolExecutor, connection_settings: dict[str, Any],
) -> None:
    connection_settings["CONN_MAX_AGE"] = 0
    capabilities = {"sampling": {"tools": {}}}
    params: dict[str, Any] = {"name": "counting_agent", "arguments": {}}
    use = {"role": "assistant", "model": "m", "stopReason": "toolUse",
           "content": [{"type": "tool_use", "id": "u1", "name": "count_products", "input": {}}]}
    with registry.registered_temporarily(make_tool(counting_agent)):
        first = (await call_modern(APP, "tools/call", params, capabilities=capabilities)).json()["result"]
        (key,) = first["inputRequests"]
        second = (await call_modern(APP, "tools/call", {**params, "requestState": first["requestState"],
                                                         "inputResponses": {key: use}}, capabilities=capabilities)).json()["result"]
    (key,) = second["inputRequests"]  # the model's next turn: the tool ran and its result is sent back
    (result,) = second["inputRequests"][key]["params"]["messages"][-1]["content"]
    assert result["structuredContent"] == {"result": 0}, result
    (wrapper, _), = USED
    assert wrapper.connection is None, "the tool's connection stayed open with CONN_MAX_AGE = 0"
