"""Elicitation answers are checked against the whole requested schema, and URL-mode ids are unique.

Each failed before its mend: array items, lengths, ranges, formats and unknown fields reached the
handler of a dict schema (unknown fields are dropped, not refused); every URL elicitation's id was its step key;
a valid answer to a model whose enum sat in a list's items or an ``Optional`` (its ``$ref`` not inlined)
crashed the round (-32603, HTTP 500), and the call waited for ever.
"""
from __future__ import annotations

import asyncio
import enum
import json
from typing import Any

import pytest
from pydantic import BaseModel

from mcp_tools import ToolContext
from mcp_tools.registry import make_tool, registry
from mcp_tools.transports.http import McpEndpoint
from tests.asgi_client import HANDSHAKE, call_modern, post_headers, post_json

pytestmark = pytest.mark.django_db(transaction=True)
APP = McpEndpoint()
FORM = {"elicitation": {"form": {}}}
URL_CAPABLE = {"elicitation": {"form": {}, "url": {}}}

SCHEMA = {"type": "object", "properties": {
    "colors": {"type": "array", "items": {"type": "string", "enum": ["Red", "Green"]}},
    "titled": {"type": "array", "items": {"anyOf": [{"const": "#f00", "title": "Red"}]}},
    "code": {"type": "string", "maxLength": 3},
    "email": {"type": "string", "format": "email"},
    "age": {"type": "integer", "minimum": 0, "maximum": 150},
}}


async def pick_colors(ctx: ToolContext) -> str:
    """Pick colours (dict schema)."""
    answer = await ctx.elicit("Pick", SCHEMA, key="pick")
    return repr(sorted(answer.items()))


async def connect_account(ctx: ToolContext) -> str:
    """URL mode."""
    await ctx.elicit_url("Link your account", "https://example.com/link", key="link")
    return "linked"


@pytest.fixture
def app():  # type: ignore[no-untyped-def]
    from demo_site.asgi import application

    with registry.registered_temporarily(make_tool(pick_colors), make_tool(connect_account)):
        yield application


async def answer(app: Any, content: dict[str, Any]) -> dict[str, Any]:
    first = (await call_modern(app, "tools/call", {"name": "pick_colors", "arguments": {}}, capabilities=FORM)).json()["result"]
    assert first["resultType"] == "input_required"
    second = await call_modern(app, "tools/call", {"name": "pick_colors", "arguments": {}, "requestState": first["requestState"],
                                                   "inputResponses": {"pick": {"action": "accept", "content": content}}},
                               capabilities=FORM)
    return second.json()


@pytest.mark.parametrize("content", [
    {"colors": ["Purple"]},                 # multi-select value outside items.enum
    {"titled": ["#0f0"]},                   # multi-select value outside items.anyOf consts
    {"code": "abcdefgh"},                   # longer than maxLength
    {"email": "not an email"},              # format
    {"age": -5},                            # below minimum
])
async def test_an_answer_that_does_not_fit_the_requested_schema_does_not_reach_the_handler(app: Any, content: dict[str, Any]) -> None:
    body = await answer(app, content)
    assert body["error"]["code"] == -32602, body  # refused as the answer arrives: the call still waits
    assert "Invalid input response for 'pick'" in body["error"]["message"]


async def test_an_answer_that_fits_reaches_the_handler(app: Any) -> None:
    content = {"colors": ["Red"], "titled": ["#f00"], "code": "abc", "email": "a@example.com", "age": 40}
    body = await answer(app, content)
    assert body["result"]["content"][0]["text"] == repr(sorted(content.items())), body


def test_url_mode_elicitation_ids_are_unique_per_elicitation() -> None:
    """Up to 2025-11-25, which requires the id (2026-07-28 has none: tests/test_elicit_url.py)."""
    from tests.test_engine_corners import first_request

    ids = [first_request(connect_account, URL_CAPABLE, "2025-11-25")["elicitationId"] for _ in range(2)]
    assert ids[0] != ids[1], ids


async def test_a_field_the_schema_does_not_name_never_reaches_the_handler(app: Any) -> None:
    """Dropped, not refused: clients (the conformance suite's among them) send extra fields."""
    body = await answer(app, {"code": "abc", "is_admin": True})
    assert body["result"]["content"][0]["text"] == repr([("code", "abc")]), body


# -- enums a model writes as a $ref: in a list's items, in an Optional -----------------------------------


class Color(str, enum.Enum):
    RED = "red"
    BLUE = "blue"


class Paint(BaseModel):
    colors: list[Color]
    trim: Color | None = None


async def paint(ctx: ToolContext) -> str:
    answer = await ctx.elicit("Which colours?", schema=Paint, key="paint")
    return ",".join(color.value for color in answer.colors) + f"/{answer.trim.value if answer.trim else '-'}"


async def paint_dict(ctx: ToolContext) -> str:
    """A model's JSON schema given as a dict: its ``$defs`` and refs as pydantic wrote them."""
    answer = await ctx.elicit("Which colours?", schema=Paint.model_json_schema(), key="paint")
    return json.dumps(answer, sort_keys=True)


def test_an_enum_in_a_list_or_an_optional_is_written_out_in_the_requested_schema() -> None:
    """``requestedSchema`` goes without ``$defs``: a ``$ref`` anywhere in it points to nothing (the
    answer's check crashed on it, and no client can render it)."""
    from mcp_tools.engine.context import _flat_elicitation_schema

    enum_schema = {"type": "string", "enum": ["red", "blue"]}
    for given in (Paint, Paint.model_json_schema()):
        requested = _flat_elicitation_schema(given)
        assert "$ref" not in json.dumps(requested) and "$defs" not in requested, requested
        properties = requested["properties"]
        assert properties["colors"]["type"] == "array" and enum_schema.items() <= properties["colors"]["items"].items(), properties
        assert enum_schema.items() <= properties["trim"].items() and "default" not in properties["trim"], properties
        assert requested["required"] == ["colors"]


async def _answer_paint_2026(name: str, content: dict[str, Any]) -> dict[str, Any]:
    first = (await call_modern(APP, "tools/call", {"name": name, "arguments": {}}, capabilities=FORM)).json()["result"]
    assert first["resultType"] == "input_required", first
    return (await call_modern(APP, "tools/call", {"name": name, "arguments": {}, "requestState": first["requestState"],
                                                  "inputResponses": {"paint": {"action": "accept", "content": content}}},
                              capabilities=FORM)).json()


async def _answer_paint_saga(name: str, content: dict[str, Any]) -> dict[str, Any]:
    started = (await call_modern(APP, "tools/callSaga", {"name": name, "arguments": {}}, capabilities=FORM)).json()["result"]
    return (await call_modern(APP, "tools/resumeSaga", {"sagaToken": started["sagaToken"], "completedSteps": [
        {"stepId": "paint", "result": {"action": "accept", "content": content}}]}, capabilities=FORM)).json()


async def _answer_paint_2025(name: str, content: dict[str, Any]) -> dict[str, Any]:
    from tests.test_http_spec_edges import Stream, open_session

    headers = post_headers(version=HANDSHAKE, session=await open_session({"elicitation": {}}))
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": name, "arguments": {}}}
    stream = Stream("POST", headers, json.dumps(call).encode())
    try:
        _, asked = await stream.wait_for(lambda m: m.get("method") == "elicitation/create")
        posted = await post_json(APP, {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": content}}, headers)
        assert posted.status == 202, (posted.status, posted.body)
        _, final = await stream.wait_for(lambda m: "result" in m or "error" in m)
        return dict(final)
    finally:
        stream.gone.set()
        await asyncio.wait_for(stream.task, 10)


@pytest.mark.parametrize("era", ["2026-07-28", "saga", "2025-11-25"])
@pytest.mark.parametrize("tool", [paint, paint_dict])
async def test_an_answer_to_an_enum_list_and_an_optional_enum_completes_the_call(era: str, tool: Any, settings: Any) -> None:
    """Each valid answer crashed its round: -32603 over 2026-07-28 and tools/resumeSaga, HTTP 500 to
    the 2025-11-25 answer's POST (jsonschema's PointerToNowhere '/$defs/Color')."""
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}  # as test_http_spec_edges
    send = {"2026-07-28": _answer_paint_2026, "saga": _answer_paint_saga, "2025-11-25": _answer_paint_2025}[era]
    with registry.registered_temporarily(make_tool(tool)):
        body = await send(tool.__name__, {"colors": ["red", "blue"], "trim": "blue"})
    assert "result" in body, body
    text = body["result"]["content"][0]["text"]
    assert text == ("red,blue/blue" if tool is paint else json.dumps({"colors": ["red", "blue"], "trim": "blue"}, sort_keys=True)), body


@pytest.mark.parametrize("content", [{"colors": ["green"]}, {"colors": ["red"], "trim": "green"}])
async def test_an_answer_outside_the_enum_is_refused(content: dict[str, Any]) -> None:
    with registry.registered_temporarily(make_tool(paint)):
        body = await _answer_paint_2026("paint", content)
    assert body["error"]["code"] == -32602, body
    assert "Invalid input response for 'paint'" in body["error"]["message"], body


#: ``Paint``'s ``requestedSchema`` as earlier releases sent and journaled it: the list's items kept
#: their ref (``$defs`` was not sent), the Optional's ref was left out with nothing in its place, and
#: the first of them sent its ``"default": null``.
EARLIER_PAINT_SCHEMAS = [{"type": "object", "properties": {
    "colors": {"items": {"$ref": "#/$defs/Color"}, "title": "Colors", "type": "array"}, "trim": trim,
}, "required": ["colors"]} for trim in ({}, {"default": None})]


@pytest.mark.parametrize("earlier_schema", EARLIER_PAINT_SCHEMAS)
def test_a_step_an_earlier_release_journaled_with_an_enum_ref_takes_its_answer_and_replays(earlier_schema: dict[str, Any]) -> None:
    """A call in flight across the upgrade (one such call waited for ever): the ref in the journaled
    request is the server's fault, not the answer's, and the step is the handler's step on replay."""
    from asgiref.sync import async_to_sync

    from mcp_tools.engine import Completed, Invocation, run
    from mcp_tools.engine.journal import Journal, Step, digest
    from mcp_tools.protocol.answers import checked_step_answer
    from tests.test_engine_corners import StubRuntime

    request = {"method": "elicitation/create", "params": {"mode": "form", "message": "Which colours?", "requestedSchema": earlier_schema}}
    answer = checked_step_answer(request, {"action": "accept", "content": {"colors": ["red"]}})
    journal = Journal([Step(seq=0, kind="elicit", key="paint", digest=digest(["elicit", request]), request=request,
                            status="done", response=answer)])
    inv = Invocation(fn=paint, is_async=True, kwargs={}, context_param="ctx", principal=None,
                     protocol_version="2025-11-25", client_capabilities={"elicitation": {}},
                     runtime=StubRuntime(), journal=journal)  # type: ignore[arg-type]
    outcome = async_to_sync(run)(inv)
    assert isinstance(outcome, Completed), outcome
    assert outcome.value == "red/-"


def test_a_dict_schema_an_earlier_release_sent_with_its_defs_checks_the_answer_against_them() -> None:
    from mcp_tools.protocol.answers import InvalidAnswer, check_answer

    params = {"mode": "form", "message": "Which colours?", "requestedSchema": Paint.model_json_schema()}
    check_answer("elicitation/create", params, {"action": "accept", "content": {"colors": ["red"]}})
    with pytest.raises(InvalidAnswer, match="colors"):
        check_answer("elicitation/create", params, {"action": "accept", "content": {"colors": ["green"]}})
