"""Background work: calls that a Celery worker runs instead of the request that started them.

A background call is the same ``ToolCall`` row and journal as any other. The
request that starts it (a ``background=True`` tool, or a handler that awaited
``ctx.defer()``) writes the row, and queues ``mcp_tools.run_call`` once that
write has committed. A worker claims the call with a lease (compare-and-set),
runs the handler from its journal, renews the lease while it runs, and writes
the outcome to the row: a result, or ``input_required`` when the handler asks
the client something (the worker is then free; answering queues the call again).

A worker that dies stops renewing its lease; the periodic sweep
(:func:`sweep`, the ``mcp_tools.sweep`` task: Celery beat and each worker's start) queues its
calls again, and their journaled ``ctx.once`` effects do not repeat. A call
whose runs keep losing their worker (killed by Celery's hard time limit, out
of memory) ends failed past :func:`lost_worker_limit`, rather than run forever.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import logging
import os
import socket
import threading
import time
import uuid
from datetime import timedelta
from typing import Any

from asgiref.sync import sync_to_async
from django.utils import timezone

from .. import engine, store
from ..conf import mcp_settings
from ..interprocess import cancellation, wakeups
from ..protocol import jsonrpc, versions
from ..protocol.errors import McpError
from ..registry import Tool, registry
from ..states import WireFlavor
from . import core, resumable
from .threads import unfinished_jobs
from .auth import Principal
from .context import RequestContext

logger = logging.getLogger("mcp_tools.background")

RUN_TASK = "mcp_tools.run_call"


def worker_name() -> str:
    """This worker process, as shown in the admin (host and pid)."""
    return f"{socket.gethostname()}:{os.getpid()}"


def send(call_id: str, tool: Tool | None, task_id: str) -> None:
    """Queue the worker task of a call (sync; after the row committed)."""
    from celery import current_app

    options: dict[str, Any] = {"task_id": task_id}
    if tool is not None and tool.queue:
        options["queue"] = tool.queue
    if tool is not None and tool.time_limit:
        # Celery's hard limit is the backstop; the handler's own limit ends it cleanly first.
        options["time_limit"] = tool.time_limit + float(mcp_settings.WORKER_LEASE_SECONDS)
    current_app.send_task(RUN_TASK, args=[call_id], **options)


def _queue_after_commit(call_id: str, tool: Tool | None, task_id: str) -> None:
    store.sync_calls.after_commit(lambda: _send_or_leave_for_sweep(call_id, tool, task_id))


def _send_or_leave_for_sweep(call_id: str, tool: Tool | None, task_id: str) -> None:
    """Queue the call; if the broker refuses (down, unreachable), the row says nothing is queued for it
    (an empty task id) and the sweep queues it again, rather than the call waiting for a worker forever."""
    try:
        send(call_id, tool, task_id)
    except Exception:
        logger.exception("Could not queue background call %s; the sweep will queue it again", call_id)
        store.sync_calls.not_queued(call_id, task_id)


#: How long a request waits for the broker to take a call's message. Past it the request goes on (the
#: row is queued with a deadline, and the sweep queues the call again if no worker claims it by then):
#: a stalled broker (a Redis that accepts and never answers) held the send with no timeout.
BROKER_SEND_SECONDS = 5.0
#: The threads that hand messages to the broker for requests: never the store's thread, whose every
#: journal write and ctx.once effect waited behind a stalled send (every durable call of the process).
_senders = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="mcp-tools-broker")


async def _queue(call_id: str, tool: Tool | None, task_id: str) -> None:
    """Queue a call whose row has committed, from a request: on a sender thread, waiting at most
    :data:`BROKER_SEND_SECONDS`. A broker that refuses leaves the call for the sweep, as
    :func:`_send_or_leave_for_sweep` does; one that does not answer in time, too (its send goes on
    in its thread, and a late message finds the call claimed or queued again: a worker runs it once)."""
    # In the request's context, as the store's thread ran it: Celery's publish hooks read it (a request
    # or trace id copied into the task's headers: django-guid, OpenTelemetry, Sentry).
    sent = asyncio.get_running_loop().run_in_executor(_senders, contextvars.copy_context().run, send, call_id, tool, task_id)
    try:
        await asyncio.wait_for(asyncio.shield(sent), BROKER_SEND_SECONDS)
    except asyncio.TimeoutError:
        logger.warning("The broker did not take background call %s within %.0f s; the sweep will queue it again if no "
                       "worker claims it", call_id, BROKER_SEND_SECONDS)
    except Exception:
        logger.exception("Could not queue background call %s; the sweep will queue it again", call_id)
        await store.db(store.sync_calls.not_queued)(call_id, task_id)


async def defer(inv: engine.Invocation, target: core.Target, rc: RequestContext, round_number: int) -> str:
    """Hand a call to a worker: write (or update) its row as a background call, then queue it.

    Returns the call id. Steps the handler journaled before deferring are kept;
    the worker replays them.
    """
    try:
        return await _hand_over(inv, target, round_number)
    except asyncio.CancelledError as exc:  # the request stopped (its client left) before a worker had the call
        await core.end_before_hand_off(inv, exc)
        raise


async def _hand_over(inv: engine.Invocation, target: core.Target, round_number: int) -> str:
    task_id = str(uuid.uuid4())
    # Queued with a deadline: if no worker claims the call by then (its message was lost, or never
    # sent: this process died after the commit), the sweep queues it again.
    fields: dict[str, Any] = {"background": True, "celery_task_id": task_id,
                              "queued_until": timezone.now() + timedelta(seconds=queue_wait(0))}
    if inv.call_id is None:
        inv.state["row_fields"] = {**inv.state.get("row_fields", {}), **fields}
        call_id = await core.ensure_row(inv, status="working")
    else:
        call_id = inv.call_id
        # A retry of the round that deferred is told the call is on a worker (core.repeat_outcome).
        fields["last_outcome"] = {"round": round_number, "on_worker": True}
        if not await store.save_round(call_id, round_number, [s for s in inv.journal.steps if not s.persisted], status="working", **fields):
            raise core.call_ended_error(await core.status_of(call_id))
    await _queue(call_id, target.tool, task_id)  # its row committed above (ensure_row / save_round)
    inv.state["handed_off"] = True  # a worker runs it now: a stop of the request no longer ends it (core)
    return call_id


async def requeue(call_id: str) -> None:
    """Queue a background call again (its answers are in), with a queue deadline (see :func:`defer`)."""
    loaded = await store.load_call(call_id)
    if loaded is None:
        return
    row, _ = loaded
    task_id = str(uuid.uuid4())
    if not await store.db(store.sync_calls.queue_call)(call_id, task_id, queue_wait(0)):
        return  # a worker claimed it meanwhile (another message for it came first): it runs there
    await _queue(call_id, registry.get_tool(row.tool_name), task_id)  # queue_call committed


async def go_on_if_answered(call_id: str) -> bool:
    """Queue a background call again once every request it waits on is answered; whether this did.

    Whoever records a task's last answer calls it (``tasks/update``, a client's response on any
    of the caller's streams, the stream that carries the task): the round's compare-and-set lets
    exactly one of them queue it, and a call answered with no stream open still goes on.
    """
    loaded = await store.load_call(call_id)
    if loaded is None:
        return False
    row, journal = loaded
    if row.status != "input_required" or journal.pending or not await store.claim_round(call_id, row.round):
        return False
    await requeue(call_id)
    return True


#: What a call whose user was deactivated or deleted since it was made fails with, instead of running.
CALLER_GONE_MESSAGE = "The call cannot run: the caller is no longer allowed (their account was deactivated or deleted)."


class CallerGone(Exception):
    """The call's user was deactivated or deleted since the call was made (see :func:`_principal_of`)."""


def _principal_of(row: Any) -> Principal:
    """The caller a worker runs ``row`` as: its user as the database has it now, with the row's scopes.

    A call made by a user (a ``user`` on the row, or a ``user:<pk>`` principal whose user was
    deleted: the column is then null) whose account is no longer active or present raises
    :class:`CallerGone`: the endpoint refuses that user, so neither a queued call nor a retry
    (the admin's) may run for them. It ran as ``AnonymousUser`` before, even where
    ``ALLOW_ANONYMOUS`` is off. Calls with no user (anonymous callers, user-less OAuth clients
    and tokens) run as ``AnonymousUser``, as they were made.
    """
    from django.contrib.auth.models import AnonymousUser

    if row.user_id is None and not str(row.principal).startswith("user:"):
        user: Any = AnonymousUser()
    elif row.user is None or not getattr(row.user, "is_active", True):
        raise CallerGone(row.principal)
    else:
        user = row.user
    # The token's scopes travel with the call: without them every scope check would pass on the worker.
    scopes = frozenset(row.scopes) if row.scopes is not None else None
    # The row's id is fitted already (``fit_principal_id`` is not idempotent): kept as stored.
    return Principal(user=user, id=row.principal, scopes=scopes, stored=True)


class RetryCall(Exception):
    """The handler raised an exception of its tool's ``retry_on``: run the call again in ``countdown``
    seconds, as Celery task ``task_id``, the one the call waits for (a new id: see :func:`run_in_worker`)."""

    def __init__(self, countdown: float, task_id: str) -> None:
        super().__init__(countdown, task_id)
        self.countdown = countdown
        self.task_id = task_id


_loop: asyncio.AbstractEventLoop | None = None
_loop_lock = threading.Lock()


def worker_loop() -> asyncio.AbstractEventLoop:
    """This worker process's event loop, in a thread of its own, started on first use.

    Every call this process runs shares it, so what lives as long as the process (the
    shared channel layer's connections, the cancellation listener) lives on one loop.
    A loop per task (``async_to_sync``) had to wind those down at the end of each
    task: with channels-redis that waited out a blocked read, 5 s per task.
    """
    global _loop
    with _loop_lock:
        if _loop is None or _loop.is_closed():  # closed: its thread ended (_run_loop)
            _loop = asyncio.new_event_loop()
            threading.Thread(target=_run_loop, args=(_loop,), name="mcp-tools-worker-loop", daemon=True).start()
        return _loop


def _run_loop(loop: asyncio.AbstractEventLoop) -> None:
    """The worker loop's thread: run ``loop`` until it stops, then close it.

    asyncio lets a ``SystemExit`` or ``KeyboardInterrupt`` raised in a task or a callback out of
    ``run_forever`` (a handler's own is a tool error, ``core.execute``; not one of code around it),
    and ``loop.stop()`` ends it too. The thread ends then, and the loop with it: closed, it is seen
    to be gone by :func:`worker_loop`, which starts another, and by the task bodies waiting on its
    calls (:func:`run_call_sync`). Left open, it was handed out again, and every call sent to it, and
    every task body waiting on one, waited forever.
    """
    try:
        loop.run_forever()
    except BaseException:
        logger.critical("The worker's event loop stopped on an exception; the calls it ran are left to the sweep", exc_info=True)
    finally:
        loop.close()


def _forget_loop_after_fork() -> None:
    # A forked child (a Celery prefork worker) has no thread running its parent's loop: a
    # call sent to that loop would wait forever. The child starts its own on first use.
    global _loop, _loop_lock
    _loop = None
    _loop_lock = threading.Lock()  # another thread may have held it at the fork


if hasattr(os, "register_at_fork"):  # POSIX only (no fork on Windows)
    os.register_at_fork(after_in_child=_forget_loop_after_fork)


#: How often a task body waiting for its call's run checks that the worker loop still runs (:func:`run_call_sync`).
LOOP_CHECK_SECONDS = 1.0


class _Round:
    """What the task learns of the round it ran on the loop: whether its tool's function is sync
    code of the task's request thread (a sync, thread-sensitive tool), which a stop cannot end."""

    __slots__ = ("sync_tool",)

    def __init__(self) -> None:
        self.sync_tool = False


def run_call_sync(call_id: str, worker: str, task_id: str | None = None) -> str:
    """The body of the ``mcp_tools.run_call`` Celery task ``task_id``: one round, on this process's loop.

    Inside the task's :class:`~mcp_tools.server.threads.RequestThread`: when the round of a sync tool
    ended while its function still runs (its ``time_limit``, a cancel), it returns once that function
    is done, or gave up waiting for it (:func:`wait_for_sync_tool`).
    """
    started = time.monotonic()
    ran = _Round()
    loop = worker_loop()
    future = asyncio.run_coroutine_threadsafe(run_in_worker(call_id, worker, task_id, ran), loop)
    try:
        # Not future.result() alone: a loop that stopped under the call never completes it.
        while not future.done():
            if loop.is_closed() and not future.done():
                # Its lease keeper stops with the loop: the lease runs out, and the sweep hands the call
                # to a worker again (a lost worker, counted). This task fails, logged.
                raise RuntimeError(f"The worker's event loop stopped while it ran background call {call_id}")
            concurrent.futures.wait((future,), timeout=LOOP_CHECK_SECONDS)
        return future.result()
    except (asyncio.CancelledError, concurrent.futures.CancelledError):
        # The call ended (cancelled, expired, taken over) while this worker ran it; the row says so.
        return "stopped"
    finally:
        if ran.sync_tool:
            wait_for_sync_tool(call_id, _hard_limit_left(started))


def _hard_limit_left(started: float) -> float | None:
    """Seconds left, from ``started`` (``time.monotonic()``), to the hard time limit of the Celery task
    running now (its message's, else the task's default, ``task_time_limit``); None without one."""
    from celery import current_task

    if current_task is None:
        return None
    limit = (getattr(current_task.request, "timelimit", None) or (None, None))[0] or current_task.time_limit
    return None if not limit else max(0.0, float(limit) - (time.monotonic() - started))


def wait_for_sync_tool(call_id: str, at_most: float | None) -> bool:
    """Wait, at most ``at_most`` seconds (None: ``WORKER_LEASE_SECONDS``), for the sync tool's function
    of this task's round that still runs after the round ended; whether it ended.

    A sync tool runs in a thread, which Python cannot stop: past its ``time_limit`` (or a cancel)
    the call has ended, and the function runs on. The task waits for it rather than return, so the
    worker takes no other call while it runs (its concurrency is what it says), up to Celery's hard
    limit (the time limit plus ``WORKER_LEASE_SECONDS``), which on the prefork pool ends it with the
    process: the function's effects after the client was told the call failed last at most that long.
    Where no hard limit fires (a pool that enforces none: ``threads``, ``solo``), the wait ends when
    it was due; without one (no ``time_limit``, no ``task_time_limit``: a cancelled call), after
    ``WORKER_LEASE_SECONDS``. The task then logs an error and returns, and the function runs on in
    its thread while the worker takes other calls. Only a sync tool's own function is waited for
    (:func:`run_call_sync`): an async tool's abandoned ``sync_to_async`` calls are not.
    """
    running = unfinished_jobs()
    if not running:
        return True
    limit = float(mcp_settings.WORKER_LEASE_SECONDS) if at_most is None else at_most
    logger.warning("Background call %s ended while its sync tool's function still runs (a thread cannot be stopped): "
                   "this worker waits for it, at most %g s, before it takes another call", call_id, limit)
    _, still_running = concurrent.futures.wait(running, timeout=limit)
    if still_running:
        logger.error("Background call %s: its sync tool's function still runs after %g s; this worker stops waiting "
                     "for it and takes other calls while it runs on in its thread", call_id, limit)
        return False
    return True


async def run_in_worker(call_id: str, worker: str, task_id: str | None = None, ran: _Round | None = None) -> str:
    """Run one round of a background call on this worker, for the message of Celery task ``task_id``.
    Returns what happened, for the log; ``ran`` (the task's) learns whether its tool is sync code of the
    task's request thread (:func:`run_call_sync`).

    ``claimed-elsewhere`` when another worker holds a valid lease, the call waits for its
    ``retry_on`` retry (a task of its own id, :class:`RetryCall`) and ``task_id`` is another task
    (the one whose run raised, delivered again, included), or it is not waiting for a worker
    (finished, cancelled, waiting for input); ``expired`` when it waited past its expiry
    (it is marked so, and does not run). The attempt (for ``retry_on``) is the row's count.
    """
    lease = float(mcp_settings.WORKER_LEASE_SECONDS)
    if not await store.claim_for_worker(call_id, worker, lease, task_id):
        # A call that waited past its expiry (in the broker, or for a dead worker's lease) ends so
        # now, not at the next sweep: its task reads failed with the expiry's message at once.
        if await store.expire_overdue(call_id):
            return "expired"
        return "claimed-elsewhere"
    loaded = await store.load_call(call_id)
    if loaded is None:
        return "gone"
    row, journal = loaded
    try:
        principal = await sync_to_async(_principal_of)(row)
    except CallerGone:
        logger.warning("Background call %s cannot run: its caller %s is no longer active or was deleted", call_id, row.principal)
        return await _fail_unrun(row, worker, CALLER_GONE_MESSAGE)
    rc = RequestContext(
        principal=principal, protocol_version=row.protocol_version, modern=versions.is_modern(row.protocol_version),
        client_capabilities=row.client_capabilities or {}, request_id=jsonrpc.id_from_text(row.request_id),
        session_id=row.session_id or None, flavor=row.flavor, progress_token=row.progress_token,
    )
    try:
        target = await core.resolve_target("tools/call", row.arguments, principal)
    except Exception as exc:  # the tool is gone, or the caller lost the permission since
        logger.warning("Background call %s cannot run: %s", call_id, exc)
        return await _fail_unrun(row, worker, f"The call cannot run: {getattr(exc, 'message', exc)}")
    if row.lost_workers > lost_worker_limit(target.tool):
        # Each run of it lost its worker (killed by Celery's hard time limit, or out of memory):
        # running it again would only repeat its effects (those not in ctx.once) on the next worker.
        logger.error("Background call %s lost its worker %d times; it fails instead of running again", call_id, row.lost_workers)
        return await _fail_unrun(row, worker, lost_workers_message(row.lost_workers))
    for step in journal.steps:
        step.persisted = True
    inv = core.new_invocation(target, rc, journal, call_id)
    inv.in_worker = True
    inv.cursor = resumable.row_cursor(row.arguments)  # the page it runs (a resumed paginate=True tool)
    inv.state["worker"] = worker  # every write of this run is on condition that this worker still holds the call
    tool = target.tool
    if ran is not None:
        # Only a thread-sensitive sync tool's function is a job of the task's request thread.
        ran.sync_tool = not inv.is_async and inv.thread_sensitive
    attempt = row.retries
    heartbeat = _LeaseKeeper(inv, call_id, worker, lease, asyncio.current_task(), _ttl_left(row)).start()
    started = time.monotonic()
    try:
        try:
            outcome = await core.execute(target, inv)  # the tool's time_limit applies in there
            # A converging tool's polls for a client without resume tokens run here, under the lease.
            outcome = await core.converge_on_worker(inv, target, rc, outcome, started)
        except McpError as exc:
            # A protocol error: the call failed (a task reports it as "failed" with this error).
            error = {"code": exc.code, "message": exc.message, **({"data": exc.data} if exc.data is not None else {})}
            if not await store.save_round(call_id, row.round, [s for s in inv.journal.steps if not s.persisted], held_by=worker,
                                          status="failed", error=error, worker="", lease_expires_at=None, finished_at=timezone.now()):
                return "stopped"
            await wakeups.notify(call_id)
            return "failed"
        except Exception as exc:  # the tool's retry_on exceptions, and the database unreachable (see core.execute)
            assert tool is not None
            if not isinstance(exc, tool.retry_on):
                # The store failed under the handler: nothing can be written now. The task fails,
                # the lease runs out and the sweep queues the call again (a lost worker, counted).
                raise
            if attempt < tool.max_retries:
                logger.info("Background call %s raised %r; retry %d of %d", call_id, exc, attempt + 1, tool.max_retries)
                countdown = tool.retry_backoff * 2**attempt
                # The lease covers the wait for the retry: if its message never comes (the broker lost
                # it, or refused it), the sweep finds the call past that lease and queues it again.
                # Until then only the retry's message claims the call: another message for it would
                # run it at once. The retry is a task of its own id, not Celery's usual retry under
                # the same id: a copy of this task's message delivered again (a visibility timeout, a
                # worker lost before it acknowledged) would have the retry's id and take the call early.
                # The count is the row's, which a new message does not reset.
                retry_task_id = str(uuid.uuid4())
                if not await store.save_round(call_id, row.round, [s for s in inv.journal.steps if not s.persisted],
                                              held_by=worker, worker="", retries=attempt + 1, celery_task_id=retry_task_id,
                                              lease_expires_at=timezone.now() + timedelta(seconds=countdown + lease)):
                    return "stopped"
                # The retry runs failed effects again: that is what retry_on is for.
                await store.db(store.sync_calls.drop_failed_once_steps)(call_id)
                raise RetryCall(countdown, retry_task_id) from exc
            # The exception's own text is the server's (a driver's or a client library's: hosts,
            # users, DSNs), as core.internal_error_text says: the log has it, the client its class.
            logger.error("Background call %s failed after %d attempts", call_id, attempt + 1, exc_info=exc)
            outcome = core.error_result(retries_exhausted_text(attempt + 1, exc))
    finally:
        heartbeat.stop()
    if heartbeat.ttl_ran_out():
        # The task's ttl ran out while it ran: it ended expired (the lease keeper's renewal at the ttl
        # ended it and stopped the handler), or it ends so now. A result that came after the ttl is
        # not written: the task is failed ("The task expired before it finished.").
        await store.expire_overdue(call_id)
        if await core.status_of(call_id) == "expired":
            await wakeups.notify(call_id)
            return "expired"
    if inv.state.get("lease_lost"):
        return "stopped"  # the call ended, or another worker runs it now: this run writes nothing more
    try:
        if isinstance(outcome, engine.NeedsInput):
            await core.suspend(inv, rc, row.round, worker="", lease_expires_at=None)
            return "input-required"
        await core.finish(inv, target, outcome, rc, row.round, worker="", lease_expires_at=None)
    except McpError:  # the row moved on meanwhile (ended, or taken over): it keeps what it says
        return "stopped"
    return "finished"


def retries_exhausted_text(attempts: int, exc: BaseException) -> str:
    """The tool error of a call whose ``retry_on`` exception outlasted its retries: how many attempts,
    the exception's class, and never its text (a driver's message names hosts, users, DSNs)."""
    tries = "1 attempt" if attempts == 1 else f"{attempts} attempts"
    return f"The call failed after {tries} ({type(exc).__name__}); the server log has the details."


def _ttl_left(row: Any) -> float | None:
    """Seconds until the ttl of the task ``row`` runs out, if a ttl ends it while it runs: a 2025-11-25
    task's, the client's own limit on the whole task, which no lease holds off (``managers._held_by_lease``).
    None for any other call: its expiry (``CALL_TTL``, a 2026-07-28 task's ``ttlMs`` too) is how long it
    may wait, not run."""
    if row.expires_at is None or row.flavor != WireFlavor.TASK:
        return None
    return (row.expires_at - timezone.now()).total_seconds()


def lost_worker_limit(tool: Tool | None) -> int:
    """How many lost workers a call of ``tool`` survives: its ``max_retries`` plus one.

    A worker is lost when its lease runs out while it holds the call: the process died (killed
    by Celery's hard time limit, out of memory, its machine gone). The call is taken over up to
    this many times; the worker that would run it once more ends it failed instead.
    """
    return (tool.max_retries if tool is not None else 0) + 1


def lost_workers_message(times: int) -> str:
    """The tool error of a call that lost more workers than :func:`lost_worker_limit` allows."""
    return (f"The call failed: the worker running it was lost {times} times (killed by Celery's hard time limit, "
            "out of memory, or its machine gone); it is not run again.")


async def _fail_unrun(row: Any, worker: str, message: str) -> str:
    """End a call this worker claimed but will not run, failed with ``message`` as a tool error."""
    call_id = str(row.id)
    result = core.error_result(message)
    if not await store.save_round(call_id, row.round, [], held_by=worker, status="failed", result=result, status_message=message,
                                  worker="", lease_expires_at=None, finished_at=timezone.now(),
                                  last_outcome={"round": row.round, "answer": result}):
        return "stopped"
    await wakeups.notify(call_id)
    return "failed"


#: How long past a task's ttl its lease keeper renews (then ends it): the expiry is "past", strictly.
TTL_MARGIN_SECONDS = 0.01


class _LeaseKeeper:
    """Renews the lease of the call a worker runs, every third of ``lease``, from a thread of its own.

    Not a task on the call's event loop: a handler that blocks that loop (a sync client library in an
    async tool) would stop the renewals, and another worker would take the call over and run it too
    while this one still does. The writes go through the store's "alive" thread (:func:`store.db_alive`),
    so a long sync ``ctx.once`` effect does not hold them up either. When a renewal finds the call
    ended or held by another worker, the handler is stopped (on its loop) and the run writes nothing more.

    A task whose ttl ends it while it runs (``ttl_left`` seconds from now) is renewed once more as
    that ttl runs out: the renewal ends it ``expired`` (:meth:`~mcp_tools.managers.ToolCallManager.renew_lease`),
    and the handler stops then, not at the next renewal or sweep.
    """

    def __init__(self, inv: engine.Invocation, call_id: str, worker: str, lease: float, handler: asyncio.Task[Any] | None,
                 ttl_left: float | None = None) -> None:
        self.inv, self.call_id, self.worker, self.lease, self.handler = inv, call_id, worker, lease, handler
        self.ttl_at = None if ttl_left is None else time.monotonic() + ttl_left
        self.loop = asyncio.get_running_loop()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._renew, name=f"mcp-tools-lease-{call_id}", daemon=True)

    def ttl_ran_out(self) -> bool:
        """Whether the ttl of the task this run holds has run out (False for a call without one)."""
        return self.ttl_at is not None and time.monotonic() >= self.ttl_at

    def _next_wait(self) -> float:
        """Seconds to the next renewal: a third of the lease, or the task's ttl if that comes first."""
        if self.ttl_at is None:
            return self.lease / 3
        return min(self.lease / 3, max(0.0, self.ttl_at - time.monotonic()) + TTL_MARGIN_SECONDS)

    def start(self) -> _LeaseKeeper:
        self.thread.start()
        return self

    def stop(self) -> None:
        """The run is over: no more renewals (one under way does nothing to the run)."""
        self.stopped.set()

    def _renew(self) -> None:
        while not self.stopped.wait(self._next_wait()) and not self.loop.is_closed():  # closed: the run is gone with it
            try:
                renewed = store.renew_lease_blocking(self.call_id, self.worker, self.lease, ends_with_ttl=self.ttl_at is not None)
            except Exception:
                # The database is down, or locked past its timeout (SQLite: a ctx.once effect's
                # transaction holds the write lock, as it would hold off another worker's claim):
                # try again at the next third, rather than let the lease run out unrenewed.
                logger.warning("Could not renew the lease of call %s", self.call_id, exc_info=True)
                continue
            if not renewed:
                with contextlib.suppress(RuntimeError):  # the loop closed: nothing left to stop
                    self.loop.call_soon_threadsafe(self._lost)
                return

    def _lost(self) -> None:
        if self.stopped.is_set() or self.handler is None:
            return  # the run ended meanwhile; its writes are compare-and-set on this worker anyway
        # The call ended (cancelled, expired) or another worker took it over: stop here, as
        # neither a cancel of ours (the row is not this run's to end) nor a result written over.
        self.inv.state["lease_lost"] = True
        cancellation.stop_task(self.handler)


def queue_wait(requeues: int) -> float:
    """How long a call queued for the ``requeues``-th time waits for a worker before the sweep queues it
    again: ``WORKER_LEASE_SECONDS``, doubled each time up to 16 times that (a long backlog is not a lost
    message, and its calls should not be queued again and again)."""
    return float(mcp_settings.WORKER_LEASE_SECONDS) * 2 ** min(requeues, 4)


def sweep() -> dict[str, int]:
    """Periodic housekeeping (sync): expire overdue calls, queue again calls whose worker or message was lost.

    A call whose worker was lost is counted (``lost_workers``); the worker that claims it next
    fails it once that count is past :func:`lost_worker_limit`, rather than run it again.
    """
    expired = store.sync_calls.expire_overdue()
    requeued = 0
    for call_id, tool_name, requeues in store.sync_calls.orphaned_background_calls():
        task_id = str(uuid.uuid4())
        if store.sync_calls.requeue_orphan(call_id, requeues, task_id, queue_wait(requeues + 1)):
            _queue_after_commit(call_id, registry.get_tool(tool_name), task_id)
            requeued += 1
    if requeued:
        logger.warning("Queued %d background call(s) again after their worker or their message was lost", requeued)
    return {"expired": expired, "requeued": requeued}



def retry_failed(call_id: str) -> str | None:
    """Run a failed background call again, as a new call with the same arguments and caller (sync).

    A call that ended stays as it ended (terminal states do not change); the new
    call's status message names the one it retries. Returns the new call id, or
    None when ``call_id`` is not a failed background call.
    """
    copy = store.sync_calls.copy_failed_background_call(call_id, str(uuid.uuid4()), queue_wait(0))
    if copy is None:
        return None
    new_id, tool_name, task_id = copy
    _queue_after_commit(new_id, registry.get_tool(tool_name), task_id)
    return new_id
