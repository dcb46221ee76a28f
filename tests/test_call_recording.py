"""Which calls get a ``ToolCall`` row: none for fast calls, slow ones after a threshold, all on request."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from django.test import override_settings

from mcp_tools.models import ToolCall
from mcp_tools.registry import make_tool, registry
from tests.asgi_client import call_modern

pytestmark = pytest.mark.django_db(transaction=True)


async def nap(seconds: float) -> str:
    """Sleep, then say so."""
    await asyncio.sleep(seconds)
    return "rested"


@pytest.fixture
def app():  # type: ignore[no-untyped-def]
    from demo_site.asgi import application

    with registry.registered_temporarily(make_tool(nap)):
        yield application


async def rows() -> list[tuple[str, str]]:
    return await sync_to_async(lambda: list(ToolCall.objects.values_list("tool_name", "status")))()


async def test_fast_call_writes_no_row(app) -> None:  # type: ignore[no-untyped-def]
    response = await call_modern(app, "tools/call", {"name": "echo", "arguments": {"text": "hi"}})
    assert response.json()["result"]["content"] == [{"type": "text", "text": "hi"}]
    assert await rows() == []


async def test_record_all_calls_writes_a_completed_row(app, settings) -> None:  # type: ignore[no-untyped-def]
    with override_settings(MCP_TOOLS={**settings.MCP_TOOLS, "RECORD_ALL_CALLS": True}):
        await call_modern(app, "tools/call", {"name": "echo", "arguments": {"text": "hi"}})
    assert await rows() == [("echo", "completed")]
    call = await sync_to_async(ToolCall.objects.get)()
    assert call.result == {"content": [{"type": "text", "text": "hi"}]}
    assert call.flavor == "mrtr"


async def test_slow_call_gets_a_row_while_it_runs(app, settings) -> None:  # type: ignore[no-untyped-def]
    with override_settings(MCP_TOOLS={**settings.MCP_TOOLS, "SLOW_CALL_SECONDS": 0.05}):
        running = asyncio.ensure_future(call_modern(app, "tools/call", {"name": "nap", "arguments": {"seconds": 0.6}}))
        seen: list[tuple[str, str]] = []
        for _ in range(50):
            await asyncio.sleep(0.02)
            seen = await rows()
            if seen:
                break
        assert seen == [("nap", "working")], "a call still running after SLOW_CALL_SECONDS shows up as working"
        response = await running
    assert response.json()["result"]["content"] == [{"type": "text", "text": "rested"}]
    assert await rows() == [("nap", "completed")]


async def test_call_faster_than_the_threshold_writes_no_row(app, settings) -> None:  # type: ignore[no-untyped-def]
    with override_settings(MCP_TOOLS={**settings.MCP_TOOLS, "SLOW_CALL_SECONDS": 5}):
        await call_modern(app, "tools/call", {"name": "nap", "arguments": {"seconds": 0.05}})
    assert await rows() == []
