"""MCP Tasks (2025-11-25) belong to their caller: answered from any of its sessions, going on once
answered with no stream open, hidden from a token that may not call their tool, living the ttl they
report. Each test failed before its fix (a review of the tasks flavor)."""
from __future__ import annotations

import asyncio
import json
from datetime import datetime
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from mcp_tools.models import ToolCall
from mcp_tools.server import background
from tests.asgi_client import HANDSHAKE, handshake_message, post_headers, post_json
from tests.clients import create_user_with_token
from tests.test_background_review import APP, queued  # noqa: F401
from tests.test_http_spec_edges import Stream, _in_memory_layer  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


async def open_session(token: str | None = None, capabilities: dict[str, Any] | None = None) -> str:
    r = await post_json(APP, handshake_message("initialize", {"protocolVersion": HANDSHAKE, "capabilities": capabilities or {},
                                                              "clientInfo": {"name": "t", "version": "1"}}),
                        post_headers(version=None, token=token))
    assert r.status == 200, r.body
    return r.header("mcp-session-id")


async def legacy(session: str, method: str, params: dict[str, Any], token: str | None = None) -> dict[str, Any]:
    r = await post_json(APP, handshake_message(method, params), post_headers(version=HANDSHAKE, session=session, token=token))
    assert r.status == 200, (r.status, r.body)
    return r.json()


async def test_a_task_asking_for_input_can_be_answered_from_the_callers_other_session(queued: list[str]) -> None:  # noqa: F811
    """A user's task outlives the session that started it (tasks/get and tasks/result work from any
    of the caller's sessions): the answer to its elicitation, POSTed on the session whose
    tasks/result stream carried it, sends the task back to a worker."""
    token = await sync_to_async(create_user_with_token)("alice")
    caps = {"elicitation": {"form": {}}, "tasks": {}}
    a = await open_session(token, caps)
    created = await legacy(a, "tools/call", {"name": "confirm_delete", "arguments": {}, "task": {}}, token)
    task_id = created["result"]["task"]["taskId"]
    assert await background.run_in_worker(task_id, "w") == "input-required"
    b = await open_session(token, caps)  # session A expired, or a second client of the same user
    headers = post_headers(version=HANDSHAKE, session=b, token=token)
    s = Stream("POST", headers, json.dumps(handshake_message("tasks/result", {"taskId": task_id})).encode())
    _, ask = await s.wait_for(lambda m: m.get("method") == "elicitation/create")
    r = await post_json(APP, {"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"confirm": True}}}, headers)
    assert r.status == 202
    row = await sync_to_async(ToolCall.objects.get)(id=task_id)
    s.gone.set()
    await asyncio.wait_for(s.task, 10)
    assert (row.status, queued.count(task_id)) == ("working", 2)  # answered, and queued again


async def _scoped_job(sku: str) -> dict[str, Any]:
    """Runs on a worker."""
    return {"secret": f"restocked {sku}"}


async def test_a_token_without_the_tools_scope_cannot_read_or_cancel_its_task(queued: list[str]) -> None:  # noqa: F811
    """Scopes restrict a tool at every gate (docs/oauth.md): a token of the same user without the
    tool's scope gets "Unknown task" from tasks/get, tasks/result and tasks/cancel, as tools/call
    answers "Unknown tool", and tasks/list leaves the task out."""
    from django.contrib.auth.models import User

    from mcp_tools.protocol.errors import McpError
    from mcp_tools.registry import make_tool, registry
    from mcp_tools.server import core
    from mcp_tools.server.auth import Principal
    from mcp_tools.server.context import RequestContext
    from mcp_tools.server.flavors import tasks

    user = await sync_to_async(User.objects.create_user)(username="scoped", password="x")
    wide = Principal(user=user, id=f"user:{user.pk}", scopes=frozenset({"mcp", "inventory:write"}))
    narrow = Principal(user=user, id=f"user:{user.pk}", scopes=frozenset({"mcp"}))

    def rc(p: Principal) -> RequestContext:
        return RequestContext(principal=p, protocol_version=HANDSHAKE, modern=False, client_capabilities={})

    with registry.registered_temporarily(make_tool(_scoped_job, name="scoped_job", background=True, scopes=["inventory:write"])):
        created = await tasks.create_legacy({"name": "scoped_job", "arguments": {"sku": "A1"}, "task": {}}, rc(wide))
        task_id = created["task"]["taskId"]
        assert await background.run_in_worker(task_id, "w") == "finished"
        # The narrow token cannot call the tool, nor resume it:
        with pytest.raises(McpError, match="^Unknown tool"):
            await core.resolve_target("tools/call", {"name": "scoped_job", "arguments": {"sku": "A1"}}, narrow)
        for call in (tasks.legacy_get, tasks.legacy_result, tasks.legacy_cancel):
            with pytest.raises(McpError, match="^Unknown task$"):
                await call({"taskId": task_id}, rc(narrow))
        assert (await tasks.legacy_list({}, rc(narrow)))["tasks"] == []
        # The token that may call the tool still reaches its task, and lists it.
        assert (await tasks.legacy_get({"taskId": task_id}, rc(wide)))["status"] == "completed"
        assert [t["taskId"] for t in (await tasks.legacy_list({}, rc(wide)))["tasks"]] == [task_id]


@pytest.mark.parametrize("ttl", [1500, 60_500])
async def test_the_task_reports_the_ttl_it_was_given(queued: list[str], ttl: int) -> None:  # noqa: F811
    """Spec 2025-11-25 tasks, "TTL and Resource Management": receivers MUST include the actual ttl;
    one the server accepted (any integer of milliseconds in range) is the one the task lives and reports."""
    s = await open_session()
    created = await legacy(s, "tools/call", {"name": "slow_compute", "arguments": {"seconds": 30}, "task": {"ttl": ttl}})
    task_id = created["result"]["task"]["taskId"]
    got = await legacy(s, "tasks/get", {"taskId": task_id})
    assert (created["result"]["task"]["ttl"], got["result"]["ttl"]) == (ttl, ttl)


async def test_a_task_answered_after_its_result_stream_closed_goes_on(queued: list[str]) -> None:  # noqa: F811
    """Spec 2025-11-25 tasks, "Task-Augmented Tool Call With Elicitation": the client may close the
    tasks/result stream that carried the request, answer it, and poll: the task moves back to working."""
    s = await open_session(capabilities={"elicitation": {"form": {}}})
    headers = post_headers(version=HANDSHAKE, session=s)
    created = await legacy(s, "tools/call", {"name": "confirm_delete", "arguments": {}, "task": {}})
    task_id = created["result"]["task"]["taskId"]
    assert await background.run_in_worker(task_id, "w") == "input-required"
    stream = Stream("POST", headers, json.dumps(handshake_message("tasks/result", {"taskId": task_id})).encode())
    _, ask = await stream.wait_for(lambda m: m.get("method") == "elicitation/create")
    stream.gone.set()  # the client closes the result stream ...
    await asyncio.wait_for(stream.task, 10)
    r = await post_json(APP, {"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"confirm": True}}}, headers)
    assert r.status == 202  # ... and answers, then polls
    assert (await legacy(s, "tasks/get", {"taskId": task_id}))["result"]["status"] == "working"
    assert queued.count(task_id) == 2  # back on a worker


async def test_task_times_name_the_instant_without_time_zone_support(queued: list[str], no_time_zone_support: None) -> None:  # noqa: F811
    """With ``USE_TZ = False`` the rows hold naive wall times of ``TIME_ZONE``: ``createdAt`` and
    ``lastUpdatedAt`` were sent as such, with no offset, and a client read them in its own time zone
    (RFC 3339 has no naive times). Both eras now send the instant in UTC, ``Z``, as with ``USE_TZ = True``."""
    from zoneinfo import ZoneInfo

    from tests.test_background_review import TASKS, modern

    s = await open_session()
    legacy_task = (await legacy(s, "tools/call", {"name": "slow_compute", "arguments": {"seconds": 30}, "task": {}}))["result"]["task"]
    modern_task = (await modern("tools/call", {"name": "slow_compute", "arguments": {"seconds": 30}}, TASKS))["result"]
    for task in (legacy_task, modern_task):
        row = await sync_to_async(ToolCall.objects.get)(id=task["taskId"])
        assert row.created_at.tzinfo is None  # New York wall time, as Django stores it here
        for field, value in (("createdAt", row.created_at), ("lastUpdatedAt", row.updated_at)):
            sent = task[field]
            assert sent.endswith("Z"), f"{field} {sent!r} names no instant"
            assert datetime.fromisoformat(sent.replace("Z", "+00:00")) == value.replace(tzinfo=ZoneInfo("America/New_York"))


def _failed_row(**fields: Any) -> Any:
    from types import SimpleNamespace

    from django.utils import timezone

    now = timezone.now()
    row: dict[str, Any] = {"id": "0b9a3f4e-1d7c-4c5e-9a51-6f1b2c3d4e5f", "status": "failed", "error": None, "result": None,
                           "status_message": "", "created_at": now, "updated_at": now, "expires_at": None, "poll_interval_ms": 0}
    return SimpleNamespace(**{**row, **fields})


@pytest.mark.parametrize(("fields", "message"), [
    ({"error": {"code": -32603, "message": "protocol_error_job failed at the protocol level"}},
     "protocol_error_job failed at the protocol level"),
    ({"result": {"content": [{"type": "text", "text": "failing_job always fails"}], "isError": True}}, "failing_job always fails"),
    ({"result": {"content": [{"type": "image", "data": "", "mimeType": "image/png"}], "isError": True}}, "The tool call failed."),
    ({"result": {"content": [{"type": "text", "text": "x" * 2000}], "isError": True}}, "x" * 500),
    # The row's own message is the last progress message (what the call was doing), not why it failed.
    ({"error": {"code": -32603, "message": "failed"}, "status_message": "Retry of 1234"}, "failed"),
    ({"result": {"content": [{"type": "text", "text": "Row 3: duplicate SKU 'A-1'"}], "isError": True},
      "status_message": "Importing row 3"}, "Row 3: duplicate SKU 'A-1'"),
])
def test_a_failed_task_says_why_in_its_status_message(fields: dict[str, Any], message: str) -> None:
    """tasks/get SHOULD carry a statusMessage for a failed task (2025-11-25, Task Failure): the error's
    message, else the tool error's text; not the progress message the row holds."""
    from mcp_tools.server.flavors.tasks import legacy_task, task_fields

    row = _failed_row(**fields)
    assert legacy_task(row)["status"] == "failed"
    assert legacy_task(row)["statusMessage"] == message
    if row.error is not None:  # a protocol error fails a 2026 task as well (a tool error completes it)
        assert task_fields(row)["status"] == "failed"
        assert task_fields(row)["statusMessage"] == message
    else:
        assert task_fields(row)["status"] == "completed"
        assert task_fields(row).get("statusMessage") == (row.status_message or None)  # its last status, as any completed task



async def _tool_error_job() -> str:
    """Runs on a worker, and fails with a tool error (``isError``): a failed 2025-11-25 task."""
    from mcp_tools import ToolError

    raise ToolError("the job failed")


async def test_cancelling_a_task_that_a_tool_error_failed_says_it_failed(queued: list[str]) -> None:  # noqa: F811
    """2025-11-25 tasks/cancel of a terminal task is -32602; it said "it is already completed" with
    data.status "completed" (the 2026 mapping, where a tool error completes a task) for a task that
    tasks/get and tasks/list report "failed"."""
    from mcp_tools.registry import make_tool, registry

    s = await open_session()
    with registry.registered_temporarily(make_tool(_tool_error_job, name="tool_error_job", background=True)):
        created = await legacy(s, "tools/call", {"name": "tool_error_job", "arguments": {}, "task": {}})
        task_id = created["result"]["task"]["taskId"]
        assert await background.run_in_worker(task_id, "w") == "finished"
        got = (await legacy(s, "tasks/get", {"taskId": task_id}))["result"]
        refused = (await legacy(s, "tasks/cancel", {"taskId": task_id}))["error"]
    assert got["status"] == "failed", got
    assert refused["code"] == -32602, refused
    assert (refused["message"], refused["data"]["status"]) == ("Cannot cancel the task: it is already failed", "failed"), refused


@pytest.mark.parametrize(("ttl", "chosen"), [
    (60_000.0, 60_000),  # a JSON number written with a fraction: the schema types ttl "number"
    (1500.6, 1501),  # milliseconds, rounded
    (1, 1000),  # below the server's range: the shortest it keeps a task
    (0.5, 1000),
    (10**12, 86_400_000),  # above it: TASK_MAX_TTL_MS
    (1e300, 86_400_000),
    pytest.param(10**400, 86_400_000, id="an-integer-past-a-double"),
])
async def test_a_task_ttl_is_any_positive_number_and_the_server_chooses_within_its_range(
    queued: list[str], ttl: Any, chosen: int,  # noqa: F811
) -> None:
    """Spec 2025-11-25 tasks: ``ttl`` is a ``number`` of milliseconds, and "Receivers MAY override the
    requested ttl duration" (and MUST report the actual one). 60000.0, 1500.6, or one out of range were
    refused with -32602; the server now keeps the task within its range and says so in the Task."""
    s = await open_session()
    created = await legacy(s, "tools/call", {"name": "slow_compute", "arguments": {"seconds": 30}, "task": {"ttl": ttl}})
    assert "error" not in created, created
    task_id = created["result"]["task"]["taskId"]
    got = await legacy(s, "tasks/get", {"taskId": task_id})
    assert (created["result"]["task"]["ttl"], got["result"]["ttl"]) == (chosen, chosen)


@pytest.mark.parametrize("ttl", ["60000", True, False, 0, -1, -0.5, [60_000], {"ms": 1}])
async def test_a_task_ttl_that_is_not_a_positive_number_is_refused(queued: list[str], ttl: Any) -> None:  # noqa: F811
    s = await open_session()
    refused = await legacy(s, "tools/call", {"name": "slow_compute", "arguments": {"seconds": 30}, "task": {"ttl": ttl}})
    assert refused["error"]["code"] == -32602, refused
    assert await sync_to_async(ToolCall.objects.count)() == 0


@pytest.mark.parametrize("ttl", [float("nan"), float("inf"), float("-inf")])
def test_a_task_ttl_that_is_no_finite_number_is_refused(ttl: float) -> None:
    """The wire refuses NaN and infinities before this (jsonrpc.parse_body); a transport of another
    decoder (stdio, a test client) still gets -32602, not a task that lives forever or an OverflowError."""
    from mcp_tools.protocol.errors import McpError
    from mcp_tools.server.flavors import tasks

    with pytest.raises(McpError) as refused:
        tasks._requested_ttl_ms({"task": {"ttl": ttl}})
    assert refused.value.code == -32602
