"""A sync wrapper of an ``async def`` (a decorator written without async in mind) and how it is called.

Its own module: the registry, the runner, sampling and the server ask it, and the engine's context
imports sampling (an import circle otherwise)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async


def wraps_a_coroutine_function(fn: Any) -> bool:
    """Whether ``fn`` is a sync wrapper (``functools.wraps``, nested too; a decorator written as a class
    with ``functools.update_wrapper``) of an ``async def`` function: a decorator written without async in
    mind, whose call returns the coroutine. It runs as the async function it wraps (a tool, prompt,
    resource, completer or ``ctx.once`` effect), called through :func:`call_async`."""
    if not hasattr(fn, "__wrapped__"):
        return False
    try:
        return inspect.iscoroutinefunction(inspect.unwrap(fn))
    except ValueError:  # a __wrapped__ cycle
        return False


def runs_a_sync_wrapper(fn: Any) -> bool:
    """Whether ``fn`` (or the function a ``functools.partial`` of it calls) is a sync wrapper of an
    ``async def`` (:func:`wraps_a_coroutine_function`), not itself a coroutine function: what
    :func:`call_async` runs in a thread."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    if isinstance(fn, staticmethod):
        fn = fn.__func__
    if "__wrapped__" not in getattr(fn, "__dict__", ()):
        return False  # most handlers, asked on every call: no wrapper of anything (a dict lookup)
    if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(type(fn), "__call__", None)):
        return False
    return wraps_a_coroutine_function(fn)


async def call_async(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """``await fn(*args, **kwargs)`` for an async tool, prompt, resource, completer or ``ctx.once`` effect.

    A sync wrapper of an ``async def`` (:func:`runs_a_sync_wrapper`) is a decorator written without
    async in mind: it is called in a thread (``sync_to_async``, thread-sensitive), as it was before it
    was taken for async, and what it returns is awaited in the event loop when it is awaitable (the
    coroutine of the function it wraps), taken as it is when it is not. Called in the event loop, a
    wrapper that blocks (the ORM, ``async_to_sync`` of the function it wraps) raised there, and one
    that answers a plain value without calling the function (a guard) was awaited: ``TypeError``."""
    if not runs_a_sync_wrapper(fn):
        return await fn(*args, **kwargs)
    value = await sync_to_async(fn, thread_sensitive=True)(*args, **kwargs)
    return await value if inspect.isawaitable(value) else value
