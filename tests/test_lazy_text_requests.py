"""Django's lazy translations (``gettext_lazy``) as the text of what a handler asks the client.

Found by the seeds review: ``ctx.elicit(_("..."))`` and ``ctx.elicit_url(_("..."), ...)`` answered
-32603 (the call's row could not hold the lazy message), so did a dict schema with a lazy title,
``ctx.sample(_("..."))`` read the prompt as a list of messages (the tool failed with "Internal error"),
and a lazy text in sampling messages, a lazy ``systemPrompt`` or ``ctx.report_progress`` message failed
the call alike. Each is sent as its text now, in every flavor.
"""
from __future__ import annotations

import json
from typing import Any

import pytest
from django.utils.translation import gettext_lazy as _
from pydantic import BaseModel

from mcp_tools import ToolContext
from mcp_tools.registry import make_tool, registry
from mcp_tools.transports.http import McpEndpoint
from tests.asgi_client import call_modern

pytestmark = pytest.mark.django_db(transaction=True)
APP = McpEndpoint()
CAPS = {"elicitation": {"form": {}, "url": {}}, "sampling": {}}


class Name(BaseModel):
    name: str


async def lazy_form(ctx: ToolContext) -> str:
    return (await ctx.elicit(_("Your name?"), schema=Name, key="ask")).name


async def lazy_url(ctx: ToolContext) -> str:
    await ctx.elicit_url(_("Link your account"), "https://example.com/link", key="ask")
    return "linked"


async def lazy_prompt(ctx: ToolContext) -> str:
    return (await ctx.sample(_("Say hi"), system_prompt=_("Be brief"), key="ask")).text


async def lazy_step(ctx: ToolContext) -> str:
    (answer,) = await ctx.gather(ctx.sample_step(_("Say hi"), systemPrompt=_("Be brief"), key="ask"))
    return str(answer["content"]["text"])


async def lazy_progress(ctx: ToolContext) -> str:
    await ctx.report_progress(1, 2, _("Half way"))
    return (await ctx.elicit("Your name?", schema=Name, key="ask")).name


async def lazy_dict_form(ctx: ToolContext) -> str:
    """A dict schema made from a model field's labels (``verbose_name`` is lazy)."""
    schema = {"type": "object", "properties": {"name": {"type": "string", "title": _("Name"), "description": _("Your name")}}}
    return str((await ctx.elicit("Your name?", schema, key="ask"))["name"])


async def lazy_messages(ctx: ToolContext) -> str:
    return (await ctx.sample([{"role": "user", "content": {"type": "text", "text": _("Say hi")}}], key="ask")).text


ASKED = {
    lazy_form: ("elicitation/create", {"message": "Your name?"}, {"action": "accept", "content": {"name": "ann"}}, "ann"),
    lazy_url: ("elicitation/create", {"message": "Link your account"}, {"action": "accept"}, "linked"),
    lazy_prompt: ("sampling/createMessage", {"messages": [{"role": "user", "content": {"type": "text", "text": "Say hi"}}],
                                             "systemPrompt": "Be brief"},
                  {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"}, "hi"),
    lazy_dict_form: ("elicitation/create", {"requestedSchema": {"type": "object", "properties": {"name": {
        "type": "string", "title": "Name", "description": "Your name"}}}}, {"action": "accept", "content": {"name": "ann"}}, "ann"),
    lazy_messages: ("sampling/createMessage", {"messages": [{"role": "user", "content": {"type": "text", "text": "Say hi"}}]},
                    {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"}, "hi"),
    lazy_step: ("sampling/createMessage", {"messages": [{"role": "user", "content": {"type": "text", "text": "Say hi"}}],
                                           "systemPrompt": "Be brief"},
                {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"}, "hi"),
    lazy_progress: ("elicitation/create", {"message": "Your name?"}, {"action": "accept", "content": {"name": "ann"}}, "ann"),
}


async def rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
    response = await call_modern(APP, method, params, capabilities=CAPS)
    body: dict[str, Any] = response.json() if response.body.startswith(b"{") else [
        json.loads(line[5:]) for line in response.body.decode().splitlines() if line.startswith("data:")][-1]
    assert "result" in body, body
    return body["result"]


@pytest.mark.parametrize("flavor", ["mrtr", "saga"])
@pytest.mark.parametrize("handler", list(ASKED), ids=lambda fn: fn.__name__)
async def test_a_lazy_text_is_asked_as_its_text_and_the_call_completes(handler: Any, flavor: str) -> None:
    method, expected, answer, final = ASKED[handler]
    params = {"name": handler.__name__, "arguments": {}, "_meta": {"progressToken": "p"}}
    with registry.registered_temporarily(make_tool(handler)):
        if flavor == "mrtr":
            first = await rpc("tools/call", params)
            asked = first["inputRequests"]["ask"]
            done = await rpc("tools/call", {**params, "requestState": first["requestState"], "inputResponses": {"ask": answer}})
        else:
            first = await rpc("tools/callSaga", params)
            (asked,) = first["steps"]
            asked = {"method": {"elicitation": "elicitation/create", "sampling": "sampling/createMessage"}[asked["type"]],
                     "params": asked["params"]}
            done = await rpc("tools/resumeSaga", {"sagaToken": first["sagaToken"], "completedSteps": [{"stepId": "ask", "result": answer}]})
    assert asked["method"] == method
    assert {k: asked["params"][k] for k in expected} == expected, asked
    assert done["content"] == [{"type": "text", "text": final}], done


async def lazy_text_result() -> str:
    return _("Done")  # type: ignore[return-value]  # what a Django author writes: a lazy text for a str


async def lazy_block_result() -> Any:
    from mcp_tools import ToolResult

    return ToolResult(content=[_("Done")])


@pytest.mark.parametrize("handler", [lazy_text_result, lazy_block_result], ids=lambda fn: fn.__name__)
async def test_a_lazy_text_returned_is_answered_as_its_text(handler: Any) -> None:
    """Found by the seeds review: a ``-> str`` tool returning a lazy translation answered the JSON-quoted text
    ('"Done"'), and ``ToolResult(content=[_("Done")])`` answered "does not match its output schema"."""
    with registry.registered_temporarily(make_tool(handler)):
        done = await rpc("tools/call", {"name": handler.__name__, "arguments": {}})
    assert done["content"] == [{"type": "text", "text": "Done"}], done
    assert not done.get("isError"), done


def test_text_converts_lazy_texts_beside_values_json_has_no_form_for_and_leaves_plain_structures_as_they_are() -> None:
    """``_text`` skips its walk where orjson takes the structure (no lazy text in it): the structure itself
    comes back. Where orjson refuses it (a lazy text, or a Decimal beside one), the walk converts the texts
    and keeps every other value as it was."""
    from decimal import Decimal

    from mcp_tools.engine.context import _text

    plain = {"type": "object", "properties": {"n": {"type": "integer", "title": "N", "enum": [1, 2]}}}
    assert _text(plain) is plain
    mixed = {"type": "object", "properties": {"n": {"type": "number", "title": _("Amount"), "minimum": Decimal("0.5")}},
             "required": [_("n")]}
    converted = _text(mixed)
    assert converted == {"type": "object", "properties": {"n": {"type": "number", "title": "Amount", "minimum": Decimal("0.5")}},
                         "required": ["n"]}
    assert type(converted["properties"]["n"]["title"]) is str and type(converted["required"][0]) is str
    decimal_only = {"minimum": Decimal("1")}
    assert _text(decimal_only) is decimal_only
