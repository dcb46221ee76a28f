"""core.execute does its slow-call work when the handler first waits, inline in a request or on its own.

A call that completes in one step arms no ``SLOW_CALL_SECONDS`` timer (docs/performance.md, issue 9's
fourth pass); one that waits gets its row after the threshold whether or not an enclosing
:class:`~mcp_tools.server.core.Awaiting` (the HTTP transport's) reports the first wait.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import override_settings

from mcp_tools.models import ToolCall
from mcp_tools.registry import make_tool, registry
from mcp_tools.server import core
from mcp_tools.server.auth import ANONYMOUS
from mcp_tools.server.context import RequestContext

pytestmark = pytest.mark.django_db(transaction=True)


async def doze(release: float) -> str:
    """Wait until the test lets go (or ``release`` seconds)."""
    await asyncio.sleep(release)
    return "awake"


async def snap(text: str) -> str:
    """Answer in one step."""
    return text


async def rows() -> list[tuple[str, str]]:
    return await sync_to_async(lambda: list(ToolCall.objects.values_list("tool_name", "status")))()


async def first_rows(running: asyncio.Future[Any]) -> list[tuple[str, str]]:
    """The rows as soon as there are any, while ``running`` runs ([] if it ends first)."""
    while not running.done():
        found = await rows()
        if found:
            return found
        await asyncio.sleep(0.02)
    return []


def _rc() -> RequestContext:
    return RequestContext(principal=ANONYMOUS, protocol_version="2026-07-28", modern=True, client_capabilities={}, request_id=1)


async def _run(name: str, arguments: dict[str, Any], inline: bool) -> Any:
    rc = _rc()
    target = await core.resolve_target("tools/call", {"name": name, "arguments": arguments}, rc.principal)
    inv = core.new_invocation(target, rc)
    waited: list[bool] = []
    if inline:  # as the HTTP transport runs it: inside an Awaiting of its own
        return await core.Awaiting(core.execute(target, inv), lambda: waited.append(True)), inv, waited
    return await core.execute(target, inv), inv, waited


@pytest.fixture
def tools():  # type: ignore[no-untyped-def]
    with registry.registered_temporarily(make_tool(doze), make_tool(snap)):
        yield


@pytest.mark.parametrize("inline", [True, False])
async def test_a_call_that_waits_past_the_threshold_gets_its_row(tools, settings, inline: bool) -> None:  # type: ignore[no-untyped-def]
    with override_settings(MCP_TOOLS={**settings.MCP_TOOLS, "SLOW_CALL_SECONDS": 0.05}):
        running = asyncio.ensure_future(_run("doze", {"release": 0.6}, inline))
        assert await first_rows(running) == [("doze", "working")]
        outcome, inv, waited = await running
    assert outcome.value == "awake"
    assert inv.call_id is not None
    assert inv.state.get("task") is None, "the handler is done: its task is forgotten"
    if inline:
        assert waited == [True], "the enclosing Awaiting still hears of the first wait"


@pytest.mark.parametrize("inline", [True, False])
async def test_a_call_done_in_one_step_arms_nothing(tools, settings, inline: bool) -> None:  # type: ignore[no-untyped-def]
    with override_settings(MCP_TOOLS={**settings.MCP_TOOLS, "SLOW_CALL_SECONDS": 0}):
        outcome, inv, waited = await _run("snap", {"text": "hi"}, inline)
        await asyncio.sleep(0.05)  # a timer due at once would have fired by now
    assert outcome.value == "hi"
    assert inv.call_id is None
    assert await rows() == []
    assert waited == []


async def test_the_first_step_hook_is_not_left_behind() -> None:
    """A run that completes inline gives the enclosing Awaiting's hook back; a later wait calls only the transport's."""
    calls: list[str] = []

    async def request() -> str:
        assert core.Awaiting.first_step() is not None
        waiter = core.Awaiting.first_step()
        assert waiter is not None and waiter.also is None
        await asyncio.sleep(0)  # the first wait of the request, after the run ended
        assert core.Awaiting.first_step() is None, "only the first step of the request is one"
        return "done"

    assert await core.Awaiting(request(), lambda: calls.append("transport")) == "done"
    assert calls == ["transport"]


async def test_a_task_started_in_the_first_step_is_not_in_it() -> None:
    seen: list[Any] = []

    async def child() -> None:
        seen.append(core.Awaiting.first_step())

    async def request() -> None:
        started = asyncio.ensure_future(child())
        await started

    await core.Awaiting(request(), lambda: None)
    assert seen == [None]
