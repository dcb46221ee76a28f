"""A sync decorator around an ``async def`` tool that blocks, or answers a plain value, still works.

Commit 2ad4f9e made a ``functools.wraps`` wrapper whose ``__wrapped__`` reaches an ``async def`` an
async tool: the wrapper was called in the event loop and what it returned awaited. Two decorators that
worked before broke (found reviewing that commit, through a 2026-07-28 ``tools/call`` on the ASGI app):

- a guard that answers a plain value without calling the function (a feature switch, a refusal):
  ``await "off"`` raised ``TypeError`` (an internal error) where the caller got the text before;
- a wrapper that runs the async function with ``async_to_sync`` (a sync adapter) or reads the
  database first: in the event loop ``async_to_sync`` raises ``RuntimeError`` and the ORM
  ``SynchronousOnlyOperation``; in a thread, as before, both worked.

Now such a wrapper runs in a thread (as a sync tool does) and its result, when awaitable (the
coroutine of the ``async def`` it wraps), is awaited in the event loop with the async context.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth import get_user_model

import mcp_tools
from mcp_tools import ToolContext
from mcp_tools.registry import make_tool, registry
from mcp_tools.transports.http import McpEndpoint
from tests.asgi_client import call_modern

pytestmark = pytest.mark.django_db(transaction=True)
APP = McpEndpoint()
SWITCH = {"on": False}


def switched(fn: Any) -> Any:
    """A guard written without async in mind: a plain answer while the switch is off."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not SWITCH["on"]:
            return "switched off"
        return fn(*args, **kwargs)
    return wrapper


def run_sync(fn: Any) -> Any:
    """A sync adapter of an async function (asgiref's documented way), which also reads the database."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        users = get_user_model().objects.count()
        return f"{async_to_sync(fn)(*args, **kwargs)} ({users} users)"
    return wrapper


@switched
async def greet_switched(name: str, ctx: ToolContext) -> str:
    await ctx.log("info", f"greeting {name}")
    return f"hello {name} {type(ctx).__name__}"


@run_sync
async def greet_adapted(name: str) -> str:
    return f"hi {name}"


async def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    body = (await call_modern(APP, "tools/call", {"name": name, "arguments": arguments})).json()
    assert "result" in body, body
    assert not body["result"].get("isError"), body
    return body["result"]


@pytest.mark.parametrize("on, text", [(False, "switched off"), (True, "hello Ada ToolContext")])
async def test_a_guard_answering_a_plain_value_or_the_coroutine(on: bool, text: str) -> None:
    SWITCH["on"] = on
    tool = make_tool(greet_switched, name="switched_greet")
    with registry.registered_temporarily(tool):
        result = await call(tool.name, {"name": "Ada"})
    assert result["content"][0]["text"] == text, result


async def test_a_wrapper_that_blocks_runs_out_of_the_event_loop() -> None:
    tool = make_tool(greet_adapted, name="adapted_greet")
    with registry.registered_temporarily(tool):
        result = await call(tool.name, {"name": "Ada"})
    assert result["content"][0]["text"] == "hi Ada (0 users)", result


@switched
async def effect(name: str) -> str:
    return f"sent to {name}"


async def send(name: str, ctx: ToolContext) -> str:
    return str(await ctx.once("send", effect, name))


def send_sync(name: str, ctx: ToolContext) -> str:
    return str(ctx.once("send", effect, name))


@pytest.mark.parametrize("tool_fn", [send, send_sync], ids=["async-tool", "sync-tool"])
@pytest.mark.parametrize("on, text", [(False, "switched off"), (True, "sent to Ada")])
async def test_a_guarded_once_effect_answers_its_plain_value_or_is_awaited(tool_fn: Any, on: bool, text: str) -> None:
    SWITCH["on"] = on
    with registry.registered_temporarily(make_tool(tool_fn, name="guarded_once")):
        body = (await call_modern(APP, "tools/call", {"name": "guarded_once", "arguments": {"name": "Ada"}})).json()
    assert not body["result"].get("isError"), body
    assert body["result"]["content"][0]["text"] == text, body


@switched
async def suggest(value: str, arguments: dict[str, Any]) -> list[str]:
    return [s for s in ("north", "south") if s.startswith(value)]


@pytest.mark.parametrize("on, values", [(False, ["switched off"]), (True, ["south"])])
async def test_a_guarded_completer_answers_its_plain_value_or_is_awaited(on: bool, values: list[str]) -> None:
    SWITCH["on"] = on
    mcp_tools.prompt(name="guarded_completed", completions={"store": suggest})(lambda store: store)
    try:
        params = {"ref": {"type": "ref/prompt", "name": "guarded_completed"}, "argument": {"name": "store", "value": "s"}}
        body = (await call_modern(APP, "completion/complete", params)).json()
    finally:
        registry.unregister_prompt("guarded_completed")
    assert body.get("result", {}).get("completion", {}).get("values") == values, body
