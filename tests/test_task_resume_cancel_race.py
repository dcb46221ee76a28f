"""``notifications/cancelled`` for a resumed ``tasks/result`` request stops the request, not the task,
also when it comes while the resumed stream still reads the task's row (before the tasks flavor
carries it). The test holds that read until the cancel is in: it only widens that window."""
from __future__ import annotations

import asyncio
from typing import Any

import pytest

from mcp_tools.server.flavors import tasks as tasks_flavor
from tests.asgi_client import HANDSHAKE, post_headers, post_json
from tests.test_background_review import APP, queued  # noqa: F401
from tests.test_http_spec_edges import Stream
from tests.test_task_resume import CAPABILITIES, _task_waiting_on_a_dropped_result_stream
from tests.test_task_review import open_session

pytestmark = pytest.mark.django_db(transaction=True)


async def test_cancel_while_the_resumed_request_starts_leaves_the_task(queued: list[str], monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    session = await open_session(capabilities=CAPABILITIES)
    headers = post_headers(version=HANDSHAKE, session=session)
    task_id, event_id, _ask = await _task_waiting_on_a_dropped_result_stream(headers, "result-5")
    reading, gate = asyncio.Event(), asyncio.Event()
    own_task = tasks_flavor._own_task

    async def slow_own_task(*args: Any, **kwargs: Any) -> Any:  # the row read of continue_result, held
        reading.set()
        await gate.wait()
        return await own_task(*args, **kwargs)

    monkeypatch.setattr(tasks_flavor, "_own_task", slow_own_task)
    resumed = Stream("GET", {**headers, "accept": "text/event-stream", "last-event-id": event_id})
    await asyncio.wait_for(reading.wait(), 10)
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "result-5"}}
    assert (await post_json(APP, cancel, headers)).status == 202
    gate.set()
    await asyncio.wait_for(resumed.task, 10)
    monkeypatch.setattr(tasks_flavor, "_own_task", own_task)
    status = await post_json(APP, {"jsonrpc": "2.0", "id": "get-1", "method": "tasks/get", "params": {"taskId": task_id}}, headers)
    assert status.json()["result"]["status"] == "input_required", status.json()
