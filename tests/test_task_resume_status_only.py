"""A 2025-11-25 ``tasks/result`` stream that carried only the task's status (a task that never asks for
input), dropped and resumed with ``Last-Event-ID``, goes on as the ``tasks/result`` request and answers
it, as one that carried an input request does (tests/test_task_resume.py)."""
from __future__ import annotations

import asyncio
import json

import pytest

from mcp_tools import ToolContext
from mcp_tools.registry import make_tool, registry
from mcp_tools.server import background
from tests.asgi_client import HANDSHAKE, post_headers, post_json
from tests.test_background_review import APP, queued  # noqa: F401
from tests.test_http_spec_edges import Stream
from tests.test_task_review import open_session

pytestmark = pytest.mark.django_db(transaction=True)
CAPABILITIES = {"elicitation": {"form": {}}, "tasks": {}}


async def _report(ctx: ToolContext) -> str:
    return "report ready"


async def test_a_resumed_status_only_tasks_result_stream_answers_the_request(queued: list[str]) -> None:  # noqa: F811
    with registry.registered_temporarily(make_tool(_report, name="status_only_report", background=True)):
        session = await open_session(capabilities=CAPABILITIES)
        headers = post_headers(version=HANDSHAKE, session=session)
        call = {"jsonrpc": "2.0", "id": "call-1", "method": "tools/call",
                "params": {"name": "status_only_report", "arguments": {}, "task": {}}}
        created = await post_json(APP, call, headers)
        task_id = created.json()["result"]["task"]["taskId"]
        request = {"jsonrpc": "2.0", "id": "result-1", "method": "tasks/result", "params": {"taskId": task_id}}
        first = Stream("POST", headers, json.dumps(request).encode())
        event_id, _ = await first.wait_for(lambda m: m.get("method") == "notifications/tasks/status")
        assert event_id is not None
        first.gone.set()  # the client loses the stream
        await asyncio.wait_for(first.task, 10)
        assert await background.run_in_worker(task_id, "w") == "finished"
        resumed = Stream("GET", {**headers, "accept": "text/event-stream", "last-event-id": event_id})
        await asyncio.wait_for(resumed.task, 10)
        answers = [m for _, m in resumed.events() if "id" in m and ("result" in m or "error" in m)]
        assert answers and answers[0]["id"] == "result-1", (resumed.text(), resumed.sent[:1])
