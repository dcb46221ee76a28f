"""Task ids, and the ids of the requests the server sends, are opaque strings: matched exactly.

The database lookup parses a call id as a UUID, so ``tasks/get``, ``tasks/result`` and
``tasks/cancel`` with the upper-cased ``taskId`` (or braces, no hyphens, ``urn:uuid:``) found the
task and acted on it, in both eras, and a client response whose id was another spelling of one of
ours (an upper-cased call id, step "01" for 1) answered that request. Each is now an unknown id.
"""
from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from mcp_tools.server import background
from tests.asgi_client import HANDSHAKE, call_modern, post_headers, post_json
from tests.clients import create_user_with_token
from tests.test_background_review import APP, TASKS_ELICIT, queued  # noqa: F401
from tests.test_http_spec_edges import Stream, _in_memory_layer  # noqa: F401
from tests.test_task_review import legacy, open_session

pytestmark = pytest.mark.django_db(transaction=True)


def spellings(task_id: str) -> list[str]:
    """Other texts of the same UUID, each another id."""
    value = uuid.UUID(task_id)
    return [task_id.upper(), f"{{{task_id}}}", value.hex, value.urn]


async def test_a_2025_task_id_spelled_otherwise_is_an_unknown_task(queued: list[str]) -> None:  # noqa: F811
    session = await open_session()
    created = await legacy(session, "tools/call", {"name": "slow_compute", "arguments": {"seconds": 30}, "task": {"ttl": 60_000}})
    task_id = created["result"]["task"]["taskId"]
    for other in spellings(task_id):
        for method in ("tasks/get", "tasks/result", "tasks/cancel"):
            answer = await legacy(session, method, {"taskId": other})
            assert answer["error"]["code"] == -32602 and answer["error"]["message"] == "Unknown task", (method, other, answer)
            assert answer["error"]["data"] == {"taskId": other}, answer
    assert (await legacy(session, "tasks/get", {"taskId": task_id}))["result"]["status"] == "working"


async def _modern(method: str, params: dict[str, Any], token: str) -> dict[str, Any]:
    headers = {"mcp-name": params["taskId"]} if method.startswith("tasks/") else None
    r = await call_modern(APP, method, params, token=token, capabilities=TASKS_ELICIT, headers=headers)
    answer: dict[str, Any] = r.json()
    return answer


async def test_a_2026_task_id_spelled_otherwise_is_an_unknown_task(queued: list[str]) -> None:  # noqa: F811
    token = await sync_to_async(create_user_with_token)("alice")
    created = await _modern("tools/call", {"name": "confirm_delete", "arguments": {}}, token)
    task_id = created["result"]["taskId"]
    assert await background.run_in_worker(task_id, "w") == "input-required"
    for other in spellings(task_id):
        for method, params in (("tasks/get", {}), ("tasks/cancel", {}),
                               ("tasks/update", {"inputResponses": {"confirm": {"action": "accept", "content": {"confirm": True}}}})):
            answer = await _modern(method, {"taskId": other, **params}, token)
            assert answer["error"]["code"] == -32602 and answer["error"]["message"] == "Unknown task", (method, other, answer)
    assert (await _modern("tasks/get", {"taskId": task_id}, token))["result"]["status"] == "input_required"
    assert queued.count(task_id) == 1  # no update reached it


async def test_a_response_to_another_spelling_of_our_request_id_answers_nothing() -> None:
    session = await open_session(capabilities={"elicitation": {}})
    headers = post_headers(version=HANDSHAKE, session=session)
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "test_elicitation", "arguments": {"message": "hi"}}}
    stream = Stream("POST", headers, json.dumps(call).encode())
    try:
        _, asked = await stream.wait_for(lambda m: m.get("method") == "elicitation/create")
        prefix, call_id, seq = asked["id"].split(":")
        content = {"action": "accept", "content": {"username": "u", "email": "e@x.org"}}
        for other in (f"{prefix}:{call_id.upper()}:{seq}", f"{prefix}:{uuid.UUID(call_id).hex}:{seq}", f"{prefix}:{call_id}:0{seq}"):
            refused = await post_json(APP, {"jsonrpc": "2.0", "id": other, "result": content}, headers)
            assert refused.status == 400 and refused.json()["error"]["code"] == -32600, (other, refused.body)
        # The request still waits for its answer, which the id as sent gives it.
        assert (await post_json(APP, {"jsonrpc": "2.0", "id": asked["id"], "result": content}, headers)).status == 202
        _, final = await stream.wait_for(lambda m: m.get("id") == 7)
    finally:
        stream.gone.set()
    assert "action=accept" in final["result"]["content"][0]["text"], final
