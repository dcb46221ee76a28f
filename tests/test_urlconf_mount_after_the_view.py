"""The URLconf mount (``include("mcp_tools.urls")`` behind Django's ASGI handler): the endpoint's
sync code after the view returned.

Work that outlives the request (a task a tool started, still running sync code once the
response has been sent) ran in a thread of its own per request (asgiref makes one for a
request context that has exited) or, behind a sync-only middleware, in asgiref's shared
thread, with none of Django's connection rules: with ``CONN_MAX_AGE = 0`` its connection stayed
open. It now runs as on the ASGI mount: in the shared thread, the rules of a request's start
and end around it.

Each request goes through the real handler (``get_asgi_application()``) with this module as the
URLconf; a request that does not finish in time fails the test instead of hanging the run.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from typing import Any

import pytest
from asgiref.sync import SyncToAsync, sync_to_async
from django.conf import settings
from django.db import connections
from django.http import HttpRequest, HttpResponseBase
from django.test import override_settings
from django.urls import include, path

from demo_site.inventory.models import Product
from mcp_tools.registry import make_tool, registry
from tests.asgi_client import AsgiResponse, modern_message, post_headers, request

pytestmark = pytest.mark.django_db(transaction=True)

urlpatterns = [path("mcp", include("mcp_tools.urls"))]

#: How long one request may take before the test calls it stuck.
PATIENCE = 20.0


class SyncOnlyMiddleware:
    """A middleware as many third-party packages still ship: sync only."""

    sync_capable = True
    async_capable = False

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, req: HttpRequest) -> HttpResponseBase:
        return self.get_response(req)


def middleware(*extra: type) -> list[str]:
    return [*settings.MIDDLEWARE, *(f"{__name__}.{cls.__name__}" for cls in extra)]


async def serve(app: Any, tool: str, arguments: dict[str, Any] | None = None) -> AsgiResponse:
    """One 2026-07-28 ``tools/call`` through ``app``; fails the test if it is not answered in time.

    Not ``asyncio.wait_for``: a deadlocked request ignores its cancellation (Django's handler waits
    for the stuck thread), so ``wait_for`` would hang too. Here every other task is cancelled (the
    stuck thread's ``async_to_sync`` among them), which frees the thread, and the test fails.
    """
    params = {"name": tool, "arguments": arguments or {}, "_meta": {"progressToken": "p1"}}
    headers = post_headers(extra={"mcp-method": "tools/call", "mcp-name": tool})
    served = asyncio.ensure_future(request(app, "POST", "/mcp", headers=headers, timeout=PATIENCE * 3,
                                           body=json.dumps(modern_message("tools/call", params)).encode()))
    done, _ = await asyncio.wait({served}, timeout=PATIENCE)
    if not done:
        for task in asyncio.all_tasks():
            if task is not asyncio.current_task():
                task.cancel()
        await asyncio.wait({served}, timeout=PATIENCE)
        pytest.fail(f"{tool}: no answer in {PATIENCE:g} s (deadlocked)")
    return served.result()


def django_app() -> Any:
    from django.core.asgi import get_asgi_application

    return get_asgi_application()  # after override_settings: it loads the MIDDLEWARE in force


# -- work that outlives the request ------------------------------------------------------------

#: What the late work saw: its thread's connection and the thread.
_late: list[tuple[Any, threading.Thread]] = []
_late_tasks: list[asyncio.Task[None]] = []
#: Set once the request is over (an event of the test's own loop).
_answered: list[asyncio.Event] = []


def count_products_late() -> int:
    _late.append((connections["default"], threading.current_thread()))
    return Product.objects.count()


async def hands_work_over() -> str:
    """Start work that goes on, with the ORM, once the answer has been sent."""

    async def later() -> None:
        await _answered[0].wait()
        await sync_to_async(count_products_late)()

    _late_tasks.append(asyncio.ensure_future(later()))
    return "handed over"


@pytest.fixture
def conn_max_age_0() -> Any:
    configured = connections.settings["default"]["CONN_MAX_AGE"]
    connections.settings["default"]["CONN_MAX_AGE"] = 0  # what a new connection reads (the demo's is 60)
    yield
    connections.settings["default"]["CONN_MAX_AGE"] = configured


@pytest.mark.parametrize("sync_only", [False, True], ids=["async-capable", "sync-only-too"])
async def test_sync_work_that_outlives_the_request_gets_the_connection_rules_and_no_thread_of_its_own(
        conn_max_age_0: None, sync_only: bool) -> None:
    """As Django closes a request's connections at its end (all of them with CONN_MAX_AGE = 0), the
    late work's connection is closed when the work ends; two requests' late work share one thread."""
    shared = SyncToAsync.single_thread_executor
    await asyncio.wrap_future(shared.submit(connections.close_all))  # a connection an earlier test left there
    _late.clear()
    _late_tasks.clear()
    with override_settings(ROOT_URLCONF=__name__, MIDDLEWARE=middleware(*([SyncOnlyMiddleware] if sync_only else []))), \
            registry.registered_temporarily(make_tool(hands_work_over)):
        app = django_app()
        for _ in range(2):
            _answered[:] = [asyncio.Event()]
            answer = await serve(app, "hands_work_over")
            assert answer.status == 200 and "handed over" in answer.body.decode(), answer.body
            _answered[0].set()  # the request is over (Django's handler has returned): the work goes on
            await asyncio.wait_for(asyncio.gather(*_late_tasks), PATIENCE)
    (first, first_thread), (second, second_thread) = _late
    assert first.connection is None and second.connection is None, "the late work's connection was left open"
    assert first_thread is second_thread, "each request's late work got a thread of its own"
