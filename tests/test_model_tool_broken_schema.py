"""A model tool whose schemas cannot be built (a serializer field no schema fits: mcp_tools.E034).

The first ``tools/list`` answered "Internal error" for the whole server; the tool then kept its
placeholder input schema, which validates nothing, so later calls reached its handler unvalidated.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from mcp_tools.modeltools.base import build_tool
from mcp_tools.registry import registry
from tests.asgi_client import call_modern
from tests.test_resources_review import APP

pytestmark = pytest.mark.django_db(transaction=True)

ran: list[Any] = []


def handler(ctx: Any, **arguments: Any) -> str:
    ran.append(arguments)
    return "ran"


def resolve() -> Any:
    raise TypeError("no JSON Schema for the serializer field 'blob'")


@pytest.fixture
def broken_tool(settings: Any) -> Any:
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    ran.clear()
    tool = build_tool("broken.things.create", handler, resolve, title="Create a thing", description="Create a thing.",
                      annotations={}, permissions=())
    with registry.registered_temporarily(tool):
        yield tool


async def test_the_list_leaves_the_broken_tool_out_and_says_why_in_the_log(broken_tool: Any, caplog: Any) -> None:
    with caplog.at_level(logging.ERROR, logger="mcp_tools.server"):
        for _ in range(2):
            r = await call_modern(APP, "tools/list", {})
            assert r.status == 200, r.body
            names = [tool["name"] for tool in r.json()["result"]["tools"]]
            assert "echo" in names and "broken.things.create" not in names
    assert "broken.things.create cannot be listed" in caplog.text


async def test_a_call_of_the_broken_tool_never_reaches_its_handler(broken_tool: Any) -> None:
    await call_modern(APP, "tools/list", {})  # the failed build used to leave the placeholder schema
    for _ in range(2):
        r = await call_modern(APP, "tools/call", {"name": "broken.things.create", "arguments": {"anything": [1, 2]}})
        body = r.json()
        assert r.status == 200 and body["id"] is not None, body  # an error of the call, not a 500 with id null
        assert "error" in body or body["result"].get("isError") is True, body
    assert ran == []
