"""docs/protocol.md (52cbb48): "what the prompt returns is a string or a message, or a list of them; a
message is a string (a user message), a (role, content) pair or a {"role", "content"} dict". A single
pair is iterated as two strings: two user messages, "assistant" and the text."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_tools import prompt
from mcp_tools.registry import registry
from mcp_tools.transports.http import McpEndpoint
from tests.asgi_client import call_modern

pytestmark = pytest.mark.django_db(transaction=True)
APP = McpEndpoint()


async def test_a_prompt_returning_one_role_content_pair_is_one_message() -> None:
    def greeting() -> Any:
        return ("assistant", "Hello.")

    prompt(name="review_single_pair")(greeting)
    try:
        body = (await call_modern(APP, "prompts/get", {"name": "review_single_pair"})).json()
    finally:
        registry.unregister_prompt("review_single_pair")
    assert body["result"]["messages"] == [{"role": "assistant", "content": {"type": "text", "text": "Hello."}}], body
