"""Tool chaining (seed 001): ``_meta.nextTool`` is sent only when the caller could make that call."""

from __future__ import annotations

import pytest

from mcp_tools.registry import make_tool, registry
from mcp_tools.registry.results import ToolResult
from tests.asgi_client import call_modern


def chain_to(tool: str, arguments: dict[str, object]) -> ToolResult:
    return ToolResult(content=["next step suggested"], next_tool=(tool, arguments))


async def suggests_echo() -> ToolResult:
    return chain_to("echo", {"text": "again"})


async def suggests_bad_arguments() -> ToolResult:
    return chain_to("echo", {"text": 5, "extra": True})


async def suggests_hidden_tool() -> ToolResult:
    return chain_to("restock", {"sku": "WID-001", "quantity": 1})


@pytest.fixture
def app():  # type: ignore[no-untyped-def]
    from demo_site.asgi import application

    with registry.registered_temporarily(
        make_tool(suggests_echo), make_tool(suggests_bad_arguments), make_tool(suggests_hidden_tool)
    ):
        yield application


async def call(app, name: str) -> dict:  # type: ignore[no-untyped-def]
    response = await call_modern(app, "tools/call", {"name": name, "arguments": {}})
    assert response.status == 200
    return response.json()["result"]


@pytest.mark.django_db(transaction=True)
async def test_next_tool_kept_when_the_caller_may_make_that_call(app) -> None:  # type: ignore[no-untyped-def]
    result = await call(app, "suggests_echo")
    assert result["_meta"]["nextTool"] == {"tool": "echo", "arguments": {"text": "again"}}


@pytest.mark.django_db(transaction=True)
async def test_next_tool_dropped_when_its_arguments_do_not_validate(app) -> None:  # type: ignore[no-untyped-def]
    result = await call(app, "suggests_bad_arguments")
    assert "nextTool" not in result.get("_meta", {})
    assert result["content"] == [{"type": "text", "text": "next step suggested"}]


@pytest.mark.django_db(transaction=True)
async def test_next_tool_dropped_when_the_caller_may_not_see_the_tool(app) -> None:  # type: ignore[no-untyped-def]
    result = await call(app, "suggests_hidden_tool")  # anonymous: restock needs inventory.change_product
    assert "nextTool" not in result.get("_meta", {})
