"""A 2026-07-28 form answer's whole-number float past 64 bits (``1e20``, ``1e300``) for an integer
field is the integer, as docs/durable-calls.md says an integer field takes "any number whose
fractional part is zero ... the handler gets it as the integer". Found by a review: it passed the
answer's -32602 check as the float it was, then failed the call on replay ("int_parsing_size",
a tool error, the call over)."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field

from mcp_tools import ToolContext
from mcp_tools.registry import make_tool, registry
from tests.asgi_client import call_modern

pytestmark = pytest.mark.django_db(transaction=True)
FORM = {"elicitation": {"form": {}}}


class Amount(BaseModel):
    amount: int


class Bounded(BaseModel):
    amount: Annotated[int, Field(le=2**63 - 1)]


async def s37_ask_amount(ctx: ToolContext) -> str:
    answer = await ctx.elicit("Amount?", schema=Amount, key="amount")
    return f"{type(answer.amount).__name__} {answer.amount}"


async def s37_ask_bounded(ctx: ToolContext) -> str:
    answer = await ctx.elicit("Amount?", schema=Bounded, key="amount")
    return f"{type(answer.amount).__name__} {answer.amount}"


def _stamp() -> str:
    return "stamped"


async def s37_ask_journaled(ctx: ToolContext) -> str:
    """A side effect first: the call has a row, and the answer is journaled in the database."""
    stamp = await ctx.once("stamp", _stamp)
    answer = await ctx.elicit("Amount?", schema=Amount, key="amount")
    assert stamp == "stamped"
    return f"{type(answer.amount).__name__} {answer.amount}"


async def s37_ask_dict(ctx: ToolContext) -> str:
    answer = await ctx.elicit("Amount?", {"type": "object", "properties": {"amount": {"type": "integer"}}}, key="amount")
    return f"{type(answer['amount']).__name__} {answer['amount']}"


@pytest.fixture
def app():  # type: ignore[no-untyped-def]
    from mcp_tools.transports.http import McpEndpoint

    with registry.registered_temporarily(make_tool(s37_ask_amount), make_tool(s37_ask_bounded), make_tool(s37_ask_dict),
                                         make_tool(s37_ask_journaled)):
        yield McpEndpoint()


async def answer(app: Any, tool: str, amount: Any) -> dict[str, Any]:
    first = (await call_modern(app, "tools/call", {"name": tool, "arguments": {}}, capabilities=FORM)).json()["result"]
    assert first["resultType"] == "input_required", first
    body: dict[str, Any] = (await call_modern(app, "tools/call", {
        "name": tool, "arguments": {}, "requestState": first["requestState"],
        "inputResponses": {"amount": {"action": "accept", "content": {"amount": amount}}}}, capabilities=FORM)).json()
    return body


@pytest.mark.parametrize("tool", ["s37_ask_amount", "s37_ask_dict", "s37_ask_journaled"])
@pytest.mark.parametrize("amount", [1e20, -1e20, 1e300, float(2**63)])
async def test_a_whole_float_past_64_bits_is_the_integer(app: Any, tool: str, amount: float) -> None:
    body = await answer(app, tool, amount)
    assert body.get("result", {}).get("content") == [{"type": "text", "text": f"int {int(amount)}"}], body
    if tool == "s37_ask_journaled":
        from mcp_tools.models import CallStep

        stored = [step.response async for step in CallStep.objects.filter(key="amount")]
        assert stored and stored[-1]["content"] == {"amount": int(amount)}, stored  # the integer, as JSON, exactly


async def test_one_the_models_bound_refuses_is_invalid_params_and_the_request_still_waits(app: Any) -> None:
    body = await answer(app, "s37_ask_bounded", 1e20)
    assert body.get("error", {}).get("code") == -32602 and "amount" in body["error"]["message"], body
    assert (await answer(app, "s37_ask_bounded", 5.0))["result"]["content"] == [{"type": "text", "text": "int 5"}]
