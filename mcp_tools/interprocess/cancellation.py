"""Stopping a handler that may run in another process.

Two ways in:

* ``notifications/cancelled`` names a 2025-11-25 request (session id + request id);
* an operator (the admin), a cancelled task or an expired deadline names a call
  (its ``ToolCall`` id). The call's row is marked first; this module only stops
  the handler that still runs it.

Each process registers the handler tasks it runs. A cancellation that arrives at
a process which does not run the handler is broadcast on the shared channel
layer (when there is one) to the process that does. Without a shared layer (the
embedded in-memory default) the database is the fallback: a handler whose call
has a row checks the row's status every ``CANCEL_POLL_SECONDS`` and at each
progress report, and stops once the row has ended. See docs/durable-calls.md
for the latency each setup gives.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from typing import Any, Protocol

from .. import store
from ..conf import mcp_settings
from . import broadcast

logger = logging.getLogger("mcp_tools.cancellation")

GROUP = "mcp_tools.cancel"
#: The message a handler task is cancelled with when the server ended its call
#: (not the client): the client then gets an answer saying so instead of silence.
SERVER_CANCEL = "mcp_tools: the call was ended by the server"

class Cancellable(Protocol):
    """What runs a 2025-11-25 request here: its handler (``transports.http._Handler``), or the task
    of a stream resumed for it."""

    def cancel(self, msg: Any = None) -> Any: ...


#: A 2025-11-25 request of this process: its session and its id, a JSON string or integer as it
#: came (``jsonrpc.classify`` lets no other id through), so ``1`` and ``"1"`` are two requests.
Key = tuple[str, str | int]
#: What runs each 2025-11-25 request in this process, by its :data:`Key`: more than one at a
#: time when a resumed stream follows a handler that its closed stream left running (or two
#: resumes overlap). A cancel stops them all; each one leaves with its own entry.
_running: dict[Key, list[Cancellable]] = {}
#: The handler tasks watching each call's row (more than one when a retry overlaps the run
#: it retries: none may displace another, or the other's row would stop looking alive).
_calls: dict[str, set[asyncio.Task[Any]]] = {}
#: Handler tasks this module stopped because their call ended (a CancelledError's
#: message does not survive every await it crosses, so the task is remembered).
_stopped_by_server: weakref.WeakSet[asyncio.Task[Any]] = weakref.WeakSet()


def register(session_id: str, request_id: str | int, running: Cancellable) -> Key:
    """Let a cancel of request ``request_id`` of session ``session_id`` stop ``running``; returns
    the key that :func:`unregister` takes (made once per request: this runs in every 2025-11-25 one)."""
    key = (session_id, request_id)
    entries = _running.get(key)
    if entries is None:
        _running[key] = [running]
    else:
        entries.append(running)
    broadcast.listen(GROUP, _on_cancel)
    return key


def unregister(key: Key, running: Cancellable) -> None:
    """Undo :func:`register` (``key`` is what it returned)."""
    entries = _running.get(key)
    if entries is None:
        return
    try:  # not contextlib.suppress: three calls of its own, in every 2025-11-25 request
        entries.remove(running)
    except ValueError:
        pass
    if not entries:
        del _running[key]


def _cancel_local(session_id: str, request_id: Any) -> bool:
    # A cancel names any JSON value: only a string or an integer can be a request's id here (and
    # True or 1.0, equal to 1 with its hash, must not stop request 1; a list has no hash).
    if type(request_id) is not str and type(request_id) is not int:
        return False
    entries = _running.get((session_id, request_id))
    if not entries:
        return False
    for running in list(entries):
        running.cancel()
    return True


def _stop_detached_local(session_id: str, *, every: bool = False) -> None:
    for (session, _), entries in list(_running.items()):
        if session == session_id:
            for running in list(entries):
                if getattr(running, "detached", False) or (every and _runs_its_handler(running)):
                    running.cancel()


def _runs_its_handler(running: Any) -> bool:
    """Whether a registered request runs its call's handler itself (not a wait on a call that runs
    elsewhere, which its call's end answers), and the server has not stopped it already (its call ended)."""
    rc = getattr(running, "rc", None)
    return bool(getattr(rc, "handler_here", False)) and getattr(running, "task", None) not in _stopped_by_server


async def stop_detached(session_id: str, *, every: bool = False) -> None:
    """Stop the handlers of session ``session_id`` that its closed streams left running (here and in
    the other processes): the session is gone, so no client can resume them for their answers.
    ``every``: the handlers that run on its open streams too, but for those the server stopped already
    (their calls ended, and they answer so): the client deleted the session, and a call too young to
    have a row, which nothing else reaches, ran on to its end."""
    _stop_detached_local(session_id, every=every)
    await broadcast.publish(GROUP, {"type": "mcp.cancel", "session_id": session_id, "detached": True, "every": every})


def _stop_local(call_id: str) -> bool:
    tasks = [task for task in _calls.get(call_id, ()) if not task.done()]
    for task in tasks:
        _stop(task)
    return bool(tasks)


def _stop(task: asyncio.Task[Any]) -> None:
    if task in _stopped_by_server:  # once is enough: a second cancel would hit its clean-up
        return
    _stopped_by_server.add(task)
    task.cancel(SERVER_CANCEL)


def stop_task(task: asyncio.Task[Any]) -> None:
    """Stop a handler task of this process because its call ended (the client gets told so)."""
    _stop(task)


def _on_cancel(message: dict[str, Any]) -> None:
    if message.get("call_id"):
        _stop_local(str(message["call_id"]))
    elif message.get("detached"):
        _stop_detached_local(str(message.get("session_id", "")), every=bool(message.get("every")))
    else:
        _cancel_local(message.get("session_id", ""), message.get("request_id"))


async def cancel(session_id: str, request_id: Any) -> bool:
    """Cancel the request's handler here, or ask the other processes to; whether it ran here."""
    if _cancel_local(session_id, request_id):
        return True
    await broadcast.publish(GROUP, {"type": "mcp.cancel", "session_id": session_id, "request_id": request_id})
    return False


async def stop_call(call_id: str) -> None:
    """Stop the handler running call ``call_id`` (whose row has ended), here or in another process."""
    if _stop_local(call_id):
        return
    await broadcast.publish(GROUP, {"type": "mcp.cancel", "call_id": call_id})


async def cancel_as_client(call_id: str) -> bool:
    """Stop the request of call ``call_id`` as its client's ``notifications/cancelled`` stops it (no
    response), when that is how its row ended, received by another process (with no shared layer,
    or while it is down, the row is how the cancel arrives); whether a request of this process was
    stopped so. Any other end (an operator, a deadline) is the server's: the client is told."""
    try:
        request = await store.client_cancelled_request(call_id)
    except Exception:
        logger.warning("Could not read how call %s ended", call_id, exc_info=True)
        return False
    return request is not None and _cancel_local(*request)


def is_server_cancel(exc: BaseException, task: asyncio.Task[Any] | None) -> bool:
    """Whether a ``CancelledError`` came from :func:`stop_call` or a row check (not the client)."""
    if task is not None and task in _stopped_by_server:
        return True
    return isinstance(exc, asyncio.CancelledError) and SERVER_CANCEL in exc.args


def stop_requested(exc: BaseException, task: asyncio.Task[Any] | None) -> bool:
    """Whether a ``CancelledError`` out of a handler running in ``task`` is a stop someone asked for.

    Every stop (the client's ``notifications/cancelled`` or closed stream, ``tasks/cancel``, an
    operator, a lost lease, the server's shutdown) cancels the task, which ``Task.cancelling()``
    counts until the cancel is taken back; the server's own stop at the handler's next step, once its
    call ended, raises ``CancelledError(SERVER_CANCEL)`` (:func:`is_server_cancel`). Any other is the
    handler's own (a library's timeout or cancel scope leaking out): nobody asked for it.
    """
    return (task is not None and task.cancelling() > 0) or is_server_cancel(exc, task)


def forget(task: asyncio.Task[Any]) -> None:
    """The handler ``task`` ran is done with its stop: a later run in the same task may be stopped anew.

    Until then a stop counts once, however many times it arrives: one operator's cancel
    reaches a process by the row poll and by the broadcast, and a second ``cancel()``
    while the handler writes its answer would kill the request instead (its client
    would wait for an answer that never comes).
    """
    _stopped_by_server.discard(task)


class CallWatch:
    """Stops ``task`` when call ``call_id`` ends elsewhere, for as long as the watch is open."""

    def __init__(self, call_id: str, task: asyncio.Task[Any]) -> None:
        self.call_id = call_id
        self.task = task
        self._timer: asyncio.TimerHandle | None = None
        self._check: asyncio.Task[None] | None = None
        _calls.setdefault(call_id, set()).add(task)
        broadcast.listen(GROUP, _on_cancel)
        self._schedule()

    def _schedule(self) -> None:
        interval = float(mcp_settings.CANCEL_POLL_SECONDS)
        if interval > 0:
            # A timer handle, not a task: a round that ends before the interval pays nothing.
            self._timer = asyncio.get_running_loop().call_later(interval, self._poll)

    def _poll(self) -> None:
        self._check = asyncio.ensure_future(self._check_row())

    async def _check_row(self) -> None:
        # One write does both jobs: it tells whether the call has ended, and it shows that
        # the call's owner is alive (a round whose owner died is taken over once the row
        # has gone untouched for a few intervals, see store.take_over_round).
        try:
            live = await store.touch_live(self.call_id)
        except Exception:
            logger.warning("Could not check the status of call %s", self.call_id, exc_info=True)
            live = True
        if self.task.done() or self.task not in _calls.get(self.call_id, ()):
            return
        if not live:
            if not await cancel_as_client(self.call_id):
                _stop(self.task)
        else:
            self._schedule()

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._check is not None and not self._check.done() and self._check is not asyncio.current_task():
            self._check.cancel()
        watching = _calls.get(self.call_id)
        if watching is not None:
            watching.discard(self.task)
            if not watching:
                del _calls[self.call_id]
