"""A step key names one step of a call: a second step under a key the call used is refused.

The journal's table holds each key once per call (``mcp_step_unique_key``): a second step
under a used key failed at its INSERT, an internal error after the handler had run up to it.
Now the handler gets ``ValueError`` naming the key where it asks, before a second effect runs,
on every database alike.
"""

from __future__ import annotations

from typing import Any

import pytest

from mcp_tools import ToolContext
from mcp_tools.registry import make_tool, registry
from tests.asgi_client import call_modern

pytestmark = pytest.mark.django_db(transaction=True)
FORM = {"elicitation": {"form": {}}}
OK = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
RUNS: list[str] = []


def effect(name: str) -> str:
    RUNS.append(name)
    return name


async def once_twice(ctx: ToolContext) -> str:
    await ctx.once("charge", effect, "first")
    try:
        await ctx.once("charge", effect, "second")
    except ValueError as exc:
        return f"refused: {exc}"
    return "ran twice"


async def once_then_ask(ctx: ToolContext) -> str:
    await ctx.once("step", effect, "once")
    try:
        await ctx.elicit("Sure?", OK, key="step")
    except ValueError as exc:
        return f"refused: {exc}"
    return "asked"


async def once_in_each_case(ctx: ToolContext) -> str:
    """Keys that differ in case, accent or a trailing space are different steps (MariaDB's default
    collation took them for one: IntegrityError 1062 at the second INSERT, an "Internal error")."""
    return ",".join([await ctx.once(key, effect, key) for key in ("Audit", "audit", "audít", "audit ")])


async def gather_twice(ctx: ToolContext) -> str:
    try:
        await ctx.gather(ctx.elicit("A?", OK, key="same"), ctx.elicit("B?", OK, key="same"))
    except ValueError as exc:
        return f"refused: {exc}"
    return "asked"


@pytest.fixture
def app():  # type: ignore[no-untyped-def]
    from demo_site.asgi import application

    RUNS.clear()
    with registry.registered_temporarily(make_tool(once_twice), make_tool(once_then_ask), make_tool(gather_twice),
                                         make_tool(once_in_each_case)):
        yield application


@pytest.mark.parametrize("name, effects", [("once_twice", ["first"]), ("once_then_ask", ["once"]), ("gather_twice", [])])
async def test_a_second_step_under_a_used_key_is_refused_where_it_is_asked(app: Any, name: str, effects: list[str]) -> None:
    response = await call_modern(app, "tools/call", {"name": name, "arguments": {}}, capabilities=FORM)
    result = response.json()["result"]
    assert result.get("isError") is not True, result
    text = result["content"][0]["text"]
    assert text.startswith("refused: The step key") and "used twice" in text, text
    assert RUNS == effects, "the second effect never ran"


async def test_keys_that_differ_in_case_accent_or_trailing_space_are_different_steps(app: Any) -> None:
    response = await call_modern(app, "tools/call", {"name": "once_in_each_case", "arguments": {}}, capabilities=FORM)
    result = response.json()["result"]
    assert result.get("isError") is not True and result["content"][0]["text"] == "Audit,audit,audít,audit ", result
    assert RUNS == ["Audit", "audit", "audít", "audit "]
