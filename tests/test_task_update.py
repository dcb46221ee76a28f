"""``tasks/update`` (2026-07-28 tasks extension, SEP-2663) for a task that waits for no input.

"A server SHOULD ignore any inputResponses responses mapped to a key that is not currently
outstanding for the task" and "MUST acknowledge the request with an empty result"; docs/protocol.md:
keys not pending are ignored. The caller's own task that was working (queued, or answered already:
a retried update), completed, failed or cancelled answered ``-32602 "The task is not waiting for
input"``. It is acknowledged now, as ``tasks/cancel`` is, and changes nothing; an unknown task, or
another caller's, is still ``-32602 "Unknown task"``.

The worker is simulated in-process (``background.run_in_worker``), as in tests/test_background_review.py.
"""
from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from mcp_tools.models import ToolCall
from mcp_tools.server import background
from tests.clients import create_user_with_token
from tests.test_background_review import queued  # noqa: F401
from tests.test_task_cross_era import _modern

pytestmark = pytest.mark.django_db(transaction=True)
CONFIRMED = {"confirm": {"action": "accept", "content": {"confirm": True}}}


def _ack(answer: dict[str, Any]) -> bool:
    """Whether ``answer`` is the empty acknowledgement, as any other (docs/protocol.md): its result type (and ``_meta``)."""
    return {k: v for k, v in answer.get("result", {}).items() if k != "_meta"} == {"resultType": "complete"}


async def _task(tool: str, token: str) -> str:
    created = await _modern("tools/call", {"name": tool, "arguments": {}}, token)
    task_id: str = created["result"]["taskId"]
    return task_id


async def _acknowledged_and_unchanged(task_id: str, token: str, queued: list[str]) -> None:
    before = await sync_to_async(ToolCall.objects.get)(id=task_id)
    sent = queued.count(task_id)
    update = await _modern("tasks/update", {"taskId": task_id, "inputResponses": CONFIRMED}, token)
    assert _ack(update), update
    after = await sync_to_async(ToolCall.objects.get)(id=task_id)
    assert (after.status, after.round, queued.count(task_id)) == (before.status, before.round, sent)


async def test_an_update_of_a_working_task_is_acknowledged(queued: list[str]) -> None:  # noqa: F811
    token = await sync_to_async(create_user_with_token)("alice")
    task_id = await _task("confirm_delete", token)  # queued: it has asked nothing yet
    await _acknowledged_and_unchanged(task_id, token, queued)


async def test_an_update_sent_again_after_its_answer_went_in_is_acknowledged(queued: list[str]) -> None:  # noqa: F811
    """A client retrying its tasks/update (its first answer's ack was lost) after the task went back to work."""
    token = await sync_to_async(create_user_with_token)("alice")
    task_id = await _task("confirm_delete", token)
    assert await background.run_in_worker(task_id, "w") == "input-required"
    first = await _modern("tasks/update", {"taskId": task_id, "inputResponses": CONFIRMED}, token)
    assert _ack(first), first
    await _acknowledged_and_unchanged(task_id, token, queued)
    assert await background.run_in_worker(task_id, "w") == "finished"
    got = await _modern("tasks/get", {"taskId": task_id}, token)
    assert got["result"]["result"]["content"] == [{"type": "text", "text": "deleted file.txt"}], got


@pytest.mark.parametrize(("tool", "end", "status"), [
    ("confirm_delete", "cancel", "cancelled"),
    ("protocol_error_job", "worker", "failed"),
    ("slow_compute_done", "worker", "completed"),
])
async def test_an_update_of_an_ended_task_is_acknowledged(queued: list[str], tool: str, end: str, status: str) -> None:  # noqa: F811
    from mcp_tools.registry import make_tool, registry

    async def _done() -> str:
        return "done"

    token = await sync_to_async(create_user_with_token)("alice")
    with registry.registered_temporarily(make_tool(_done, name="slow_compute_done", background=True)):
        task_id = await _task(tool, token)
        if end == "cancel":
            await _modern("tasks/cancel", {"taskId": task_id}, token)
        else:
            await background.run_in_worker(task_id, "w")
        assert (await _modern("tasks/get", {"taskId": task_id}, token))["result"]["status"] == status
        await _acknowledged_and_unchanged(task_id, token, queued)


async def test_an_update_of_an_unknown_or_anothers_task_is_still_refused(queued: list[str]) -> None:  # noqa: F811
    alice = await sync_to_async(create_user_with_token)("alice")
    bob = await sync_to_async(create_user_with_token)("bob")
    task_id = await _task("confirm_delete", alice)
    for other, token in ((task_id, bob), ("00000000-0000-0000-0000-000000000000", alice)):
        refused = await _modern("tasks/update", {"taskId": other, "inputResponses": CONFIRMED}, token)
        assert (refused["error"]["code"], refused["error"]["message"]) == (-32602, "Unknown task"), refused
