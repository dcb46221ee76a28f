"""A 2026-07-28 request that answers a background call's question (held: no tasks, no resume tokens) gets the
worker's new progress only.

Found by a review of the tool author's API: the worker reported 1, 2, 3 of 10, asked a form, then 9; the
answering request got ``3 "before 2"`` again before 9 (docs/durable-calls.md: a retry gets the notifications
of the handler's new work only). The worker is simulated in-process.
"""
from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from mcp_tools import ToolContext
from mcp_tools.registry import make_tool, registry
from mcp_tools.server import background
from tests.asgi_client import call_modern
from tests.test_background_review import APP, queued  # noqa: F401
from tests.test_http_spec_edges import _in_memory_layer  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)
FORM = {"type": "object", "properties": {"go": {"type": "boolean"}}}
CAPS = {"elicitation": {"form": {}}}


async def progress_then_ask(ctx: ToolContext) -> str:
    for step in (1, 2, 3):
        await ctx.report_progress(step, 10, f"before {step}")
    await ctx.elicit("Go on?", FORM, key="go")
    await ctx.report_progress(9, 10, "after")
    return "done"


def messages(body: bytes) -> list[dict[str, Any]]:
    text = body.decode()
    if not text.lstrip().startswith("{"):
        return [json.loads(line[len("data: "):]) for line in text.splitlines() if line.startswith("data: ") and line != "data: "]
    return [json.loads(text)]


async def worker_once(queued: list[str], already: int) -> str:  # noqa: F811
    for _ in range(500):
        if len(queued) > already:
            break
        await asyncio.sleep(0.01)
    return await background.run_in_worker(queued[-1], "w")


async def test_the_answering_request_gets_only_the_workers_new_progress(queued: list[str]) -> None:  # noqa: F811
    with registry.registered_temporarily(make_tool(progress_then_ask, background=True)):
        params: dict[str, Any] = {"name": "progress_then_ask", "arguments": {}, "_meta": {"progressToken": "first"}}
        first = asyncio.ensure_future(call_modern(APP, "tools/call", params, capabilities=CAPS))
        assert await worker_once(queued, 0) == "input-required"
        asked = messages((await asyncio.wait_for(first, 10)).body)
        # (the worker ran before the held request looked: its row's latest value, 3)
        assert [m["params"]["progress"] for m in asked if m.get("method") == "notifications/progress"][-1] == 3, asked
        state = asked[-1]["result"]["requestState"]

        answer = {**params, "_meta": {"progressToken": "second"}, "requestState": state, "inputResponses": {"go": {"action": "accept", "content": {"go": True}}}}
        second = asyncio.ensure_future(call_modern(APP, "tools/call", answer, capabilities=CAPS))
        await asyncio.sleep(0.3)  # the request holds, the row still at 3
        assert await worker_once(queued, 1) == "finished"
        done = messages((await asyncio.wait_for(second, 10)).body)
    assert [m["params"]["progress"] for m in done if m.get("method") == "notifications/progress"] == [9], done
    assert done[-1]["result"]["content"][0]["text"] == "done", done



async def test_progress_the_worker_reports_before_the_answering_request_holds_reaches_it(
        queued: list[str], monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """The fix above took what the row held at the hold's first pass as already told: a worker quicker than the
    request (a loaded server) wrote 9 first, and the answering request got no progress at all (a review of the
    fix). The value told is read before the call goes back to a worker."""
    from mcp_tools.server.flavors import mrtr

    original = mrtr._hold
    ran: list[str] = []

    async def late_hold(*args: Any, **kwargs: Any) -> Any:
        ran.append(await worker_once(queued, 1))  # the worker finishes before this request looks
        return await original(*args, **kwargs)

    with registry.registered_temporarily(make_tool(progress_then_ask, background=True)):
        params: dict[str, Any] = {"name": "progress_then_ask", "arguments": {}, "_meta": {"progressToken": "first"}}
        first = asyncio.ensure_future(call_modern(APP, "tools/call", params, capabilities=CAPS))
        assert await worker_once(queued, 0) == "input-required"
        state = messages((await asyncio.wait_for(first, 10)).body)[-1]["result"]["requestState"]
        monkeypatch.setattr(mrtr, "_hold", late_hold)
        answer = {**params, "_meta": {"progressToken": "second"}, "requestState": state, "inputResponses": {"go": {"action": "accept", "content": {"go": True}}}}
        done = messages((await asyncio.wait_for(call_modern(APP, "tools/call", answer, capabilities=CAPS), 10)).body)
    assert ran == ["finished"]
    assert [m["params"]["progress"] for m in done if m.get("method") == "notifications/progress"] == [9], done
