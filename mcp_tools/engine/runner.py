"""Run a handler against its journal; the run ends Completed, NeedsInput or Deferred.

The journal, not a Python frame, is the continuation: on each round the
handler runs from the top and every step it already completed returns its
recorded answer. That is what lets any process continue any call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from asgiref.sync import sync_to_async

from .context import SyncToolContext, ToolContext
from .wrapped import call_async
from .errors import Defer, Suspend
from .journal import Journal, Step


class Runtime(Protocol):
    """What the engine needs from the layer that persists calls and talks to clients."""

    async def run_once(self, inv: Invocation, step: Step, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any: ...

    async def progress(self, inv: Invocation, progress: float, total: float | None, message: str | None, *, replaying: bool) -> None:
        """``ctx.report_progress``; ``replaying``: the handler has not yet passed the steps an earlier run journaled."""
        ...

    async def log(self, inv: Invocation, level: str, data: Any, logger: str | None, *, replaying: bool) -> None:
        """``ctx.log``; ``replaying`` as for :meth:`progress`."""
        ...

    def resolve_tools(self, tools: Sequence[Any]) -> list[Any]:
        """Tools a handler offers the client's model (``ctx.sample(tools=...)``), as registry tools."""
        ...

    def tool_function(self, tool: Any) -> Callable[..., Any]:
        """What runs a registry tool the client's model asked for: its function, with whatever the
        layer below needs around it (Django's connection rules for a thread-insensitive sync tool)."""
        ...

    async def tool_arguments(self, tool: Any, arguments: Any, principal: Any) -> dict[str, Any]:
        """A registry tool's keyword arguments from the input the client's model gave it, validated as a
        ``tools/call``'s are (a serializer's in a thread, with the caller in its context)."""
        ...

    def failure_text(self, tool: Any, exc: Exception) -> str:
        """What the client's model reads when a tool it asked for raised ``exc`` (logging what it keeps back)."""
        ...

    def sampling_limits(self) -> tuple[int, int]:
        """``(max tools per request, default max tool calls)`` of sampling with tools."""
        ...


@dataclass(slots=True)
class Invocation:
    """Everything one run of a handler needs."""

    fn: Callable[..., Any]
    is_async: bool
    kwargs: dict[str, Any]
    context_param: str | None
    principal: Any
    protocol_version: str
    client_capabilities: dict[str, Any]
    runtime: Runtime
    journal: Journal = field(default_factory=Journal)
    call_id: str | None = None
    progress_token: Any = None
    emit: Callable[[dict[str, Any]], Awaitable[None]] | None = None
    thread_sensitive: bool = True
    #: True when a worker runs the call: ``ctx.defer()`` then has nothing left to do.
    in_worker: bool = False
    #: Where a paginated tool goes on from (sealed in the resume token of its previous page).
    cursor: Any = None
    #: The rest of a handler whose first step already ran (``server.core.run_fresh``): awaited
    #: instead of calling ``fn`` again, once.
    started: Awaitable[Any] | None = None
    state: dict[str, Any] = field(default_factory=dict)
    #: The run was stopped (its task cancelled: the client's cancel, the call's end, the server). A
    #: sync handler's thread runs on, as Python cannot interrupt it: its next ``ctx`` step raises
    #: ``CancelledError`` (:class:`~.context.SyncToolContext`).
    stopped: bool = False


@dataclass(slots=True)
class Completed:
    value: Any


@dataclass
class NeedsInput:
    pending: list[Step]


@dataclass
class Deferred:
    """The handler asked to finish on a worker; the journal so far is the continuation."""


Outcome = Completed | NeedsInput | Deferred


async def run(inv: Invocation) -> Outcome:
    """Run the handler once. Exceptions other than suspension propagate to the caller."""
    kwargs = inv.kwargs
    try:
        if inv.started is not None:
            started, inv.started = inv.started, None
            value = await started
        elif inv.is_async:
            if inv.context_param:
                kwargs = {**kwargs, inv.context_param: ToolContext(inv)}
            value = await call_async(inv.fn, **kwargs)  # a sync wrapper of an async def: in a thread
        else:
            if inv.context_param:
                kwargs = {**kwargs, inv.context_param: SyncToolContext(inv)}
            value = await sync_to_async(inv.fn, thread_sensitive=inv.thread_sensitive)(**kwargs)
    except asyncio.CancelledError:
        inv.stopped = True
        raise
    except Suspend:
        return NeedsInput(inv.journal.pending)
    except Defer:
        return Deferred()
    return Completed(value)
