"""What belongs to a 2025-11-25 session, and what ends with it (found by reviews of this era and of background work).

- A background call held on the session's stream (no task) was spared by ``DELETE`` and ``mcp_cleanup``
  as if it were a task: nothing could reach it (``tasks/get`` says unknown task), and it waited, its
  stream open, until ``CALL_TTL``.
- Another session of the same user could answer such a call's question (202), and move it on.
- A ``tasks/result`` from a session that did not declare elicitation carried the task's form there; an
  answer "Method not found" from that client failed the task.
- ``DELETE`` stopped a running call only once it was old enough to have a row: a younger one ran on
  to its end (its effects too) after the session was gone.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from mcp_tools import ToolContext
from mcp_tools.models import ToolCall
from mcp_tools.registry import make_tool, registry
from mcp_tools.server import background
from tests.asgi_client import HANDSHAKE, handshake_message, post_headers, post_json, request
from tests.clients import create_user_with_token
from tests.test_background_review import queued  # noqa: F401
from tests.test_http_spec_edges import APP, Stream, _in_memory_layer  # noqa: F401
from tests.test_task_review import legacy, open_session

pytestmark = pytest.mark.django_db(transaction=True)
FORM_CAPS = {"elicitation": {"form": {}}, "tasks": {}}
EFFECTS: list[str] = []


async def delete(session: str, token: str) -> None:
    r = await request(APP, "DELETE", "/mcp", headers=post_headers(version=HANDSHAKE, session=session, token=token))
    assert r.status == 204, (r.status, r.body)


async def held_call_waiting_for_input(token: str, queued: list[str]) -> tuple[str, Stream, str, dict[str, Any]]:  # noqa: F811
    """A background call with no task, held on its session's POST stream, whose worker asked the user."""
    session = await open_session(token, FORM_CAPS)
    headers = post_headers(version=HANDSHAKE, session=session, token=token)
    call = handshake_message("tools/call", {"name": "confirm_delete", "arguments": {}}, request_id=5)
    held = Stream("POST", headers, json.dumps(call).encode())
    for _ in range(500):
        if queued:
            break
        await asyncio.sleep(0.01)
    call_id = queued[-1]
    assert await background.run_in_worker(call_id, "w") == "input-required"
    _, asked = await held.wait_for(lambda m: m.get("method") == "elicitation/create")
    return session, held, call_id, asked


async def test_deleting_the_session_cancels_its_held_background_call(queued: list[str]) -> None:  # noqa: F811
    token = await sync_to_async(create_user_with_token)("hal")
    session, held, call_id, _ = await held_call_waiting_for_input(token, queued)
    row: Any = await ToolCall.objects.aget(id=call_id)
    assert row.background and not row.is_task
    await delete(session, token)
    row = await ToolCall.objects.aget(id=call_id)
    assert row.status == "cancelled", row.status
    await asyncio.wait_for(held.task, 10)  # its stream ends too, with the call's end
    assert any(m.get("id") == 5 for _, m in held.events()), held.text()


async def test_another_session_of_the_user_cannot_answer_a_held_background_call(queued: list[str]) -> None:  # noqa: F811
    token = await sync_to_async(create_user_with_token)("hana")
    _, held, call_id, asked = await held_call_waiting_for_input(token, queued)
    other = await open_session(token, FORM_CAPS)
    answer = {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {"confirm": True}}}
    r = await post_json(APP, answer, post_headers(version=HANDSHAKE, session=other, token=token))
    assert r.status == 400, (r.status, r.body)
    row: Any = await ToolCall.objects.aget(id=call_id)
    assert row.status == "input_required", row.status
    held.gone.set()


async def test_tasks_result_on_a_session_without_elicitation_does_not_carry_the_form(queued: list[str]) -> None:  # noqa: F811
    token = await sync_to_async(create_user_with_token)("tina")
    asking = await open_session(token, FORM_CAPS)
    created = await legacy(asking, "tools/call", {"name": "confirm_delete", "arguments": {}, "task": {}}, token)
    task_id = created["result"]["task"]["taskId"]
    assert await background.run_in_worker(task_id, "w") == "input-required"

    watching = await open_session(token, {"tasks": {}})
    headers = post_headers(version=HANDSHAKE, session=watching, token=token)
    result = Stream("POST", headers, json.dumps(handshake_message("tasks/result", {"taskId": task_id}, request_id=9)).encode())
    await asyncio.sleep(0.5)  # passes of its loop: nothing to send this client
    assert not [m for _, m in result.events() if m.get("method") == "elicitation/create"], result.text()
    result.gone.set()
    await asyncio.wait_for(result.task, 10)

    capable = Stream("POST", post_headers(version=HANDSHAKE, session=asking, token=token),
                     json.dumps(handshake_message("tasks/result", {"taskId": task_id}, request_id=10)).encode())
    await capable.wait_for(lambda m: m.get("method") == "elicitation/create")  # the session that can answer gets it
    capable.gone.set()


async def sleepy(ctx: ToolContext) -> str:
    await asyncio.sleep(1.0)
    EFFECTS.append("ran")
    return "slept"


async def test_deleting_the_session_stops_a_call_too_young_to_have_a_row() -> None:
    EFFECTS.clear()
    token = await sync_to_async(create_user_with_token)("dora")
    session = await open_session(token, {})
    headers = post_headers(version=HANDSHAKE, session=session, token=token)
    with registry.registered_temporarily(make_tool(sleepy)):
        running = Stream("POST", headers, json.dumps(handshake_message("tools/call", {"name": "sleepy", "arguments": {}}, request_id=3)).encode())
        await asyncio.sleep(0.2)
        await delete(session, token)
        await asyncio.wait_for(running.task, 10)
        await asyncio.sleep(1.2)
    assert EFFECTS == [], "the call went on after its session was deleted"
    assert not any(m.get("result", {}).get("content") == [{"type": "text", "text": "slept"}] for _, m in running.events()), running.text()
