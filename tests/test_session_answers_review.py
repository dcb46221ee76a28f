"""Review: client responses to elicitation/create in a 2025-11-25 session (answers arrive as POSTed JSON-RPC
responses). Each test asserts the correct behaviour and fails on the current code."""
from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from mcp_tools import ToolContext
from mcp_tools.models import ToolCall
from mcp_tools.registry import make_tool, registry
from tests.asgi_client import HANDSHAKE, post_headers, post_json
from tests.test_http_spec_edges import APP, Stream, _in_memory_layer, open_session  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)
SCHEMA = {"type": "object", "properties": {"age": {"type": "integer", "maximum": 150}}, "required": ["age"]}


async def ask_age(ctx: ToolContext) -> str:
    """Form elicitation with a range."""
    answer = await ctx.elicit("Age?", SCHEMA, key="age")
    return str(answer["age"])


async def ask_name(ctx: ToolContext) -> str:
    """Form elicitation."""
    answer = await ctx.elicit("Name?", {"type": "object", "properties": {"name": {"type": "string"}}}, key="name")
    return str(answer.get("name"))


@pytest.fixture(autouse=True)
def tools():  # type: ignore[no-untyped-def]
    with registry.registered_temporarily(make_tool(ask_age), make_tool(ask_name)):
        yield


async def _asked(session: str, tool: str) -> tuple[Stream, dict[str, Any]]:
    call = {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": tool, "arguments": {}}}
    stream = Stream("POST", post_headers(version=HANDSHAKE, session=session), json.dumps(call).encode())
    try:
        _, ask = await stream.wait_for(lambda m: m.get("method") == "elicitation/create" or "result" in m or "error" in m)
    except AssertionError:  # no SSE stream: the whole answer came as one JSON body
        ask = json.loads(stream.text())
    return stream, ask


async def test_form_elicitation_is_not_sent_to_a_session_that_declared_url_mode_only() -> None:
    """2025-11-25 elicitation: "Servers MUST NOT send elicitation requests with modes that are not supported
    by the client"; {"url": {}} is URL mode only. Expected: the call fails with -32021 (missing capability)."""
    session = await open_session({"elicitation": {"url": {}}})
    stream, first = await _asked(session, "ask_name")
    stream.gone.set()
    assert first.get("method") != "elicitation/create", f"form elicitation sent to a url-only client: {first}"
    assert first["error"]["code"] == -32021 and first["error"]["data"] == {"requiredCapabilities": {"elicitation": {"form": {}}}}, first


async def test_an_answer_breaking_the_schema_is_refused_with_an_http_error_and_the_call_keeps_waiting() -> None:
    """2025-11-25 transports: a POSTed response the server "cannot accept" MUST get an HTTP error status
    (e.g. 400). Today the invalid answer gets 202 Accepted and the call ends at once as a failed tool call
    ("Invalid answer: ... greater than the maximum of 150"); the 2026-07-28 path refuses the same answer
    with -32602 and the call keeps waiting."""
    session = await open_session({"elicitation": {}})
    stream, ask = await _asked(session, "ask_age")
    assert ask.get("method") == "elicitation/create", ask
    headers = post_headers(version=HANDSHAKE, session=session)
    bad = await post_json(APP, {"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"age": 999}}}, headers)
    try:
        assert 400 <= bad.status < 500, f"an answer the server refuses was acknowledged {bad.status}"
        call_id = ask["id"].split(":")[1]
        status = await sync_to_async(lambda: ToolCall.objects.get(id=call_id).status)()
        assert status == "input_required", status
    finally:
        stream.gone.set()


async def test_a_response_for_another_session_s_call_is_refused_with_an_http_error() -> None:
    """The server ignores (rightly) a response to a request it sent to another session, but answers it
    202 Accepted; the transport says a response it cannot accept MUST get an HTTP error status."""
    session, other = await open_session({"elicitation": {}}), await open_session({"elicitation": {}})
    stream, ask = await _asked(session, "ask_name")
    try:
        forged = await post_json(APP, {"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"name": "x"}}},
                                 post_headers(version=HANDSHAKE, session=other))
        assert 400 <= forged.status < 500, f"a response that was ignored was acknowledged {forged.status}"
    finally:
        stream.gone.set()


async def test_a_refused_answer_can_be_given_again_and_a_repeated_one_is_accepted_as_it_was() -> None:
    """After the 400 the step still waits: the client's corrected answer is accepted (202) and the call goes
    on. The same answer delivered again (a client retrying a POST whose 202 it lost) changes nothing and is
    accepted again; another answer to the answered request is refused, as is an id the server never sent."""
    session = await open_session({"elicitation": {}})
    stream, ask = await _asked(session, "ask_age")
    headers = post_headers(version=HANDSHAKE, session=session)
    try:
        bad = await post_json(APP, {"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"age": 999}}}, headers)
        assert bad.status == 400 and "id" not in bad.json() and bad.json()["error"]["code"] == -32602, (bad.status, bad.body)
        good = {"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"age": 42}}}
        assert (await post_json(APP, good, headers)).status == 202
        _, final = await stream.wait_for(lambda m: m.get("id") == 5)
        assert final["result"]["content"] == [{"type": "text", "text": "42"}], final
        assert (await post_json(APP, good, headers)).status == 202
        other = {"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"age": 43}}}
        assert (await post_json(APP, other, headers)).status == 400
        unknown = await post_json(APP, {"jsonrpc": "2.0", "id": "nonsense", "result": {}}, headers)
        assert unknown.status == 400 and unknown.json()["error"]["code"] == -32600, (unknown.status, unknown.body)
    finally:
        stream.gone.set()
