"""Review of elicitation (URL mode, client capabilities, answer validation).

Each test asserts the correct behaviour and fails on the current code.
"""
from __future__ import annotations

import datetime
import json
from typing import Any

import pytest
from pydantic import BaseModel, Field

from mcp_tools import ToolContext
from mcp_tools.registry import make_tool, registry
from tests.asgi_client import call_modern

pytestmark = pytest.mark.django_db(transaction=True)
FORM = {"elicitation": {"form": {}}}
URL_ONLY = {"elicitation": {"url": {}}}


async def ask_name(ctx: ToolContext) -> str:
    """Form-mode elicitation."""
    answer = await ctx.elicit("Your name?", {"type": "object", "properties": {"name": {"type": "string"}}}, key="name")
    return str(answer.get("name"))


class Code(BaseModel):
    code: str = Field(pattern=r"^[A-Z]{3}$")


async def ask_code(ctx: ToolContext) -> str:
    """A pydantic schema with a string pattern (part of the 2025-11-25 restricted schema)."""
    answer = await ctx.elicit("Three capital letters", schema=Code, key="code")
    return answer.code


FORMATS = {"type": "object", "properties": {
    "site": {"type": "string", "format": "uri"},
    "when": {"type": "string", "format": "date-time"},
}}


async def ask_formats(ctx: ToolContext) -> str:
    """A dict schema using two of the four formats the spec supports."""
    answer = await ctx.elicit("Where and when?", FORMATS, key="fmt")
    return json.dumps(answer, sort_keys=True)


class Meeting(BaseModel):
    when: datetime.datetime


async def ask_meeting(ctx: ToolContext) -> str:
    """A pydantic datetime field: requestedSchema says format date-time."""
    answer = await ctx.elicit("When?", schema=Meeting, key="meeting")
    return answer.when.isoformat()


@pytest.fixture
def app():  # type: ignore[no-untyped-def]
    from demo_site.asgi import application

    with registry.registered_temporarily(make_tool(ask_name), make_tool(ask_code), make_tool(ask_formats), make_tool(ask_meeting)):
        yield application


async def _first(app: Any, name: str, caps: dict[str, Any] = FORM) -> dict[str, Any]:
    body = (await call_modern(app, "tools/call", {"name": name, "arguments": {}}, capabilities=caps)).json()
    return body


async def _answer(app: Any, name: str, first: dict[str, Any], key: str, content: dict[str, Any]) -> dict[str, Any]:
    return (await call_modern(app, "tools/call", {
        "name": name, "arguments": {}, "requestState": first["requestState"],
        "inputResponses": {key: {"action": "accept", "content": content}}}, capabilities=FORM)).json()


# -- 1. a client that declared URL mode only is sent a form elicitation --------------------------------


async def test_form_elicitation_is_not_sent_to_a_client_that_declared_url_mode_only(app: Any) -> None:
    """2025-11-25 elicitation, Capabilities: "Servers MUST NOT send elicitation requests with modes that are
    not supported by the client." {"url": {}} declares URL mode only (only an *empty* object means form)."""
    response = await call_modern(app, "tools/call", {"name": "ask_name", "arguments": {}}, capabilities=URL_ONLY)
    body = response.json()
    assert "error" in body, f"a form elicitation was sent to a url-only client: {body}"
    assert body["error"]["code"] == -32021
    assert body["error"]["data"] == {"requiredCapabilities": {"elicitation": {"form": {}}}}


# -- 2. a model constraint requestedSchema does not carry (pattern): a non-matching answer kills the call ---------




# -- 3. the uri and date-time formats are not checked ----------------------------------------------------






