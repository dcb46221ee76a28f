"""``ctx.sample(messages)`` takes messages as a prompt's are written: a message's content may be plain
text (a text block is sent), and a message or block may be an ``mcp_types`` model (sent as its JSON).

Found by the author review: ``ctx.sample([{"role": "user", "content": "text"}])`` sent the string as the
content, which the spec's ``SamplingMessage`` refuses: the official client (2026-07-28) raised a
``ValidationError`` out of ``call_tool``, and in a 2025-11-25 session it answered "Invalid request
parameters", failing the call.
"""

from __future__ import annotations

from typing import Any

import mcp_types
import pytest

from mcp_tools import ToolContext
from mcp_tools.registry import make_tool, registry
from mcp_tools.transports.http import McpEndpoint
from tests.asgi_client import call_modern

pytestmark = pytest.mark.django_db(transaction=True)
APP = McpEndpoint()

TEXT = {"type": "text", "text": "plain"}


async def sample_messages(ctx: ToolContext) -> str:
    answer = await ctx.sample([
        {"role": "user", "content": "plain"},
        {"role": "assistant", "content": [mcp_types.TextContent(type="text", text="plain")]},
        mcp_types.SamplingMessage(role="user", content=mcp_types.TextContent(type="text", text="plain")),
    ], max_tokens=5)
    return answer.text


async def test_plain_text_and_sdk_models_are_sent_as_content_blocks() -> None:
    params: dict[str, Any] = {"name": "author_sample_messages", "arguments": {}}
    caps = {"sampling": {}}
    with registry.registered_temporarily(make_tool(sample_messages, name="author_sample_messages")):
        asked = (await call_modern(APP, "tools/call", params, capabilities=caps)).json()["result"]
        [(key, request)] = asked["inputRequests"].items()
        assert request["params"]["messages"] == [
            {"role": "user", "content": TEXT}, {"role": "assistant", "content": [TEXT]}, {"role": "user", "content": TEXT}], request
        answer = {"role": "assistant", "model": "m", "content": {"type": "text", "text": "done"}}
        done = (await call_modern(APP, "tools/call", {**params, "requestState": asked["requestState"], "inputResponses": {key: answer}},
                                  capabilities=caps)).json()["result"]
    assert done["content"] == [{"type": "text", "text": "done"}], done
