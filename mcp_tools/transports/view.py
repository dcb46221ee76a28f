"""The endpoint as a Django view, for projects that mount it with ``include()``.

The ASGI mount (:mod:`mcp_tools.routing`) is the fast path; this view runs the
same endpoint behind the project's middleware stack::

    urlpatterns = [path("mcp", include("mcp_tools.urls"))]

It needs Django's ASGI handler (``daphne``/``uvicorn``), not WSGI: responses may
be long-lived SSE streams.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import threading
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

from asgiref.sync import AsyncToSync, SyncToAsync, ThreadSensitiveContext
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from ..conf import mcp_settings
from ..protocol import jsonrpc
from ..protocol.errors import INTERNAL_ERROR, McpError
from ..server import threads
from .http import McpEndpoint

logger = logging.getLogger(__name__)
ViewT = TypeVar("ViewT", bound=Callable[..., Any])
_endpoint = McpEndpoint()

#: Why the URLconf mount cannot answer under WSGI, and what to do: said to the client and the log.
NEEDS_ASGI = (
    "The MCP endpoint mounted in the URLconf needs the site served over ASGI, and this request came "
    "through WSGI. Serve the project with an ASGI server: for runserver, add \"daphne\" first in "
    "INSTALLED_APPS (ASGI_APPLICATION names your asgi.py application); in production run daphne or "
    "uvicorn on your asgi.py instead of a WSGI server."
)
_said_needs_asgi = False


def _needs_asgi() -> HttpResponse:
    """The answer to a request served by WSGI: a JSON-RPC error saying how to serve the site.

    Logged once per process (each such request fails the same way; Django logs each 500 too).
    """
    global _said_needs_asgi
    if not _said_needs_asgi:
        _said_needs_asgi = True
        logger.error(NEEDS_ASGI)
    return JsonResponse(jsonrpc.error_message(None, McpError(INTERNAL_ERROR, NEEDS_ASGI)), status=500)


class EveryDatabase(set[str]):
    """A set holding every database alias: ``_non_atomic_requests`` of a view no database wraps in a transaction.

    ``transaction.non_atomic_requests(using=...)`` exempts the aliases it names; this one also covers
    aliases a project adds, which the view cannot know when it is defined.
    """

    def __contains__(self, alias: object) -> bool:
        return True


def non_atomic_everywhere(view: ViewT) -> ViewT:
    """Exempt ``view`` from ``ATOMIC_REQUESTS`` on every database, as ``transaction.non_atomic_requests`` does for one.

    Django cannot run an async view inside ``ATOMIC_REQUESTS``' transaction: it refuses the request
    ("You cannot use ATOMIC_REQUESTS with async views", an HTML 500) unless the view is exempt for
    each database that sets it. The endpoint needs no request-wide transaction: the durable store
    runs its own, on its own threads' connections, and one held open for a long-lived stream would
    hide the call's rows from every other process meanwhile.
    """
    setattr(view, "_non_atomic_requests", EveryDatabase())  # what Django's make_view_atomic reads
    return view


class _Job:
    """One piece of the endpoint's sync code, offered to more than one executor: the first to run it
    does; the others find it taken and do nothing."""

    __slots__ = ("future", "_call", "_lock", "taken")

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self.future: Future[Any] = Future()
        self._call = (fn, args, kwargs)
        self._lock = threading.Lock()
        self.taken = False

    def run(self) -> None:
        with self._lock:
            if self.taken:
                return
            self.taken = True
        fn, args, kwargs = self._call
        del self._call  # the copy still queued elsewhere must not keep the arguments alive
        if not self.future.set_running_or_notify_cancel():  # its caller stopped waiting before it started
            return
        try:
            result = fn(*args, **kwargs)
        except BaseException as exc:
            self.future.set_exception(exc)
        else:
            self.future.set_result(result)


class _DjangoRequestThread(Executor):
    """Where the endpoint's thread-sensitive sync code runs under Django's ASGI handler: Django's
    thread for the request, where its middleware ran, with what that set up there (a tenant's
    connection, thread-locals), as a view's sync code would; after the request, where a task that
    outlived its request runs it on the ASGI mount.

    Django's thread is reached as the request has it at each moment:

    * While the view runs under a sync-only middleware (Django called it through
      ``async_to_sync`` from that thread): that call's ``CurrentThreadExecutor``, which quits
      when the view returns.
    * Then, or from the start without such a middleware: the request context's executor (the
      thread's own queue), which runs the work once the thread is free. A sync-only middleware
      (or a ``process_response`` run in the thread) may instead hold the thread to read the
      streamed answer itself (Django reads an async stream for sync code through
      ``async_to_sync``): the work also goes to the executor that read runs meanwhile in the
      thread, found when the reader asks the stream for more (:meth:`reading`). Before, it
      waited in the thread's queue behind the reader, which waited for it: a deadlock.
    * Once the endpoint has ended (the answer is complete) or Django's request context has
      exited: :func:`~mcp_tools.server.threads.run_after_request`, the thread the process
      shares, with the connection rules of a request's start and end around it. Before,
      asgiref made a thread of its own for each exited request context (or, behind a
      sync-only middleware, used the shared thread without the rules): with
      ``CONN_MAX_AGE = 0`` the work's connection stayed open, and each such request left a
      thread behind.

    Called on the event loop's thread only (``sync_to_async`` submits from there).
    """

    def __init__(self, view_thread: Executor | None, request_context: ThreadSensitiveContext, request_thread: Executor) -> None:
        self._view_thread = view_thread
        self._request_context = request_context
        self._request_thread = request_thread
        #: The endpoint's task: once it is done, the request is over for the endpoint.
        self.endpoint: asyncio.Task[None] | None = None
        self.view_returned = False
        #: Where the code reading the streamed answer runs its sync work (its async_to_sync's
        #: executor), or None: nothing read it yet, or Django's async handler does.
        self._reader: Executor | None = None
        #: Work queued in Django's thread and not yet run there: offered to a reader that comes.
        self._waiting: list[_Job] = []

    def _over(self) -> bool:
        endpoint = self.endpoint
        if endpoint is not None and endpoint.done():
            return True
        # Django's handler drops the context's executor (and ends its thread) when the request ends.
        return SyncToAsync.context_to_thread_executor.get(self._request_context) is not self._request_thread

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        if self._over():
            return threads.run_after_request(fn, *args, **kwargs)
        if self._view_thread is not None and not self.view_returned:
            return self._view_thread.submit(fn, *args, **kwargs)
        job = _Job(fn, args, kwargs)
        if self._reader is not None:
            try:
                self._reader.submit(job.run)
                return job.future
            except RuntimeError:  # that read is over ("CurrentThreadExecutor already quit")
                self._reader = None
        try:
            self._request_thread.submit(job.run)
        except RuntimeError:  # shut down: the request just ended
            return threads.run_after_request(fn, *args, **kwargs)
        self._waiting = [waiting for waiting in self._waiting if not waiting.taken]
        self._waiting.append(job)
        return job.future

    def reading(self) -> None:
        """The streamed answer is being read, by the code of the current context: its sync work
        runs where ``sync_to_async`` would run it there (a sync reader's ``async_to_sync``
        executor, in Django's thread), and so does the endpoint's, that queued there included."""
        reader = getattr(AsyncToSync.executors, "current", None)
        if reader is self._reader:  # the same read goes on: it has been offered what waits
            return
        self._reader = reader
        self._waiting = [job for job in self._waiting if not job.taken]
        if reader is None:
            return
        for job in self._waiting:
            try:
                reader.submit(job.run)
            except RuntimeError:  # that read is over already
                self._reader = None
                return


def _in_django_request_thread(context: contextvars.Context) -> _DjangoRequestThread | None:
    """Give the endpoint's task (its ``context``) Django's thread for this request
    (:class:`_DjangoRequestThread`), or nothing outside a request context of Django's."""
    view_thread = getattr(AsyncToSync.executors, "current", None)
    # sync_to_async prefers an async_to_sync's executor to the context's: none for the endpoint's
    # calls, which all come to the context's (ours), which uses that one while it runs.
    context.run(setattr, AsyncToSync.executors, "current", None)
    request_context = SyncToAsync.thread_sensitive_context.get(None)
    if request_context is None:  # not under Django's ASGI handler: the endpoint's RequestThread serves
        return None
    request_thread = SyncToAsync.context_to_thread_executor.get(request_context)
    if request_thread is None:  # no sync code ran in the request yet: made as asgiref would
        request_thread = SyncToAsync.context_to_thread_executor[request_context] = ThreadPoolExecutor(max_workers=1)
    executor = _DjangoRequestThread(view_thread, request_context, request_thread)
    endpoint_context = ThreadSensitiveContext()
    SyncToAsync.context_to_thread_executor[endpoint_context] = executor  # goes with the context (a weak key)
    context.run(SyncToAsync.thread_sensitive_context.set, endpoint_context)
    return executor


# The endpoint authenticates its callers itself (DRF / OAuth: a 401 with WWW-Authenticate): a site's
# LoginRequiredMiddleware redirected every MCP request, an authenticated one too, to its login page.
@login_not_required
@non_atomic_everywhere
@csrf_exempt  # MCP clients are not browsers; Origin and Host are checked by the endpoint
async def mcp_view(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse | StreamingHttpResponse:
    """Serve one MCP request (any era) through the Django URLconf.

    ``args`` / ``kwargs``: what the include's path captures (``path("t/<slug:tenant>/mcp", include(...))``),
    passed by Django to every view below it, and unused here: the endpoint at each such path is a resource of
    its own by the path it reached (docs/oauth.md). Refused, every request there was a 500 (a TypeError)."""
    scope = getattr(request, "scope", None)
    if scope is None:
        return _needs_asgi()
    # Read from the stream, not request.body: DATA_UPLOAD_MAX_MEMORY_SIZE (Django's 2.5 MiB for form
    # data) would answer an HTML 400 before MAX_BODY_BYTES is applied; one byte past the limit is
    # enough for the endpoint to answer 413 (and it answers a declared Content-Length past it unread).
    body = request.read(mcp_settings.MAX_BODY_BYTES + 1)
    outgoing: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    delivered = False
    gone = asyncio.Event()

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        await outgoing.put(message)

    # The endpoint's sync code runs in Django's thread for this request, as a view's would: what its
    # middleware set up there applies (_DjangoRequestThread).
    context = contextvars.copy_context()
    django_thread = _in_django_request_thread(context)
    task = asyncio.get_running_loop().create_task(_endpoint(dict(scope), receive, send), context=context)
    if django_thread is not None:
        django_thread.endpoint = task
    try:
        response = await _answer(task, outgoing, gone, django_thread.reading if django_thread is not None else None)
    finally:
        if django_thread is not None:
            django_thread.view_returned = True
    if response.streaming:
        _refuse_compression(request)
    return response


def _refuse_compression(request: HttpRequest) -> None:
    """Keep the project's compression middleware off a streamed answer (SSE): the request says it
    accepts no content coding.

    Django's ``GZipMiddleware`` compresses each chunk of an async stream as a gzip member of its own,
    and httpx (the official SDK's client) decodes the first member only: the client saw the first
    event of the stream alone, and waited for the rest until it timed out. A compression middleware
    decides in its ``process_response`` from the request's ``Accept-Encoding`` (Django's,
    django-compression-middleware), and the response cannot say "not encoded" in a header it would
    respect instead (``Content-Encoding: identity`` is not one to send). Whole (JSON) answers stay
    compressible.
    """
    request.META.pop("HTTP_ACCEPT_ENCODING", None)
    # request.headers is built from META once and kept: a middleware reading it must not see the old value.
    request.__dict__.pop("headers", None)


async def _answer(task: asyncio.Task[None], outgoing: asyncio.Queue[dict[str, Any]], gone: asyncio.Event,
                  reading: Callable[[], None] | None) -> HttpResponse | StreamingHttpResponse:
    """The view's response to what the endpoint (``task``) sends: whole, or streamed while it runs
    (``reading()`` each time its reader asks for more: :meth:`_DjangoRequestThread.reading`)."""

    async def stop_endpoint() -> None:
        gone.set()
        if not task.done():
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task

    try:
        start = await outgoing.get()
        first = await outgoing.get()
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in start.get("headers", [])]
        if not first.get("more_body"):
            await task
            response = HttpResponse(first.get("body", b""), status=start["status"])
            for name, value in headers:
                response[name] = value
            return response
    except asyncio.CancelledError:
        # Django cancels the view when the client leaves before the answer starts: the endpoint it
        # runs stops too (its receive() hears of it only from here), as it would served directly.
        await stop_endpoint()
        raise

    async def stream() -> AsyncIterator[bytes]:
        message = first
        try:
            while True:
                if message.get("body"):
                    yield message["body"]
                if not message.get("more_body"):
                    return
                if reading is not None:
                    reading()
                message = await outgoing.get()
        finally:
            # The client went away (Django stops iterating) or the stream ended.
            await stop_endpoint()

    loop = asyncio.get_running_loop()

    def stop_unread_endpoint() -> None:
        gone.set()
        if not task.done():
            task.cancel()
            task.add_done_callback(_read_outcome)

    def closed() -> None:
        # Django closes the response at the request's end (in a thread). When the client left while
        # the response's start went out, Django never iterated the stream, whose finally never ran:
        # the endpoint (a standalone GET stream: its session's stream, keep-alives queued for
        # nobody) ran on. Stopped here, on its loop; after a stream that ended, there is nothing to stop.
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(stop_unread_endpoint)

    streaming = _EndpointStream(stream(), status=start["status"], on_close=closed)
    for name, value in headers:
        streaming[name] = value
    return streaming


def _read_outcome(task: asyncio.Task[None]) -> None:
    """Take the outcome of an endpoint stopped where nobody awaits it (an error is the endpoint's
    own, which it logged), so the collector does not report a task exception never retrieved."""
    if not task.cancelled():
        task.exception()


class _EndpointStream(StreamingHttpResponse):
    """A streamed answer that stops its endpoint when Django closes it (:func:`_answer`)."""

    def __init__(self, *args: Any, on_close: Callable[[], None], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._on_close = on_close

    def close(self) -> None:
        try:
            self._on_close()
        finally:
            super().close()
