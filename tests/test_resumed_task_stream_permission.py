"""A 2025-11-25 task's ``tasks/result`` stream resumed by a caller who lost the tool replays nothing.

Commit 1f5152c made a session call's stream resumed with ``Last-Event-ID`` by a caller who may no
longer use the call's tool answer "Unknown tool" without replaying what the stream missed. A task's
``tasks/result`` stream was left to its flavor, which answers "Unknown task" (docs/protocol.md) but
only once the replay had been sent: the caller whose permission was taken away got the task's
pending ``elicitation/create`` again (found with the raw ASGI client: the GET resume from the
stream's priming event carried the elicitation, then the error). Now the refusal comes first: the
"Unknown task" answer alone, with the ``tasks/result`` request's id.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from mcp_tools import ToolContext
from mcp_tools.registry import make_tool, registry
from mcp_tools.server import background
from tests.asgi_client import HANDSHAKE, post_headers, post_json
from tests.clients import create_user_with_token
from tests.test_background_review import APP, queued  # noqa: F401
from tests.test_http_spec_edges import Stream
from tests.test_resumed_stream_permission import priming_event_id, revoke
from tests.test_task_review import open_session

pytestmark = pytest.mark.django_db(transaction=True)
CONFIRM = {"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]}
TOOL = "zz_task_resume_gated"
CAPABILITIES = {"elicitation": {"form": {}}, "tasks": {}}


async def ask(ctx: ToolContext) -> str:
    answer = await ctx.elicit("Proceed?", schema=CONFIRM, key="confirm")
    return f"done {answer.get('confirm')}"


async def dropped_result_stream(username: str) -> tuple[dict[str, str], str, Stream]:
    """A gated tool's task that asked the user on its tasks/result stream, that stream lost: (headers, task id, the stream)."""
    token = await sync_to_async(create_user_with_token)(username, ("auth.view_user",))
    session = await open_session(token, CAPABILITIES)
    headers = post_headers(version=HANDSHAKE, session=session, token=token)
    call = {"jsonrpc": "2.0", "id": "call-1", "method": "tools/call", "params": {"name": TOOL, "arguments": {}, "task": {}}}
    task_id = (await post_json(APP, call, headers)).json()["result"]["task"]["taskId"]
    assert await background.run_in_worker(task_id, "w") == "input-required"
    request = {"jsonrpc": "2.0", "id": "result-3", "method": "tasks/result", "params": {"taskId": task_id}}
    stream = Stream("POST", headers, json.dumps(request).encode())
    await stream.wait_for(lambda m: m.get("method") == "elicitation/create")
    stream.gone.set()  # the client's read timed out
    await asyncio.wait_for(stream.task, 10)
    return headers, task_id, stream


async def resume(headers: dict[str, str], event_id: str) -> tuple[Any, list[Any]]:
    again = Stream("GET", {**headers, "accept": "text/event-stream", "last-event-id": event_id})
    _, final = await again.wait_for(lambda m: m.get("id") == "result-3" and ("result" in m or "error" in m))
    again.gone.set()
    await asyncio.wait_for(again.task, 10)
    return final, [m for _, m in again.events()]


async def test_a_task_stream_resumed_by_a_caller_who_lost_the_tool_answers_unknown_task_alone(queued: list[str]) -> None:  # noqa: F811
    with registry.registered_temporarily(make_tool(ask, name=TOOL, permissions=["auth.view_user"], background=True)):
        headers, task_id, first = await dropped_result_stream("task-resume-revoked")
        await revoke("task-resume-revoked")
        final, carried = await resume(headers, priming_event_id(first))
    refused = {"jsonrpc": "2.0", "id": "result-3",
               "error": {"code": -32602, "message": "Unknown task", "data": {"taskId": task_id}}}
    assert final == refused
    assert carried == [refused]  # the elicitation it missed is not replayed


async def test_a_task_stream_resumed_by_a_caller_who_keeps_the_tool_replays_and_carries_the_task(queued: list[str]) -> None:  # noqa: F811
    """The control: permission kept, the resume replays the elicitation and answers tasks/result once the task ends."""
    with registry.registered_temporarily(make_tool(ask, name=TOOL, permissions=["auth.view_user"], background=True)):
        headers, task_id, first = await dropped_result_stream("task-resume-kept")
        again = Stream("GET", {**headers, "accept": "text/event-stream", "last-event-id": priming_event_id(first)})
        _, asked = await again.wait_for(lambda m: m.get("method") == "elicitation/create")
        answer = {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {"confirm": True}}}
        assert (await post_json(APP, answer, headers)).status == 202
        assert await background.run_in_worker(task_id, "w") == "finished"
        _, final = await again.wait_for(lambda m: m.get("id") == "result-3")
        again.gone.set()
        await asyncio.wait_for(again.task, 10)
    assert final["result"]["content"][0]["text"] == "done True", final
