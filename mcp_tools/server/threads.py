"""Each request's own thread for its thread-sensitive sync code, as Django's ASGI handler gives it.

asgiref runs thread-sensitive sync code (``sync_to_async(fn)``: sync tools, resources,
prompts and completers, DRF authentication, OAuth token verifiers) in the thread of the
current ``ThreadSensitiveContext``, and, outside one, in a single thread the whole process
shares. Django's ``ASGIHandler`` opens a context per request; the MCP endpoint and stdio
run no Django handler, so without :class:`RequestThread` one slow sync tool held every
other request's sync code until it returned.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from types import TracebackType
from typing import Any

from asgiref.sync import SyncToAsync, ThreadSensitiveContext

from .. import store

logger = logging.getLogger("mcp_tools.server")

#: The context asgiref's thread-sensitive calls look up, and the executor each context's calls
#: run in (asgiref makes a plain one when the context has none: :class:`RequestThread` sets its own).
_current_context = SyncToAsync.thread_sensitive_context
_context_executors = SyncToAsync.context_to_thread_executor


def _close_connections() -> None:
    try:
        store.close_thread_connections()
    except Exception:  # the request is over: nothing to answer, and the thread ends all the same
        logger.exception("Could not close a request thread's database connections")


class _RequestExecutor(Executor):
    """The one thread of a request's thread-sensitive sync code, started by its first job."""

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._last: Future[Any] | None = None
        self._ended = False

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        if self._ended:
            # A task the request started outlived it: its sync code runs where all of it ran
            # before requests had threads of their own, in the thread the process shares.
            return SyncToAsync.single_thread_executor.submit(fn, *args, **kwargs)
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mcp-tools-request")
        future = self._last = self._pool.submit(fn, *args, **kwargs)
        return future

    def end(self) -> asyncio.Future[None] | None:
        """The request is over: after its last job the thread closes its database connections
        and ends. Returns the close to wait for, when the thread is idle; None when there is no
        thread, or when it still runs a job the request stopped waiting for (cancelled: a thread
        cannot be stopped), which the close then follows without holding the request."""
        self._ended = True
        pool = self._pool
        if pool is None:
            return None
        assert self._last is not None
        idle = self._last.done()
        closed = pool.submit(_close_connections)
        pool.shutdown(wait=False)
        return asyncio.wrap_future(closed) if idle else None


class RequestThread:
    """``async with RequestThread():`` around one request: its thread-sensitive sync code runs in
    a thread of its own, started when the request first runs some, so requests no longer wait
    for each other's sync code. At the end the thread closes the database connections it
    opened and ends (Django closes a thread's connections only when told to: one left in an
    ended thread would stay open until the garbage collector found it).

    Inside an enclosing context (the endpoint served as a Django view, under Django's ASGI
    handler) the enclosing request's thread serves, as asgiref does for nested contexts.
    A request that runs no sync code starts no thread: it costs about 2 µs.
    """

    __slots__ = ("_token", "_executor")
    _token: contextvars.Token[ThreadSensitiveContext] | None
    _executor: _RequestExecutor

    async def __aenter__(self) -> None:
        if _current_context.get(None) is not None:
            self._token = None
            return
        context = ThreadSensitiveContext()
        # What ThreadSensitiveContext.__aenter__ does for an outermost context, with the executor
        # its calls run in set here: ours starts its thread with the first call. The entry goes
        # when the context does (a weak key).
        self._token = _current_context.set(context)
        _context_executors[context] = self._executor = _RequestExecutor()

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        token = self._token
        if token is None:
            return
        _current_context.reset(token)
        closing = self._executor.end()
        if closing is not None:
            await closing
