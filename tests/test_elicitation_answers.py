"""Elicitation answers are checked against the whole requested schema, and URL-mode ids are unique.

Each failed before its mend: array items, lengths, ranges, formats and unknown fields reached the
handler of a dict schema (unknown fields are dropped, not refused); every URL elicitation's id was its step key.
"""
from __future__ import annotations

from typing import Any

import pytest

from mcp_tools import ToolContext
from mcp_tools.registry import make_tool, registry
from tests.asgi_client import call_modern

pytestmark = pytest.mark.django_db(transaction=True)
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


async def test_url_mode_elicitation_ids_are_unique_per_elicitation(app: Any) -> None:
    ids = []
    for _ in range(2):
        first = (await call_modern(app, "tools/call", {"name": "connect_account", "arguments": {}}, capabilities=URL_CAPABLE)).json()["result"]
        ids.append(first["inputRequests"]["link"]["params"]["elicitationId"])
    assert ids[0] != ids[1], ids


async def test_a_field_the_schema_does_not_name_never_reaches_the_handler(app: Any) -> None:
    """Dropped, not refused: clients (the conformance suite's among them) send extra fields."""
    body = await answer(app, {"code": "abc", "is_admin": True})
    assert body["result"]["content"][0]["text"] == repr([("code", "abc")]), body
