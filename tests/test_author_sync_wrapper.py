"""A plain ``def`` decorator (``functools.wraps``) around an ``async def`` tool runs as the async tool it wraps.

The registry took such a wrapper for a sync tool, from the wrapper's own ``def``: it ran in a thread,
and its result was the coroutine the wrapper returned, never awaited. Found with a 2026-07-28
``tools/call`` through the ASGI app: the caller got a success whose text was
``"<coroutine object greet at 0x...>"`` (and the server a ``RuntimeWarning: coroutine ... was never
awaited``). Now a function whose ``__wrapped__`` chain reaches a coroutine function
is async: called in the event loop with the async ``ToolContext``, its coroutine awaited; so is a
decorator written as a class (``functools.update_wrapper``).
"""

from __future__ import annotations

import functools
from typing import Any

import pytest

import mcp_tools
from mcp_tools import ToolContext
from mcp_tools.registry import make_tool, registry
from mcp_tools.transports.http import McpEndpoint
from tests.asgi_client import call_modern

pytestmark = pytest.mark.django_db(transaction=True)
APP = McpEndpoint()
CALLS: list[str] = []


def logged(fn: Any) -> Any:
    """A decorator written without async in mind."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        CALLS.append(fn.__name__)
        return fn(*args, **kwargs)
    return wrapper


@logged
async def greet(name: str, ctx: ToolContext) -> str:
    """Greet someone."""
    await ctx.log("info", f"greeting {name}")
    return f"hello {name} {type(ctx).__name__}"  # the async ToolContext, not SyncToolContext


@logged
@logged
async def greet_twice(name: str) -> str:
    return f"hi {name}"


async def _shout(name: str) -> str:
    return name.upper()


async def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    body = (await call_modern(APP, "tools/call", {"name": name, "arguments": arguments})).json()
    assert not body["result"].get("isError"), body
    return body["result"]


@pytest.mark.parametrize("fn, text, wrappers", [(greet, "hello Ada ToolContext", 1), (greet_twice, "hi Ada", 2)])
async def test_a_sync_wrapper_of_an_async_tool_runs_as_that_async_tool(fn: Any, text: str, wrappers: int) -> None:
    CALLS.clear()
    tool = make_tool(fn, name=f"wrapped_{fn.__name__}")
    assert tool.is_async is True
    assert list(tool.input.schema["properties"]) == ["name"], tool.input.schema  # ctx found through the wrapper
    with registry.registered_temporarily(tool):
        result = await call(tool.name, {"name": "Ada"})
    assert result["content"][0]["text"] == text, result
    assert CALLS == [fn.__name__] * wrappers  # the wrappers ran (once each), not bypassed


class audited:  # noqa: N801 - a decorator, named as one
    """A decorator written as a class (``functools.update_wrapper``)."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        CALLS.append("audited")
        return self.fn(*args, **kwargs)


async def test_a_class_decorator_of_an_async_tool_runs_as_that_async_tool() -> None:
    CALLS.clear()
    tool = make_tool(audited(_shout), name="wrapped_shout")
    assert tool.is_async is True
    with registry.registered_temporarily(tool):
        result = await call(tool.name, {"name": "ada"})
    assert result["content"][0]["text"] == "ADA", result
    assert CALLS == ["audited"]


def test_a_sync_wrapper_of_a_sync_tool_stays_sync() -> None:
    @logged
    def plain(name: str) -> str:
        return name

    assert make_tool(plain, name="wrapped_plain").is_async is False


async def test_a_prompt_wrapped_so_runs_as_the_async_prompt() -> None:
    @logged
    async def topic(topic: str) -> str:
        return f"about {topic}"

    mcp_tools.prompt(name="wrapped_topic")(topic)
    try:
        got = (await call_modern(APP, "prompts/get", {"name": "wrapped_topic", "arguments": {"topic": "t"}})).json()
    finally:
        registry.unregister_prompt("wrapped_topic")
    assert got["result"]["messages"][0]["content"]["text"] == "about t", got
