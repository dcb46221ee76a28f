"""MCP Tasks with a real Celery worker, through the official client (2025-11-25 tasks) and raw 2026 requests.

The 2026-07-28 extension is also exercised scenario by scenario by the
conformance suite (tests/test_conformance.py).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from mcp import types
from mcp.shared.exceptions import MCPError

from mcp_tools.models import ToolCall
from tests.clients import LegacySession, ModernClient, http_client, sdk_client
from tests.conftest import CeleryWorker, LiveServer

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]
TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}


def _reports() -> list[dict[str, Any]]:
    from demo_site.operations.models import ReportRun

    return list(ReportRun.objects.values("call_id", "total"))


def _rows() -> list[dict[str, Any]]:
    return list(ToolCall.objects.values("id", "status", "background", "flavor"))


async def test_legacy_task_lifecycle_with_the_official_client(
    start_server: type[LiveServer], start_worker: type[CeleryWorker],
) -> None:
    server = start_server().start()
    start_worker().start()
    # mcp 2.3.0 checks every tools/call result as a CallToolResult, so it cannot take the
    # CreateTaskResult of a task-augmented call: that one request is sent raw, as the same
    # user (an anonymous caller is bound to its session, and tasks are private to their caller).
    from tests.clients import create_user_with_token

    token = await sync_to_async(create_user_with_token)("tasker")
    async with http_client(token) as http:
        raw = await LegacySession.open(http, server.url)
        created_raw = await raw.request("tools/call", {"name": "generate_report", "arguments": {"rows": 300}, "task": {"ttl": 60_000}})
    created = types.CreateTaskResult.model_validate(created_raw)  # the official types accept it
    task_id = created.task.task_id
    assert created.task.status == "working" and created.task.ttl == 60_000 and created.task.poll_interval
    async with sdk_client(server.url, "legacy", token=token) as client:
        session = client.session
        assert session.server_capabilities.tasks is not None
        status = await session.send_request(types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task_id)), types.GetTaskResult)
        assert status.task_id == task_id and status.status in ("working", "completed")
        payload = await session.send_request(
            types.GetTaskPayloadRequest(params=types.GetTaskPayloadRequestParams(task_id=task_id)), types.CallToolResult,
        )
        assert payload.is_error is False and payload.structured_content["total"] == sum(range(300))
        assert payload.meta["io.modelcontextprotocol/related-task"] == {"taskId": task_id}
        listed = await session.send_request(types.ListTasksRequest(), types.ListTasksResult)
        assert [task.task_id for task in listed.tasks] == [task_id]
        assert listed.tasks[0].status == "completed"
        with pytest.raises(MCPError) as finished:
            await session.send_request(types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=task_id)), types.CancelTaskResult)
        assert finished.value.error.code == -32602

        async with http_client(token) as http:
            raw = await LegacySession.open(http, server.url)
            running = await raw.request("tools/call", {"name": "generate_report", "arguments": {"rows": 100_000}, "task": {}})
        running_id = running["task"]["taskId"]
        cancelled = await session.send_request(
            types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=running_id)), types.CancelTaskResult,
        )
        assert cancelled.status == "cancelled"

    await asyncio.sleep(3)  # longer than the whole report would take
    rows = {str(r["id"]): r for r in await sync_to_async(_rows)()}
    assert rows[task_id]["status"] == "completed" and rows[task_id]["flavor"] == "task"
    assert rows[running_id]["status"] == "cancelled"
    reports = {r["call_id"]: r for r in await sync_to_async(_reports)()}
    assert reports.get(running_id, {}).get("total") is None, "the cancelled handler must not have run to its end"


async def test_legacy_task_bad_input_changes_nothing(start_server: type[LiveServer]) -> None:
    server = start_server().start()
    async with http_client() as http:
        raw = await LegacySession.open(http, server.url)
        for params, code in (
            ({"name": "generate_report", "arguments": {"rows": 10}, "task": {"ttl": "60000"}}, -32602),  # ttl no number
            ({"name": "generate_report", "arguments": {"rows": 10}, "task": {"ttl": 0}}, -32602),  # nor a positive one
            ({"name": "generate_report", "arguments": {"rows": 10}, "task": "soon"}, -32602),
            ({"name": "echo", "arguments": {"text": "x"}, "task": {}}, -32601),  # a tool that cannot run as a task
            ({"name": "failing_job", "arguments": {}}, -32601),  # a tool that runs only as a task
        ):
            _, message = await raw.post("tools/call", params)
            assert message["error"]["code"] == code, (params, message)
    async with sdk_client(server.url, "legacy") as client:
        session = client.session
        for unknown in ("00000000-0000-0000-0000-000000000000", "not-a-task"):
            with pytest.raises(MCPError) as missing:
                await session.send_request(types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=unknown)), types.GetTaskResult)
            assert missing.value.error.code == -32602
        with pytest.raises(MCPError) as bad_cursor:
            await session.send_request(types.ListTasksRequest(params=types.PaginatedRequestParams(cursor="forged")), types.ListTasksResult)
        assert bad_cursor.value.error.code == -32602
    assert await sync_to_async(_rows)() == []


async def test_a_task_is_private_to_its_caller(start_server: type[LiveServer], start_worker: type[CeleryWorker]) -> None:
    """Another caller's task id answers exactly like an unknown one (2026 extension)."""
    from tests.clients import create_user_with_token

    server = start_server().start()
    start_worker().start()
    alice = await sync_to_async(create_user_with_token)("alice")
    bob = await sync_to_async(create_user_with_token)("bob")
    async with http_client(alice) as http:
        created = await ModernClient(http, server.url, capabilities=TASKS).request(
            "tools/call", {"name": "generate_report", "arguments": {"rows": 50}},
        )
    assert created["resultType"] == "task"
    task_id = created["taskId"]
    async with http_client(bob) as http:
        client = ModernClient(http, server.url, capabilities=TASKS)
        _, foreign = await client.post("tasks/get", {"taskId": task_id})
        _, unknown = await client.post("tasks/get", {"taskId": "00000000-0000-0000-0000-000000000000"})
        _, cancel = await client.post("tasks/cancel", {"taskId": task_id})
    assert foreign["error"] == unknown["error"] | {"data": {"taskId": task_id}}
    assert cancel["error"]["code"] == -32602
    async with http_client(alice) as http:
        client = ModernClient(http, server.url, capabilities=TASKS)
        for _ in range(100):
            detailed = await client.request("tasks/get", {"taskId": task_id})
            if detailed["status"] == "completed":
                break
            await asyncio.sleep(0.1)
    assert detailed["result"]["structuredContent"]["rows"] == 50


async def test_a_server_killed_while_a_client_waits_on_tasks_result_another_serves_it(
    start_server: type[LiveServer], start_worker: type[CeleryWorker],
) -> None:
    server_a = start_server().start()
    server_b = start_server(server="uvicorn").start()
    start_worker().start()
    async with http_client() as http:
        session = await LegacySession.open(http, server_a.url)
        created = await session.request("tools/call", {"name": "generate_report", "arguments": {"rows": 2000}, "task": {}})
        task_id = created["task"]["taskId"]
        waiting = asyncio.ensure_future(session.post("tasks/result", {"taskId": task_id}))
        await asyncio.sleep(0.5)
        server_a.kill()
        with pytest.raises(Exception):  # noqa: B017 - the connection to A breaks, however httpx words it
            await asyncio.wait_for(waiting, 10)
        result = await session.request("tasks/result", {"taskId": task_id}, url=server_b.url)
    assert result["structuredContent"]["total"] == sum(range(2000))
    assert result["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": task_id}


async def test_a_failed_background_call_can_be_retried_as_a_new_call(
    start_server: type[LiveServer], start_worker: type[CeleryWorker],
) -> None:
    from mcp_tools.tasks import retry_call

    server = start_server().start()
    start_worker().start()
    async with http_client() as http:
        session = await LegacySession.open(http, server.url)
        created = await session.request("tools/call", {"name": "failing_job", "arguments": {}, "task": {}})
        first = created["task"]["taskId"]
        result = await session.request("tasks/result", {"taskId": first})
    assert result["isError"] is True
    assert await sync_to_async(retry_call)("00000000-0000-0000-0000-000000000000") is None
    retried = await sync_to_async(retry_call)(first)
    assert retried and retried != first
    for _ in range(100):
        rows = {str(r["id"]): r for r in await sync_to_async(_rows)()}
        if rows[retried]["status"] == "failed":
            break
        await asyncio.sleep(0.1)
    assert rows[first]["status"] == "failed" and rows[retried]["status"] == "failed"
    assert await sync_to_async(retry_call)(retried) not in (None, first, retried)
