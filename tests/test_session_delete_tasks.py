"""What a session's ``DELETE`` leaves of its tasks (2025-11-25 task-augmented calls).

A user's task belongs to the user and outlives the session (tests/test_task_review.py answers one
from another session). An anonymous session's caller is bound to the session itself: after its
``DELETE`` no request can reach its tasks (``tasks/get`` from any other session is another caller),
so they are cancelled with the session's other calls. They were left waiting until their ttl.
"""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from mcp_tools.models import ToolCall
from mcp_tools.server import background
from tests.asgi_client import HANDSHAKE, post_headers, request
from tests.clients import create_user_with_token
from tests.test_background_review import queued  # noqa: F401
from tests.test_http_spec_edges import APP, _in_memory_layer  # noqa: F401
from tests.test_task_review import legacy, open_session

pytestmark = pytest.mark.django_db(transaction=True)

CAPS = {"elicitation": {"form": {}}, "tasks": {}}


async def task_waiting_for_input(token: str | None) -> tuple[str, str]:
    session = await open_session(token, CAPS)
    created = await legacy(session, "tools/call", {"name": "confirm_delete", "arguments": {}, "task": {}}, token)
    task_id: str = created["result"]["task"]["taskId"]
    assert await background.run_in_worker(task_id, "w") == "input-required"
    return session, task_id


async def delete(session: str, token: str | None) -> None:
    r = await request(APP, "DELETE", "/mcp", headers=post_headers(version=HANDSHAKE, session=session, token=token))
    assert r.status == 204, (r.status, r.body)


@pytest.mark.parametrize("caller", ["anonymous", "user"])
async def test_deleting_a_session_ends_only_the_tasks_nobody_can_reach_after(caller: str, queued: list[str]) -> None:  # noqa: F811
    token = await sync_to_async(create_user_with_token)("tess") if caller == "user" else None
    session, task_id = await task_waiting_for_input(token)
    await delete(session, token)
    row: Any = await ToolCall.objects.aget(id=task_id)
    if caller == "anonymous":
        assert row.status == "cancelled", row.status
    else:
        assert row.status == "input_required", row.status
        other = await open_session(token, CAPS)
        assert (await legacy(other, "tasks/get", {"taskId": task_id}, token))["result"]["status"] == "input_required"
