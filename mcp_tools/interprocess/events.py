"""Call lifecycle events: Django signals in this process, and "call changed" for the operator console.

The four signals live here, in the lowest layer that both the server (which
sends them, from :mod:`mcp_tools.server.core`) and Django's face may import;
:mod:`mcp_tools.signals` is their public path. They are sent only for calls
that have a ``ToolCall`` row, so a fast call that writes nothing costs nothing.

"Call changed" is a message on :data:`CONSOLE_GROUP` of the channel layer. The
admin's live dashboard (``mcp_tools.console.consumers``) listens on it. With
the in-memory layer it reaches consoles served by this process only; the
console also looks at the table now and then, so it never depends on it.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from typing import Any

from django.dispatch import Signal

logger = logging.getLogger("mcp_tools.events")

#: A call got its row (it suspended, ran long, ran ``ctx.once``, or went to a worker).
#: kwargs: ``call_id``, ``tool_name``, ``status``, ``principal``, ``flavor``.
tool_call_started = Signal()
#: A call waits for the client's input (``status="input_required"``). Same kwargs.
tool_call_suspended = Signal()
#: A call completed with a result (``status="completed"``). Same kwargs.
tool_call_finished = Signal()
#: A call ended with an error result (``status="failed"``). Same kwargs.
tool_call_failed = Signal()

#: The channel-layer group every open console joins.
CONSOLE_GROUP = "mcp_tools.console"
CHANGED = "call.changed"

_pending: set[asyncio.Task[None]] = set()
#: Calls changed since the last "call changed" message, per event loop: ``call id -> status``.
_batches: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, str]] = weakref.WeakKeyDictionary()
#: Changes within this window go to the consoles as one message (a shared layer is a network hop).
BATCH_SECONDS = 0.05


def _sender() -> Any:
    """The ``ToolCall`` model as the signals' sender (looked up, not imported: this layer has no models)."""
    from django.apps import apps

    return apps.get_model("mcp_tools", "ToolCall")


async def emit(signal: Signal, call_id: Any, **info: Any) -> None:
    """Send a lifecycle signal; a receiver that raises is logged, never fails the call.

    The row is committed before this runs, so the call's outcome stands whatever
    a project's audit or metrics receiver does. Open consoles hear of the change
    in the next batch (:func:`call_changed`), without a task per signal.
    """
    call_changed(call_id, info.get("status", ""))
    # ``receivers`` empty (no project receiver, the usual case): nothing to send, told without
    # has_listeners()'s filtering of the receivers.
    if not signal.receivers or not signal.has_listeners():
        return
    for receiver, response in await signal.asend_robust(sender=_sender(), call_id=str(call_id), **info):
        if isinstance(response, Exception):
            logger.error("Receiver %r of a tool call signal failed", receiver, exc_info=response)


def _message(call_id: Any, status: str, calls: list[str] | None = None) -> dict[str, Any]:
    return {"type": CHANGED, "call": str(call_id), "status": status, "calls": calls or [str(call_id)]}


def call_changed(call_id: Any, status: str) -> None:
    """Tell open consoles that a call changed, batched: one message per :data:`BATCH_SECONDS` (best effort)."""
    loop = asyncio.get_running_loop()
    batch = _batches.get(loop)
    if batch is None:
        batch = _batches[loop] = {}
    if not batch:
        loop.call_later(BATCH_SECONDS, _flush, loop)
    batch[str(call_id)] = status


def _flush(loop: asyncio.AbstractEventLoop) -> None:
    batch = _batches.pop(loop, None)
    if batch:
        last = next(reversed(batch))
        _spawn(_publish(_message(last, batch[last], list(batch))))


async def _publish(message: dict[str, Any]) -> None:
    from channels.layers import get_channel_layer

    layer = get_channel_layer()
    if layer is None:
        return
    try:
        await layer.group_send(CONSOLE_GROUP, message)
    except Exception:
        logger.warning("Could not publish a call change to the console", exc_info=True)


def _spawn(coroutine: Any) -> None:
    task = asyncio.ensure_future(coroutine)
    _pending.add(task)  # keep a reference until it is done
    task.add_done_callback(_pending.discard)


async def publish_changed(call_id: Any, status: str) -> None:
    """Tell open consoles that a call changed now (best effort: logged, never raised)."""
    await _publish(_message(call_id, status))


def publish_changed_sync(call_id: Any, status: str) -> None:
    """:func:`publish_changed` for sync code (the admin's actions)."""
    from asgiref.sync import async_to_sync

    async_to_sync(publish_changed)(call_id, status)
