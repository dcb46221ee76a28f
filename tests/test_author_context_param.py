"""A context parameter written ``ctx: ToolContext | None = None`` (so the function can also be called
directly, in the author's own code or tests) or ``Annotated[ToolContext, ...]`` receives the call's
context, as ``ctx: ToolContext`` does.

Found by the author review: such a tool, prompt or resource could not be registered; the project did
not start, with pydantic's "Cannot generate a JsonSchema for core_schema.IsInstanceSchema (ToolContext)"
as the reason (the parameter was taken for an argument of the input schema).
"""

from __future__ import annotations

from typing import Annotated, Optional

import pytest

import mcp_tools
from mcp_tools import ToolContext
from mcp_tools.registry import make_tool, registry
from mcp_tools.transports.http import McpEndpoint
from tests.asgi_client import call_modern

pytestmark = pytest.mark.django_db(transaction=True)
APP = McpEndpoint()


async def optional_ctx(x: int, ctx: ToolContext | None = None) -> str:
    return f"{x} {isinstance(ctx, ToolContext)}"


def optional_ctx_sync(x: int, ctx: Optional[ToolContext] = None) -> str:  # noqa: UP045 - the spelling under test
    return f"{x} {isinstance(ctx, ToolContext)}"


async def annotated_ctx(x: int, ctx: Annotated[ToolContext, "the call"]) -> str:
    return f"{x} {isinstance(ctx, ToolContext)}"


async def annotated_optional_ctx(x: int, ctx: Annotated[ToolContext | None, "the call"] = None) -> str:
    return f"{x} {isinstance(ctx, ToolContext)}"


@pytest.mark.parametrize("fn", [optional_ctx, optional_ctx_sync, annotated_ctx, annotated_optional_ctx])
async def test_an_optional_or_annotated_context_parameter_gets_the_context(fn: object) -> None:
    tool = make_tool(fn)  # type: ignore[arg-type]
    assert tool.context_param == "ctx"
    assert set(tool.input.schema["properties"]) == {"x"}, tool.input.schema
    with registry.registered_temporarily(tool):
        body = (await call_modern(APP, "tools/call", {"name": tool.name, "arguments": {"x": 3}})).json()
    assert body["result"]["content"] == [{"type": "text", "text": "3 True"}], body


async def test_a_prompt_and_a_resource_take_an_optional_context_too() -> None:
    @mcp_tools.prompt(name="author_optional_ctx_prompt")
    def topic_prompt(topic: str, ctx: ToolContext | None = None) -> str:
        return f"{topic} {isinstance(ctx, ToolContext)}"

    @mcp_tools.resource("author-ctx://{topic}", mime_type="text/plain")
    def topic_resource(topic: str, ctx: ToolContext | None = None) -> str:
        return f"{topic} {isinstance(ctx, ToolContext)}"

    try:
        prompts = (await call_modern(APP, "prompts/list", {})).json()["result"]["prompts"]
        listed = next(p for p in prompts if p["name"] == "author_optional_ctx_prompt")
        assert [a["name"] for a in listed["arguments"]] == ["topic"], listed
        got = (await call_modern(APP, "prompts/get", {"name": "author_optional_ctx_prompt", "arguments": {"topic": "t"}})).json()
        assert got["result"]["messages"][0]["content"]["text"] == "t True", got
        read = (await call_modern(APP, "resources/read", {"uri": "author-ctx://t"})).json()
        assert read["result"]["contents"][0]["text"] == "t True", read
    finally:
        registry.unregister_prompt("author_optional_ctx_prompt")
        registry.unregister_resource("author-ctx://{topic}")


def _group_and_superuser_token() -> tuple[int, str]:
    from django.contrib.auth.models import Group, User
    from rest_framework.authtoken.models import Token

    user = User.objects.create_superuser("author_ctx_admin", password="x")
    return Group.objects.create(name="author-ctx").pk, Token.objects.create(user=user).key


def _describe(self: object, ctx: ToolContext | None = None) -> str:
    """Describe the group."""
    return f"{getattr(self, 'name')} {isinstance(ctx, ToolContext)}"


async def test_a_model_action_takes_an_optional_context_too() -> None:
    from asgiref.sync import sync_to_async
    from django.contrib.auth.models import Group

    from mcp_tools.modeltools import unregister_model_action

    pk, token = await sync_to_async(_group_and_superuser_token)()
    Group.author_describe = _describe  # type: ignore[attr-defined]
    action = mcp_tools.register_model_action(Group, "author_describe", name="author.groups.describe", read_only=True)
    try:
        tools = (await call_modern(APP, "tools/list", {}, token=token)).json()["result"]["tools"]
        listed = next(tool for tool in tools if tool["name"] == "author.groups.describe")
        assert "ctx" not in listed["inputSchema"]["properties"], listed
        body = (await call_modern(APP, "tools/call", {"name": "author.groups.describe", "arguments": {"id": pk}}, token=token)).json()
        assert body["result"]["content"] == [{"type": "text", "text": "author-ctx True"}], body
    finally:
        unregister_model_action(action)
        del Group.author_describe  # type: ignore[attr-defined]
