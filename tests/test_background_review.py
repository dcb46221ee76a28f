"""Background calls, MCP Tasks and resume tokens: what a review of them found, each failing before its mend.

A protocol error on the worker read as an empty success, ``time_limit`` ended calls as cancelled,
a call the broker refused stayed ``working`` forever, tasks said ``expired`` (no such task status),
``tasks/list`` pages repeated tasks, and a retry of the round that deferred hung for 30 s.

The Celery worker is simulated in-process: ``background.send`` is replaced by a recorder, and the
test runs ``background.run_in_worker`` itself, exactly as the ``mcp_tools.run_call`` task body does.
"""
from __future__ import annotations

import asyncio
import contextvars
import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from mcp_tools import ToolContext
from mcp_tools.models import ToolCall
from mcp_tools.registry import make_tool, registry
from mcp_tools.server import background
from mcp_tools.store import sync_calls
from mcp_tools.transports.http import McpEndpoint
from tests.asgi_client import HANDSHAKE, call_modern, handshake_message, post_headers, post_json

pytestmark = pytest.mark.django_db(transaction=True)
APP = McpEndpoint()
VALID_TASK_STATUSES = {"working", "input_required", "completed", "failed", "cancelled"}
TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
TASKS_ELICIT = {**TASKS, "elicitation": {"form": {}}}
RESUMES = {"experimental": {"resumeTokens": {}}}


@pytest.fixture
def queued(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Call ids handed to the (simulated) broker."""
    sent: list[str] = []
    monkeypatch.setattr(background, "send", lambda call_id, tool, task_id: sent.append(call_id))
    return sent


async def open_session() -> str:
    r = await post_json(APP, handshake_message("initialize", {"protocolVersion": HANDSHAKE, "capabilities": {},
                                                              "clientInfo": {"name": "t", "version": "1"}}), post_headers(version=None))
    assert r.status == 200
    return r.header("mcp-session-id")


async def legacy(session: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    r = await post_json(APP, handshake_message(method, params), post_headers(version=HANDSHAKE, session=session))
    assert r.status == 200, r.body
    return r.json()


async def modern(method: str, params: dict[str, Any], capabilities: dict[str, Any]) -> dict[str, Any]:
    headers = {"mcp-name": params["taskId"]} if method.startswith("tasks/") and isinstance(params.get("taskId"), str) else None
    r = await call_modern(APP, method, params, capabilities=capabilities, headers=headers)
    assert r.status == 200, (r.status, r.body)
    return r.json()


PROTOCOL_ERROR = "protocol_error_job failed at the protocol level"


async def held_until_the_worker_fails(request: Any, queued: list[str]) -> dict[str, Any]:
    """Send ``request`` (held while its call runs on a worker), run the worker, and return the answer."""
    held = asyncio.ensure_future(request)
    for _ in range(100):
        if queued:
            break
        await asyncio.sleep(0.05)
    [call_id] = queued
    assert await background.run_in_worker(call_id, "w-test") == "failed"
    answer: dict[str, Any] = await asyncio.wait_for(held, 10)
    return answer


def _expire_now(call_id: str) -> None:
    row = ToolCall.objects.get(id=call_id)
    ToolCall.objects.filter(id=call_id).update(expires_at=row.created_at)


# 1 ---------------------------------------------------------------------------------------------
async def test_a_2025_expired_task_reads_as_failed(queued: list[str]) -> None:
    """2025-11-25 tasks: TaskStatus is working|input_required|completed|failed|cancelled. A task whose
    ttl ran out (and that the sweep expired) answers tasks/get and tasks/list with status "expired"."""
    session = await open_session()
    created = await legacy(session, "tools/call", {"name": "slow_compute", "arguments": {"seconds": 30}, "task": {"ttl": 1000}})
    task_id = created["result"]["task"]["taskId"]
    await asyncio.sleep(1.2)
    assert await sync_to_async(sync_calls.expire_overdue)() == 1  # what the periodic sweep does
    got = await legacy(session, "tasks/get", {"taskId": task_id})
    listed = await legacy(session, "tasks/list", {})
    statuses = [t["status"] for t in listed["result"]["tasks"]]
    assert got["result"]["status"] == "failed" and got["result"]["statusMessage"] == "The task expired before it finished.", got
    assert set(statuses) <= VALID_TASK_STATUSES, statuses


async def test_a_2025_task_past_its_ttl_is_listed_as_tasks_get_reads_it(queued: list[str]) -> None:
    """Found by a review: before the sweep ran, tasks/list showed a task past its ttl as still working
    while tasks/get said failed (the 2025-11-25 spec: what tasks/get returns, tasks/list lists)."""
    session = await open_session()
    created = await legacy(session, "tools/call", {"name": "slow_compute", "arguments": {"seconds": 30}, "task": {"ttl": 1000}})
    task_id = created["result"]["task"]["taskId"]
    await sync_to_async(_expire_now)(task_id)  # its ttl ran out; no sweep has run
    listed = {t["taskId"]: t for t in (await legacy(session, "tasks/list", {}))["result"]["tasks"]}
    assert listed[task_id]["status"] == "failed", listed
    assert listed[task_id]["statusMessage"] == "The task expired before it finished.", listed
    got = await legacy(session, "tasks/get", {"taskId": task_id})
    assert got["result"]["status"] == "failed", got


async def test_a_2026_expired_task_reads_as_failed(queued: list[str]) -> None:
    created = await modern("tools/call", {"name": "slow_compute", "arguments": {"seconds": 30}}, TASKS)
    task_id = created["result"]["taskId"]
    await sync_to_async(_expire_now)(task_id)
    assert await sync_to_async(sync_calls.expire_overdue)() == 1
    got = await modern("tasks/get", {"taskId": task_id}, TASKS)
    assert got["result"]["status"] == "failed", got
    assert got["result"]["error"]["message"] == "The task expired before it finished.", got


# 2 ---------------------------------------------------------------------------------------------
async def test_resuming_a_call_that_failed_with_a_protocol_error_answers_the_error(queued: list[str]) -> None:
    """A 2026 client with resume tokens; the background tool raises McpError on the worker. Resuming
    answers {"content": []} (no isError, no JSON-RPC error): the failure reads as an empty success."""
    args = {"name": "protocol_error_job", "arguments": {}}
    first = await modern("tools/call", args, RESUMES)
    token = first["result"]["nextResumeToken"]
    [call_id] = queued
    assert await background.run_in_worker(call_id, "w-test") == "failed"
    row = await sync_to_async(ToolCall.objects.get)(id=call_id)
    assert row.status == "failed" and row.error is not None
    again = await modern("tools/call", {**args, "resumeToken": token}, RESUMES)
    assert again["error"]["message"] == PROTOCOL_ERROR, again


async def test_a_held_2026_call_that_failed_with_a_protocol_error_answers_the_error(queued: list[str]) -> None:
    """Same, for a 2026 client without tasks or resume tokens, whose request is held until the worker ends."""
    answer = await held_until_the_worker_fails(modern("tools/call", {"name": "protocol_error_job", "arguments": {}}, {}), queued)
    assert answer["error"]["message"] == PROTOCOL_ERROR, answer


# 3 ---------------------------------------------------------------------------------------------


async def _sleeper(ctx: ToolContext) -> str:
    await asyncio.sleep(5)
    return "done"


async def test_time_limit_fails_the_call_with_a_tool_error(queued: list[str]) -> None:
    """docs/background.md: "time_limit ends the handler cleanly with a tool error". The worker's
    asyncio.timeout cancels the handler; core.execute takes that for a cancel and ends the row as
    "cancelled", so the task reads cancelled and the client gets "The call was cancelled"."""
    with registry.registered_temporarily(make_tool(_sleeper, name="limited_sleeper", background=True, time_limit=0.3)):
        session = await open_session()
        created = await legacy(session, "tools/call", {"name": "limited_sleeper", "arguments": {}, "task": {}})
        task_id = created["result"]["task"]["taskId"]
        await background.run_in_worker(task_id, "w-test")
        row = await sync_to_async(ToolCall.objects.get)(id=task_id)
        got = await legacy(session, "tasks/result", {"taskId": task_id})
    assert row.status == "failed", (row.status, row.result, row.status_message)
    assert "ran out of time" in json.dumps(got), got


# 7 ---------------------------------------------------------------------------------------------
async def test_a_2025_session_background_call_that_failed_with_a_protocol_error(queued: list[str]) -> None:
    """2025-11-25, no task: the request holds the stream while the worker runs. The worker ends the
    call with a protocol error (row.error, row.result None); session.follow returns None and
    session.py's `assert result is not None` fires: the client gets an internal error, not the tool's error."""
    session = await open_session()
    answer = await held_until_the_worker_fails(legacy(session, "tools/call", {"name": "protocol_error_job", "arguments": {}}), queued)
    assert answer["error"]["message"] == PROTOCOL_ERROR, answer


# 8 ---------------------------------------------------------------------------------------------
async def test_a_call_the_broker_refused_is_queued_again_by_the_sweep(monkeypatch: pytest.MonkeyPatch) -> None:
    """The broker is down when the task is sent (after the row committed). The row stays "working"
    with no lease, and the sweep (which requeues only rows whose lease ran out) never queues it again."""
    def broker_down(call_id: str, tool: Any, task_id: str) -> None:
        raise ConnectionError("broker unreachable")

    monkeypatch.setattr(background, "send", broker_down)
    session = await open_session()
    r = await post_json(APP, handshake_message("tools/call", {"name": "slow_compute", "arguments": {"seconds": 0}, "task": {}}),
                        post_headers(version=HANDSHAKE, session=session))
    first_answer = (r.status, r.body[:300])
    sent: list[str] = []
    monkeypatch.setattr(background, "send", lambda call_id, tool, task_id: sent.append(call_id))
    swept = await sync_to_async(background.sweep)()
    rows = await sync_to_async(lambda: list(ToolCall.objects.values_list("id", "status", "lease_expires_at")))()
    stuck = [row for row in rows if row[1] == "working" and str(row[0]) not in sent]
    assert not stuck, (first_answer, swept, rows)


# 9 ---------------------------------------------------------------------------------------------
async def test_tasks_list_pages_neither_repeat_nor_skip_when_tasks_are_created_between_pages(queued: list[str], settings: Any) -> None:
    settings.MCP_TOOLS = {**settings.MCP_TOOLS, "PAGE_SIZE": 2}
    session = await open_session()
    ids = []
    for _ in range(3):
        created = await legacy(session, "tools/call", {"name": "slow_compute", "arguments": {"seconds": 0}, "task": {}})
        ids.append(created["result"]["task"]["taskId"])
    page1 = await legacy(session, "tasks/list", {})
    await legacy(session, "tools/call", {"name": "slow_compute", "arguments": {"seconds": 0}, "task": {}})
    page2 = await legacy(session, "tasks/list", {"cursor": page1["result"]["nextCursor"]})
    seen = [t["taskId"] for t in page1["result"]["tasks"] + page2["result"]["tasks"]]
    assert len(seen) == len(set(seen)), seen
    assert set(ids) <= set(seen), (ids, seen)


# 11 --------------------------------------------------------------------------------------------
async def test_a_2026_retry_of_the_round_that_deferred_gets_the_same_task(queued: list[str]) -> None:
    """MRTR retries are idempotent ("identical answers get the identical outcome", core.repeat_outcome).
    A retry of the round whose handler awaited ctx.defer() (a lost response) should get the same
    CreateTaskResult. The deferral writes no last_outcome, so repeat_outcome polls for 30 s and answers
    -32603 "still being processed" while the task runs (or, once it finished, the tool result)."""
    first = await modern("tools/call", {"name": "test_tool_with_task", "arguments": {}}, TASKS_ELICIT)
    params = {"name": "test_tool_with_task", "arguments": {}, "requestState": first["result"]["requestState"],
              "inputResponses": {"user_name": {"action": "accept", "content": {"name": "Bo"}}}}
    second = await modern("tools/call", params, TASKS_ELICIT)
    assert second["result"]["resultType"] == "task", second
    replay = asyncio.ensure_future(call_modern(APP, "tools/call", params, capabilities=TASKS_ELICIT))
    finished, _ = await asyncio.wait({replay}, timeout=5)
    replay.cancel()
    assert replay in finished, "the retry got no answer within 5 s (it polls for 30 s, then answers -32603)"
    assert replay.result().json()["result"].get("taskId") == second["result"]["taskId"]


async def test_a_queued_call_past_its_expiry_is_expired_by_the_worker_not_run() -> None:
    from datetime import timedelta

    from django.utils import timezone

    ran: list[str] = []

    async def late_job() -> str:
        """Runs on a worker."""
        ran.append("ran")
        return "done"

    with registry.registered_temporarily(make_tool(late_job, background=True)):
        call_id = await sync_to_async(sync_calls.create_call)(
            [], method="tools/call", tool_name="late_job", arguments={}, principal="anon", protocol_version="2026-07-28",
            flavor="tasks", status="working", background=True, expires_at=timezone.now() - timedelta(seconds=1))
        assert await background.run_in_worker(call_id, "w-test") == "expired"
    row = await sync_to_async(ToolCall.objects.get)(id=call_id)
    assert (row.status, row.worker, ran) == ("expired", "", [])


def test_a_forked_child_runs_its_calls_on_a_loop_of_its_own() -> None:
    """A Celery prefork child forked after its parent started the worker loop: the parent's loop has
    no thread in the child, and a call sent there would wait forever."""
    import os

    parent_loop = background.worker_loop()
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report, then leave at once (no pytest teardown in here)
        code = 1
        try:
            loop = background.worker_loop()
            done = asyncio.run_coroutine_threadsafe(asyncio.sleep(0, result="ran"), loop).result(timeout=5)
            os.write(writer, f"{loop is parent_loop} {done}".encode())
            code = 0
        finally:
            os._exit(code)
    os.close(writer)
    _, status = os.waitpid(pid, 0)
    with os.fdopen(reader) as report:
        assert (report.read(), os.waitstatus_to_exitcode(status)) == ("False ran", 0)
    assert background.worker_loop() is parent_loop  # the parent's own is left as it was


async def logs_in_the_worker(ctx: ToolContext) -> str:
    await ctx.log("warning", {"step": 1}, logger="reports")
    await ctx.log("debug", "fine detail")
    return "logged"


async def test_a_background_tools_log_lines_go_to_the_server_log_not_nowhere(queued: list[str], caplog: Any) -> None:
    """Found by a first-hour review: a background tool's ``ctx.log`` lines vanished (the worker holds no
    client stream, and only progress has a way back through the row). They go to the server's log,
    under ``mcp_tools.tool_log``, at the matching level; docs/background.md says so."""
    import logging

    tool_log = logging.getLogger("mcp_tools.tool_log")
    tool_log.addHandler(caplog.handler)  # (the demo's LOGGING may not propagate mcp_tools' loggers)
    caplog.set_level(logging.DEBUG, logger="mcp_tools.tool_log")
    try:
        with registry.registered_temporarily(make_tool(logs_in_the_worker, background=True)):
            first = await modern("tools/call", {"name": "logs_in_the_worker", "arguments": {}}, RESUMES)
            [call_id] = queued
            assert await background.run_in_worker(call_id, "w-test") == "finished", first
    finally:
        tool_log.removeHandler(caplog.handler)
    # (Each once: the handler may see a record both directly and through propagation.)
    lines = list(dict.fromkeys((r.levelno, r.getMessage()) for r in caplog.records if r.name == "mcp_tools.tool_log"))
    assert lines == [
        (logging.WARNING, f"tools/call 'logs_in_the_worker' (call {call_id}) logged [warning] reports: {{'step': 1}}"),
        (logging.DEBUG, f"tools/call 'logs_in_the_worker' (call {call_id}) logged [debug]: 'fine detail'"),
    ], lines


async def noted_once(ctx: ToolContext) -> str:
    return str(await ctx.once("note", lambda: 7))


async def test_a_stalled_broker_holds_neither_the_request_nor_the_process_s_other_durable_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by a durability review: a broker that accepts connections and never answers (a stalled or
    half-open Redis) held the background call's request with no timeout, and, the send running on the
    store's one thread, every durable call of the process (journal writes, ctx.once) waited behind it."""
    import threading

    release = threading.Event()
    sent: list[str] = []

    def stalled(call_id: str, tool: Any, task_id: str) -> None:
        release.wait(30)
        sent.append(call_id)

    monkeypatch.setattr(background, "send", stalled)
    monkeypatch.setattr(background, "BROKER_SEND_SECONDS", 0.3, raising=False)
    try:
        with registry.registered_temporarily(make_tool(logs_in_the_worker, background=True), make_tool(noted_once)):
            answered = await asyncio.wait_for(modern("tools/call", {"name": "logs_in_the_worker", "arguments": {}}, RESUMES), 5)
            assert "nextResumeToken" in answered["result"], answered  # answered as usual; the sweep queues it again if need be
            other = await asyncio.wait_for(modern("tools/call", {"name": "noted_once", "arguments": {}}, {}), 5)
            assert other["result"]["content"][0]["text"] == "7", other  # ctx.once's journal write did not wait for the broker
            row = await sync_to_async(ToolCall.objects.get)(tool_name="logs_in_the_worker")
            assert row.background and row.celery_task_id and row.queued_until is not None
    finally:
        release.set()


EFFECTS: list[int] = []


def audited(ctx: ToolContext) -> str:
    return str(ctx.once("audit", lambda: EFFECTS.append(1) or len(EFFECTS)))


async def test_a_worker_whose_database_connection_drops_under_a_sync_once_leaves_the_call_for_another_run(
        queued: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by a durability review (pg_terminate_backend mid-effect): the journal's insert of a sync
    ``ctx.once`` failed with "the connection is closed", and the worker ended the call failed for good,
    though the rule for a worker is that the store failing under the handler is not the handler's
    failure: the run writes nothing, and the call is taken over once its lease runs out."""
    from django.db import OperationalError

    from mcp_tools.store import sql

    EFFECTS.clear()
    with registry.registered_temporarily(make_tool(audited, background=True)):
        await modern("tools/call", {"name": "audited", "arguments": {}}, RESUMES)
        [call_id] = queued
        real_insert = sql.Statements.insert_steps

        def connection_dropped(self: Any, *args: Any, **kwargs: Any) -> None:
            # Once: the ctx.once step's insert; the connection is back for what comes after.
            monkeypatch.setattr(sql.Statements, "insert_steps", real_insert)
            raise OperationalError("the connection is closed")

        monkeypatch.setattr(sql.Statements, "insert_steps", connection_dropped)
        with pytest.raises(OperationalError):  # the Celery task fails; its lease runs out
            await background.run_in_worker(call_id, "w-test")
        row = await sync_to_async(ToolCall.objects.get)(id=call_id)
        assert row.status == "working" and not row.error, (row.status, row.error)


REQUEST_ID: contextvars.ContextVar[Any] = contextvars.ContextVar("request_id", default=None)


async def test_the_send_to_the_broker_runs_in_the_request_s_context(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by a diff review of the sender thread: Celery's publish hooks read the request's context
    variables (a request or trace id copied into the task's headers: django-guid, OpenTelemetry, Sentry);
    the executor's thread ran without them, as the store's thread had not."""
    seen: list[Any] = []
    monkeypatch.setattr(background, "send", lambda call_id, tool, task_id: seen.append(REQUEST_ID.get()))
    REQUEST_ID.set("rid-1")
    with registry.registered_temporarily(make_tool(logs_in_the_worker, background=True)):
        await modern("tools/call", {"name": "logs_in_the_worker", "arguments": {}}, RESUMES)
    assert seen == ["rid-1"], seen
