"""The store's own database thread, and the hop from a coroutine to it.

Coroutines cannot use the ORM on the event loop, so store functions run in a
thread (on SQLite in WAL mode, those that run nothing but the store's own
statements run on the event loop's thread instead, where they can: :mod:`.lane`). Channels' ``database_sync_to_async`` did that at about 100 µs a
hop on this path: asgiref's thread-sensitive executor machinery, a context
copy both ways, and ``close_old_connections()`` before *and* after every call,
which on PostgreSQL with ``CONN_HEALTH_CHECKS`` re-armed a ``SELECT 1`` round
trip for every hop (two of the eight round trips of an answering round).

Here a single thread, owned by the store, runs the store's functions from a
queue and hands each result back with ``loop.call_soon_threadsafe`` (about half
the cost of ``run_in_executor``'s two chained futures; the caller's
``contextvars`` are carried along), and keeps
Django's connection rules at the cost of one check per hop:

* a connection past its ``CONN_MAX_AGE``, or left in a broken state
  (``errors_occurred``, autocommit not restored), is closed before the next job,
  and after a job when its age is 0 (``CONN_MAX_AGE = 0`` keeps meaning "no
  persistent connection");
* health checks (``CONN_HEALTH_CHECKS``) run at most once per
  :data:`HEALTH_CHECK_SECONDS` per connection, as they would once per HTTP request
  in a Django view, instead of once per hop.

One thread keeps SQLite's writers in this process in line (no lock waits
between our own statements) and gives each process one connection per database
for its durable calls. ``ctx.once`` functions run in this thread too, inside
the transaction that journals them; a ``once`` function that itself waits on
the store (``async_to_sync`` of a store call) would wait on itself.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from django.db import close_old_connections, connections

logger = logging.getLogger("mcp_tools.store")

P = ParamSpec("P")
R = TypeVar("R")

#: How long a connection counts as checked (Django checks once per request; a hop is not a request).
HEALTH_CHECK_SECONDS = 1.0

#: A job, the loop that waits for it and its future (None, None: nobody waits, :func:`submit`).
Job = tuple[Callable[[], Any], "asyncio.AbstractEventLoop | None", "asyncio.Future[Any] | None"]

_lock = threading.Lock()
_jobs: queue.SimpleQueue[Job] | None = None
_last_check: dict[str, float] = {}


def _store_queue() -> queue.SimpleQueue[Job]:
    """The store thread's job queue (the thread starts with the first job of the process)."""
    global _jobs
    jobs = _jobs
    if jobs is None:
        with _lock:
            if _jobs is None:
                _jobs = queue.SimpleQueue()
                threading.Thread(target=_serve, args=(_jobs,), name="mcp-tools-store", daemon=True).start()
            jobs = _jobs
    return jobs


def _serve(jobs: queue.SimpleQueue[Job]) -> None:
    """The store thread: run jobs one at a time, hand each result to its event loop."""
    while True:
        run, loop, future = jobs.get()
        try:
            value = run()
        except BaseException as exc:  # the caller gets it, whatever it is; this thread goes on
            if loop is None or future is None:
                logger.exception("store job %r failed", run)
            else:
                _hand_over(loop, future, None, exc)
        else:
            if loop is not None and future is not None:
                _hand_over(loop, future, value, None)


def _hand_over(loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    try:
        loop.call_soon_threadsafe(_settle, future, value, error)
    except RuntimeError:  # the loop closed while the job ran: nobody waits for it
        pass


def _settle(future: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    if future.done():  # the caller was cancelled; the job ran to its end all the same
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)


def _forget_thread_after_fork() -> None:
    # A forked child (a Celery prefork worker) has the queue but not the thread.
    global _jobs
    _jobs = None
    _last_check.clear()


if hasattr(os, "register_at_fork"):  # POSIX only (no fork on Windows)
    os.register_at_fork(after_in_child=_forget_thread_after_fork)


def _before_job() -> None:
    now = time.monotonic()
    for connection in connections.all(initialized_only=True):
        if connection.connection is None:
            continue
        if connection.errors_occurred or (connection.close_at is not None and now >= connection.close_at) \
                or connection.get_autocommit() != connection.settings_dict["AUTOCOMMIT"]:
            connection.close_if_unusable_or_obsolete()
        elif connection.settings_dict.get("CONN_HEALTH_CHECKS") and now - _last_check.get(connection.alias, 0.0) >= HEALTH_CHECK_SECONDS:
            setattr(connection, "health_check_done", False)  # the next cursor checks the connection first
            _last_check[connection.alias] = now


def _after_job() -> None:
    now = time.monotonic()
    for connection in connections.all(initialized_only=True):
        if connection.connection is not None and connection.close_at is not None and now >= connection.close_at \
                and not connection.in_atomic_block:
            connection.close()


def _job(fn: Callable[..., R], args: tuple[Any, ...], kwargs: dict[str, Any]) -> R:
    _before_job()
    try:
        return fn(*args, **kwargs)
    finally:
        _after_job()


def db(fn: Callable[P, R]) -> Callable[P, Any]:
    """``fn`` (sync, uses the ORM) as a coroutine function that runs it in the store's thread."""

    @functools.wraps(fn)
    async def in_store_thread(*args: P.args, **kwargs: P.kwargs) -> R:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[R] = loop.create_future()
        context = contextvars.copy_context()
        _store_queue().put((functools.partial(context.run, _job, fn, args, kwargs), loop, future))
        return await future

    return in_store_thread


def submit(fn: Callable[[], Any]) -> None:
    """Run ``fn()`` in the store's thread after the jobs queued before it, waiting for nothing.

    For the store's own housekeeping (a checkpoint): ``fn`` touches no Django connection
    (no connection rules run around it), and what it raises is logged.
    """
    _store_queue().put((fn, None, None))


def close_thread_connections() -> None:
    """Close the calling thread's database connections (a thread about to end: Django keeps one
    per thread, and one left in an ended thread stays open until the process exits)."""
    connections.close_all()


def close_old_thread_connections() -> None:
    """What Django does in a request's thread as the request starts and ends (``request_started`` /
    ``request_finished``): close the calling thread's connections that are past ``CONN_MAX_AGE``
    (0, Django's default: every one), broken or left in a transaction, and have a kept one
    health-checked at its next use (``CONN_HEALTH_CHECKS``)."""
    close_old_connections()


async def close_store_thread_connections() -> None:
    """Close the store thread's database connections (tests before dropping their database; shutdown)."""
    if _jobs is None:
        return
    await db(connections.close_all)()
