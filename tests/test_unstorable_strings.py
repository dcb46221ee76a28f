"""Strings no database column here can hold on PostgreSQL: U+0000 and lone surrogates.

PostgreSQL's ``text`` refuses U+0000 and its ``jsonb`` refuses both U+0000 and a lone surrogate's
escape (``"\\ud800"``): a call whose arguments or answers held one failed on PostgreSQL only, and
only when it first wrote its row (after its handler had run up to its first question), while on
SQLite it ran. Now a message holding one is refused as it arrives (-32602, HTTP 400, nothing
written) on every database, and a value of the server's own that holds one (a ``ctx.once``
result) is refused by the store on every database, so that what runs in development runs on
PostgreSQL.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connection

from mcp_tools import ToolContext
from mcp_tools.models import McpSession, ToolCall
from mcp_tools.protocol import jsonrpc
from mcp_tools.registry import make_tool, registry
from tests.asgi_client import call_modern, handshake_message, post_headers, post_json

pytestmark = pytest.mark.django_db(transaction=True)

HEAD = b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":'


@pytest.mark.parametrize("arguments", [
    b'{"text":"a\\u0000b"}',  # an escaped NUL in a value
    b'{"te\\u0000xt":"a"}',  # in a key
    b'{"text":"\\ud800"}',  # a lone high surrogate
    b'{"text":"x\\udc00"}',  # a lone low surrogate
    b'{"text":"\\udc00\\ud800"}',  # a pair in the wrong order
    b'{"text":"\xed\xa0\x80"}',  # a surrogate encoded as UTF-8 bytes (no valid UTF-8 either)
    b'{"text":"\\u0000","n":12345678901234567890}',  # read by json, not orjson (a number past 64 bits)
    b'{"list":[["a",{"deep":"\\u0000"}]]}',
], ids=["nul", "nul-in-key", "high", "low", "reversed", "raw-bytes", "long-number", "nested"])
def test_a_message_holding_an_unstorable_string_is_invalid_params_with_its_id(arguments: bytes) -> None:
    with pytest.raises(jsonrpc.InvalidMessage) as caught:
        jsonrpc.parse_body(HEAD + arguments + b"}}")
    assert caught.value.code == -32602
    assert caught.value.request_id == 7
    assert "U+0000" in caught.value.message


@pytest.mark.parametrize("arguments, text", [
    (b'{"text":"a\\\\u0000b"}', "a\\u0000b"),  # a backslash, then "u0000": six characters of text
    (b'{"text":"\\ud83d\\ude00"}', "\U0001f600"),  # a surrogate pair: one character
    (b'{"text":"\xf0\x9f\x98\x80 \\u00e9"}', "\U0001f600 \u00e9"),
])
def test_text_that_only_looks_like_one_is_read_as_it_is(arguments: bytes, text: str) -> None:
    assert jsonrpc.parse_body(HEAD + arguments + b"}}").params["arguments"]["text"] == text


def test_the_stored_value_check_finds_them_anywhere() -> None:
    assert jsonrpc.unstorable_string({"a": ["ok", {"b": "x\x00"}]}) == "x\x00"
    assert jsonrpc.unstorable_string({"\ud800": 1}) == "\ud800"
    assert jsonrpc.unstorable_string({"a": ["\U0001f600", 1, 2.5, None, True, "\\u0000"]}) is None


async def ask_name(ctx: ToolContext) -> str:
    """Asks the user for a name (a free string), then greets them."""
    answer = await ctx.elicit("Your name?", {"type": "object", "properties": {"name": {"type": "string"}}}, key="name")
    return f"hello {answer['name']}"


def effect_writing_a_row_and_returning_nul() -> str:
    from demo_site.inventory.models import AuditLog

    AuditLog.objects.create(action="unstorable-probe")
    return "x\x00y"


async def once_returning_nul(ctx: ToolContext) -> str:
    """Runs an effect whose result holds U+0000."""
    return await ctx.once("effect", effect_writing_a_row_and_returning_nul)


@pytest.fixture
def app():  # type: ignore[no-untyped-def]
    from demo_site.asgi import application

    with registry.registered_temporarily(make_tool(ask_name), make_tool(once_returning_nul)):
        yield application


def call_rows() -> list[dict[str, Any]]:
    return list(ToolCall.objects.order_by("pk").values())


async def test_a_call_with_one_in_its_arguments_is_refused_before_the_tool_runs(app: Any) -> None:
    response = await call_modern(app, "tools/call", {"name": "ask_name", "arguments": {"unused": "a\x00b"}})
    assert response.status == 400
    body = response.json()
    assert body["error"]["code"] == -32602 and "id" in body and body["id"] is not None
    assert await sync_to_async(call_rows)() == []


async def test_an_answer_holding_one_is_refused_and_the_call_waits_as_it_was(app: Any) -> None:
    first = (await call_modern(app, "tools/call", {"name": "ask_name", "arguments": {}})).json()["result"]
    assert first["resultType"] == "input_required"
    before = await sync_to_async(call_rows)()
    params = {"name": "ask_name", "arguments": {}, "requestState": first["requestState"]}
    for bad in ("Ada\x00", "Ada\ud800"):
        refused = await call_modern(app, "tools/call", params | {"inputResponses": {"name": {"action": "accept", "content": {"name": bad}}}})
        assert refused.status == 400 and refused.json()["error"]["code"] == -32602
    assert await sync_to_async(call_rows)() == before, "nothing written"
    good = await call_modern(app, "tools/call", params | {"inputResponses": {"name": {"action": "accept", "content": {"name": "Ada"}}}})
    assert good.json()["result"]["content"][0]["text"] == "hello Ada"


async def test_a_session_with_one_in_its_client_info_is_not_opened(app: Any) -> None:
    message = handshake_message("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                               "clientInfo": {"name": "c\x00", "version": "1"}})
    response = await post_json(app, message, post_headers(version=None))
    assert response.status == 400
    assert response.json()["error"]["code"] == -32602 and response.json()["id"] == message["id"]
    assert response.header("mcp-session-id") is None
    assert await McpSession.objects.acount() == 0


async def test_a_once_result_holding_nul_fails_the_call_alike_on_every_database(app: Any) -> None:
    """The store refuses the value (as PostgreSQL would, on SQLite too): the effect's own writes roll
    back with its step, the call ends failed, and the client gets a tool error, not a 500."""
    from demo_site.inventory.models import AuditLog

    response = await call_modern(app, "tools/call", {"name": "once_returning_nul", "arguments": {}})
    assert response.status == 200
    result = response.json()["result"]
    assert result["isError"] is True and "Internal error" in result["content"][0]["text"]
    assert await AuditLog.objects.filter(action="unstorable-probe").acount() == 0
    [row] = await sync_to_async(call_rows)()
    assert row["status"] == "failed"


def test_the_store_refuses_them_in_json_and_text_columns() -> None:
    from mcp_tools.store import sql

    prep = sql.Statements("default").call.prep
    for value in ({"a": "x\x00"}, ["\ud800"], "\udfff"):
        with pytest.raises(sql.UnstorableValue, match="ToolCall.result"):
            prep["result"](value)
    with pytest.raises(sql.UnstorableValue, match="ToolCall.status_message"):
        prep["status_message"]("x\x00")
    value = {"a": "\\u0000 \U0001f600"}  # storable: a backslash and "u0000", a surrogate pair
    prepared = prep["result"](value)
    assert (prepared.obj if connection.vendor == "postgresql" else json.loads(prepared)) == value


@pytest.mark.parametrize("pair", ["name=a\x00b", "name=\udcff"], ids=["nul", "argv-bytes-not-utf-8"])
def test_mcp_call_refuses_such_arguments_before_calling(pair: str) -> None:
    from django.core.management.base import CommandError

    from mcp_tools.management.commands.mcp_call import parse_arguments

    with pytest.raises(CommandError, match="U\\+0000"):
        parse_arguments([pair], None, {"properties": {"name": {"type": "string"}}})


# -- responses and notifications (2025-11-25): what they hold is not refused at parse ---------------


@pytest.mark.parametrize("body", [
    b'{"jsonrpc":"2.0","id":"c1:2","result":{"action":"accept","content":{"name":"Zo\\ud83d"}}}',
    b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5,"reason":"a\\u0000b"}}',
], ids=["response", "notification"])
def test_responses_and_notifications_are_parsed_whatever_their_strings(body: bytes) -> None:
    assert jsonrpc.parse_body(body).kind in ("response", "notification")


@pytest.fixture
def in_memory_layer(settings: Any) -> None:
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


async def session_call_answered(app: Any, tool: str, name: str) -> tuple[Any, dict[str, Any]]:
    """A 2025-11-25 session's call of ``tool``, whose elicitation is answered with ``name``:
    (the answer's POST response, the message that answers the call on its stream)."""
    from tests.test_http_spec_edges import Stream, open_session

    session = await open_session({"elicitation": {}})
    headers = post_headers(version="2025-11-25", session=session)
    call = {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": tool, "arguments": {}}}
    stream = Stream("POST", headers, json.dumps(call).encode())
    try:
        _, ask = await stream.wait_for(lambda m: m.get("method") == "elicitation/create")
        answer = {"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"name": name}}}
        posted = await post_json(app, answer, headers)
        _, outcome = await stream.wait_for(lambda m: m.get("id") == 5)
    finally:
        stream.gone.set()
    return posted, outcome


@pytest.mark.parametrize("name", ["Zo\ud83d", "a\x00b"], ids=["cut-emoji", "nul"])
async def test_a_session_answer_holding_one_fails_its_step_and_the_call_ends(app: Any, in_memory_layer: None, name: str) -> None:
    """Refused (400, -32602) as any answer that does not fit, and its step fails with that: the
    client is told on the call's stream, instead of the call waiting for an answer no client sends."""
    refused, outcome = await session_call_answered(app, "ask_name", name)
    assert refused.status == 400 and refused.json()["error"]["code"] == -32602
    assert outcome["result"]["isError"] is True, outcome
    [row] = await sync_to_async(call_rows)()
    assert row["status"] == "failed"


async def test_a_cancel_is_not_lost_for_its_reason_text(app: Any, in_memory_layer: None) -> None:
    from tests.test_http_spec_edges import Stream, open_session

    session = await open_session({"elicitation": {}})
    headers = post_headers(version="2025-11-25", session=session)
    call = {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "ask_name", "arguments": {}}}
    stream = Stream("POST", headers, json.dumps(call).encode())
    try:
        await stream.wait_for(lambda m: m.get("method") == "elicitation/create")
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5, "reason": "Stopped \ud83d"}}
        sent = await post_json(app, cancel, headers)
        assert sent.status == 202, sent.body
        for _ in range(100):  # the cancel ends the row (in process; polled, not timed)
            [row] = await sync_to_async(call_rows)()
            if row["status"] != "input_required":
                break
            await asyncio.sleep(0.05)
    finally:
        stream.gone.set()
    assert row["status"] == "cancelled"


# -- values of the tool's own that the call's row cannot hold: its result, its questions ------------
#
# A result (or ToolError text) holding one was refused by the store as the row closed, and nothing
# handled it: a worker's call stayed working until its lease ran out, the sweep ran it again (its
# effects outside ctx.once twice), and it ended "the worker running it was lost 2 times"; an inline
# round answered -32603 and left its row input_required. An elicitation asking with one failed
# the same way when its step was journaled. Each now ends the call at once, failed, once.

RUNS: list[str] = []


async def returns_nul(ctx: ToolContext) -> str:
    RUNS.append("nul")  # an effect outside ctx.once: it must not run twice
    return "x\x00y"


async def returns_surrogate(ctx: ToolContext) -> dict[str, str]:
    RUNS.append("surrogate")
    return {"a": "\ud800"}


async def raises_nul(ctx: ToolContext) -> str:
    from mcp_tools import ToolError

    RUNS.append("tool-error")
    raise ToolError("bad \x00 thing")


async def asks_with_nul(ctx: ToolContext) -> str:
    RUNS.append("elicit")
    await ctx.elicit("name\x00?", {"type": "object", "properties": {"name": {"type": "string"}}}, key="name")
    return "unreached"


async def asks_then_returns_nul(ctx: ToolContext) -> str:
    answer = await ctx.elicit("Your name?", {"type": "object", "properties": {"name": {"type": "string"}}}, key="name")
    return f"x\x00{answer['name']}"


CANNOT_BE_STORED = "returned a result that cannot be stored: a string holds U+0000 or a lone surrogate"


@pytest.mark.parametrize("handler, says", [
    (returns_nul, CANNOT_BE_STORED),
    (returns_surrogate, CANNOT_BE_STORED),
    (raises_nul, CANNOT_BE_STORED),
    (asks_with_nul, "Internal error"),
], ids=["nul-result", "surrogate-result", "tool-error", "elicitation-message"])
async def test_a_background_task_whose_value_cannot_be_stored_fails_at_once_and_runs_once(
    app: Any, in_memory_layer: None, monkeypatch: pytest.MonkeyPatch, handler: Any, says: str,
) -> None:
    from mcp_tools.server import background
    from tests.test_http_spec_edges import open_session

    monkeypatch.setattr(background, "send", lambda call_id, tool, task_id: None)
    RUNS.clear()
    with registry.registered_temporarily(make_tool(handler, name="unstorable_bg", background=True)):
        session = await open_session({"elicitation": {}})
        headers = post_headers(version="2025-11-25", session=session)
        created = await post_json(app, handshake_message("tools/call", {"name": "unstorable_bg", "arguments": {}, "task": {}}), headers)
        task_id = created.json()["result"]["task"]["taskId"]
        # Before the fix: UnstorableValue out of the run, the row still working (a lost worker, for the sweep).
        assert await background.run_in_worker(task_id, "w") == "finished"
        assert await background.run_in_worker(task_id, "w2") == "claimed-elsewhere", "ended: nothing runs it again"
        answer = await post_json(app, handshake_message("tasks/result", {"taskId": task_id}), headers)
    assert len(RUNS) == 1, RUNS
    [row] = await sync_to_async(call_rows)()
    assert row["status"] == "failed" and row["worker"] == "" and row["lease_expires_at"] is None
    result = answer.json()["result"]
    assert result["isError"] is True and says in result["content"][0]["text"], result
    assert row["result"]["content"] == result["content"]


async def test_an_inline_round_whose_result_cannot_be_stored_is_a_tool_error_and_ends_its_row(app: Any) -> None:
    """After an MRTR round: -32603 and a row left input_required before the fix."""
    with registry.registered_temporarily(make_tool(asks_then_returns_nul)):
        first = (await call_modern(app, "tools/call", {"name": "asks_then_returns_nul", "arguments": {}})).json()["result"]
        params = {"name": "asks_then_returns_nul", "arguments": {}, "requestState": first["requestState"],
                  "inputResponses": {"name": {"action": "accept", "content": {"name": "Ada"}}}}
        body = (await call_modern(app, "tools/call", params)).json()
        again = (await call_modern(app, "tools/call", params)).json()
    assert body["result"]["isError"] is True and CANNOT_BE_STORED in body["result"]["content"][0]["text"], body
    assert again["result"] == body["result"], "an identical retry of the round gets the same answer"
    [row] = await sync_to_async(call_rows)()
    assert row["status"] == "failed" and row["round"] == 1, (row["status"], row["round"])
    steps = await sync_to_async(lambda: list(ToolCall.objects.get(pk=row["id"]).steps.values_list("status", flat=True)))()
    assert steps == ["done"], "the round's answer was committed with the failure"


async def test_a_prompt_round_whose_value_cannot_be_stored_is_an_internal_error_and_ends_its_row(app: Any) -> None:
    from mcp_tools import prompt

    async def nul_prompt(ctx: ToolContext) -> str:
        answer = await ctx.elicit("Your name?", {"type": "object", "properties": {"name": {"type": "string"}}}, key="name")
        return f"Greet \x00{answer['name']}"

    prompt(name="nul_prompt")(nul_prompt)
    try:
        first = (await call_modern(app, "prompts/get", {"name": "nul_prompt"})).json()["result"]
        params = {"name": "nul_prompt", "requestState": first["requestState"],
                  "inputResponses": {"name": {"action": "accept", "content": {"name": "Ada"}}}}
        body = (await call_modern(app, "prompts/get", params)).json()
    finally:
        registry.unregister_prompt("nul_prompt")
    assert body["error"]["code"] == -32603 and "cannot be its result" in body["error"]["message"], body
    [row] = await sync_to_async(call_rows)()
    assert row["status"] == "failed" and row["error"] == body["error"]


async def test_a_session_call_whose_result_cannot_be_stored_is_a_tool_error_on_its_stream(app: Any, in_memory_layer: None) -> None:
    """2025-11-25, the call's row written by its elicitation: the stream got -32603 before the fix."""
    with registry.registered_temporarily(make_tool(asks_then_returns_nul)):
        posted, outcome = await session_call_answered(app, "asks_then_returns_nul", "Ada")
    assert posted.status == 202
    assert outcome["result"]["isError"] is True and CANNOT_BE_STORED in outcome["result"]["content"][0]["text"], outcome
    [row] = await sync_to_async(call_rows)()
    assert row["status"] == "failed"


# -- a progress message holding one: dropped, and the call goes on ------------------------------------
#
# record_progress took the store's refusal for "the call has ended" and the runtime stopped the
# handler as a server cancel: a task read cancelled ("The call was cancelled before it finished.").
# The message is dropped instead (no row could keep it), on the wire as in the row.


async def reports_an_unstorable_message(ctx: ToolContext) -> str:
    await ctx.report_progress(1, 10, "a\x00b\ud800")
    return "ok"


async def reports_one_then_asks(ctx: ToolContext) -> str:
    await ctx.report_progress(1, 10, "a\x00b")
    answer = await ctx.elicit("Your name?", {"type": "object", "properties": {"name": {"type": "string"}}}, key="name")
    return f"hello {answer['name']}"


async def test_a_background_task_whose_progress_message_cannot_be_stored_goes_on(
    app: Any, in_memory_layer: None, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mcp_tools.server import background
    from tests.test_http_spec_edges import open_session

    monkeypatch.setattr(background, "send", lambda call_id, tool, task_id: None)
    with registry.registered_temporarily(make_tool(reports_an_unstorable_message, name="progress_bg", background=True)):
        headers = post_headers(version="2025-11-25", session=await open_session())
        created = await post_json(app, handshake_message("tools/call", {"name": "progress_bg", "arguments": {}, "task": {}}), headers)
        task_id = created.json()["result"]["task"]["taskId"]
        assert await background.run_in_worker(task_id, "w") == "finished"
        answer = await post_json(app, handshake_message("tasks/result", {"taskId": task_id}), headers)
    assert answer.json()["result"]["content"] == [{"type": "text", "text": "ok"}], answer.json()
    [row] = await sync_to_async(call_rows)()
    assert (row["status"], row["progress"], row["progress_total"], row["status_message"]) == ("completed", 1, 10, "")


async def test_an_inline_call_drops_such_a_message_from_its_notification_and_its_row(app: Any) -> None:
    """Reported before the call had a row, then kept for the row its question wrote: -32603 before the fix."""
    with registry.registered_temporarily(make_tool(reports_one_then_asks)):
        response = await call_modern(app, "tools/call", {"name": "reports_one_then_asks", "arguments": {}, "_meta": {"progressToken": "p"}})
    assert response.status == 200, response.body
    messages = [json.loads(line[5:]) for line in response.body.decode().splitlines() if line.startswith("data:")] or [response.json()]
    progress = [m["params"] for m in messages if m.get("method") == "notifications/progress"]
    assert progress == [{"progressToken": "p", "progress": 1, "total": 10}], messages
    assert messages[-1]["result"]["resultType"] == "input_required"
    [row] = await sync_to_async(call_rows)()
    assert (row["status"], row["progress"], row["status_message"]) == ("input_required", 1, "")


# -- a protocol error of the tool's own that the row cannot hold ---------------------------------------
#
# An McpError whose message or data held one could not be written where it ends the call: a worker's
# run raised UnstorableValue with the row still working under its lease (run again by the sweep); an
# inline round that had claimed its row (a ctx.once after the answer) answered -32603 with a traceback
# and left the row working, and an identical retry ran the handler again. Both failed before the fix.

def harmless_effect() -> str:
    return "ok"


async def raises_unstorable_error(ctx: ToolContext) -> str:
    from mcp_tools.protocol.errors import McpError

    RUNS.append("mcp-error")
    raise McpError(-32602, "bad \x00 name", {"given": "a\ud800b"})


async def asks_then_raises_unstorable_error(ctx: ToolContext) -> str:
    from mcp_tools.protocol.errors import McpError

    await ctx.elicit("Your name?", {"type": "object", "properties": {"name": {"type": "string"}}}, key="name")
    await ctx.once("effect", harmless_effect)  # the round claims its row
    RUNS.append("after-answer")
    raise McpError(-32602, "bad \x00 name", {"given": "a\x00b"})


ERROR_CANNOT_BE_STORED = "raised an error that cannot be stored: a string holds U+0000 or a lone surrogate"


async def test_a_background_task_raising_an_unstorable_protocol_error_fails_at_once_and_runs_once(
    app: Any, in_memory_layer: None, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mcp_tools.server import background
    from tests.test_http_spec_edges import open_session

    monkeypatch.setattr(background, "send", lambda call_id, tool, task_id: None)
    RUNS.clear()
    with registry.registered_temporarily(make_tool(raises_unstorable_error, name="unstorable_error_bg", background=True)):
        session = await open_session()
        headers = post_headers(version="2025-11-25", session=session)
        created = await post_json(app, handshake_message("tools/call", {"name": "unstorable_error_bg", "arguments": {}, "task": {}}), headers)
        task_id = created.json()["result"]["task"]["taskId"]
        assert await background.run_in_worker(task_id, "w") == "failed"
        assert await background.run_in_worker(task_id, "w2") == "claimed-elsewhere", "ended: nothing runs it again"
        answer = await post_json(app, handshake_message("tasks/result", {"taskId": task_id}), headers)
    assert RUNS == ["mcp-error"]
    [row] = await sync_to_async(call_rows)()
    assert row["status"] == "failed" and row["worker"] == "" and row["lease_expires_at"] is None
    assert row["error"]["code"] == -32602 and ERROR_CANNOT_BE_STORED in row["error"]["message"], row["error"]
    assert answer.json()["error"] == row["error"]


async def test_an_inline_round_raising_an_unstorable_protocol_error_ends_its_row_once(app: Any) -> None:
    RUNS.clear()
    with registry.registered_temporarily(make_tool(asks_then_raises_unstorable_error, name="unstorable_error")):
        first = (await call_modern(app, "tools/call", {"name": "unstorable_error", "arguments": {}})).json()["result"]
        params = {"name": "unstorable_error", "arguments": {}, "requestState": first["requestState"],
                  "inputResponses": {"name": {"action": "accept", "content": {"name": "Ada"}}}}
        body = (await call_modern(app, "tools/call", params)).json()
        again = (await call_modern(app, "tools/call", params)).json()
    assert body["error"]["code"] == -32602 and ERROR_CANNOT_BE_STORED in body["error"]["message"], body
    assert again["error"] == body["error"], "an identical retry of the round gets the same answer"
    assert RUNS == ["after-answer"], "the retry read the stored error: the handler ran once"
    [row] = await sync_to_async(call_rows)()
    assert row["status"] == "failed" and row["error"] == body["error"]
