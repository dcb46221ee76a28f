"""A 2026-07-28 call that needs a client capability after it ran an effect goes on once the client retries
with it, and the effect runs once.

Found by a review of the 2026-07-28 era: a tool that asks the user, runs a ``ctx.once`` effect, then samples,
called by a client that declared elicitation alone. The answering round ran the effect, then answered 400 /
-32021 (``requiredCapabilities: sampling``), and ended the call ``failed``: the same retry declaring sampling,
as -32021 asks of the client, got -32021 again, as HTTP 200 (basic/index: the status MUST be 400), for ever.
Starting over ran the effect a second time.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.test import override_settings
from django.conf import settings

from mcp_tools import ToolContext
from mcp_tools.models import ToolCall
from mcp_tools.protocol.errors import MISSING_CLIENT_CAPABILITY
from mcp_tools.registry import make_tool, registry
from tests.asgi_client import call_modern

pytestmark = pytest.mark.django_db(transaction=True)
EFFECTS: list[str] = []
FORM = {"type": "object", "properties": {"go": {"type": "boolean"}}}
SAID = {"role": "assistant", "content": {"type": "text", "text": "fine"}, "model": "m"}


def effect() -> str:
    EFFECTS.append("ran")
    return "e1"


async def ask_act_sample(ctx: ToolContext) -> str:
    await ctx.elicit("Go?", FORM, key="go")
    done = await ctx.once("e1", effect)
    verdict = await ctx.sample("Verdict?", key="verdict")
    return f"{done}/{verdict.text}"


@pytest.fixture(autouse=True)
def tool() -> Any:
    EFFECTS.clear()
    with registry.registered_temporarily(make_tool(ask_act_sample)), \
            override_settings(MCP_TOOLS={**settings.MCP_TOOLS, "CANCEL_POLL_SECONDS": 0.05}):
        yield


async def test_a_retry_that_declares_the_missing_capability_goes_on_and_the_effect_runs_once() -> None:
    from demo_site.asgi import application

    form_only = {"elicitation": {"form": {}}}
    both = {**form_only, "sampling": {}}
    params: dict[str, Any] = {"name": "ask_act_sample", "arguments": {}}
    asked = (await call_modern(application, "tools/call", params, capabilities=form_only)).json()["result"]
    answered = {**params, "requestState": asked["requestState"], "inputResponses": {"go": {"action": "accept", "content": {"go": True}}}}

    refused = await call_modern(application, "tools/call", answered, capabilities=form_only)
    assert refused.status == 400 and refused.json()["error"]["code"] == MISSING_CLIENT_CAPABILITY, refused.body
    again = await call_modern(application, "tools/call", answered, capabilities=form_only)  # still without it: the same
    assert again.status == 400 and again.json()["error"]["code"] == MISSING_CLIENT_CAPABILITY, again.body
    assert EFFECTS == ["ran"]

    goes_on = (await call_modern(application, "tools/call", answered, capabilities=both)).json()["result"]
    assert goes_on["resultType"] == "input_required" and list(goes_on["inputRequests"]) == ["verdict"], goes_on
    done = (await call_modern(application, "tools/call", {**params, "requestState": goes_on["requestState"],
                                                         "inputResponses": {"verdict": SAID}}, capabilities=both)).json()["result"]
    assert done["content"][0]["text"] == "e1/fine", done
    assert EFFECTS == ["ran"]
    assert [row.status async for row in ToolCall.objects.all()] == ["completed"]


async def once_then_sample(ctx: ToolContext) -> str:
    done = await ctx.once("e1", effect)
    verdict = await ctx.sample("Verdict?", key="verdict")
    return f"{done}/{verdict.text}"


async def test_a_first_round_refused_after_an_effect_ends_its_call() -> None:
    """A first round's client holds no requestState to retry the round with: its call ends failed, as before
    ecf0939 (which left it working until CALL_TTL, unreachable; found by a review of that fix)."""
    from demo_site.asgi import application

    with registry.registered_temporarily(make_tool(once_then_sample)):
        refused = await call_modern(application, "tools/call", {"name": "once_then_sample", "arguments": {}}, capabilities={})
    assert refused.status == 400 and refused.json()["error"]["code"] == MISSING_CLIENT_CAPABILITY, refused.body
    assert EFFECTS == ["ran"]
    assert [row.status async for row in ToolCall.objects.all()] == ["failed"]
