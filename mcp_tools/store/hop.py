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
  in a Django view, instead of once per hop;
* on PostgreSQL, an idle connection the server has closed since (a restart, a failover,
  ``pg_terminate_backend``, ``idle_session_timeout``) is replaced before the job uses it,
  health checks or not, at no round trip (:func:`close_dropped_connections`).

One thread keeps SQLite's writers in this process in line (no lock waits
between our own statements) and gives each process one connection per database
for its durable calls. ``ctx.once`` functions run in this thread too, inside
the transaction that journals them; a ``once`` function that itself waits on
the store (``async_to_sync`` of a store call) would wait on itself.

Which is why the writes that say a call's runner is alive (a running round's
touch of its row, a worker's lease renewal: :func:`db_alive`) have a second
thread, with its own connection and the same connection rules: behind a ``once``
function that runs for longer than a few ``CANCEL_POLL_SECONDS`` (or a third of
``WORKER_LEASE_SECONDS``) they would leave a living owner looking dead, and
another process would take its round over and run the effect again.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import functools
import logging
import sqlite3
import os
import queue
import select
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, ParamSpec, TypeVar

from django.db import InterfaceError, OperationalError, close_old_connections, connections
from django.db.backends.base.base import BaseDatabaseWrapper

logger = logging.getLogger("mcp_tools.store")

P = ParamSpec("P")
R = TypeVar("R")

#: How long a connection counts as checked (Django checks once per request; a hop is not a request).
HEALTH_CHECK_SECONDS = 1.0

#: A job, the loop that waits for it and its future (None, None: nobody waits, :func:`submit`).
Job = tuple[Callable[[], Any], "asyncio.AbstractEventLoop | None", "asyncio.Future[Any] | None"]


class _Thread:
    """A thread that runs jobs from a queue one at a time, on database connections of its own
    (Django's are per thread); it starts with its first job (and again in a forked child)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.lock = threading.Lock()
        self.jobs: queue.SimpleQueue[Job] | None = None

    def queue(self) -> queue.SimpleQueue[Job]:
        jobs = self.jobs
        if jobs is None:
            with self.lock:
                if self.jobs is None:
                    self.jobs = queue.SimpleQueue()
                    threading.Thread(target=_serve, args=(self.jobs,), name=self.name, daemon=True).start()
                jobs = self.jobs
        return jobs

    def forget(self) -> None:
        """In a forked child: the queue was copied, not the thread."""
        self.lock = threading.Lock()  # another thread may have held it at the fork
        self.jobs = None


#: The store's thread: every store function, and the ``ctx.once`` effects with their transactions.
_store = _Thread("mcp-tools-store")
#: The thread of the writes that say a call's runner is alive (:func:`db_alive`). Not the store's:
#: that one may be inside a ``ctx.once`` transaction for as long as the user's effect takes.
_alive = _Thread("mcp-tools-store-alive")


#: Per thread (each has its own connections): alias -> when its connection was last health-checked.
_checked = threading.local()


def _serve(jobs: queue.SimpleQueue[Job]) -> None:
    """A job thread: run jobs one at a time, hand each result to its event loop."""
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
    # A forked child (a Celery prefork worker) has the queues but not the threads.
    _store.forget()
    _alive.forget()


if hasattr(os, "register_at_fork"):  # POSIX only (no fork on Windows)
    os.register_at_fork(after_in_child=_forget_thread_after_fork)


def _server_spoke(connection: BaseDatabaseWrapper) -> bool:
    """Whether the server sent something on an idle PostgreSQL connection since its last statement.

    A client sends a statement and reads its whole answer, so an idle connection's socket has
    nothing to read unless the server said something unasked: a backend that is terminated (a
    restart, a failover, ``pg_terminate_backend``, ``idle_session_timeout``) sends its FATAL error
    and closes the socket; rarely a notice, a parameter's new value, a ``NOTIFY``. A poll with no
    timeout, well under a microsecond and no round trip, instead of finding out with the job's
    first statement (``server closed the connection unexpectedly``).
    """
    try:
        fd = connection.connection.fileno()
    except Exception:  # psycopg refuses: the connection is closed (broken) already
        return True
    if _poll is not None:
        poller = _poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(0))
    return bool(select.select([fd], [], [], 0)[0])  # no poll() (Windows): its sockets are few


#: ``select.poll`` where the platform has it: unlike ``select.select``, it takes any descriptor (a
#: server with many sockets has descriptors past ``FD_SETSIZE``, 1024).
_poll = getattr(select, "poll", None)


def _dropped(connection: BaseDatabaseWrapper) -> bool:
    """Whether an open connection is an idle PostgreSQL one that the server has closed (:func:`_server_spoke`).

    Not one in a transaction (what it did is lost with it either way: the transaction fails).
    When the server sent something else (a notice), a ``SELECT 1`` tells which it was.
    """
    return connection.vendor == "postgresql" and not connection.in_atomic_block and _server_spoke(connection) \
        and not connection.is_usable()


def close_dropped_connections() -> None:
    """Close the calling thread's connections that the server has closed (:func:`_dropped`): the
    next use opens a new one, as after ``CONN_MAX_AGE``."""
    for connection in connections.all(initialized_only=True):
        if connection.connection is not None and _dropped(connection):
            connection.close()


def _before_job() -> None:
    now = time.monotonic()
    last_check: dict[str, float] | None = getattr(_checked, "at", None)
    if last_check is None:
        last_check = _checked.at = {}
    for connection in connections.all(initialized_only=True):
        if connection.connection is None:
            continue
        if _dropped(connection):
            connection.close()  # dropped by the server since its last job: the job's first use reconnects
            continue
        if connection.errors_occurred or (connection.close_at is not None and now >= connection.close_at) \
                or connection.get_autocommit() != connection.settings_dict["AUTOCOMMIT"]:
            connection.close_if_unusable_or_obsolete()
        elif connection.settings_dict.get("CONN_HEALTH_CHECKS") and now - last_check.get(connection.alias, 0.0) >= HEALTH_CHECK_SECONDS:
            setattr(connection, "health_check_done", False)  # the next cursor checks the connection first
            last_check[connection.alias] = now


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


def _in_thread(thread: _Thread, fn: Callable[P, R]) -> Callable[P, Any]:
    """``fn`` as a coroutine function that runs it in ``thread``, with the connection rules around it."""

    @functools.wraps(fn)
    async def in_thread(*args: P.args, **kwargs: P.kwargs) -> R:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[R] = loop.create_future()
        context = contextvars.copy_context()
        thread.queue().put((functools.partial(context.run, _job, fn, args, kwargs), loop, future))
        stopped = _on_stop.get()
        if stopped is None:
            return await future
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            # Stopped while the job runs: it runs to its end all the same, and its value decides what the stop ends.
            with contextlib.suppress(asyncio.CancelledError, Exception):
                stopped(await asyncio.shield(future))
            raise

    return in_thread


#: What a coroutine stopped (a ``CancelledError``) while its store job runs in a thread does with the
#: job's value, set by :func:`handing_over`.
_on_stop: contextvars.ContextVar[Callable[[Any], None] | None] = contextvars.ContextVar("mcp_tools_store_on_stop", default=None)


@contextlib.contextmanager
def handing_over(stopped: Callable[[Any], None] | None) -> Iterator[None]:
    """Within it, a store call whose coroutine is stopped while its job runs in a store thread (where
    the job runs to its end all the same) waits for the job and hands its value to ``stopped`` before
    the stop goes on. A job in the loop's SQLite lane (:mod:`.lane`) cannot be stopped midway: a stop
    lands before it starts, and nothing was done. No task per call: a round's writes take this path.
    None: no job within hands anything over (the lane's own opening, which is not the caller's job)."""
    token = _on_stop.set(stopped)
    try:
        yield
    finally:
        _on_stop.reset(token)


def db(fn: Callable[P, R]) -> Callable[P, Any]:
    """``fn`` (sync, uses the ORM) as a coroutine function that runs it in the store's thread."""
    return _in_thread(_store, fn)


def db_alive(fn: Callable[P, R]) -> Callable[P, Any]:
    """``fn`` (sync, one short write saying a call's runner is alive: a row's touch, a worker's lease)
    as a coroutine function that runs it in a thread of its own, on a connection of its own.

    Not in the store's thread: that one runs each ``ctx.once`` effect inside the transaction that
    journals it, for as long as the user's function takes, and a touch queued behind it would make
    a living owner look dead (its round taken over, the effect run again by another process). On
    PostgreSQL the touch does not wait for that transaction: its ``UPDATE`` of non-key columns
    (``FOR NO KEY UPDATE``) goes with the ``FOR KEY SHARE`` lock the step's insert takes on the call
    row. On SQLite it waits for the transaction's write lock where the transaction holds one (an
    ``IMMEDIATE`` one, or an effect that wrote), as does any takeover, which writes the row too.
    """
    return _in_thread(_alive, fn)


def alive_blocking(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn`` as :func:`db_alive` runs it (its thread, its connection rules), for a plain thread that waits
    for it: a worker's lease renewal, which must go on while the call's event loop is blocked."""

    @functools.wraps(fn)
    def blocking(*args: P.args, **kwargs: P.kwargs) -> R:
        done: concurrent.futures.Future[R] = concurrent.futures.Future()

        def job() -> None:
            try:
                done.set_result(_job(fn, args, kwargs))
            except BaseException as exc:  # the waiting thread gets it, whatever it is
                done.set_exception(exc)

        _alive.queue().put((job, None, None))
        return done.result()

    return blocking


def submit(fn: Callable[[], Any]) -> None:
    """Run ``fn()`` in the store's thread after the jobs queued before it, waiting for nothing.

    For the store's own housekeeping (a checkpoint): ``fn`` touches no Django connection
    (no connection rules run around it), and what it raises is logged.
    """
    _store.queue().put((fn, None, None))


def close_thread_connections() -> None:
    """Close the calling thread's database connections (a thread about to end: Django keeps one
    per thread, and one left in an ended thread stays open until the process exits)."""
    connections.close_all()


def close_old_thread_connections() -> None:
    """What Django does in a request's thread as the request starts and ends (``request_started`` /
    ``request_finished``): close the calling thread's connections that are past ``CONN_MAX_AGE``
    (0, Django's default: every one), broken or left in a transaction, and have a kept one
    health-checked at its next use (``CONN_HEALTH_CHECKS``); and those the server has closed
    meanwhile (:func:`close_dropped_connections`), which a health check would find only once
    ``CONN_HEALTH_CHECKS`` is on, with a round trip."""
    close_old_connections()
    close_dropped_connections()


#: The errors of the database failing as a whole (it refuses connections: down, restarting, at
#: ``max_connections``; it dropped ours), rather than one statement failing in it: what
#: :func:`database_unreachable` judges.
DATABASE_UNAVAILABLE: tuple[type[Exception], ...] = (OperationalError, InterfaceError)
#: SQLite's primary result codes that say its file cannot be used now: BUSY, LOCKED, NOMEM, IOERR,
#: FULL, CANTOPEN. Its other errors are a statement's own ("no such table" before migrate:
#: PostgreSQL's ProgrammingError), not worth a retry.
_SQLITE_UNAVAILABLE = frozenset({5, 6, 7, 10, 13, 14})


def database_unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` says the database cannot be used now (a client may retry: 503), not that a
    statement failed in it (a 500): on every database alike."""
    if not isinstance(exc, DATABASE_UNAVAILABLE):
        return False
    cause = exc.__cause__
    if isinstance(cause, sqlite3.Error):
        code = getattr(cause, "sqlite_errorcode", None)  # extended code: its low byte is the primary one
        return code is not None and code & 0xFF in _SQLITE_UNAVAILABLE
    return True


def longest_conn_max_age() -> float | None:
    """The longest ``CONN_MAX_AGE`` of the configured databases: how long a thread's connections
    may live. None when one keeps its connections for good (``CONN_MAX_AGE = None``)."""
    longest = 0.0
    for settings in connections.settings.values():
        age = settings.get("CONN_MAX_AGE", 0)
        if age is None:
            return None
        longest = max(longest, float(age))
    return longest


async def close_store_thread_connections() -> None:
    """Close the database connections of the store's threads (tests before dropping their database; shutdown)."""
    for thread in (_store, _alive):
        if thread.jobs is not None:
            await _in_thread(thread, connections.close_all)()
