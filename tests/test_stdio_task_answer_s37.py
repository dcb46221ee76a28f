"""A stdio client answers its own 2025-11-25 task's question (found by a review of this session's fixes).

6da3d8f refused an answer over stdio to a call whose row is not stdio's: a task's row says ``task``, so the
``elicitation/create`` a stdio ``tasks/result`` carried could not be answered ("from another principal or
session"), and the task waited until its ttl.
"""
from __future__ import annotations

from typing import Any

import pytest

from mcp_tools import store
from mcp_tools.server.flavors.session import parse_step_request_id
from mcp_tools.server import background
from tests.test_stdio_refused_answer import wait_for
from tests.test_background_review import queued  # noqa: F401
from tests.test_stdio_current_user import make_user, serving

pytestmark = pytest.mark.django_db(transaction=True)


async def test_a_stdio_client_answers_its_tasks_question(queued: list[str]) -> None:  # noqa: F811
    from asgiref.sync import sync_to_async

    await sync_to_async(make_user)("user")
    async with serving("ada", capabilities={"elicitation": {"form": {}}, "tasks": {}}) as client:
        created = await client.request(1, "tools/call", {"name": "confirm_delete", "arguments": {}, "task": {}})
        task_id = created["result"]["task"]["taskId"]
        assert await background.run_in_worker(task_id, "w") == "input-required"
        client.send({"jsonrpc": "2.0", "id": 2, "method": "tasks/result", "params": {"taskId": task_id}})
        ask: Any = await wait_for(client.out, lambda m: m.get("method") == "elicitation/create", 15)
        assert ask is not None, client.out.lines
        client.send({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"confirm": True}}})
        assert (await client.request("ping", "ping"))["result"] == {}  # lines are served in order
        parsed = parse_step_request_id(ask["id"])
        assert parsed is not None
        loaded = await store.load_call(parsed[0])
        assert loaded is not None
        step = loaded[1].at(parsed[1])
        assert step is not None and step.status == "done", step
        assert await background.run_in_worker(task_id, "w") == "finished"
        done = await client.reply_to(2)
        assert "deleted" in done["result"]["content"][0]["text"], done
