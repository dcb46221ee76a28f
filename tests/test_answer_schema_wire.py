"""answerSchema is "journaled with the step and never sent" (docs/durable-calls.md): the 2026-07-28
requestState carries the round's journal (core.seal's carry), and with it the step's answerSchema."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, Field

from mcp_tools import ToolContext
from mcp_tools.registry import make_tool, registry
from mcp_tools.server import tokens
from tests.asgi_client import call_modern

pytestmark = pytest.mark.django_db(transaction=True)


class Code(BaseModel):
    code: str = Field(pattern=r"^[A-Z]{3}$")


async def ask_code_wire(ctx: ToolContext) -> str:
    """A model whose pattern requestedSchema cannot carry."""
    answer = await ctx.elicit("Three capital letters", schema=Code, key="code")
    return answer.code


async def test_the_request_state_does_not_carry_the_answer_schema() -> None:
    from demo_site.asgi import application

    with registry.registered_temporarily(make_tool(ask_code_wire)):
        body = (await call_modern(application, "tools/call", {"name": "ask_code_wire", "arguments": {}},
                                  capabilities={"elicitation": {"form": {}}})).json()
    state = body["result"]["requestState"]
    payload: dict[str, Any] = tokens.unseal("request", state)
    carried = [step[4] for step in payload.get("j", [])]
    assert all("answerSchema" not in (request or {}) for request in carried), carried
    assert "^[A-Z]{3}$" not in str(payload), "the model's pattern went to the client inside requestState"
