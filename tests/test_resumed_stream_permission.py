"""A 2025-11-25 call's stream resumed with ``Last-Event-ID`` asks again whether the caller may use the tool.

Every other way a call goes on re-checks the tool's permission for the request that carries it (a task's
``tasks/result`` answers "Unknown task", a client's answer to the call's elicitation is refused, a
2026-07-28 retry resolves the tool again: "Unknown tool"). A session call's stream resumed with
``Last-Event-ID`` did not: for the same user, whose permission had been taken away meanwhile, it
replayed what the stream missed (the pending ``elicitation/create``) and followed the call on to its
result. Found with the raw ASGI client (a GET with ``Last-Event-ID`` after the permission was
removed). Now it answers the request as a new ``tools/call`` of that tool would be answered: the
JSON-RPC error "Unknown tool", with the request's id, nothing replayed.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from mcp_tools import ToolContext
from mcp_tools.registry import make_tool, registry
from tests.asgi_client import HANDSHAKE, handshake_message, post_headers, post_json
from tests.clients import create_user_with_token
from tests.test_authz_review import APP, open_session
from tests.test_http_spec_edges import Stream, _in_memory_layer  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)
CONFIRM = {"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]}
TOOL = "zz_resume_gated"


async def ask(ctx: ToolContext) -> str:
    answer = await ctx.elicit("Proceed?", schema=CONFIRM, key="confirm")
    return f"done {answer.get('confirm')}"


def priming_event_id(stream: Stream) -> str:
    first = stream.text().split("\n\n")[0]
    return next(line[3:].strip() for line in first.splitlines() if line.startswith("id:"))


async def dropped_call(username: str) -> tuple[dict[str, str], Stream, str, dict[str, Any]]:
    """A gated tool's call that asked the user, its stream lost: (headers, that stream, the request's event id, the request)."""
    token = await sync_to_async(create_user_with_token)(username, ("auth.view_user",))
    session = await open_session({"authorization": f"Token {token}"}, {"elicitation": {"form": {}}})
    headers = post_headers(version=HANDSHAKE, session=session, token=token)
    call = {"jsonrpc": "2.0", "id": 17, "method": "tools/call", "params": {"name": TOOL, "arguments": {}}}
    stream = Stream("POST", headers, json.dumps(call).encode())
    event_id, asked = await stream.wait_for(lambda m: m.get("method") == "elicitation/create")
    assert event_id is not None
    stream.gone.set()  # the client's read timed out
    await asyncio.wait_for(stream.task, 10)
    return headers, stream, event_id, asked


async def revoke(username: str) -> None:
    from django.contrib.auth.models import User

    await sync_to_async(lambda: User.objects.get(username=username).user_permissions.clear())()


async def resume(headers: dict[str, str], event_id: str) -> tuple[Any, list[Any]]:
    """GET the stream from ``event_id``: (its response to the call, every message it carried)."""
    again = Stream("GET", {**headers, "accept": "text/event-stream", "last-event-id": event_id})
    _, final = await again.wait_for(lambda m: m.get("id") == 17 and ("result" in m or "error" in m))
    again.gone.set()
    await asyncio.wait_for(again.task, 10)
    return final, [m for _, m in again.events()]


REFUSED = {"jsonrpc": "2.0", "id": 17, "error": {"code": -32602, "message": f"Unknown tool: {TOOL}"}}


async def test_a_call_waiting_for_an_answer_is_not_replayed_to_a_caller_who_lost_the_permission() -> None:
    with registry.registered_temporarily(make_tool(ask, name=TOOL, permissions=["auth.view_user"])):
        headers, first, _, _ = await dropped_call("resume-revoked")
        await revoke("resume-revoked")
        fresh = await post_json(APP, handshake_message("tools/call", {"name": TOOL, "arguments": {}}), headers)
        assert fresh.json()["error"]["message"] == f"Unknown tool: {TOOL}"  # what a new call is answered
        final, carried = await resume(headers, priming_event_id(first))
    assert final == REFUSED
    assert carried == [REFUSED]  # the elicitation it missed is not replayed


async def test_a_call_that_ended_meanwhile_is_not_answered_to_a_caller_who_lost_the_permission() -> None:
    with registry.registered_temporarily(make_tool(ask, name=TOOL, permissions=["auth.view_user"])):
        headers, _, event_id, asked = await dropped_call("resume-revoked-done")
        answer = {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {"confirm": True}}}
        assert (await post_json(APP, answer, headers)).status == 202  # accepted while allowed: the call runs on (here, resumed)
        await revoke("resume-revoked-done")
        final, carried = await resume(headers, event_id)
    assert final == REFUSED
    assert carried == [REFUSED]


async def test_a_caller_who_keeps_the_permission_gets_the_call_resumed() -> None:
    """The control: the same resume, permission kept, replays the request and follows the call to its result."""
    with registry.registered_temporarily(make_tool(ask, name=TOOL, permissions=["auth.view_user"])):
        headers, first, _, asked = await dropped_call("resume-kept")
        again = Stream("GET", {**headers, "accept": "text/event-stream", "last-event-id": priming_event_id(first)})
        await again.wait_for(lambda m: m.get("method") == "elicitation/create")
        answer = {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {"confirm": True}}}
        assert (await post_json(APP, answer, headers)).status == 202
        _, final = await again.wait_for(lambda m: m.get("id") == 17)
        again.gone.set()
        await asyncio.wait_for(again.task, 10)
    assert final["result"]["content"][0]["text"] == "done True", final


async def test_a_response_the_log_holds_that_the_client_missed_is_not_withheld_for_ever() -> None:
    """The call's response went out on a resumed stream (kept in the stream's log) but the client did not
    read it (its connection dropped): it resumes from the same event, after its permission was taken.
    The refusal was then kept as the stream's response, which the log refuses (it has one already): the
    stream ended with ``retry`` and no response, and the client, resuming again, got the same for ever.
    Found by reading refuse_resumed against store.append_response_event; reproduced with the raw ASGI
    client. It is answered "Unknown tool" (sent, not kept: the log keeps the one response it has)."""
    with registry.registered_temporarily(make_tool(ask, name=TOOL, permissions=["auth.view_user"])):
        headers, _, event_id, asked = await dropped_call("resume-revoked-missed")
        answer = {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {"confirm": True}}}
        assert (await post_json(APP, answer, headers)).status == 202
        resumed = {**headers, "accept": "text/event-stream", "last-event-id": event_id}
        again = Stream("GET", resumed)
        _, result = await again.wait_for(lambda m: m.get("id") == 17)  # what the client does not get to read
        again.gone.set()
        await asyncio.wait_for(again.task, 10)
        assert result["result"]["content"][0]["text"] == "done True", result
        await revoke("resume-revoked-missed")
        third = Stream("GET", resumed)
        await asyncio.wait_for(third.task, 10)  # the stream ends: with its answer, or (before) with "retry" and none
        carried = [m for _, m in third.events()]
    assert carried == [REFUSED], third.text()
