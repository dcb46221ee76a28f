"""Pages and converging state of a background tool, through resume tokens (seed 002).

A ``background=True`` tool returning :class:`~mcp_tools.Page` or :class:`~mcp_tools.Pending` handed out a
``nextResumeToken`` that was refused (-32602 "This call cannot be resumed with a token"): the resume ran
the tool in the request, where a background tool defers at once. The next page (or the next poll) is
a call on a worker now, served as the client's first call was: a running token, a task, or the request
held until the worker's answer.

The Celery worker is simulated in-process, as in tests/test_background_review.py: ``background.send``
is recorded and the test runs ``background.run_in_worker`` itself.
"""
from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

import mcp_tools
from mcp_tools import ToolContext
from mcp_tools.models import ToolCall
from mcp_tools.registry import make_tool, registry
from mcp_tools.server import background
from tests.asgi_client import call_modern
from tests.test_background_review import APP, RESUMES, TASKS, legacy, modern, open_session, queued  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)

RUNS: list[tuple[bool, Any]] = []


async def _pages(ctx: ToolContext) -> mcp_tools.Page[list[int]]:
    RUNS.append((ctx._inv.in_worker, ctx.cursor))
    start = int(ctx.cursor or 0)
    return mcp_tools.Page(list(range(start, start + 2)), next_cursor=start + 2 if start < 4 else None)


async def _converging(ctx: ToolContext) -> str | mcp_tools.Pending:
    RUNS.append((ctx._inv.in_worker, None))
    if len(RUNS) < 3:
        return mcp_tools.Pending("not yet", poll_seconds=0.01)
    return "ready"


@pytest.fixture
def tools() -> Any:
    RUNS.clear()
    with registry.registered_temporarily(make_tool(_pages, name="bg_pages", background=True, paginate=True)), \
            registry.registered_temporarily(make_tool(_converging, name="bg_converging", background=True)):
        yield


async def run_worker(queued: list[str]) -> str:
    """Run the one call queued since the last run, as the worker's task does."""
    call_id = queued.pop()
    assert not queued
    assert await background.run_in_worker(call_id, "w-test") == "finished"
    return call_id


async def held(request: Any, queued: list[str]) -> dict[str, Any]:
    """Send ``request``, which is held while its call runs on a worker; run the worker; the answer."""
    answer = asyncio.ensure_future(request)
    for _ in range(200):
        if queued or answer.done():
            break
        await asyncio.sleep(0.02)
    assert queued, answer.result() if answer.done() else "nothing queued"
    await run_worker(queued)
    result: dict[str, Any] = await asyncio.wait_for(answer, 10)
    return result


def items(answer: dict[str, Any]) -> Any:
    assert "error" not in answer, answer
    return answer["result"]["structuredContent"]["result"]


async def resume_to_the_end(call: dict[str, Any], queued: list[str]) -> list[dict[str, Any]]:
    """Call, then resume with each token, as a client with resume tokens does; each result with a page or a state.

    Every page or poll is a call on a worker: its first answer says "working" and carries a token,
    which (once the worker ran) answers the page or state, with the next token but for the last."""
    answers = []
    token = None
    for _ in range(5):
        running = await modern("tools/call", {**call, **({"resumeToken": token} if token else {})}, RESUMES)
        assert running["result"]["_meta"]["io.modelcontextprotocol/status"]["status"] == "working", running
        await run_worker(queued)
        answer = await modern("tools/call", {**call, "resumeToken": running["result"]["nextResumeToken"]}, RESUMES)
        assert "error" not in answer, answer
        answers.append(answer["result"])
        token = answer["result"].get("nextResumeToken")
        if token is None:
            return answers
    raise AssertionError(f"no last answer after {answers}")


async def test_a_client_that_resumes_pages_through_a_background_tool(queued: list[str], tools: Any) -> None:
    pages = await resume_to_the_end({"name": "bg_pages", "arguments": {}}, queued)
    assert [page["structuredContent"]["result"] for page in pages] == [[0, 1], [2, 3], [4, 5]]
    assert RUNS == [(True, None), (True, 2), (True, 4)]  # each page ran once, on the worker


async def test_a_client_that_resumes_polls_a_background_tool_until_it_converges(queued: list[str], tools: Any) -> None:
    states = await resume_to_the_end({"name": "bg_converging", "arguments": {}}, queued)
    assert [state["content"][0]["text"] for state in states] == ["not yet", "not yet", "ready"]
    assert RUNS == [(True, None)] * 3


async def test_a_held_2026_client_gets_the_next_page_from_a_worker(queued: list[str], tools: Any) -> None:
    """A 2026-07-28 client without resume tokens or tasks gets page tokens too (pages carry one for every
    client); its resumed request is held while the worker runs the next page, as its first was."""
    call = {"name": "bg_pages", "arguments": {}}
    first = await held(modern("tools/call", call, {}), queued)
    second = await held(modern("tools/call", {**call, "resumeToken": first["result"]["nextResumeToken"]}, {}), queued)
    assert (items(first), items(second)) == ([0, 1], [2, 3])
    assert "nextResumeToken" in second["result"]


async def test_a_2026_task_client_gets_a_task_for_the_next_page(queued: list[str], tools: Any) -> None:
    call = {"name": "bg_pages", "arguments": {}}
    created = await modern("tools/call", call, TASKS)
    await run_worker(queued)
    first = await modern("tasks/get", {"taskId": created["result"]["taskId"]}, TASKS)
    assert first["result"]["status"] == "completed", first
    token = first["result"]["result"]["nextResumeToken"]
    again = await modern("tools/call", {**call, "resumeToken": token}, TASKS)
    assert again["result"]["resultType"] == "task", again
    second_id = await run_worker(queued)
    second = await modern("tasks/get", {"taskId": second_id}, TASKS)
    assert second["result"]["result"]["structuredContent"]["result"] == [2, 3], second


async def test_a_2025_session_gets_the_next_page_on_its_held_stream(queued: list[str], tools: Any) -> None:
    session = await open_session()
    call = {"name": "bg_pages", "arguments": {}}
    first = await held(legacy(session, "tools/call", call), queued)
    second = await held(legacy(session, "tools/call", {**call, "resumeToken": first["result"]["nextResumeToken"]}), queued)
    assert (items(first), items(second)) == ([0, 1], [2, 3])


async def test_a_2025_task_client_gets_a_task_for_the_next_page(queued: list[str], tools: Any) -> None:
    session = await open_session()
    call = {"name": "bg_pages", "arguments": {}}
    created = await legacy(session, "tools/call", {**call, "task": {}})
    first_id = await run_worker(queued)
    assert first_id == created["result"]["task"]["taskId"]
    first = await legacy(session, "tasks/result", {"taskId": first_id})
    again = await legacy(session, "tools/call", {**call, "task": {}, "resumeToken": first["result"]["nextResumeToken"]})
    second_id = again["result"]["task"]["taskId"]
    await run_worker(queued)
    second = await legacy(session, "tasks/result", {"taskId": second_id})
    assert (items(first), items(second)) == ([0, 1], [2, 3])


async def test_the_page_s_cursor_is_on_its_row(queued: list[str], tools: Any) -> None:
    """The worker reads the cursor from the call's row (the request that queued it is gone by then),
    and the row stays bound to the call's arguments: its digest is the first call's."""
    call = {"name": "bg_pages", "arguments": {}}
    running = await modern("tools/call", call, RESUMES)
    first_id = await run_worker(queued)
    first = await modern("tools/call", {**call, "resumeToken": running["result"]["nextResumeToken"]}, RESUMES)
    await modern("tools/call", {**call, "resumeToken": first["result"]["nextResumeToken"]}, RESUMES)
    [second_id] = queued
    first_row, second_row = await sync_to_async(lambda: [ToolCall.objects.get(id=i) for i in (first_id, second_id)])()
    assert second_row.params_digest == first_row.params_digest and first_row.arguments == call
    assert second_row.arguments == {**call, "_meta": {"mcp-tools/cursor": "2"}}  # the cursor's JSON text



# -- a converging background tool, for a client without resume tokens ---------------------------------
# The worker's finish re-ran the tool off the worker, where a background handler defers at once: the
# call ended failed with "A converging tool may not ask for input." The polls run on the worker now,
# while it holds the call (its lease renewed), and the client gets the converged state, once.


async def test_a_held_2026_client_gets_the_converged_state_of_a_background_tool(queued: list[str], tools: Any) -> None:
    answer = await held(modern("tools/call", {"name": "bg_converging", "arguments": {}}, {}), queued)
    assert answer["result"]["content"][0]["text"] == "ready", answer
    assert "isError" not in answer["result"] and "nextResumeToken" not in answer["result"]
    assert RUNS == [(True, None)] * 3  # every run on the worker
    assert not queued  # one call, run by one worker


async def test_a_2025_session_gets_the_converged_state_of_a_background_tool(queued: list[str], tools: Any) -> None:
    session = await open_session()
    answer = await held(legacy(session, "tools/call", {"name": "bg_converging", "arguments": {}}), queued)
    assert answer["result"]["content"][0]["text"] == "ready", answer
    assert RUNS == [(True, None)] * 3


async def test_a_task_gets_the_converged_state_of_a_background_tool(queued: list[str], tools: Any) -> None:
    created = await modern("tools/call", {"name": "bg_converging", "arguments": {}}, TASKS)
    call_id = await run_worker(queued)
    task = await modern("tasks/get", {"taskId": created["result"]["taskId"]}, TASKS)
    assert call_id == created["result"]["taskId"]
    assert task["result"]["status"] == "completed", task
    assert task["result"]["result"]["content"][0]["text"] == "ready"
    assert RUNS == [(True, None)] * 3


LEASES: list[tuple[str, bool]] = []


async def _slow_to_converge(ctx: ToolContext) -> str | mcp_tools.Pending:
    """Converges on its third run, the polls between its runs outlasting a lease (WORKER_LEASE_SECONDS)."""
    row = await sync_to_async(ToolCall.objects.get)(id=LEASES[0][0]) if LEASES else None
    if row is not None:
        LEASES.append((row.worker, row.lease_expires_at > timezone.now()))
    else:
        LEASES.append((ctx.call_id or "", True))
    if len(LEASES) < 3:
        return mcp_tools.Pending("not yet", poll_seconds=2.0)
    return "ready"


async def test_the_worker_holds_the_call_while_it_polls(queued: list[str], settings: Any) -> None:
    """The polls outlast a lease: the worker renews it meanwhile, so no sweep hands the call to another
    worker (which would run it, and answer the client, again). Each run finds the call this worker's."""
    LEASES.clear()
    # Two 2 s polls outlast a 3 s lease, renewed every second: a second of slack for a loaded machine.
    settings.MCP_TOOLS = {**settings.MCP_TOOLS, "WORKER_LEASE_SECONDS": 3.0}
    with registry.registered_temporarily(make_tool(_slow_to_converge, name="bg_slow_converging", background=True)):
        answer = await held(modern("tools/call", {"name": "bg_slow_converging", "arguments": {}}, {}), queued)
    assert answer["result"]["content"][0]["text"] == "ready", answer
    assert LEASES[1:] == [("w-test", True), ("w-test", True)]


async def _never_converges(ctx: ToolContext) -> str | mcp_tools.Pending:
    RUNS.append((ctx._inv.in_worker, None))
    return mcp_tools.Pending("still converging", poll_seconds=0.05)


async def test_a_background_tool_that_does_not_converge_within_its_time_limit_answers_its_state(
        queued: list[str], settings: Any) -> None:
    """Celery's hard limit is the tool's time_limit plus a lease: the polls stop at the time limit (before
    CONVERGE_WAIT_SECONDS), and the client gets the state then, as when that wait runs out."""
    RUNS.clear()
    with registry.registered_temporarily(make_tool(_never_converges, name="bg_never", background=True, time_limit=0.3)):
        answer = await held(modern("tools/call", {"name": "bg_never", "arguments": {}}, {}), queued)
    assert answer["result"]["content"][0]["text"] == "still converging", answer
    assert 1 < len(RUNS) and all(in_worker for in_worker, _ in RUNS)


async def _odd_cursors(ctx: ToolContext) -> mcp_tools.Page[list[int]]:
    RUNS.append((ctx._inv.in_worker, ctx.cursor))
    return mcp_tools.Page([len(RUNS)], next_cursor={"after": "a\x00b\ud800é"} if ctx.cursor is None else None)


async def test_a_cursor_holding_characters_no_row_stores_reaches_the_worker_as_it_was(queued: list[str]) -> None:
    """The page's row keeps its cursor for the worker: a U+0000 or a lone surrogate in the tool's cursor
    (which the token carries as it is) made that row unstorable, and page 2 was a -32603."""
    RUNS.clear()
    with registry.registered_temporarily(make_tool(_odd_cursors, name="bg_odd_cursors", background=True, paginate=True)):
        pages = await resume_to_the_end({"name": "bg_odd_cursors", "arguments": {}}, queued)
    assert [page["structuredContent"]["result"] for page in pages] == [[1], [2]]
    assert RUNS == [(True, None), (True, {"after": "a\x00b\ud800é"})]


async def test_the_next_page_of_a_tool_that_needs_tasks_is_refused_to_a_client_without_them(queued: list[str]) -> None:
    """A taskSupport "required" tool's first call without the tasks extension is refused (-32021); its
    page token, taken from a task, was run on a worker for a client without them and the request held."""
    RUNS.clear()
    with registry.registered_temporarily(
            make_tool(_pages, name="bg_task_pages", background=True, paginate=True, task_support="required")):
        created = await modern("tools/call", {"name": "bg_task_pages", "arguments": {}}, TASKS)
        await run_worker(queued)
        done = await modern("tasks/get", {"taskId": created["result"]["taskId"]}, TASKS)
        token = done["result"]["result"]["nextResumeToken"]
        first = await call_modern(APP, "tools/call", {"name": "bg_task_pages", "arguments": {}}, capabilities={})
        resumed = await call_modern(
            APP, "tools/call", {"name": "bg_task_pages", "arguments": {}, "resumeToken": token}, capabilities={})
    assert (first.status, first.json()["error"]["code"]) == (400, -32021), first.body
    assert (resumed.status, resumed.json()["error"]) == (400, first.json()["error"]), resumed.body
    assert not queued and RUNS == [(True, None)]


RESUME_TOKEN_CLIENT = {"experimental": {"resumeTokens": {}}, "elicitation": {"form": {}}}


async def test_a_resumed_call_that_asks_takes_the_answers_sent_with_its_token(queued: list[str]) -> None:
    """MRTR: the client "retries the original request including the additional requested information", its
    ``resumeToken`` among it. Before, that request was read as a status check: the same question, with the
    same ``requestState``, for ever, the answers ignored and the call waiting until its ttl."""
    arguments = {"name": "confirm_delete", "arguments": {"filename": "f.txt"}}
    token = (await modern("tools/call", arguments, RESUME_TOKEN_CLIENT))["result"]["nextResumeToken"]
    [call_id] = queued
    assert await background.run_in_worker(call_id, "w1") == "input-required"
    asked = (await modern("tools/call", {**arguments, "resumeToken": token}, RESUME_TOKEN_CLIENT))["result"]
    assert asked["resultType"] == "input_required" and list(asked["inputRequests"]) == ["confirm"], asked

    answered = {**arguments, "resumeToken": token, "requestState": asked["requestState"],
                "inputResponses": {"confirm": {"action": "accept", "content": {"confirm": True}}}}
    running = (await modern("tools/call", answered, RESUME_TOKEN_CLIENT))["result"]
    assert running.get("resultType") != "input_required", running
    assert queued == [call_id, call_id], "back to a worker with its answer"
    assert await background.run_in_worker(call_id, "w2") == "finished"
    done = (await modern("tools/call", {**arguments, "resumeToken": running["nextResumeToken"]}, RESUME_TOKEN_CLIENT))["result"]
    assert done["content"][0]["text"] == "deleted f.txt", done
    row = await ToolCall.objects.aget(id=call_id)
    assert row.status == "completed" and row.round == 1

    # The same answers again (a retry): the round is taken, nothing runs twice, the call's answer stands.
    again = await call_modern(APP, "tools/call", answered, capabilities=RESUME_TOKEN_CLIENT)
    assert queued == [call_id, call_id]
    assert (await ToolCall.objects.aget(id=call_id)).round == 1
    assert again.status == 200 and again.json()["result"]["content"] == done["content"], again.body


async def test_answers_with_a_token_of_another_call_s_arguments_are_refused(queued: list[str]) -> None:
    arguments = {"name": "confirm_delete", "arguments": {"filename": "f.txt"}}
    token = (await modern("tools/call", arguments, RESUME_TOKEN_CLIENT))["result"]["nextResumeToken"]
    [call_id] = queued
    assert await background.run_in_worker(call_id, "w1") == "input-required"
    asked = (await modern("tools/call", {**arguments, "resumeToken": token}, RESUME_TOKEN_CLIENT))["result"]
    other = {"name": "confirm_delete", "arguments": {"filename": "g.txt"}, "resumeToken": token, "requestState": asked["requestState"],
             "inputResponses": {"confirm": {"action": "accept", "content": {"confirm": True}}}}
    refused = (await call_modern(APP, "tools/call", other, capabilities=RESUME_TOKEN_CLIENT)).json()
    assert refused["error"]["code"] == -32602, refused
    row = await ToolCall.objects.aget(id=call_id)
    assert row.status == "input_required" and row.round == 0 and queued == [call_id]


@pytest.mark.parametrize("state", ["input_required", "working"])
async def test_a_call_past_its_expiry_reads_expired_to_its_token_before_the_sweep(queued: list[str], state: str) -> None:
    """``CALL_TTL``: an expired call's tokens are refused (docs/settings.md). Before the sweep ran, a token
    read such a call as live: its question asked again (whose answer was then refused), or "running"."""
    arguments = {"name": "confirm_delete", "arguments": {"filename": "f.txt"}}
    token = (await modern("tools/call", arguments, RESUME_TOKEN_CLIENT))["result"]["nextResumeToken"]
    [call_id] = queued
    if state == "input_required":
        assert await background.run_in_worker(call_id, "w1") == "input-required"
    past = timezone.now() - timezone.timedelta(seconds=1)
    assert await ToolCall.objects.filter(id=call_id, status=state).aupdate(expires_at=past) == 1
    answer = (await modern("tools/call", {**arguments, "resumeToken": token}, RESUME_TOKEN_CLIENT))["result"]
    assert answer.get("isError") is True and "expired" in answer["content"][0]["text"], answer
    assert (await ToolCall.objects.aget(id=call_id)).status == "expired"


# -- a 2025-11-25 resumed call and the tool's taskSupport --------------------------------------------
# A tools/call with a resumeToken skipped the taskSupport checks of every other 2025-11-25 tools/call:
# the next page of a foreground tool that supports tasks, asked for as a task, answered a plain
# CallToolResult (the spec: a receiver that accepts a task-augmented request MUST answer CreateTaskResult),
# and one that forbids tasks answered its page to a "task" instead of -32601.


async def _fg_pages(ctx: ToolContext) -> mcp_tools.Page[list[int]]:
    RUNS.append((ctx._inv.in_worker, ctx.cursor))
    start = int(ctx.cursor or 0)
    return mcp_tools.Page(list(range(start, start + 2)), next_cursor=start + 2 if start < 4 else None)


@pytest.fixture
def foreground_pages() -> Any:
    RUNS.clear()
    with registry.registered_temporarily(make_tool(_fg_pages, name="fg_task_pages", paginate=True, task_support="optional")), \
            registry.registered_temporarily(make_tool(_fg_pages, name="fg_no_task_pages", paginate=True)), \
            registry.registered_temporarily(make_tool(_fg_pages, name="fg_task_only_pages", paginate=True, task_support="required")):
        yield


async def test_a_2025_task_client_gets_a_task_for_the_next_page_of_a_foreground_tool(queued: list[str], foreground_pages: Any) -> None:
    session = await open_session()
    call = {"name": "fg_task_pages", "arguments": {}}
    created = await legacy(session, "tools/call", {**call, "task": {}})
    await run_worker(queued)
    first = await legacy(session, "tasks/result", {"taskId": created["result"]["task"]["taskId"]})
    again = await legacy(session, "tools/call", {**call, "task": {"ttl": 60000}, "resumeToken": first["result"]["nextResumeToken"]})
    assert "task" in again.get("result", {}), again  # a CreateTaskResult, not the page itself
    assert again["result"]["task"]["ttl"] == 60000
    second_id = await run_worker(queued)
    assert second_id == again["result"]["task"]["taskId"]
    second = await legacy(session, "tasks/result", {"taskId": second_id})
    assert (items(first), items(second)) == ([0, 1], [2, 3])
    assert RUNS == [(True, None), (True, 2)]  # each page ran once, on the worker


async def test_a_2025_resumed_call_is_refused_where_the_tool_s_task_support_refuses_it(queued: list[str], foreground_pages: Any) -> None:
    session = await open_session()
    first = await legacy(session, "tools/call", {"name": "fg_no_task_pages", "arguments": {}})
    token = first["result"]["nextResumeToken"]
    refused = await legacy(session, "tools/call", {"name": "fg_no_task_pages", "arguments": {}, "task": {}, "resumeToken": token})
    assert refused.get("error", {}).get("code") == -32601, refused
    created = await legacy(session, "tools/call", {"name": "fg_task_only_pages", "arguments": {}, "task": {}})
    await run_worker(queued)
    page = await legacy(session, "tasks/result", {"taskId": created["result"]["task"]["taskId"]})
    refused = await legacy(session, "tools/call", {"name": "fg_task_only_pages", "arguments": {}, "resumeToken": page["result"]["nextResumeToken"]})
    assert refused.get("error", {}).get("code") == -32601, refused
    assert RUNS == [(False, None), (True, None)] and not queued  # the refused pages did not run


async def _drifting(ctx: ToolContext) -> str | mcp_tools.Pending:
    RUNS.append((ctx._inv.in_worker, None))
    if len(RUNS) >= 3:
        await asyncio.sleep(5)  # this run outlasts the time limit: cut
    return mcp_tools.Pending(f"state {len(RUNS)}", progress=len(RUNS), poll_seconds=0.05)


async def test_a_poll_cut_by_the_time_limit_answers_the_last_state_not_the_first(queued: list[str]) -> None:
    """docs/background.md: the call's one result is "the state when that time runs out". A re-run that the
    time limit cut made the worker answer the first run's state ("state 1"), not the last one it had."""
    RUNS.clear()
    with registry.registered_temporarily(make_tool(_drifting, name="bg_drifting", background=True, time_limit=1.5)):
        answer = await held(modern("tools/call", {"name": "bg_drifting", "arguments": {}}, {}), queued)
    assert len(RUNS) == 3, RUNS
    assert answer["result"]["content"][0]["text"] == "state 2", answer


# -- a page's token, delivered long after the worker sealed it ----------------------------------------
# The worker seals the next page's token when it finishes the page; a task keeps that result for its
# ttl (CALL_TTL, a day by default), but the token expired TOKEN_TTL (an hour) after the worker sealed it:
# a client that read the page later got a token refused at once, -32602 "Invalid or expired resumeToken".


async def test_a_task_s_page_read_after_token_ttl_still_leads_to_the_next_page(queued: list[str], tools: Any, settings: Any) -> None:
    settings.MCP_TOOLS = {**settings.MCP_TOOLS, "TOKEN_TTL": 1}
    call = {"name": "bg_pages", "arguments": {}}
    created = await modern("tools/call", call, TASKS)
    await run_worker(queued)
    await asyncio.sleep(2.5)  # the client reads the task's page more than TOKEN_TTL after the worker ran it
    first = await modern("tasks/get", {"taskId": created["result"]["taskId"]}, TASKS)
    again = await modern("tools/call", {**call, "resumeToken": first["result"]["result"]["nextResumeToken"]}, TASKS)
    assert again.get("result", {}).get("resultType") == "task", again
    queued.clear()  # page 2's call: not run here
    session = await open_session()
    created = await legacy(session, "tools/call", {**call, "task": {}})
    await run_worker(queued)
    await asyncio.sleep(2.5)
    page = await legacy(session, "tasks/result", {"taskId": created["result"]["task"]["taskId"]})
    again = await legacy(session, "tools/call", {**call, "task": {}, "resumeToken": page["result"]["nextResumeToken"]})
    assert "task" in again.get("result", {}), again
    assert page["result"]["_meta"]["nextResumeToken"] == page["result"]["nextResumeToken"]


async def test_a_resumed_call_s_page_read_after_token_ttl_still_leads_to_the_next_page(queued: list[str], tools: Any, settings: Any) -> None:
    settings.MCP_TOOLS = {**settings.MCP_TOOLS, "TOKEN_TTL": 1}
    call = {"name": "bg_pages", "arguments": {}}
    running = await modern("tools/call", call, RESUMES)
    await run_worker(queued)
    await asyncio.sleep(2.5)
    # The running token is expired too by now: a client that polls slower than TOKEN_TTL gets -32602 for
    # it, as docs/background.md says. One that comes back in time gets the page...
    settings.MCP_TOOLS = {**settings.MCP_TOOLS, "TOKEN_TTL": 3600}
    page = await modern("tools/call", {**call, "resumeToken": running["result"]["nextResumeToken"]}, RESUMES)
    settings.MCP_TOOLS = {**settings.MCP_TOOLS, "TOKEN_TTL": 1}
    # ... whose own token is good from then, not from when the worker sealed it.
    again = await modern("tools/call", {**call, "resumeToken": page["result"]["nextResumeToken"]}, RESUMES)
    assert "error" not in again, again


# -- a 2025-11-25 request with `task` and the token of a call that is no task ---------------------


async def as_user(token: str, session: str | None, method: str, params: dict[str, Any], capabilities: dict[str, Any]) -> dict[str, Any]:
    """One request of the holder of ``token``: 2026-07-28 without a ``session``, else in that 2025-11-25 session."""
    from tests.asgi_client import HANDSHAKE, handshake_message, post_headers, post_json

    if session is None:
        r = await call_modern(APP, method, params, capabilities=capabilities, token=token)
    else:
        r = await post_json(APP, handshake_message(method, params), post_headers(version=HANDSHAKE, session=session, token=token))
    assert r.status == 200, (r.status, r.body)
    answer: dict[str, Any] = r.json()
    return answer


@pytest.mark.parametrize("run", [False, True], ids=["running", "completed"])
async def test_a_2025_task_request_with_the_token_of_a_call_that_is_no_task_is_refused(queued: list[str], run: bool) -> None:
    """A 2025-11-25 ``tools/call`` carrying ``task`` and the resume token of a background call (one the
    same user's 2026-07-28 client follows with tokens) answered that call's status, or its result: a
    CallToolResult to a task-augmented request, which a receiver that accepts it MUST answer with a
    CreateTaskResult (2025-11-25, Tasks). The call is no task (only calls created as tasks are:
    docs/protocol.md) and does not become one, so the request is refused (-32602), the call untouched:
    the token still follows it, from either era."""
    from tests.asgi_client import HANDSHAKE, handshake_message, post_headers, post_json
    from tests.clients import create_user_with_token

    user = await sync_to_async(create_user_with_token)("two-clients")
    arguments = {"name": "slow_compute", "arguments": {"seconds": 0}}
    token = (await as_user(user, None, "tools/call", arguments, RESUMES))["result"]["nextResumeToken"]
    [call_id] = queued
    if run:
        assert await background.run_in_worker(call_id, "w1") == "finished"
    opened = await post_json(APP, handshake_message("initialize", {"protocolVersion": HANDSHAKE, "capabilities": {"tasks": {}},
                                                                   "clientInfo": {"name": "t", "version": "1"}}),
                             post_headers(version=None, token=user))
    session = opened.header("mcp-session-id")
    refused = await as_user(user, session, "tools/call", {**arguments, "task": {}, "resumeToken": token}, {})
    assert refused.get("error", {}).get("code") == -32602, refused
    assert "not a task" in refused["error"]["message"], refused
    row = await ToolCall.objects.aget(id=call_id)
    assert not row.is_task and row.status == ("completed" if run else "working") and queued == [call_id]  # queued once, not again
    for followed in (await as_user(user, session, "tools/call", {**arguments, "resumeToken": token}, {}),
                     await as_user(user, None, "tools/call", {**arguments, "resumeToken": token}, RESUMES)):
        assert "error" not in followed and ("nextResumeToken" in followed["result"]) is not run, followed
