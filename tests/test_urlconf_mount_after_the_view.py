"""The URLconf mount (``include("mcp_tools.urls")`` behind Django's ASGI handler): the endpoint's
sync code after the view returned.

- Work that outlives the request (a task a tool started, still running sync code once the
  response has been sent) ran in a thread of its own per request (asgiref makes one for a
  request context that has exited) or, behind a sync-only middleware, in asgiref's shared
  thread, with none of Django's connection rules: with ``CONN_MAX_AGE = 0`` its connection stayed
  open. It now runs as on the ASGI mount: in the shared thread, the rules of a request's start
  and end around it.
- A sync-only middleware that reads the whole streamed answer itself (``b"".join(response)``,
  which Django runs through ``async_to_sync``), or a ``process_response`` that does (Django runs
  it in the request's thread), holds the request's thread while it reads: the endpoint's sync
  code, sent to that thread's executor, waited behind it for ever. It now also goes to the
  executor the reader's ``async_to_sync`` runs in that thread meanwhile.

Each request goes through the real handler (``get_asgi_application()``) with this module as the
URLconf; a request that does not finish in time fails the test instead of hanging the run.
"""

from __future__ import annotations

import asyncio
import json
import threading
import warnings
from collections.abc import Callable
from typing import Any

import pytest
from asgiref.sync import SyncToAsync, sync_to_async
from django.conf import settings
from django.db import connections
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.test import override_settings
from django.urls import include, path
from django.utils.deprecation import MiddlewareMixin

from demo_site.inventory.models import Product
from mcp_tools.engine.context import ToolContext
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


#: Set by the middleware once the view has returned, and by the tool once its sync code is queued
#: (after that): with _read_after_the_tool_queued, the middleware reads only then.
_view_returned = threading.Event()
_queued = threading.Event()
_read_after_the_tool_queued: list[bool] = [False]


def read_whole(response: HttpResponseBase) -> HttpResponseBase:
    """A streamed answer read whole (to log, sign or rewrite it) by sync code, and answered in one
    piece: Django reads an async stream for sync code through ``async_to_sync``."""
    if not response.streaming:
        return response
    if _read_after_the_tool_queued[0]:
        _view_returned.set()
        _queued.wait(PATIENCE)  # the tool's sync code waits in this thread's queue meanwhile
    with warnings.catch_warnings():  # Django warns that it reads an async stream synchronously
        warnings.simplefilter("ignore")
        body = b"".join(response)  # type: ignore[arg-type]
    whole = HttpResponse(body, status=response.status_code)
    for name, value in response.items():
        whole[name] = value
    return whole


class ReadsTheWholeAnswer(SyncOnlyMiddleware):
    """A sync-only middleware that reads the streamed answer whole."""

    def __call__(self, req: HttpRequest) -> HttpResponseBase:
        return read_whole(self.get_response(req))


class ReadsItInProcessResponse(MiddlewareMixin):
    """The same in a ``process_response`` (async-capable: Django runs it in the request's thread)."""

    def process_response(self, req: HttpRequest, response: HttpResponseBase) -> HttpResponseBase:
        return read_whole(response)


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


# -- a sync-only middleware that reads the streamed answer itself ---------------------------------


def count_products() -> int:
    return Product.objects.count()


async def progress_then_orm(ctx: ToolContext, pause: bool) -> str:
    """Progress first (the answer streams and the view returns), then sync ORM code."""
    await ctx.report_progress(1, 2, "half")
    if pause:
        for _ in range(20):  # the middleware is reading the stream by now
            await asyncio.sleep(0.01)
    if _read_after_the_tool_queued[0]:
        await asyncio.get_running_loop().run_in_executor(None, _view_returned.wait, PATIENCE)
    counting = sync_to_async(count_products)()
    _queued.set()  # set before the coroutine runs, but nothing else runs on the loop until it is queued
    rows = await counting
    return f"counted {rows}"


@pytest.mark.parametrize(("pause", "read_later"), [(False, False), (True, False), (False, True)],
                         ids=["at-once", "tool-pauses", "middleware-reads-later"])
@pytest.mark.parametrize("reader", [ReadsTheWholeAnswer, ReadsItInProcessResponse], ids=["sync-only", "process-response"])
async def test_a_middleware_that_reads_the_streamed_answer_in_the_request_thread_does_not_deadlock(
        reader: type, pause: bool, read_later: bool) -> None:
    """The sync code after the view returned: queued in the thread before the middleware reads
    (middleware-reads-later), or after it started reading (tool-pauses)."""
    _view_returned.clear()
    _queued.clear()
    _read_after_the_tool_queued[0] = read_later
    try:
        with override_settings(ROOT_URLCONF=__name__, MIDDLEWARE=middleware(reader)), \
                registry.registered_temporarily(make_tool(progress_then_orm)):
            answer = await serve(django_app(), "progress_then_orm", {"pause": pause})
    finally:
        _read_after_the_tool_queued[0] = False
    text = answer.body.decode()
    assert answer.status == 200 and "counted 0" in text and "Internal error" not in text, text
