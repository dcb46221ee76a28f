"""A prompt whose elicitation the user declines or cancels (docs/protocol.md, ``prompts/get``).

A tool answers that as its own error (``isError``); a ``GetPromptResult`` has no such field, so
``prompts/get`` answers a JSON-RPC error: ``-32602`` (the code the spec's prompts page, Error
Handling, and this project give a prompt request refused for what the client sent), never the
``-32603`` of a server failure, with ``data.action`` saying which answer ended it, the same in
both eras; the call's row ends ``failed`` with that error. Before the fix both eras answered
``-32603``, and a 2026-07-28 round answered without any effect left the row ``input_required``.
"""
from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

from mcp_tools import ToolContext, prompt
from mcp_tools.models import ToolCall
from mcp_tools.registry import registry
from mcp_tools.transports.http import McpEndpoint
from tests.asgi_client import HANDSHAKE, call_modern, handshake_message, post_headers, post_json
from tests.test_http_spec_edges import Stream, _in_memory_layer, open_session  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)
APP = McpEndpoint()
NAME = "declined_confirm_prompt"
FORM = {"elicitation": {"form": {}}}
CONFIRM = {"type": "object", "properties": {"detail": {"type": "boolean"}}, "required": ["detail"]}
MESSAGES = {
    "decline": "The user declined to provide the requested input.",
    "cancel": "The user cancelled the request for input.",
}


@pytest.fixture(autouse=True)
def confirm_prompt() -> Iterator[None]:
    async def ask_first(ctx: ToolContext) -> str:
        answer = await ctx.elicit("Include the details?", schema=CONFIRM, key="detail")
        return f"Write it {'with' if answer['detail'] else 'without'} details."

    prompt(name=NAME)(ask_first)
    try:
        yield
    finally:
        registry.unregister_prompt(NAME)


async def only_row() -> ToolCall:
    rows = [row async for row in ToolCall.objects.filter(tool_name=NAME)]
    assert len(rows) == 1, rows
    return rows[0]


def assert_refused(error: dict[str, Any], action: str) -> None:
    assert error == {"code": -32602, "message": MESSAGES[action], "data": {"action": action}}, error


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_2026_prompt_whose_elicitation_is_refused_answers_invalid_params_and_ends_its_call(action: str) -> None:
    first = (await call_modern(APP, "prompts/get", {"name": NAME}, capabilities=FORM)).json()["result"]
    assert first["resultType"] == "input_required", first
    retry = {"name": NAME, "requestState": first["requestState"], "inputResponses": {"detail": {"action": action}}}
    body = (await call_modern(APP, "prompts/get", retry, capabilities=FORM)).json()
    assert_refused(body["error"], action)
    row = await only_row()
    assert row.status == "failed" and row.error == body["error"], (row.status, row.error)
    # An identical retry of the round gets the identical answer (not a wait, not "still being processed").
    again = (await call_modern(APP, "prompts/get", retry, capabilities=FORM)).json()
    assert again.get("error") == body["error"], again


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_2025_prompt_whose_elicitation_is_refused_answers_the_same_error_and_ends_its_call(action: str) -> None:
    session = await open_session(FORM)
    headers = post_headers(version=HANDSHAKE, session=session)
    stream = Stream("POST", headers, json.dumps(handshake_message("prompts/get", {"name": NAME}, request_id=7)).encode())
    _, ask = await stream.wait_for(lambda m: m.get("method") == "elicitation/create")
    answered = await post_json(APP, {"jsonrpc": "2.0", "id": ask["id"], "result": {"action": action}}, headers)
    assert answered.status == 202, answered.body
    _, final = await stream.wait_for(lambda m: m.get("id") == 7)
    stream.gone.set()
    await asyncio.wait_for(stream.task, 10)
    assert_refused(final["error"], action)
    row = await only_row()
    assert row.status == "failed" and row.error == final["error"], (row.status, row.error)
