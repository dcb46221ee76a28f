"""A sync decorator (``functools.wraps``) around an ``async def`` ``ctx.once`` effect or completer is awaited.

The same defect as a wrapped tool's (tests/test_author_sync_wrapper.py), where a function is taken for
sync or async: ``ctx.once`` ran such an effect as sync, in the store's thread, and its value was the
coroutine, never awaited (the call failed: the journal cannot store it); ``completion/complete`` ran
such a completer in a thread and iterated its coroutine (-32603 Internal error). Found through the
ASGI app (2026-07-28 ``tools/call`` and ``completion/complete``) after the tool fix. Now both are
taken as async when their ``__wrapped__`` chain reaches a coroutine function, and awaited.
"""

from __future__ import annotations

from typing import Any

import pytest

import mcp_tools
from mcp_tools import ToolContext
from mcp_tools.registry import make_tool, registry
from mcp_tools.transports.http import McpEndpoint
from tests.asgi_client import call_modern
from tests.test_author_sync_wrapper import CALLS, logged

pytestmark = pytest.mark.django_db(transaction=True)
APP = McpEndpoint()


@logged
async def effect(name: str) -> str:
    return f"sent to {name}"


async def send(name: str, ctx: ToolContext) -> str:
    return str(await ctx.once("send", effect, name))


def send_sync(name: str, ctx: ToolContext) -> str:
    return str(ctx.once("send", effect, name))


@pytest.mark.parametrize("tool_fn", [send, send_sync], ids=["async-tool", "sync-tool"])
async def test_a_wrapped_async_once_effect_is_awaited(tool_fn: Any) -> None:
    CALLS.clear()
    with registry.registered_temporarily(make_tool(tool_fn, name="wrapped_once")):
        body = (await call_modern(APP, "tools/call", {"name": "wrapped_once", "arguments": {"name": "Ada"}})).json()
    assert body["result"]["content"][0]["text"] == "sent to Ada", body
    assert not body["result"].get("isError"), body
    assert CALLS == ["effect"]


@logged
async def suggest(value: str, arguments: dict[str, Any]) -> list[str]:
    return [s for s in ("north", "south") if s.startswith(value)]


async def test_a_wrapped_async_completer_is_awaited() -> None:
    mcp_tools.prompt(name="wrapped_completed", completions={"store": suggest})(lambda store: store)
    try:
        params = {"ref": {"type": "ref/prompt", "name": "wrapped_completed"}, "argument": {"name": "store", "value": "s"}}
        body = (await call_modern(APP, "completion/complete", params)).json()
    finally:
        registry.unregister_prompt("wrapped_completed")
    assert body.get("result", {}).get("completion", {}).get("values") == ["south"], body
