"""What a handler asks may be a lazy translation (``gettext_lazy``), as Django code writes its texts: an
elicitation's message, a URL elicitation's, a sampling prompt and its system prompt, a message's content.

Found by the author review: ``await ctx.elicit(_("Deploy now?"), ...)`` with ``gettext_lazy`` failed the
call with a JSON-RPC -32603 "Internal error" (the journal could not write the proxy: "Object of type
__proxy__ is not JSON serializable"), in both eras; ``ctx.sample(_("..."))`` took the proxy for a list
of messages.
"""

from __future__ import annotations

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


class Agree(BaseModel):
    agree: bool


async def lazy_questions(ctx: ToolContext) -> str:
    # A progress message kept on the call's row: the row could not be written ("type '__proxy__' is not supported").
    await ctx.report_progress(1, 2, _("Half way"))
    answers = await ctx.gather(
        ctx.elicit(_("Agree?"), schema=Agree),
        ctx.elicit_url(_("Sign in"), "https://example.com/sign-in"),
        ctx.sample_step([{"role": "user", "content": _("Say hi")}], max_tokens=5),
    )
    said = await ctx.sample(_("Say bye"), system_prompt=_("Be brief"), max_tokens=5)
    return f"{answers[0].agree} {said.text}"


async def test_lazy_texts_are_asked_as_text() -> None:
    params: dict[str, Any] = {"name": "author_lazy_questions", "arguments": {}}
    caps = {"elicitation": {"form": {}, "url": {}}, "sampling": {}}
    text = {"role": "assistant", "model": "m", "content": {"type": "text", "text": "hi"}}
    with registry.registered_temporarily(make_tool(lazy_questions, name="author_lazy_questions")):
        for _round in range(3):
            body = (await call_modern(APP, "tools/call", params, capabilities=caps)).json()
            result = body["result"]
            if result.get("resultType") != "input_required":
                break
            requests = result["inputRequests"]
            for request in requests.values():
                for value in (request["params"].get("message"), request["params"].get("systemPrompt")):
                    assert value is None or isinstance(value, str), request
            answers = {key: {"action": "accept", "content": {"agree": True}} if r["params"].get("requestedSchema")
                       else {"action": "accept"} if r["method"] == "elicitation/create" else text for key, r in requests.items()}
            params = {**params, "inputResponses": answers, "requestState": result["requestState"]}
    assert result["content"] == [{"type": "text", "text": "True hi"}], body
    assert requests["sample-1"]["params"]["messages"] == [{"role": "user", "content": {"type": "text", "text": "Say bye"}}], requests
    assert requests["sample-1"]["params"]["systemPrompt"] == "Be brief", requests
