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


async def get_prompt(value: Any) -> dict[str, Any]:
    """What ``prompts/get`` answers for a prompt returning ``value``."""
    def review_value() -> Any:
        return value

    prompt(name="review_value")(review_value)
    try:
        body: dict[str, Any] = (await call_modern(APP, "prompts/get", {"name": "review_value"})).json()
    finally:
        registry.unregister_prompt("review_value")
    return body


@pytest.mark.parametrize("value", [
    ("system", "You are a pirate"),  # was two user messages: "system" and the text
    {"role": "user", "content": {"type": "text"}},  # no "text": the official client refused the result
    {"role": "user", "content": {"type": "image", "data": "AA=="}},  # no mimeType
    {"role": "user", "content": {"type": "resource_link", "uri": "x://y"}},  # no name
    {"role": "user", "content": {"type": "video", "url": "x"}},  # no such block
    None,  # a missing return: found by a review, it went out as an empty prompt ({"messages": []})
], ids=["system-pair", "text-without-text", "image-without-mime", "link-without-name", "unknown-type", "none"])
async def test_a_prompt_returning_no_valid_message_is_an_internal_error(value: Any) -> None:
    """docs/protocol.md: a role other than user / assistant, or content that is no content block, is the
    prompt's bug: -32603. They went out as sent, and the official client failed to read the result."""
    body = await get_prompt(value)
    assert body["error"]["code"] == -32603, body


async def test_a_prompt_returning_whole_blocks_is_served() -> None:
    blocks = [{"role": "user", "content": {"type": "image", "data": "AA==", "mimeType": "image/png"}},
              {"role": "assistant", "content": {"type": "resource_link", "uri": "x://y", "name": "y"}}]
    assert (await get_prompt(blocks))["result"]["messages"] == blocks


async def test_a_pair_of_messages_is_two_messages() -> None:
    """Only a 2-tuple led by a role is one message (0ddd771 read every 2-tuple as one, and refused this)."""
    body = await get_prompt((("user", "a"), ("assistant", "b")))
    assert body["result"]["messages"] == [{"role": "user", "content": {"type": "text", "text": "a"}},
                                          {"role": "assistant", "content": {"type": "text", "text": "b"}}], body


@pytest.mark.parametrize("content", [
    {"type": "text", "text": None},  # a NULL column
    {"type": "image", "data": "AA==", "mimeType": None},
    {"type": "resource", "resource": {"uri": "x://y"}},  # neither text nor blob
], ids=["null-text", "null-mime", "resource-without-contents"])
async def test_a_block_whose_values_are_not_a_blocks_is_refused(content: dict[str, Any]) -> None:
    """The keys were there, their values not: the official client refused the result."""
    body = await get_prompt({"role": "user", "content": content})
    assert body["error"]["code"] == -32603, body
