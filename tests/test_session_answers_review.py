"""Review: client responses to elicitation/create in a 2025-11-25 session (answers arrive as POSTed JSON-RPC
responses). Each test asserts the correct behaviour and fails on the current code."""
from __future__ import annotations

import asyncio
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


async def ask_age_and_name(ctx: ToolContext) -> str:
    """Both questions in one round (ctx.gather)."""
    age, name = await ctx.gather(ctx.elicit("Age?", SCHEMA, key="age"),
                                 ctx.elicit("Name?", {"type": "object", "properties": {"name": {"type": "string"}}}, key="name"))
    return f"{name.get('name')}: {age['age']}"


@pytest.fixture(autouse=True)
def tools():  # type: ignore[no-untyped-def]
    with registry.registered_temporarily(make_tool(ask_age), make_tool(ask_name), make_tool(ask_age_and_name)):
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


async def test_an_answer_breaking_the_schema_is_refused_with_an_http_error_and_fails_its_step() -> None:
    """2025-11-25 transports: a POSTed response the server "cannot accept" MUST get an HTTP error status
    (e.g. 400). The step fails with the refusal as well (-32602, as over stdio): the handler hears of it and
    the call answers on its stream. Before, the step kept waiting for a corrected answer that clients do not
    send (the official SDK ignores a 400 to a response it POSTs): tools/call hung, the row input_required."""
    session = await open_session({"elicitation": {}})
    stream, ask = await _asked(session, "ask_age")
    assert ask.get("method") == "elicitation/create", ask
    headers = post_headers(version=HANDSHAKE, session=session)
    bad = {"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"age": 999}}}
    try:
        refused = await post_json(APP, bad, headers)
        assert refused.status == 400 and "id" not in refused.json(), (refused.status, refused.body)
        assert refused.json()["error"]["code"] == -32602 and "Invalid answer" in refused.json()["error"]["message"]
        _, final = await stream.wait_for(lambda m: m.get("id") == 5)
    finally:
        stream.gone.set()
    assert final["result"]["isError"] is True, final
    assert "Invalid answer" in final["result"]["content"][0]["text"], final
    call_id = ask["id"].split(":")[1]
    assert await sync_to_async(lambda: ToolCall.objects.get(id=call_id).status)() == "failed"


async def test_a_refused_answer_in_a_gather_fails_its_step_once_the_rounds_other_answers_are_in() -> None:
    """docs/durable-calls.md: in a ``ctx.gather`` the handler runs again (and ``gather`` raises ``StepFailed``)
    only once every request of the round has its answer; the refusal alone leaves the call waiting."""
    session = await open_session({"elicitation": {}})
    headers = post_headers(version=HANDSHAKE, session=session)
    call = {"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "ask_age_and_name", "arguments": {}}}
    stream = Stream("POST", headers, json.dumps(call).encode())
    try:
        await stream.wait_for(lambda m: m.get("method") == "elicitation/create" and m["params"]["message"] == "Name?")
        asks = {m["params"]["message"]: m for _, m in stream.events() if m.get("method") == "elicitation/create"}
        bad = {"jsonrpc": "2.0", "id": asks["Age?"]["id"], "result": {"action": "accept", "content": {"age": 999}}}
        assert (await post_json(APP, bad, headers)).status == 400
        call_id = asks["Age?"]["id"].split(":")[1]
        assert await sync_to_async(lambda: ToolCall.objects.get(id=call_id).status)() == "input_required"
        assert not [m for _, m in stream.events() if m.get("id") == 6]  # no answer yet: "Name?" is still open
        name = {"jsonrpc": "2.0", "id": asks["Name?"]["id"], "result": {"action": "accept", "content": {"name": "x"}}}
        assert (await post_json(APP, name, headers)).status == 202
        _, final = await stream.wait_for(lambda m: m.get("id") == 6)
    finally:
        stream.gone.set()
    assert final["result"]["isError"] is True and "Invalid answer" in final["result"]["content"][0]["text"], final


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


async def test_a_refused_answer_is_refused_again_and_a_repeated_one_is_accepted_as_it_was() -> None:
    """An answer delivered again (a client retrying a POST whose reply it lost) changes nothing and gets what
    it got the first time: 202 for an accepted one, 400 -32602 for a refused one, identical concurrent POSTs
    included. Another answer to the request it answered is refused (-32600), as is an id the server never sent."""
    session = await open_session({"elicitation": {}})
    headers = post_headers(version=HANDSHAKE, session=session)
    stream, ask = await _asked(session, "ask_age")
    try:
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
    stream, ask = await _asked(session, "ask_age")
    try:
        bad = {"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"age": 999}}}
        first = await asyncio.gather(post_json(APP, bad, headers), post_json(APP, bad, headers))
        _, final = await stream.wait_for(lambda m: m.get("id") == 5)
        assert final["result"]["isError"] is True, final
        again = await post_json(APP, bad, headers)
        late = await post_json(APP, {**good, "id": ask["id"]}, headers)
    finally:
        stream.gone.set()
    for refused in (*first, again):
        assert refused.status == 400 and refused.json()["error"]["code"] == -32602, (refused.status, refused.body)
    assert late.status == 400 and late.json()["error"]["code"] == -32600, (late.status, late.body)
