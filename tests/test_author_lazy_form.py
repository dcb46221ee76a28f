"""An elicitation form model whose fields' titles and descriptions are lazy translations (``gettext_lazy``,
as a Django form's labels are written) is asked with their texts.

Found by the author review: ``Field(title=_("Name"), description=_("Your name"))`` in the model given to
``ctx.elicit`` failed the call with a JSON-RPC -32603 "Internal error": the journal could not write the
proxies pydantic left in the form's schema ("Object of type __proxy__ is not JSON serializable").
"""

from __future__ import annotations

from typing import Any

import pytest
from django.utils.translation import gettext_lazy as _
from pydantic import BaseModel, Field

from mcp_tools import ToolContext
from mcp_tools.registry import make_tool, registry
from mcp_tools.transports.http import McpEndpoint
from tests.asgi_client import call_modern

pytestmark = pytest.mark.django_db(transaction=True)
APP = McpEndpoint()


class Signup(BaseModel):
    name: str = Field(title=_("Name"), description=_("Your name"), pattern=r"^\w+$")


async def sign_up(ctx: ToolContext) -> str:
    form = await ctx.elicit(_("Sign up"), schema=Signup)
    return form.name


async def test_a_forms_lazy_labels_are_asked_as_text() -> None:
    params: dict[str, Any] = {"name": "author_sign_up", "arguments": {}}
    caps = {"elicitation": {"form": {}}}
    with registry.registered_temporarily(make_tool(sign_up, name="author_sign_up")):
        asked = (await call_modern(APP, "tools/call", params, capabilities=caps)).json()
        [(key, request)] = asked["result"]["inputRequests"].items()
        assert request["params"]["requestedSchema"]["properties"]["name"] == {
            "type": "string", "title": "Name", "description": "Your name"}, request
        done = (await call_modern(APP, "tools/call", {**params, "requestState": asked["result"]["requestState"], "inputResponses": {
            key: {"action": "accept", "content": {"name": "Ada"}}}}, capabilities=caps)).json()
    assert done["result"]["content"] == [{"type": "text", "text": "Ada"}], done
