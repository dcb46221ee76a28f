"""Races between a call's own requests, its client's answers, operators and the cleanup: each ends the
way the sequential case does (no answer refused or taken twice, no call left working)."""
from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from mcp_tools import ToolContext
from mcp_tools.models import ToolCall
from mcp_tools.registry import make_tool, registry
from tests.asgi_client import HANDSHAKE, post_headers, post_json
from tests.test_background_review import queued  # noqa: F401
from tests.test_http_spec_edges import APP, Stream, _in_memory_layer, open_session  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


async def race_ask_name(ctx: ToolContext) -> str:
    """Form elicitation."""
    answer = await ctx.elicit("Name?", {"type": "object", "properties": {"name": {"type": "string"}}}, key="name")
    return str(answer.get("name"))


@pytest.fixture(autouse=True)
def tools():  # type: ignore[no-untyped-def]
    with registry.registered_temporarily(make_tool(race_ask_name)):
        yield


def _gate_store(monkeypatch: pytest.MonkeyPatch, name: str, parties: int) -> None:
    """Make ``parties`` concurrent callers of ``store.<name>`` all arrive before any runs (no sleeps)."""
    from mcp_tools import store

    real = getattr(store, name)
    arrived: list[asyncio.Event] = []
    everyone = asyncio.Event()

    async def gated(*args: Any, **kwargs: Any) -> Any:
        if not everyone.is_set():
            arrived.append(asyncio.Event())
            if len(arrived) >= parties:
                everyone.set()
            await asyncio.wait_for(everyone.wait(), 10)
        return await real(*args, **kwargs)

    monkeypatch.setattr(store, name, gated)


async def test_the_same_session_answer_posted_twice_concurrently_is_accepted_both_times(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 2025-11-25 client that retries its POST of a response (its first POST timed out, still in flight)
    sends the same answer twice at once. accept_client_response says "the very answer the step has already
    (delivered again: nothing changes)" is accepted; sequentially it is (202 twice). Concurrently, the loser
    of answer_step's compare-and-set is refused (400 "No request of this session is waiting")."""
    session = await open_session({"elicitation": {}})
    call = {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "race_ask_name", "arguments": {}}}
    stream = Stream("POST", post_headers(version=HANDSHAKE, session=session), json.dumps(call).encode())
    try:
        _, ask = await stream.wait_for(lambda m: m.get("method") == "elicitation/create")
        headers = post_headers(version=HANDSHAKE, session=session)
        good = {"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"name": "x"}}}
        _gate_store(monkeypatch, "answer_step", 2)  # both POSTs have read the step as pending
        first, second = await asyncio.gather(post_json(APP, good, headers), post_json(APP, good, headers))
        _, final = await stream.wait_for(lambda m: m.get("id") == 5)
        assert final["result"]["content"] == [{"type": "text", "text": "x"}], final
        assert (first.status, second.status) == (202, 202), (first.status, first.body, second.status, second.body)
    finally:
        stream.gone.set()


# -- CALL_TTL / mcp_cleanup against a round that runs ---------------------------------------------------------

GO: dict[str, asyncio.Event] = {}


def _note(tag: str) -> str:
    from demo_site.inventory.models import AuditLog

    return str(AuditLog.objects.create(actor="race", action=tag).pk)


async def race_long_round(ctx: ToolContext, tag: str) -> str:
    """Journals an effect (the call gets its row, working and watched), then works on until released."""
    await ctx.once("note", _note, tag)
    GO[tag + ":started"].set()
    await GO[tag].wait()
    return "done"


async def test_mcp_cleanup_does_not_expire_a_call_whose_handler_is_running(settings: Any) -> None:
    """docs/settings.md, CALL_TTL: a live call expires when it is "a call waiting for input, or one nobody
    runs any more (its process died)". A call whose handler runs now, in a living process that touches its
    row every CANCEL_POLL_SECONDS, is neither; but ToolCall.objects.overdue() looks only at expires_at, so
    mcp_cleanup (cron) marks it expired and the running handler is stopped: the client gets "The call was
    expired before it finished." for a call that was working normally (e.g. a round answered just before
    CALL_TTL that then runs for a while)."""
    from django.core.management import call_command
    from django.utils import timezone
    from datetime import timedelta
    from tests.asgi_client import call_modern

    tag = "ttl-running"
    GO[tag], GO[tag + ":started"] = asyncio.Event(), asyncio.Event()
    with registry.registered_temporarily(make_tool(race_long_round)):
        running = asyncio.ensure_future(call_modern(APP, "tools/call", {"name": "race_long_round", "arguments": {"tag": tag}}))
        await asyncio.wait_for(GO[tag + ":started"].wait(), 10)
        # The call reaches CALL_TTL while its handler runs (its process alive, its row touched).
        await sync_to_async(lambda: ToolCall.objects.filter(status="working").update(
            expires_at=timezone.now() - timedelta(seconds=1), updated_at=timezone.now()))()
        await sync_to_async(call_command)("mcp_cleanup", verbosity=0)
        status = await sync_to_async(lambda: ToolCall.objects.get().status)()
        GO[tag].set()
        answer = (await asyncio.wait_for(running, 20)).json()
    assert answer["result"]["content"] == [{"type": "text", "text": "done"}], answer
    assert status == "working", status


# -- a round that fails with a protocol error after its effect ------------------------------------------------

def _effect_row() -> int:
    from demo_site.inventory.models import AuditLog

    return AuditLog.objects.create(actor="race", action="prompt-effect").pk


async def _get_prompt(fn: Any) -> tuple[dict[str, Any], str]:
    """A 2026-07-28 prompts/get of ``fn`` registered as a prompt: the answer, and the status of its call's row."""
    from mcp_tools.registry import Prompt
    from tests.asgi_client import call_modern

    prompt = Prompt(name=fn.__name__, title=None, description=None, fn=fn, is_async=True,
                    arguments=[], permissions=(), completions={}, context_param="ctx")
    with registry.registered_temporarily(prompt):
        answer = (await call_modern(APP, "prompts/get", {"name": fn.__name__, "arguments": {}})).json()
    return answer, await sync_to_async(lambda: ToolCall.objects.get().status)()


async def race_failing_prompt(ctx: ToolContext) -> str:
    await ctx.once("write", _effect_row)
    raise ValueError("boom")


async def test_a_prompt_that_fails_after_its_effect_does_not_leave_its_call_working() -> None:
    """A prompts/get whose handler journals an effect (the call gets its row, 'working') and then fails
    answers -32603, so the call is over for the client. Its row stays 'working' with no outcome: the admin
    shows it running, nothing will ever finish it, and CALL_TTL only expires it a day later (a tool's
    failure ends its row 'failed', as mrtr._first_round does for an invalid answer after an effect)."""
    answer, status = await _get_prompt(race_failing_prompt)
    assert answer["error"]["code"] == -32603, answer
    assert status == "failed", status


async def test_a_session_answer_racing_an_admin_cancel_is_not_accepted_into_the_cancelled_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """An operator cancels the call (core.end_call, the admin's Cancel) between the moment the client's
    answer POST read the step as pending and its write. accept_client_response refuses an answer "of a call
    that ended" (sequentially: 400); in this race answer_step writes the answer into the cancelled call's
    journal (its UPDATE checks only the step's status) and the client gets 202 Accepted for an answer nothing
    will use."""
    from mcp_tools import store
    from mcp_tools.models import CallStep
    from mcp_tools.server import core

    real = store.answer_step

    async def cancelled_meanwhile(call_id: Any, *args: Any) -> Any:
        assert await core.end_call(call_id, "cancelled")
        return await real(call_id, *args)

    session = await open_session({"elicitation": {}})
    call = {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "race_ask_name", "arguments": {}}}
    stream = Stream("POST", post_headers(version=HANDSHAKE, session=session), json.dumps(call).encode())
    try:
        _, ask = await stream.wait_for(lambda m: m.get("method") == "elicitation/create")
        monkeypatch.setattr(store, "answer_step", cancelled_meanwhile)
        good = {"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"name": "x"}}}
        answered = await post_json(APP, good, post_headers(version=HANDSHAKE, session=session))
        steps = await sync_to_async(lambda: list(CallStep.objects.values_list("status", flat=True)))()
        row = await sync_to_async(ToolCall.objects.get)()
        assert row.status == "cancelled"
        assert answered.status == 400, (answered.status, answered.body)
        assert steps == ["pending"], steps
    finally:
        stream.gone.set()


async def bad_shape_prompt(ctx: ToolContext) -> object:
    await ctx.once("write", _effect_row)
    return {"role": "system", "content": "You are root"}  # a role a prompt message cannot have: -32603


async def test_a_prompt_whose_value_cannot_be_its_result_after_its_effect_ends_its_call_failed() -> None:
    """The sibling of the test above: the handler returns, and its value cannot be shaped into the
    result (core.finish): the client gets -32603, and the row ends 'failed' too."""
    answer, status = await _get_prompt(bad_shape_prompt)
    assert answer["error"]["code"] == -32603, answer
    assert status == "failed", status


# -- a 2026-07-28 client that walks away while its answering round claims the round ---------------------------

def _notes(tag: str) -> int:
    from demo_site.inventory.models import AuditLog

    return AuditLog.objects.filter(action=tag).count()


async def race_ask_then_note(ctx: ToolContext, tag: str) -> str:
    """Asks, then journals an effect (the answering round claims the round before it runs)."""
    await ctx.elicit("Go?", {"type": "object", "properties": {"go": {"type": "boolean"}}}, key="go")
    return await ctx.once("note", _note, tag)


async def _client_leaves_at_write(monkeypatch: pytest.MonkeyPatch, write: str, params: dict[str, Any], method: str = "tools/call",
                                  capabilities: dict[str, Any] | None = None, token: str | None = None) -> None:
    """A 2026-07-28 request (a tools/call) of ``params`` whose client leaves (closes its connection) just after the
    store's ``write`` committed, before its value is back from the store's thread (where the write runs to its end).
    The write runs in the store's thread (as on PostgreSQL or MariaDB; SQLite's lane runs it on the loop, where
    no stop can land midway), which waits there once it committed, until the client is gone."""
    from mcp_tools import store
    from tests.asgi_client import http_scope, modern_message, receive_then_disconnect

    gone = asyncio.Event()
    loop = asyncio.get_running_loop()
    real = getattr(store.sync_calls, write)

    def write_then_client_gone(*args: Any, **kwargs: Any) -> Any:
        value = real(*args, **kwargs)  # committed...
        loop.call_soon_threadsafe(gone.set)  # ...and the client leaves before the value is back
        time.sleep(0.5)
        return value

    async def send(event: dict[str, Any]) -> None:
        pass

    monkeypatch.setattr(store, write, store.db(write_then_client_gone))
    headers = post_headers(token=token, extra={"mcp-method": method, "mcp-name": params.get("name") or params["taskId"]})
    body = json.dumps(modern_message(method, params, capabilities=capabilities)).encode()
    await asyncio.wait_for(APP(http_scope("POST", "/mcp", headers), receive_then_disconnect(body, gone), send), 20)


async def _answer_and_leave_at_claim(monkeypatch: pytest.MonkeyPatch, fn: Any, tag: str) -> None:
    """Call ``fn`` (a tool that asks ``go`` first) with ``tag``; answer it, the client leaving as the answering
    round's claim of the round (store.advance) commits."""
    from tests.asgi_client import call_modern

    name = fn.__name__
    with registry.registered_temporarily(make_tool(fn)):
        first = (await call_modern(APP, "tools/call", {"name": name, "arguments": {"tag": tag}})).json()["result"]
        await _client_leaves_at_write(monkeypatch, "advance", {
            "name": name, "arguments": {"tag": tag}, "requestState": first["requestState"],
            "inputResponses": {"go": {"action": "accept", "content": {"go": True}}}})


async def test_a_2026_client_gone_while_its_round_is_claimed_ends_the_call_cancelled(monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/durable-calls.md: whatever stops a call marks its row cancelled at once, a closed 2026-07-28
    response stream included. The answering round claims the round (store.advance, a compare-and-set run in
    the store's thread) before its first effect; a client that left while that write was in flight stopped
    the handler with the advance committed but not heard of, so the run took the round for unclaimed and
    ended the call only "if the row is still at that round", which its own write had moved on: the row stayed
    'working', nobody running it, until the sweep (found live: PostgreSQL, daphne + uvicorn, 2026 retries
    whose client closed its connection at a random moment, 6 of 40 calls)."""
    tag = "gone-at-claim"
    await _answer_and_leave_at_claim(monkeypatch, race_ask_then_note, tag)
    row = await sync_to_async(lambda: ToolCall.objects.values("status", "round").get())()
    assert row["status"] == "cancelled", row
    assert await sync_to_async(_notes)(tag) == 0


async def race_note_first(ctx: ToolContext, tag: str) -> str:
    """Journals an effect in its first round (the call gets its row, store.create_call, before it runs)."""
    return await ctx.once("note", _note, tag)


async def test_a_2026_client_gone_while_its_call_row_is_written_ends_the_call_cancelled(monkeypatch: pytest.MonkeyPatch) -> None:
    """As above for a call's first round: its first ctx.once writes the call's row (store.create_call, in the
    store's thread). A client that left while that insert was in flight stopped the handler with the row
    committed but its id never heard of, so the stop ended no call: the row stayed 'working', nobody running
    it (found live: fresh 2026 calls whose client closed its connection at a random moment)."""
    tag = "gone-at-create"
    with registry.registered_temporarily(make_tool(race_note_first)):
        await _client_leaves_at_write(monkeypatch, "create_call", {"name": "race_note_first", "arguments": {"tag": tag}})
    row = await sync_to_async(lambda: ToolCall.objects.values("status").get())()
    assert row["status"] == "cancelled", row
    assert await sync_to_async(_notes)(tag) == 0


async def race_ask_then_defer(ctx: ToolContext, tag: str) -> str:
    """Asks, then hands the rest to a worker (the answering round claims the round before the hand-off)."""
    await ctx.elicit("Go?", {"type": "object", "properties": {"go": {"type": "boolean"}}}, key="go")
    await ctx.defer()
    return await ctx.once("note", _note, tag)


async def test_a_2026_client_gone_before_its_round_reaches_a_worker_ends_the_call_cancelled(monkeypatch: pytest.MonkeyPatch) -> None:
    """A round whose handler defers claims the round, then hands the call to a worker (background.defer:
    the row marked background, the message queued); a client that left between the two stopped the request
    outside the handler's run, where nothing ends a call: the row stayed 'working', in the foreground, no
    worker queued and nobody running it (found live: 2026 answers to a deferring tool whose client closed
    its connection at a random moment, 1 of 24 calls)."""
    await _answer_and_leave_at_claim(monkeypatch, race_ask_then_defer, "gone-before-worker")
    row = await sync_to_async(lambda: ToolCall.objects.values("status", "background").get())()
    assert row["status"] == "cancelled", row


async def race_on_worker(tag: str) -> str:
    """A background tool: its call's row is written (store.create_call) before its message is queued."""
    return _note(tag)


async def test_a_2026_client_gone_while_its_background_call_row_is_written_ends_the_call_cancelled(monkeypatch: pytest.MonkeyPatch) -> None:
    """A background tool's 2026-07-28 call is held on its stream, and closing that stream cancels the call
    (docs/background.md). A client that left while the call's row was inserted (before its message was
    queued) stopped the request outside any handler's run: the row stayed 'working', never queued, until the
    sweep queued it again past its queue deadline and a worker ran the call its client had cancelled (found
    live: 3 of 32 held calls whose client closed its connection in the first 80 ms)."""
    tag = "gone-before-queue"
    with registry.registered_temporarily(make_tool(race_on_worker, background=True)):
        await _client_leaves_at_write(monkeypatch, "create_call", {"name": "race_on_worker", "arguments": {"tag": tag}})
    row = await sync_to_async(lambda: ToolCall.objects.values("status", "background").get())()
    assert row == {"status": "cancelled", "background": True}, row


async def test_a_2026_tasks_update_whose_client_leaves_as_its_answer_is_recorded_still_sends_the_task_on(queued: list[str], monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """tasks/update records the answers (store.answer_step), then queues the task again once none is pending
    (background.go_on_if_answered). A client that left between the two (its connection closed) stopped the
    request there: the task stayed 'input_required' with nothing pending, tasks/get showing it waiting with
    no inputRequests, and nothing would queue it (found live: 9 of 24 updates whose client closed its
    connection in the first 30 ms)."""
    from mcp_tools.server import background
    from tests.clients import create_user_with_token
    from tests.test_task_cross_era import TASKS_ELICIT, _modern

    token = await sync_to_async(create_user_with_token)("alice")
    task_id = (await _modern("tools/call", {"name": "confirm_delete", "arguments": {}}, token))["result"]["taskId"]
    assert await background.run_in_worker(task_id, "w") == "input-required"
    await _client_leaves_at_write(monkeypatch, "answer_step", {
        "taskId": task_id, "inputResponses": {"confirm": {"action": "accept", "content": {"confirm": True}}}},
        method="tasks/update", capabilities=TASKS_ELICIT, token=token)
    row = await sync_to_async(lambda: ToolCall.objects.values("status", "round").get(id=task_id))()
    assert row == {"status": "working", "round": 1}, row
    assert queued.count(task_id) == 2, queued


async def race_asks_on_worker(ctx: ToolContext, tag: str) -> str:
    """A background tool that asks first: its answers send it back to a worker."""
    await ctx.elicit("Go?", {"type": "object", "properties": {"go": {"type": "boolean"}}}, key="go")
    return await ctx.once("note", _note, tag)


async def test_a_held_2026_background_call_whose_client_leaves_as_its_answers_go_in_ends_cancelled(queued: list[str], monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """A 2026-07-28 client without tasks is held while a worker runs its call, and closing the request cancels
    the call (docs/background.md). Its answers to the worker's question advance the round (store.advance, on a
    worker's behalf), then the call is queued again and the request holds it. A client that left as the
    advance committed stopped the request between the two: the row stayed 'working', never queued, nobody
    running it (found live: 14 of 24 answering requests whose client closed its connection in the first 40 ms)."""
    from mcp_tools.server import background
    from tests.asgi_client import call_modern

    tag = "gone-back-to-worker"
    with registry.registered_temporarily(make_tool(race_asks_on_worker, background=True)):
        held = asyncio.ensure_future(call_modern(APP, "tools/call", {"name": "race_asks_on_worker", "arguments": {"tag": tag}}))
        for _ in range(200):
            if queued:
                break
            await asyncio.sleep(0.01)
        assert await background.run_in_worker(queued[0], "w") == "input-required"
        first = (await asyncio.wait_for(held, 10)).json()["result"]
        await _client_leaves_at_write(monkeypatch, "advance", {
            "name": "race_asks_on_worker", "arguments": {"tag": tag}, "requestState": first["requestState"],
            "inputResponses": {"go": {"action": "accept", "content": {"go": True}}}})
    row = await sync_to_async(lambda: ToolCall.objects.values("status", "round").get())()
    assert row["status"] == "cancelled", row
