"""``ctx.gather`` in a sync tool asks, and given something that is no question it says so.

Found by a review of the tool author's API: a sync tool's ``ctx.gather(ctx.sample_step(..), ..)`` returned
the coroutine, never awaited (nothing was asked, the tool went on, the log warned "never awaited"); and
``ctx.gather(ctx.once(...))`` failed deep in the engine with ``AttributeError: 'coroutine' object has
no attribute 'params'``.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from mcp_tools import ToolContext
from mcp_tools.registry import make_tool, registry
from tests.asgi_client import call_modern

pytestmark = pytest.mark.django_db(transaction=True)
CAPS = {"sampling": {}}
SAID = {"role": "assistant", "content": {"type": "text", "text": "yes"}, "model": "m"}


def both_sync(ctx: ToolContext) -> str:
    first, second = ctx.gather(ctx.sample_step("One?", key="one"), ctx.sample_step("Two?", key="two"))  # type: ignore[misc]
    return f"{first['content']['text']}/{second['content']['text']}"


async def gather_once(ctx: ToolContext) -> str:
    await ctx.gather(ctx.once("effect", lambda: 1))  # type: ignore[arg-type]
    return "ran"


async def test_a_sync_tool_gathers_its_questions_in_one_round() -> None:
    from demo_site.asgi import application

    with registry.registered_temporarily(make_tool(both_sync)):
        asked = (await call_modern(application, "tools/call", {"name": "both_sync", "arguments": {}}, capabilities=CAPS)).json()["result"]
        assert asked["resultType"] == "input_required" and set(asked["inputRequests"]) == {"one", "two"}, asked
        done = (await call_modern(application, "tools/call", {"name": "both_sync", "arguments": {}, "requestState": asked["requestState"],
                                                             "inputResponses": {"one": SAID, "two": SAID}}, capabilities=CAPS)).json()["result"]
    assert done["content"][0]["text"] == "yes/yes", done


async def test_gathering_what_is_no_question_says_what_it_is(caplog: Any) -> None:
    from demo_site.asgi import application

    calls = logging.getLogger("mcp_tools.calls")
    calls.addHandler(caplog.handler)
    try:
        with registry.registered_temporarily(make_tool(gather_once)):
            result = (await call_modern(application, "tools/call", {"name": "gather_once", "arguments": {}}, capabilities=CAPS)).json()["result"]
    finally:
        calls.removeHandler(caplog.handler)
    assert result["isError"] is True, result
    assert "ctx.gather takes the requests of ctx.elicit" in caplog.text and "not coroutine" in caplog.text, caplog.text
