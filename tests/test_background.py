"""Background tools on a real Celery worker process, seen through real clients.

The server, the worker and this test share only the database and the broker
(the embedded filesystem broker, or Redis when ``REDIS_URL`` is set).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from mcp_tools.models import ToolCall
from tests.clients import ModernClient, http_client, sdk_client
from tests.conftest import CeleryWorker, LiveServer

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


def _report_rows() -> list[dict[str, Any]]:
    from demo_site.operations.models import ReportRun

    return list(ReportRun.objects.values("call_id", "rows", "total"))


def _calls(tool: str) -> list[dict[str, Any]]:
    return list(ToolCall.objects.filter(tool_name=tool).values("id", "status", "background", "worker", "celery_task_id", "flavor"))


async def test_legacy_client_gets_worker_progress_then_the_result_on_its_stream(
    start_server: type[LiveServer], start_worker: type[CeleryWorker],
) -> None:
    server = start_server().start()
    start_worker().start()
    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async with sdk_client(server.url, "legacy") as client:
        result = await asyncio.wait_for(client.call_tool("generate_report", {"rows": 200}, progress_callback=on_progress), 60)
    assert result.is_error is False, result
    assert result.structured_content["rows"] == 200
    assert result.structured_content["total"] == sum(range(200))
    assert progress and progress[-1] == 200, progress
    [call] = await sync_to_async(_calls)("generate_report")
    assert call["status"] == "completed" and call["background"] and call["celery_task_id"]
    assert await sync_to_async(_report_rows)() == [{"call_id": str(call["id"]), "rows": 200, "total": sum(range(200))}]


async def test_a_worker_killed_mid_call_is_replaced_and_the_once_effects_ran_exactly_once(
    start_server: type[LiveServer], start_worker: type[CeleryWorker],
) -> None:
    """SIGKILL the worker mid-call; once its lease runs out the sweep queues the call for another worker."""
    from mcp_tools.server.background import sweep

    server = start_server().start()
    first = start_worker().start()
    async with sdk_client(server.url, "legacy") as client:
        # The report takes ~2 s on the worker. On a loaded machine it can finish before the
        # test sees its progress, and a worker killed then kills no call: the worker is
        # frozen first, and the call checked to be unfinished, before it is killed.
        for _attempt in range(3):
            known = {row["id"] for row in await sync_to_async(_calls)("generate_report")}
            call = asyncio.ensure_future(client.call_tool("generate_report", {"rows": 1000}))
            call_id = await _started_report(known)
            first.freeze()
            if await sync_to_async(_status)(call_id) != "completed":
                break
            first.thaw()
            await asyncio.wait_for(call, 60)
        else:
            pytest.fail("the worker finished each report before it could be stopped mid-call")
        lost_task = await sync_to_async(_task_id)(call_id)
        first.kill()
        start_worker().start()
        # The lease (3 s in the tests) must run out first. Either sweep may queue the call again:
        # this one, or the one a starting worker sends (on a slow machine the lease has run out
        # by then); a new task id says it was queued again.
        for _ in range(100):
            await sync_to_async(sweep)()
            if await sync_to_async(_task_id)(call_id) != lost_task:
                break
            await asyncio.sleep(0.2)
        else:
            pytest.fail("no sweep queued the lost worker's call again")
        result = await asyncio.wait_for(call, 60)
    assert result.is_error is False, result
    assert await sync_to_async(_status)(call_id) == "completed"
    reports = [r for r in await sync_to_async(_report_rows)() if r["call_id"] == str(call_id)]
    assert reports == [{"call_id": str(call_id), "rows": 1000, "total": sum(range(1000))}], "each once effect ran once"


def _task_id(call_id: Any) -> str:
    return str(ToolCall.objects.values_list("celery_task_id", flat=True).get(id=call_id))


def _status(call_id: Any) -> str:
    return str(ToolCall.objects.values_list("status", flat=True).get(id=call_id))


async def _started_report(known: set[Any]) -> Any:
    """The id of the new ``generate_report`` call (not in ``known``), once its worker made progress."""
    for _ in range(400):
        rows = await sync_to_async(lambda: list(
            ToolCall.objects.filter(tool_name="generate_report").exclude(id__in=known).values_list("id", "progress")))()
        if rows and rows[0][1]:
            return rows[0][0]
        await asyncio.sleep(0.05)
    pytest.fail("the report made no progress in 20 s")


async def test_2026_client_without_tasks_is_held_until_the_worker_finishes(
    start_server: type[LiveServer], start_worker: type[CeleryWorker],
) -> None:
    """The official client in 2026 mode knows no resume tokens: its request waits for the worker's result."""
    server = start_server().start()
    start_worker().start()
    async with sdk_client(server.url, "2026-07-28") as client:
        result = await asyncio.wait_for(client.call_tool("generate_report", {"rows": 300}), 60)
    assert result.is_error is False, result
    assert result.structured_content["total"] == sum(range(300))
    [call] = await sync_to_async(_calls)("generate_report")
    assert call["status"] == "completed" and call["flavor"] == "mrtr"


async def test_a_client_that_resumes_polls_with_tokens_to_completion(
    start_server: type[LiveServer], start_worker: type[CeleryWorker],
) -> None:
    """A client advertising ``experimental.resumeTokens`` gets the progress so far and a token, until the result."""
    server = start_server().start()
    start_worker().start()
    capabilities = {"experimental": {"resumeTokens": {}}}
    arguments = {"name": "generate_report", "arguments": {"rows": 500}}
    async with http_client() as http:
        client = ModernClient(http, server.url, capabilities=capabilities)
        first = await client.request("tools/call", arguments)
        token = first.get("nextResumeToken")
        assert token and first["_meta"]["nextResumeToken"] == token, first
        answers = [first]
        for _ in range(300):
            await asyncio.sleep(0.1)
            answer = await client.request("tools/call", {**arguments, "resumeToken": token})
            answers.append(answer)
            token = answer.get("nextResumeToken")
            if token is None:
                break
    final = answers[-1]
    assert token is None, "the call never finished"
    assert final["structuredContent"]["total"] == sum(range(500))
    assert "nextResumeToken" not in final.get("_meta", {})
    interim = [a["_meta"]["io.modelcontextprotocol/status"] for a in answers[:-1]]
    assert interim[0]["status"] == "working"
    [call] = await sync_to_async(_calls)("generate_report")
    assert call["status"] == "completed"

    # The token is bound to the arguments, the tool and the caller.
    async with http_client() as http:
        client = ModernClient(http, server.url, capabilities=capabilities)
        changed, message = await client.post("tools/call", {"name": "generate_report", "arguments": {"rows": 501}, "resumeToken": first["nextResumeToken"]})
        assert message["error"]["code"] == -32602 and "resumeToken" in message["error"]["message"]
        forged, message = await client.post("tools/call", {**arguments, "resumeToken": first["nextResumeToken"][:-4] + "AAAA"})
        assert message["error"]["code"] == -32602
    assert len(await sync_to_async(_calls)("generate_report")) == 1, "a refused token must start nothing"


@pytest.mark.django_db
def test_check_reports_background_tools_without_a_broker(monkeypatch: pytest.MonkeyPatch) -> None:
    from celery import current_app

    from mcp_tools.checks import check_background_broker

    assert check_background_broker() == []  # the demo configures a broker
    monkeypatch.setattr(current_app.conf, "broker_url", None)
    [error] = check_background_broker()
    assert error.id == "mcp_tools.E020" and "generate_report" in error.msg
    # The step a site following docs/background.md missed: celery.py that the server never imports.
    assert "__init__.py" in error.hint and "from .celery import app as celery_app" in error.hint
