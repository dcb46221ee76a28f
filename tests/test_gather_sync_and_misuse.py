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


FORM = {"type": "object", "properties": {"name": {"type": "string"}}}
TOOLS_CAPS = {"sampling": {"tools": {}}, "elicitation": {"form": {}}}


def form_and_sample_sync(ctx: ToolContext) -> str:
    form, said = ctx.gather(ctx.elicit_step("Name?", FORM, key="form"), ctx.sample_step("Say?", key="say"))  # type: ignore[misc]
    return f"{form['name']}/{said['content']['text']}"


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def sample_with_tools_sync(ctx: ToolContext) -> str:
    return ctx.sample("What is 2+3?", tools=[add], key="math").text  # type: ignore[no-any-return,attr-defined]


async def test_a_sync_tool_gathers_a_form_with_a_sampling_request_in_one_round() -> None:
    """A sync tool's ``ctx.elicit`` asks at once (it blocks), so ``ctx.gather(ctx.elicit(...), ...)`` asked the form
    alone, then failed with a TypeError telling the author to do what they did (found by a review): the
    ``_step`` forms are the questions a sync tool gathers."""
    from demo_site.asgi import application

    with registry.registered_temporarily(make_tool(form_and_sample_sync)):
        asked = (await call_modern(application, "tools/call", {"name": "form_and_sample_sync", "arguments": {}},
                                   capabilities=TOOLS_CAPS)).json()["result"]
        assert asked["resultType"] == "input_required" and set(asked["inputRequests"]) == {"form", "say"}, asked
        answers = {"form": {"action": "accept", "content": {"name": "ada"}}, "say": SAID}
        done = (await call_modern(application, "tools/call", {"name": "form_and_sample_sync", "arguments": {}, "requestState": asked["requestState"],
                                                             "inputResponses": answers}, capabilities=TOOLS_CAPS)).json()["result"]
    assert done["content"][0]["text"] == "ada/yes", done


async def test_a_sync_tool_samples_with_tools_and_runs_the_models_tool_use() -> None:
    """``ctx.sample(..., tools=[...])`` in a sync tool failed as soon as the model used a tool (found by a review):
    its loop ran each use through the sync context's blocking ``ctx.once``, whose ``async_to_sync`` raised
    RuntimeError on the event loop ("Internal error while running ...", both eras)."""
    from demo_site.asgi import application

    uses = {"role": "assistant", "model": "m", "stopReason": "toolUse",
            "content": [{"type": "tool_use", "id": "u1", "name": "add", "input": {"a": 2, "b": 3}}]}
    final = {"role": "assistant", "model": "m", "content": {"type": "text", "text": "5"}}
    with registry.registered_temporarily(make_tool(sample_with_tools_sync)):
        params: dict[str, Any] = {"name": "sample_with_tools_sync", "arguments": {}}
        first = (await call_modern(application, "tools/call", params, capabilities=TOOLS_CAPS)).json()["result"]
        assert first["resultType"] == "input_required" and list(first["inputRequests"]) == ["math"], first
        second = (await call_modern(application, "tools/call", {**params, "requestState": first["requestState"], "inputResponses": {"math": uses}},
                                    capabilities=TOOLS_CAPS)).json()["result"]
        assert second.get("resultType") == "input_required", second
        (turn_key, turn_request), = second["inputRequests"].items()
        tool_result = turn_request["params"]["messages"][-1]["content"][0]
        assert tool_result["type"] == "tool_result" and tool_result["content"][0]["text"] == "5", tool_result
        done = (await call_modern(application, "tools/call", {**params, "requestState": second["requestState"], "inputResponses": {turn_key: final}},
                                  capabilities=TOOLS_CAPS)).json()["result"]
    assert done["content"][0]["text"] == "5" and not done.get("isError"), done


@pytest.mark.parametrize("value", [float("inf"), float("nan"), "50%", True])
async def test_progress_that_is_no_finite_number_is_refused_where_it_is_reported(value: Any) -> None:
    """Found by a review of the admin console: ``ctx.report_progress(float("inf"))`` went out as ``"progress": null``,
    which the spec's number refuses (the row kept inf)."""
    from mcp_tools.engine.runner import Invocation

    from mcp_tools.engine.context import ToolContext as Context

    ctx = Context(Invocation(fn=lambda: None, is_async=False, kwargs={}, context_param=None, principal=None,
                             protocol_version="2026-07-28", client_capabilities={}, runtime=None))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="finite number"):
        await ctx.report_progress(value)
    with pytest.raises(ValueError, match="finite number"):
        await ctx.report_progress(1, total=value)



async def test_a_decimal_progress_goes_out_as_a_number() -> None:
    """A Decimal is a finite number: the check above refused it (failing the tool), and before it, it went out as
    its text, "1" (a review of the fix)."""
    import decimal

    from mcp_tools.engine.context import ToolContext as Context
    from mcp_tools.engine.runner import Invocation

    sent: list[tuple[Any, Any]] = []

    class Runtime:
        async def progress(self, inv: Any, progress: Any, total: Any, message: Any, *, replaying: bool) -> None:
            sent.append((progress, total))

    ctx = Context(Invocation(fn=lambda: None, is_async=False, kwargs={}, context_param=None, principal=None,
                             protocol_version="2026-07-28", client_capabilities={}, runtime=Runtime()))  # type: ignore[arg-type]
    await ctx.report_progress(decimal.Decimal("1.5"), decimal.Decimal("3"))
    assert sent == [(1.5, 3.0)] and all(type(v) is float for v in sent[0]), sent


async def once_then_progress(ctx: ToolContext) -> str:
    await ctx.once("row", lambda: 1)  # the call has a row from here: progress is recorded on it
    await ctx.report_progress(1, 2, "half")
    return "done"


async def test_a_progress_write_the_database_cannot_take_for_a_moment_does_not_fail_the_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by a review of durability (a proxy dropping PostgreSQL's connections for 1 s): the progress write of a
    foreground call raised into the handler, the call answered a bare -32603 and its row stayed working. Progress
    is a status line the client was sent already: the call goes on."""
    from django.db import OperationalError

    from demo_site.asgi import application
    from mcp_tools import store
    from mcp_tools.models import ToolCall

    async def unreachable(*args: Any) -> bool:
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(store, "record_progress", unreachable)
    with registry.registered_temporarily(make_tool(once_then_progress)):
        body = (await call_modern(application, "tools/call", {"name": "once_then_progress", "arguments": {}, "_meta": {"progressToken": "p"}})).json()
    assert body.get("result", {}).get("content") == [{"type": "text", "text": "done"}], body
    assert [row.status async for row in ToolCall.objects.all()] == ["completed"]
