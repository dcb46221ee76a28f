"""Code that raises ``asyncio.CancelledError`` itself, while nobody cancelled anything: a library's own
timeout or cancel scope leaking out of a tool, a prompt or a completer.

Taken for a cancel, the request got no answer at all: a 202 with an empty body in both eras (the official
SDK: "server answered a request with 202 Accepted"), and a background call ended ``cancelled`` ("The
call was cancelled before it finished."). Only a stop someone asked for is a cancel (the client's
``notifications/cancelled``, ``tasks/cancel``, an operator, the server's stop: each cancels the task,
which ``Task.cancelling()`` counts); any other is a failure, answered as one.
"""
from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from mcp_tools import ToolContext, prompt
from mcp_tools.models import ToolCall
from mcp_tools.registry import make_tool, registry
from mcp_tools.server import background
from mcp_tools.server.core import internal_error_text
from mcp_tools.transports.http import McpEndpoint
from tests.asgi_client import call_modern
from tests.test_background_lost import _new_call
from tests.test_background_review import legacy, open_session

pytestmark = pytest.mark.django_db(transaction=True)
APP = McpEndpoint()


async def _gives_up_at_once(ctx: ToolContext) -> str:
    raise asyncio.CancelledError("lib")


async def _gives_up_later(ctx: ToolContext) -> str:
    await asyncio.sleep(0)
    raise asyncio.CancelledError("inner library gave up")


def _failed_with_internal_error(result: dict[str, Any], name: str) -> bool:
    return result["isError"] is True and result["content"] == [{"type": "text", "text": internal_error_text(name)}]


@pytest.mark.parametrize("fn", [_gives_up_at_once, _gives_up_later])
async def test_a_tool_s_own_cancelled_error_is_a_tool_error_in_both_eras(fn: Callable[..., Any]) -> None:
    name = fn.__name__.strip("_")
    with registry.registered_temporarily(make_tool(fn, name=name)):
        modern = await call_modern(APP, "tools/call", {"name": name, "arguments": {}})
        session = await open_session()
        handshake = await legacy(session, "tools/call", {"name": name, "arguments": {}})  # asserts a 200
    assert modern.status == 200, (modern.status, modern.body)  # before: 202, empty
    assert _failed_with_internal_error(modern.json()["result"], name)
    assert _failed_with_internal_error(handshake["result"], name)


async def test_a_prompt_s_own_cancelled_error_is_an_internal_error() -> None:
    async def gives_up() -> str:
        raise asyncio.CancelledError("lib")

    prompt(name="gives_up")(gives_up)
    try:
        response = await call_modern(APP, "prompts/get", {"name": "gives_up", "arguments": {}})
    finally:
        registry.unregister_prompt("gives_up")
    assert response.status != 202 and response.json()["error"] == {"code": -32603, "message": internal_error_text("gives_up")}


async def test_a_completer_s_own_cancelled_error_is_an_internal_error() -> None:
    """A completer runs outside any tool call: the transport answers for it."""

    async def completer(value: str, arguments: dict[str, Any]) -> list[str]:
        await asyncio.sleep(0)
        raise asyncio.CancelledError("lib")

    def completed(city: str) -> str:
        return city

    prompt(name="completed", completions={"city": completer})(completed)
    params = {"ref": {"type": "ref/prompt", "name": "completed"}, "argument": {"name": "city", "value": "Ber"}}
    try:
        response = await call_modern(APP, "completion/complete", params)
    finally:
        registry.unregister_prompt("completed")
    assert response.status == 200, (response.status, response.body)  # before: 202, empty
    assert response.json()["error"] == {"code": -32603, "message": "Internal error"}


async def test_a_background_tool_s_own_cancelled_error_fails_its_call_not_cancels_it() -> None:
    with registry.registered_temporarily(make_tool(_gives_up_later, name="gives_up_bg", background=True)):
        call_id = await _new_call("gives_up_bg")
        try:
            outcome = await background.run_in_worker(call_id, "w-test")
        except asyncio.CancelledError:  # before: taken for a cancel
            outcome = "raised CancelledError"
        row = await sync_to_async(ToolCall.objects.get)(id=call_id)
    assert (outcome, row.status) == ("finished", "failed")  # before: the row ended cancelled
    assert _failed_with_internal_error(row.result, "gives_up_bg")
