"""A call served over stdio is recorded, shown and filtered as stdio in the console.

The stdio transport said ``flavor="stdio"``, but the session flavor that serves its calls (as it
serves a 2025-11-25 session's) recorded every one of them as ``session``: the console said
"2025-11-25 session (SSE)" and its "stdio" filter listed nothing, though docs/admin.md lists
stdio among how a call is served. Only the label changed: the call asks, is answered and ends,
or is cancelled, as before.

Driven in process over a pipe (:func:`tests.test_stdio_current_user.serving`).
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.urls import reverse

from mcp_tools import ToolContext
from mcp_tools.models import ToolCall
from mcp_tools.registry import make_tool, registry
from mcp_tools.server.flavors.session import parse_step_request_id
from tests.stdio_harness import call
from tests.test_admin_console import CHANGELIST, client_for, detail_url, make_user
from tests.test_stdio_current_user import PipeClient, serving
from tests.test_stdio_refused_answer import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

ELICITATION = {"elicitation": {"form": {}}}


async def ask_name_over_stdio(ctx: ToolContext) -> str:
    """Ask for a name, then greet it."""
    answer = await ctx.elicit("Name?", {"type": "object", "properties": {"name": {"type": "string"}}}, key="name")
    return f"hello {answer['name']}"


async def asked(client: PipeClient, request_id: int) -> tuple[str, dict[str, Any]]:
    """Call the tool as request ``request_id``: the id of its row and the question it sent."""
    with client.out.lock:
        before = [m["id"] for m in client.out.lines if m.get("method") == "elicitation/create"]
    client.send(call(request_id, "ask_name_over_stdio"))
    ask = await wait_for(client.out, lambda m: m.get("method") == "elicitation/create" and m["id"] not in before, 15)
    assert ask is not None, client.out.lines
    parsed = parse_step_request_id(ask["id"])
    assert parsed is not None, ask
    return parsed[0], ask


def console_sees(call_id: str) -> dict[str, Any]:
    """What staff who may view calls find of the call in the console."""
    viewer = client_for(make_user("viewer", perms=("view_toolcall",)))

    def listed(flavor: str) -> bool:
        page = viewer.get(reverse(CHANGELIST), {"flavor": flavor, "state": "all"})
        return call_id in [str(row.pk) for row in page.context["cl"].result_list]

    report = viewer.get(detail_url(ToolCall.objects.get(pk=call_id))).content.decode()
    served = re.search(r"Served as</dt><dd>([^<·]*)", report)
    return {"stdio filter": listed("stdio"), "session filter": listed("session"),
            "served as": served.group(1).strip() if served else None}


async def test_a_stdio_call_is_recorded_shown_and_filtered_as_stdio_and_runs_as_before() -> None:
    with registry.registered_temporarily(make_tool(ask_name_over_stdio)):
        async with serving(None, capabilities=ELICITATION) as client:
            answered_id, ask = await asked(client, 1)
            row = await ToolCall.objects.aget(pk=answered_id)
            assert (row.flavor, row.status) == ("stdio", "input_required")
            assert await sync_to_async(console_sees)(answered_id) == {
                "stdio filter": True, "session filter": False, "served as": "stdio"}

            # Answered, it ends as before, on the request that started it.
            client.send({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"name": "Ada"}}})
            assert (await client.reply_to(1))["result"]["content"][0]["text"] == "hello Ada"

            # Cancelled while it waits, it ends cancelled, with no result.
            cancelled_id, _ = await asked(client, 2)
            client.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}})
        # The server has ended (serving() waits for it), having finished every request it accepted.
        assert not [m for m in client.out.lines if m.get("id") == 2 and "result" in m]
    rows = {str(pk): (flavor, status) async for pk, flavor, status in ToolCall.objects.values_list("pk", "flavor", "status")}
    assert rows == {answered_id: ("stdio", "completed"), cancelled_id: ("stdio", "cancelled")}


async def test_a_request_the_client_cancelled_gets_no_reply_when_the_input_closes_at_once() -> None:
    """notifications/cancelled for a request waiting for input, then EOF at once: the request ends
    cancelled with no reply (the spec: a cancelled request is not answered), not with the error reply
    of a request cancelled at shutdown (the input closed while its cancel was still ending its call)."""
    with registry.registered_temporarily(make_tool(ask_name_over_stdio)):
        async with serving(None, capabilities=ELICITATION) as client:
            call_id, _ = await asked(client, 5)
            client.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5, "reason": "gave up"}})
            client.feed.close()
    with client.out.lock:
        replies = [m for m in client.out.lines if m.get("id") == 5 and ("result" in m or "error" in m)]
    assert replies == [], replies
    assert (await ToolCall.objects.aget(pk=call_id)).status == "cancelled"
