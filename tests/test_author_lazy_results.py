"""A tool, prompt or resource that returns a lazy translation (``gettext_lazy``) answers its text, as one
returning a ``str`` does.

Found by the author review: a tool's ``-> str`` value went out JSON-quoted (``"\\"Done\\""``), a resource's as
JSON text (``application/json``), and a prompt's became one user message per character.
"""

from __future__ import annotations

import pytest
from django.utils.translation import gettext_lazy as _

import mcp_tools
from mcp_tools.registry import make_tool, registry
from mcp_tools.transports.http import McpEndpoint
from tests.asgi_client import call_modern

pytestmark = pytest.mark.django_db(transaction=True)
APP = McpEndpoint()


def lazy_done() -> str:
    return _("Done")


def lazy_prompt() -> list:  # type: ignore[type-arg]
    return [_("First"), ("assistant", _("Second"))]


def lazy_single_prompt() -> str:
    return _("Only")


def lazy_resource() -> str:
    return _("Resource text")


async def test_a_lazy_text_is_answered_as_text() -> None:
    mcp_tools.prompt(name="author_lazy_prompt")(lazy_prompt)
    mcp_tools.prompt(name="author_lazy_single_prompt")(lazy_single_prompt)
    mcp_tools.resource("author-lazy://text", mime_type="text/plain")(lazy_resource)
    try:
        with registry.registered_temporarily(make_tool(lazy_done, name="author_lazy_done")):
            tool = (await call_modern(APP, "tools/call", {"name": "author_lazy_done", "arguments": {}})).json()["result"]
        prompt = (await call_modern(APP, "prompts/get", {"name": "author_lazy_prompt"})).json()["result"]
        single = (await call_modern(APP, "prompts/get", {"name": "author_lazy_single_prompt"})).json()["result"]
        resource = (await call_modern(APP, "resources/read", {"uri": "author-lazy://text"})).json()["result"]
    finally:
        registry.unregister_prompt("author_lazy_prompt")
        registry.unregister_prompt("author_lazy_single_prompt")
        registry.unregister_resource("author-lazy://text")
    assert tool["content"] == [{"type": "text", "text": "Done"}], tool
    assert [(m["role"], m["content"]["text"]) for m in prompt["messages"]] == [("user", "First"), ("assistant", "Second")], prompt
    assert [m["content"]["text"] for m in single["messages"]] == ["Only"], single
    assert resource["contents"] == [{"uri": "author-lazy://text", "text": "Resource text", "mimeType": "text/plain"}], resource


def lazy_tool_result() -> mcp_tools.ToolResult:
    return mcp_tools.ToolResult(content=[_("Done"), "plain"])


async def test_a_hand_built_results_lazy_text_is_a_text_block() -> None:
    # "Not a content block: 'Done'" (a TypeError): the call answered "Internal error".
    with registry.registered_temporarily(make_tool(lazy_tool_result, name="author_lazy_tool_result")):
        result = (await call_modern(APP, "tools/call", {"name": "author_lazy_tool_result", "arguments": {}})).json()["result"]
    assert result["content"] == [{"type": "text", "text": "Done"}, {"type": "text", "text": "plain"}], result
