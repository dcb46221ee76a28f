"""Each request's own thread for its thread-sensitive sync code, as Django's ASGI handler gives it.

asgiref runs thread-sensitive sync code (``sync_to_async(fn)``: sync tools, resources,
prompts and completers, DRF authentication, OAuth token verifiers) in the thread of the
current ``ThreadSensitiveContext``, and, outside one, in a single thread the whole process
shares. Django's ``ASGIHandler`` opens a context per request; the MCP endpoint and stdio
run no Django handler, so without :class:`RequestThread` one slow sync tool held every
other request's sync code until it returned.

A request that settles into a long wait (a standalone ``GET`` stream, ``subscriptions/listen``, a
call waiting for the client's answers or for a worker) gives its thread back first
(:func:`release_request_thread`), as its end would: an open stream costs no thread and no database
connection, which are sized by the work in progress (docs/architecture.md), and a later sync call
of the request takes a thread again. So one request's sync code does not always run in one thread:
code before such a wait and code after it may run in two, and nothing one job leaves in its thread
(a thread-local, an open transaction) is there for a job after the wait. No transaction can span an
``await`` anyway (each job is a call of its own, and an ``atomic`` block ends with it).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from types import TracebackType
from typing import Any, ParamSpec, TypeVar

from asgiref.sync import SyncToAsync, ThreadSensitiveContext, sync_to_async

from .. import store

logger = logging.getLogger("mcp_tools.server")

P = ParamSpec("P")
R = TypeVar("R")

#: The context asgiref's thread-sensitive calls look up (the executor each context's calls run in:
#: :class:`_ContextExecutors`).
_current_context = SyncToAsync.thread_sensitive_context


#: Idle request threads kept for later requests: a request's sync code reuses one, and the
#: database connections it keeps as ``CONN_MAX_AGE`` allows, instead of starting a thread and
#: connecting again. Past this many idle ones, a thread ends with its request.
MAX_IDLE_THREADS = 16
#: The idle threads, each with the ``time.monotonic()`` it went idle at, oldest first (the most
#: recent is reused first, so a burst's threads are the ones that stay idle).
_idle: list[tuple[ThreadPoolExecutor, float]] = []
_idle_lock = threading.Lock()


def _new_thread() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="mcp-tools-request")


def _idle_seconds_allowed() -> float | None:
    """How long an idle thread may wait with its connections: the longest ``CONN_MAX_AGE`` of the
    databases. None: as long as it likes (a ``CONN_MAX_AGE`` of None keeps connections for good;
    all of them 0 leave an idle thread none to keep)."""
    return store.longest_conn_max_age() or None


def _take_stale(now: float) -> list[ThreadPoolExecutor]:
    """Remove from the idle threads those idle longer than ``CONN_MAX_AGE`` (with ``_idle_lock``):
    their connections are past it, and a thread's are checked only when a request takes it, which
    a thread left behind by a burst may never see (the most recent one is always taken first)."""
    allowed = _idle_seconds_allowed()
    if allowed is None:
        return []
    stale = 0
    while stale < len(_idle) and now - _idle[stale][1] > allowed:
        stale += 1
    taken = [pool for pool, _ in _idle[:stale]]
    del _idle[:stale]
    return taken


def _borrow() -> ThreadPoolExecutor | None:
    with _idle_lock:
        stale = _take_stale(time.monotonic())
        pool = _idle.pop()[0] if _idle else None
    for old in stale:
        _end_thread(old)
    return pool


def _give_back(pool: ThreadPoolExecutor) -> None:
    now = time.monotonic()
    with _idle_lock:
        stale = _take_stale(now)
        kept = len(_idle) < MAX_IDLE_THREADS
        if kept:
            _idle.append((pool, now))
    for old in stale if kept else [*stale, pool]:
        _end_thread(old)


def _end_thread(pool: ThreadPoolExecutor) -> None:
    pool.submit(_close_connections)
    pool.shutdown(wait=False)


def _close_connections() -> None:
    try:
        store.close_thread_connections()
    except Exception:  # the request is over: nothing to answer, and the thread ends all the same
        logger.exception("Could not close a request thread's database connections")


def _request_boundary() -> None:
    """A request starts or ends in this thread: Django's connection rules for it."""
    try:
        store.close_old_thread_connections()
    except Exception:
        logger.exception("Could not close a request thread's old database connections")


def _with_connection_rules(fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
    """``fn(*args, **kwargs)`` between the connection rules of a request's start and end, as
    Channels' ``database_sync_to_async`` does, for a thread no request's end ever reaches."""
    store.close_old_thread_connections()
    try:
        return fn(*args, **kwargs)
    finally:
        store.close_old_thread_connections()


def run_after_request(fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> Future[R]:
    """Run ``fn(*args, **kwargs)``, sync code of a task that outlived its request, where such code
    runs: the thread asgiref shares with the process, between the connection rules of a request's
    start and end (its connection closed after it with ``CONN_MAX_AGE = 0``), since no request's
    end reaches that thread. Not a thread of its own per request: one would be left behind by
    each such task, with its connection. Returns its future, as ``Executor.submit`` does.
    """
    return SyncToAsync.single_thread_executor.submit(_with_connection_rules, fn, *args, **kwargs)


async def run_sync(fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
    """Await ``fn(*args, **kwargs)``, sync code that may use the ORM (a principal's ``has_perms``),
    in a thread where Django's connection rules apply to the connection it opens.

    In a request (:class:`RequestThread`) that is the request's own thread: its end closes the
    connection as ``CONN_MAX_AGE`` says, and a kept one is checked at the next request's start
    (with ``CONN_HEALTH_CHECKS = True``; else only its age is). Outside one (a task with no
    request), a thread of the loop's default executor, with the rules before and after ``fn``.
    Not the default executor inside a request: a connection opened there was never closed
    (``CONN_MAX_AGE = 0`` ignored) nor checked, and once the database dropped it every call
    through that thread failed for as long as the process lived.
    """
    if _current_context.get(None) is not None:
        return await sync_to_async(fn)(*args, **kwargs)
    return await sync_to_async(_with_connection_rules, thread_sensitive=False)(fn, *args, **kwargs)


class _RequestExecutor(Executor):
    """The one thread of a request's thread-sensitive sync code, taken by its first job."""

    def __init__(self, ended: bool) -> None:
        self._pool: ThreadPoolExecutor | None = None
        #: Every job submitted: one may still run after a later one was cancelled before it started.
        self._jobs: list[Future[Any]] = []
        #: True once the request is over (made ended: its first job came from a task that outlived it).
        self._ended = ended

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        if self._ended:
            # A task the request started outlived it: its sync code runs where all of it ran
            # before requests had threads of their own, in the thread the process shares, which
            # no request's end reaches: the rules of a request's start and end around each job.
            return run_after_request(fn, *args, **kwargs)
        if self._pool is None:
            reused = _borrow()
            if reused is not None:
                reused.submit(_request_boundary)  # a new request in this thread, as Django starts one
            self._pool = reused or _new_thread()
        future = self._pool.submit(fn, *args, **kwargs)
        self._jobs.append(future)
        return future

    def release(self) -> None:
        """The request is about to wait for long: give its thread back as :meth:`end` does, unless
        a job of its still runs there (a sync tool the request stopped waiting for: the thread
        stays the request's, as it would at its end). The next job takes a thread again."""
        pool = self._pool
        if pool is None or self._ended or not all(job.done() for job in self._jobs):
            return
        self._pool = None
        self._jobs.clear()
        _hand_back(pool)

    def end(self) -> Future[None] | None:
        """The request is over: after its last job its thread closes the connections Django would
        close at a request's end and goes back to the idle threads. Returns that close to wait
        for; None when there is no thread, or when it still runs a job the request stopped
        waiting for (cancelled: a thread cannot be stopped): that thread is not reused, it
        closes its connections after the job and ends, without holding the request."""
        self._ended = True
        pool = self._pool
        if pool is None:
            return None
        if not all(job.done() for job in self._jobs):
            _end_thread(pool)
            return None
        return _hand_back(pool)


class _RequestContext(ThreadSensitiveContext):
    """The thread-sensitive context of one :class:`RequestThread`, which holds the executor its calls
    run in. That executor is made by the request's first sync call (:meth:`executor`), not with the
    request: most requests (an async tool, a fast path) run no sync code, and a ``WeakKeyDictionary``
    entry in asgiref's table for each of them, with its removal when the context went, cost ~2.4% of
    a plain echo request's instructions. asgiref finds the executor through :class:`_ContextExecutors`.

    Used on one thread at a time (the event loop's), as :class:`_RequestExecutor` is.
    """

    #: Class defaults, so that a request that runs no sync code sets neither.
    _request_executor: _RequestExecutor | None = None
    _request_ended = False

    def executor(self) -> _RequestExecutor:
        """The executor of the request's sync code, made by the first call that needs it (one that
        comes after the request's end, from a task that outlived it, makes it ended)."""
        executor = self._request_executor
        if executor is None:
            executor = self._request_executor = _RequestExecutor(self._request_ended)
        return executor

    def running_executor(self) -> _RequestExecutor | None:
        """The executor if a sync call made it, without making one."""
        return self._request_executor

    def end(self) -> Future[None] | None:
        """The request is over: :meth:`_RequestExecutor.end` if it has an executor (a later call from a
        task that outlived it runs after the request either way)."""
        self._request_ended = True
        executor = self._request_executor
        return None if executor is None else executor.end()


class _ContextExecutors(weakref.WeakKeyDictionary[ThreadSensitiveContext, Executor]):
    """asgiref's table of each thread-sensitive context's executor (``SyncToAsync.context_to_thread_executor``,
    replaced by one of these when this module is imported, with what it held), which answers for a
    :class:`_RequestContext` with the executor the context holds, making it when asked, instead of
    an entry of its own: ``SyncToAsync`` asks ``context in table`` and then ``table[context]``, and
    would otherwise make a plain ``ThreadPoolExecutor`` for a context with no entry. Any other
    context (Django's handler's, the URLconf mount's) has its entry here, as in asgiref's own.
    """

    def __contains__(self, key: object) -> bool:
        return type(key) is _RequestContext or super().__contains__(key)

    def __getitem__(self, key: ThreadSensitiveContext) -> Executor:
        if type(key) is _RequestContext:
            return key.executor()
        return super().__getitem__(key)

    def get(self, key: ThreadSensitiveContext, default: Any = None) -> Any:
        if type(key) is _RequestContext:
            return key.executor()
        return super().get(key, default)

    def __setitem__(self, key: ThreadSensitiveContext, value: Executor) -> None:
        if type(key) is _RequestContext:
            raise TypeError("a request's context holds its own executor")
        super().__setitem__(key, value)


if not isinstance(SyncToAsync.context_to_thread_executor, _ContextExecutors):  # once, however often imported
    SyncToAsync.context_to_thread_executor = _ContextExecutors(SyncToAsync.context_to_thread_executor)


def _hand_back(pool: ThreadPoolExecutor) -> Future[None]:
    """A request is done with ``pool``'s thread: the thread closes the connections Django closes at a
    request's end, then waits with the idle threads. Returns that close."""
    finished = pool.submit(_request_boundary)
    finished.add_done_callback(lambda _: _give_back(pool))
    return finished


def release_request_thread() -> None:
    """The current request is about to wait for as long as its client, a human or a worker takes (an
    open stream waiting for notifications, a call waiting for the client's answers or for a worker):
    its thread, if it has one and no job of its runs there, goes back to the idle threads after
    closing the connections Django closes at a request's end (``CONN_MAX_AGE``), as at the
    request's end. A later sync call of the request takes a thread again (the same one, if still
    idle, or another): the thread's state does not carry across the wait (the module's docstring).

    Otherwise each open stream held its thread and that thread's connection until it ended: a
    standalone ``GET`` stream for its session's life, whatever ``CONN_MAX_AGE`` said. Cheap when
    the request has no thread (most waits, once the first has given it back): a context lookup.
    Nothing outside a :class:`RequestThread` (under Django's handler, Django holds its request's thread).
    """
    context = _current_context.get(None)
    if type(context) is _RequestContext and (executor := context.running_executor()) is not None:
        executor.release()


def unfinished_jobs() -> list[Future[Any]]:
    """The sync jobs of the current :class:`RequestThread` that still run: a sync tool whose run was
    stopped (its ``time_limit``, a cancel) goes on in its thread, which Python cannot stop."""
    context = _current_context.get(None)
    executor = context.running_executor() if type(context) is _RequestContext else None
    if executor is None:
        return []
    return [job for job in executor._jobs if not job.done()]


def close_idle_threads() -> None:
    """End the idle request threads, each closing its database connections (tests before
    dropping their database; shutdown)."""
    with _idle_lock:
        idle = [pool for pool, _ in _idle]
        _idle.clear()
    for pool in idle:
        _end_thread(pool)
        pool.shutdown(wait=True)


def _forget_idle_threads_after_fork() -> None:
    # Threads do not survive a fork (a Celery prefork worker): the child starts its own.
    global _idle_lock
    _idle.clear()
    _idle_lock = threading.Lock()


if hasattr(os, "register_at_fork"):  # POSIX only (no fork on Windows)
    os.register_at_fork(after_in_child=_forget_idle_threads_after_fork)


class RequestThread:
    """``async with RequestThread():`` around one request: its thread-sensitive sync code runs in
    a thread of its own, started when the request first runs some, so requests no longer wait
    for each other's sync code. At the end the thread closes the database connections Django
    closes at a request's end (all of them with ``CONN_MAX_AGE = 0``) and waits, idle, for a
    later request (up to :data:`MAX_IDLE_THREADS`; past that it closes them all and ends: one
    left open in an ended thread would stay open until the garbage collector found it).

    Inside an enclosing context (the endpoint served as a Django view, under Django's ASGI
    handler) the enclosing request's thread serves, as asgiref does for nested contexts, so
    what the request's middleware set up in it applies (``transports/view.py`` gives the
    endpoint a context whose executor reaches that thread however Django holds it, and after
    the request, :func:`run_after_request`).
    A request that runs no sync code starts no thread: it costs about 2 µs.

    ``with RequestThread():`` does the same for sync code that hands one piece of work to an
    event loop in another thread and waits for it (a Celery task running a background call's
    round on the worker's loop): the coroutines it starts from inside inherit its context
    (``asyncio.run_coroutine_threadsafe`` and ``async_to_sync`` copy it), so their sync code
    runs in one request thread, under the same rules. Not on an event loop's thread: its exit
    waits for the thread to close its connections.
    """

    __slots__ = ("_token", "_context")
    _token: contextvars.Token[ThreadSensitiveContext] | None
    _context: _RequestContext

    def enter(self) -> None:
        """Enter the request's context (what ``async with`` does first): for a caller that leaves
        it itself with :meth:`leave`, without the two coroutines of ``async with``."""
        if _current_context.get(None) is not None:
            self._token = None
            return
        # What ThreadSensitiveContext.__aenter__ does for an outermost context; the executor its
        # calls run in is the context's own, made with the first (_RequestContext).
        context = self._context = _RequestContext()
        self._token = _current_context.set(context)

    def leave(self) -> Future[None] | None:
        """Leave the context :meth:`enter` entered; returns the closing of the request's thread to
        wait for (None when there is none), which ``async with`` awaits and ``with`` blocks on."""
        token = self._token
        if token is None:
            return None
        _current_context.reset(token)
        return self._context.end()

    async def __aenter__(self) -> None:
        self.enter()

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        closing = self.leave()
        if closing is not None:
            await asyncio.wrap_future(closing)

    def __enter__(self) -> None:
        self.enter()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        closing = self.leave()
        if closing is not None:
            closing.result()
