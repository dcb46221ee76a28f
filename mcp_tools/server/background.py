"""Background work: calls that a Celery worker runs instead of the request that started them.

A background call is the same ``ToolCall`` row and journal as any other. The
request that starts it (a ``background=True`` tool, or a handler that awaited
``ctx.defer()``) writes the row, and queues ``mcp_tools.run_call`` once that
write has committed. A worker claims the call with a lease (compare-and-set),
runs the handler from its journal, renews the lease while it runs, and writes
the outcome to the row: a result, or ``input_required`` when the handler asks
the client something (the worker is then free; answering queues the call again).

A worker that dies stops renewing its lease; the periodic sweep
(:func:`sweep`, the ``mcp_tools.sweep`` task and ``mcp_cleanup``) queues its
calls again, and their journaled ``ctx.once`` effects do not repeat.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import socket
import threading
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
from . import core
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
        store.sync_calls.set_task_id(call_id, "")


async def defer(inv: engine.Invocation, target: core.Target, rc: RequestContext, round_number: int) -> str:
    """Hand a call to a worker: write (or update) its row as a background call, then queue it.

    Returns the call id. Steps the handler journaled before deferring are kept;
    the worker replays them.
    """
    task_id = str(uuid.uuid4())
    fields: dict[str, Any] = {"background": True, "celery_task_id": task_id}
    if inv.call_id is None:
        inv.state["row_fields"] = {**inv.state.get("row_fields", {}), **fields}
        call_id = await core.ensure_row(inv, status="working")
    else:
        call_id = inv.call_id
        # A retry of the round that deferred is told the call is on a worker (core.repeat_outcome).
        fields["last_outcome"] = {"round": round_number, "on_worker": True}
        if not await store.save_round(call_id, round_number, [s for s in inv.journal.steps if not s.persisted], status="working", **fields):
            raise core.call_ended_error(await core.status_of(call_id))
    await store.db(_queue_after_commit)(call_id, target.tool, task_id)
    return call_id


async def requeue(call_id: str) -> None:
    """Queue a background call again (its answers are in, or its worker died)."""
    loaded = await store.load_call(call_id)
    if loaded is None:
        return
    row, _ = loaded
    task_id = str(uuid.uuid4())
    await store.db(store.sync_calls.set_task_id)(call_id, task_id)
    await store.db(_queue_after_commit)(call_id, registry.get_tool(row.tool_name), task_id)


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


def _principal_of(row: Any) -> Principal:
    from django.contrib.auth.models import AnonymousUser

    user = row.user if row.user is not None and row.user.is_active else AnonymousUser()
    # The token's scopes travel with the call: without them every scope check would pass on the worker.
    scopes = frozenset(row.scopes) if row.scopes is not None else None
    # The row's id is fitted already (``fit_principal_id`` is not idempotent): kept as stored.
    return Principal(user=user, id=row.principal, scopes=scopes, stored=True)


class RetryCall(Exception):
    """The handler raised an exception of its tool's ``retry_on``: run the call again later."""

    def __init__(self, countdown: float) -> None:
        super().__init__(countdown)
        self.countdown = countdown


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
        if _loop is None or _loop.is_closed():
            _loop = asyncio.new_event_loop()
            threading.Thread(target=_loop.run_forever, name="mcp-tools-worker-loop", daemon=True).start()
        return _loop


def _forget_loop_after_fork() -> None:
    # A forked child (a Celery prefork worker) has no thread running its parent's loop: a
    # call sent to that loop would wait forever. The child starts its own on first use.
    global _loop, _loop_lock
    _loop = None
    _loop_lock = threading.Lock()  # another thread may have held it at the fork


if hasattr(os, "register_at_fork"):  # POSIX only (no fork on Windows)
    os.register_at_fork(after_in_child=_forget_loop_after_fork)


def run_call_sync(call_id: str, worker: str, attempt: int = 0) -> str:
    """The body of the ``mcp_tools.run_call`` Celery task: one round, on this process's loop."""
    future = asyncio.run_coroutine_threadsafe(run_in_worker(call_id, worker, attempt), worker_loop())
    try:
        return future.result()
    except (asyncio.CancelledError, concurrent.futures.CancelledError):
        # The call ended (cancelled, expired, taken over) while this worker ran it; the row says so.
        return "stopped"


async def run_in_worker(call_id: str, worker: str, attempt: int = 0) -> str:
    """Run one round of a background call on this worker. Returns what happened, for the log.

    ``claimed-elsewhere`` when another worker holds a valid lease or the call is
    not waiting for a worker (finished, cancelled, waiting for input); ``expired``
    when it waited past its expiry (it is marked so, and does not run).
    """
    lease = float(mcp_settings.WORKER_LEASE_SECONDS)
    if not await store.claim_for_worker(call_id, worker, lease):
        # A call that waited past its expiry (in the broker, or for a dead worker's lease) ends so
        # now, not at the next sweep: its task reads failed with the expiry's message at once.
        if await store.expire_overdue(call_id):
            return "expired"
        return "claimed-elsewhere"
    loaded = await store.load_call(call_id)
    if loaded is None:
        return "gone"
    row, journal = loaded
    principal = await sync_to_async(_principal_of)(row)
    rc = RequestContext(
        principal=principal, protocol_version=row.protocol_version, modern=versions.is_modern(row.protocol_version),
        client_capabilities=row.client_capabilities or {}, request_id=jsonrpc.id_from_text(row.request_id),
        session_id=row.session_id or None, flavor=row.flavor,
    )
    try:
        target = await core.resolve_target("tools/call", row.arguments, principal)
    except Exception as exc:  # the tool is gone, or the caller lost the permission since
        logger.warning("Background call %s cannot run: %s", call_id, exc)
        result = core.error_result(f"The call cannot run: {getattr(exc, 'message', exc)}")
        await store.save_round(call_id, row.round, [], status="failed", result=result, worker="", lease_expires_at=None,
                               last_outcome={"round": row.round, "answer": result})
        await wakeups.notify(call_id)
        return "failed"
    for step in journal.steps:
        step.persisted = True
    inv = core.new_invocation(target, rc, journal, call_id)
    inv.in_worker = True
    inv.state["worker"] = worker  # every write of this run is on condition that this worker still holds the call
    tool = target.tool
    heartbeat = asyncio.ensure_future(_renew_lease(inv, call_id, worker, lease, asyncio.current_task()))
    try:
        try:
            outcome = await core.execute(target, inv)  # the tool's time_limit applies in there
        except McpError as exc:
            # A protocol error: the call failed (a task reports it as "failed" with this error).
            error = {"code": exc.code, "message": exc.message, **({"data": exc.data} if exc.data is not None else {})}
            if not await store.save_round(call_id, row.round, [s for s in inv.journal.steps if not s.persisted], held_by=worker,
                                          status="failed", error=error, worker="", lease_expires_at=None, finished_at=timezone.now()):
                return "stopped"
            await wakeups.notify(call_id)
            return "failed"
        except Exception as exc:  # only the tool's retry_on exceptions get here (see core.execute)
            assert tool is not None
            if attempt < tool.max_retries:
                logger.info("Background call %s raised %r; retry %d of %d", call_id, exc, attempt + 1, tool.max_retries)
                countdown = tool.retry_backoff * 2**attempt
                # The lease covers the wait for the retry: if its message never comes (the broker lost
                # it, or refused it), the sweep finds the call past that lease and queues it again.
                if not await store.save_round(call_id, row.round, [s for s in inv.journal.steps if not s.persisted],
                                              held_by=worker, worker="",
                                              lease_expires_at=timezone.now() + timedelta(seconds=countdown + lease)):
                    return "stopped"
                # The retry runs failed effects again: that is what retry_on is for.
                await store.db(store.sync_calls.drop_failed_once_steps)(call_id)
                raise RetryCall(countdown) from exc
            outcome = core.error_result(f"The call failed after {attempt + 1} attempts: {type(exc).__name__}: {exc}")
    finally:
        heartbeat.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await heartbeat
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


async def _renew_lease(inv: engine.Invocation, call_id: str, worker: str, lease: float, handler: asyncio.Task[Any] | None) -> None:
    while True:
        await asyncio.sleep(lease / 3)
        try:
            renewed = await store.renew_lease(call_id, worker, lease)
        except Exception:
            # The database is down, or locked past its timeout (SQLite: a ctx.once effect's
            # transaction holds the write lock, as it would hold off another worker's claim):
            # try again at the next third, rather than let the lease run out unrenewed.
            logger.warning("Could not renew the lease of call %s", call_id, exc_info=True)
            continue
        if not renewed and handler is not None:
            # The call ended (cancelled, expired) or another worker took it over: stop here, as
            # neither a cancel of ours (the row is not this run's to end) nor a result written over.
            inv.state["lease_lost"] = True
            cancellation.stop_task(handler)
            return


def sweep() -> dict[str, int]:
    """Periodic housekeeping (sync): expire overdue calls, queue again calls whose worker died."""
    from asgiref.sync import async_to_sync

    expired = store.sync_calls.expire_overdue()
    orphans = store.sync_calls.orphaned_background_calls()
    for call_id in orphans:
        async_to_sync(requeue)(call_id)
    if orphans:
        logger.warning("Queued %d background call(s) again after their worker was lost", len(orphans))
    return {"expired": expired, "requeued": len(orphans)}



def retry_failed(call_id: str) -> str | None:
    """Run a failed background call again, as a new call with the same arguments and caller (sync).

    A call that ended stays as it ended (terminal states do not change); the new
    call's status message names the one it retries. Returns the new call id, or
    None when ``call_id`` is not a failed background call.
    """
    copy = store.sync_calls.copy_failed_background_call(call_id, str(uuid.uuid4()))
    if copy is None:
        return None
    new_id, tool_name, task_id = copy
    _queue_after_commit(new_id, registry.get_tool(tool_name), task_id)
    return new_id
