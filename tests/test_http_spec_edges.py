"""Edges of the HTTP endpoint against the spec (both eras), found by a review of the endpoint.

Each test failed before its mend: a resumed call's id, a replayed final response, shapes of a
``subscriptions/listen`` filter, non-ASCII digits in number headers, an unknown ``_meta``
logLevel, base64 routing headers, ``Mcp-Param`` for a null argument, repeated header lines,
and the calls of a DELETEd session.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Annotated, Any

import pytest
from asgiref.sync import sync_to_async
from pydantic import Field

from mcp_tools.models import ToolCall
from mcp_tools.protocol.errors import HEADER_MISMATCH
from mcp_tools.transports.http import McpEndpoint
from tests.asgi_client import HANDSHAKE, call_modern, handshake_message, modern_message, post_headers, post_json, request

pytestmark = pytest.mark.django_db(transaction=True)
APP = McpEndpoint()


@pytest.fixture(autouse=True)
def _in_memory_layer(settings: Any) -> None:
    """These tests call the endpoint in the test's own event loop and check HTTP semantics, not
    delivery between processes (the live tests check that over Redis): a Redis layer's connections
    belong to the event loop that opened them, and pytest gives each test a new one."""
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


async def open_session(capabilities: dict[str, Any] | None = None) -> str:
    r = await post_json(APP, handshake_message("initialize", {"protocolVersion": HANDSHAKE, "capabilities": capabilities or {},
                                                              "clientInfo": {"name": "t", "version": "1"}}), post_headers(version=None))
    assert r.status == 200
    return r.header("mcp-session-id")


class Stream:
    """A POST/GET whose SSE body is read while it runs, and that the client can drop."""

    def __init__(self, method: str, headers: dict[str, str], body: bytes = b"") -> None:
        self.sent: list[dict[str, Any]] = []
        self.gone = asyncio.Event()
        self.got = asyncio.Event()
        self.body = [body]
        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
                 "path": "/mcp", "raw_path": b"/mcp", "root_path": "", "query_string": b"",
                 "headers": [(k.encode(), v.encode("latin-1")) for k, v in headers.items()],
                 "client": ("127.0.0.1", 1), "server": ("testserver", 80)}
        self.task = asyncio.ensure_future(APP(scope, self.receive, self.send))

    async def receive(self) -> dict[str, Any]:
        if self.body:
            return {"type": "http.request", "body": self.body.pop(), "more_body": False}
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)
        self.got.set()

    def text(self) -> str:
        return b"".join(m.get("body", b"") for m in self.sent if m["type"] == "http.response.body").decode()

    def events(self) -> list[tuple[str | None, Any]]:
        found = []
        for chunk in self.text().split("\n\n"):
            event_id = None
            data = None
            for line in chunk.splitlines():
                if line.startswith("id:"):
                    event_id = line[3:].strip()
                if line.startswith("data:") and line[5:].strip():
                    data = json.loads(line[5:].strip())
            if data is not None:
                found.append((event_id, data))
        return found

    async def wait_for(self, predicate: Any, timeout: float = 10) -> tuple[str | None, Any]:
        async def loop() -> tuple[str | None, Any]:
            while True:
                for event in self.events():
                    if predicate(event[1]):
                        return event
                if self.task.done():
                    raise AssertionError(f"stream ended: {self.sent!r}")
                self.got.clear()
                await self.got.wait()
        return await asyncio.wait_for(loop(), timeout)


async def asking(request_id: Any) -> tuple[dict[str, str], Stream, str | None, dict[str, Any]]:
    """A session's ``tools/call`` that asked the user: ``(headers, its stream, the request's event id, the request)``."""
    session = await open_session({"elicitation": {}})
    headers = post_headers(version=HANDSHAKE, session=session)
    call = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": "test_elicitation", "arguments": {"message": "hi"}}}
    stream = Stream("POST", headers, json.dumps(call).encode())
    event_id, asked = await stream.wait_for(lambda m: m.get("method") == "elicitation/create")
    return headers, stream, event_id, asked



# -- 1. a resumed stream answers with another id than the request's ----------------------------------


@pytest.mark.parametrize("request_id", ["42", 0, "r" * 200])
async def test_resumed_call_answers_with_the_request_id(request_id: Any) -> None:
    """2025-11-25 transports, Resumability: the resumed stream carries the response to the original
    request; JSON-RPC 2.0: the response's id MUST be the same as the request's ("42" stays a string, 0 stays 0)."""
    headers, first, event_id, asked = await asking(request_id)
    assert event_id is not None
    first.gone.set()  # the client loses the stream
    await asyncio.wait_for(first.task, 10)
    answer = {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {"username": "u", "email": "e@x.org"}}}
    r = await post_json(APP, answer, headers)
    assert r.status == 202
    resumed = Stream("GET", {**headers, "accept": "text/event-stream", "last-event-id": event_id})
    _, final = await resumed.wait_for(lambda m: "result" in m or "error" in m)
    resumed.gone.set()
    await asyncio.wait_for(resumed.task, 10)
    assert "result" in final, final
    assert final["id"] == request_id and type(final["id"]) is type(request_id), final


# -- 2. inputs that give a 500 ---------------------------------------------------------------------------


async def test_listen_with_non_list_resource_subscriptions_is_not_a_500() -> None:
    """subscriptions/listen with "resourceSubscriptions": 5 must be a -32602, not HTTP 500 (docs/robustness.md: no 500 for bad input)."""
    r = await call_modern(APP, "subscriptions/listen", {"notifications": {"resourceSubscriptions": 5}})
    assert r.status != 500, r.body
    assert r.json()["error"]["code"] == -32602


async def test_last_event_id_with_a_non_ascii_digit_is_not_a_500() -> None:
    """Last-Event-ID: "\\xb2" (superscript two; str.isdigit() is True, int() refuses it) must not be a 500."""
    session = await open_session()
    headers = {**post_headers(version=HANDSHAKE, session=session), "accept": "text/event-stream", "last-event-id": "\xb2"}
    r = await request(APP, "GET", headers=headers, timeout=5)
    assert r.status == 400 and r.json()["error"]["message"] == "Invalid Last-Event-ID", (r.status, r.body)


@pytest.mark.parametrize(("header", "value"), [("mcp-method", "tools/list\xa0"), ("mcp-name", "echo\x85")],
                         ids=["method-trailing-nbsp", "name-trailing-nel"])
async def test_a_routing_header_with_a_raw_byte_at_its_end_is_refused(header: str, value: str) -> None:
    """Found by a diff review: str.strip() took 0xA0 / 0x85 off the ends of Mcp-Method and Mcp-Name, so a
    header an intermediary reads as another value matched the body."""
    method, params = ("tools/list", {}) if header == "mcp-method" else ("tools/call", {"name": "echo", "arguments": {"text": "x"}})
    r = await call_modern(APP, method, params, headers={header: value})
    assert (r.status, r.json()["error"]["code"]) == (400, HEADER_MISMATCH), r.body


async def test_an_unknown_last_event_id_is_a_bad_request_and_the_session_lives_on() -> None:
    """Found by a review of the 2025 era: an event id the server no longer has (trimmed by EVENT_RETENTION
    or the cleanup) or another session's was answered 404, which the 2025-11-25 transport reserves for a
    session that ended ("the client MUST start a new session"): a client threw a healthy session away."""
    session = await open_session()
    other = await open_session()
    other_event = await sync_to_async(_an_event_of)(other)
    for event_id in ("999999999", str(other_event)):
        headers = {**post_headers(version=HANDSHAKE, session=session), "accept": "text/event-stream", "last-event-id": event_id}
        r = await request(APP, "GET", headers=headers, timeout=5)
        assert (r.status, r.json()["error"]["message"]) == (400, "Unknown Last-Event-ID"), (event_id, r.status, r.body)
    ping = await post_json(APP, {"jsonrpc": "2.0", "id": 5, "method": "ping"}, post_headers(version=HANDSHAKE, session=session))
    assert ping.status == 200 and ping.json()["result"] == {}, ping.body


def _an_event_of(session: str) -> int:
    """An event id of one of ``session``'s streams (a stream and an event made for the test)."""
    from mcp_tools.models import StreamEvent

    return int(StreamEvent.objects.create(session_id=session, stream_id="test-stream", payload="").pk)


# -- 3. an unknown logLevel in _meta makes a good call fail ------------------------------------------


async def test_unknown_log_level_in_meta_does_not_break_the_call() -> None:
    """A 2026-07-28 request with _meta logLevel "verbose" and a tool that logs: either -32602 for the level or a
    normal result, never the tool failing with "Internal error while running" (ValueError in levels.at_least)."""
    message = modern_message("tools/call", {"name": "test_tool_with_logging", "arguments": {},
                                            "_meta": {"io.modelcontextprotocol/logLevel": "verbose"}})
    r = await post_json(APP, message, post_headers(extra={"mcp-method": "tools/call", "mcp-name": "test_tool_with_logging"}))
    body = r.json()
    if "error" in body:
        assert body["error"]["code"] == -32602, body
    else:
        assert not body["result"].get("isError"), body


# -- 4. 2026-07-28 routing headers ------------------------------------------------------------------------



def zoned(zone: Annotated[str | None, Field(json_schema_extra={"x-mcp-header": "Zone"})] = None) -> str:
    return f"zone={zone}"


def _b64(value: str) -> str:
    import base64
    return "=?base64?" + base64.b64encode(value.encode()).decode() + "?="


async def test_mcp_name_in_base64_sentinel_is_decoded_before_comparing() -> None:
    """2026-07-28 streamable-http, Value Encoding: a name or URI outside the header-safe set is carried as
    Mcp-Name: =?base64?...?= and servers MUST decode it before comparing it to the body (Server Validation)."""
    uri = "test://template/café/data"
    r = await call_modern(APP, "resources/read", {"uri": uri}, headers={"mcp-name": _b64(uri)})
    body = r.json()
    assert r.status == 200 and "result" in body, (r.status, body)
    assert body["result"]["contents"][0]["uri"] == uri


async def test_a_raw_non_ascii_mcp_name_is_refused() -> None:
    """The same URI sent raw in Mcp-Name (the byte 0xE9, read as latin-1) is refused: "Servers MUST reject
    requests with a recognized ... header that contains invalid characters" (Value Encoding: visible ASCII,
    space and tab; the rest base64). Found by a review: it was read as latin-1 and matched, so what the
    server compared depended on how each intermediary read the byte."""
    uri = "test://template/café/data"
    r = await call_modern(APP, "resources/read", {"uri": uri})  # call_modern sends the name as latin-1 bytes
    assert (r.status, r.json()["error"]["code"]) == (400, HEADER_MISMATCH), r.body


async def test_mcp_param_header_not_expected_for_a_null_argument() -> None:
    """2026-07-28 streamable-http, Server Behavior for Custom Headers: "Parameter value is null: client MUST omit
    the header, server MUST NOT expect the header"."""
    from mcp_tools.registry import make_tool, registry

    with registry.registered_temporarily(make_tool(zoned, name="zoned_echo")):
        r = await call_modern(APP, "tools/call", {"name": "zoned_echo", "arguments": {"zone": None}})
    body = r.json()
    assert r.status == 200 and "result" in body, (r.status, body)
    assert body["result"]["content"][0]["text"] == "zone=None"


async def test_listen_subscription_id_is_the_request_id() -> None:
    """2026-07-28 subscriptions: io.modelcontextprotocol/subscriptionId is a RequestId whose value is the
    JSON-RPC id of the subscriptions/listen request (schema.ts; the spec's example: id 1 -> subscriptionId 1)."""
    message = modern_message("subscriptions/listen", {"notifications": {"toolsListChanged": True}}, request_id=1)
    headers = post_headers(extra={"mcp-method": "subscriptions/listen"})
    stream = Stream("POST", headers, json.dumps(message).encode())
    _, ack = await stream.wait_for(lambda m: m.get("method") == "notifications/subscriptions/acknowledged")
    stream.gone.set()
    await asyncio.wait_for(stream.task, 10)
    assert ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == 1, ack


async def test_a_listen_stream_the_server_stops_gets_its_completion_result() -> None:
    """Found by a review of subscriptions: at shutdown (the server cancels the request) the stream was cut
    without a response, and the official client raised SubscriptionLost. 2026-07-28 subscriptions: "When
    the server ends a subscription on its own initiative (for example, during shutdown), it SHOULD respond
    to the original subscriptions/listen request with a completion result before closing the stream"."""
    message = modern_message("subscriptions/listen", {"notifications": {"toolsListChanged": True}}, request_id="listen-1")
    stream = Stream("POST", post_headers(extra={"mcp-method": "subscriptions/listen"}), json.dumps(message).encode())
    await stream.wait_for(lambda m: m.get("method") == "notifications/subscriptions/acknowledged")
    stream.task.cancel()  # what a server's shutdown does to a request
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.wait_for(stream.task, 10)
    [done] = [m for _, m in stream.events() if m.get("id") == "listen-1"]
    assert done["result"] == {"resultType": "complete", "_meta": {"io.modelcontextprotocol/subscriptionId": "listen-1"}}, done


# -- 5. replaying a finished stream sends the response twice --------------------------------------------


async def test_resuming_a_finished_stream_does_not_send_the_response_twice() -> None:
    """2025-11-25 transports, Resumability: the server replays the messages sent after the last event id; the
    request gets ONE response (JSON-RPC: exactly one response per request). A client whose connection broke
    just before it processed the final event resumes from the priming event id."""
    session = await open_session({"elicitation": {}})
    headers = post_headers(version=HANDSHAKE, session=session)
    call = {"jsonrpc": "2.0", "id": 77, "method": "tools/call", "params": {"name": "test_elicitation", "arguments": {"message": "hi"}}}
    first = Stream("POST", headers, json.dumps(call).encode())
    _, asked = await first.wait_for(lambda m: m.get("method") == "elicitation/create")
    priming = [line[3:].strip() for line in first.text().splitlines() if line.startswith("id:")][0]
    answer = {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {"username": "u", "email": "e@x.org"}}}
    assert (await post_json(APP, answer, headers)).status == 202
    await first.wait_for(lambda m: m.get("id") == 77)
    await asyncio.wait_for(first.task, 10)
    resumed = Stream("GET", {**headers, "accept": "text/event-stream", "last-event-id": priming})
    await asyncio.wait_for(resumed.task, 10)
    responses = [m for _, m in resumed.events() if m.get("id") == 77 and ("result" in m or "error" in m)]
    assert len(responses) == 1, resumed.text()


@pytest.mark.parametrize("notes", [0, 520], ids=["short-stream", "stream-longer-than-EVENT_RETENTION"])
async def test_resuming_a_stream_at_its_response_event_sends_nothing_more(notes: int) -> None:
    """2025-11-25 transports, Resumability: the server replays what came AFTER the last event id. A client
    that resumes at the event carrying the response has it: the stream ends with nothing more, and no new
    event is stored, however often the client reconnects (the response went out once: docs/protocol.md).
    Also on a stream that holds more than EVENT_RETENTION events (trimmed only now and then), where a first
    version of this fix looked for the response among the stream's first EVENT_RETENTION events only."""
    from mcp_tools.models import StreamEvent

    session = await open_session({"elicitation": {}})
    headers = post_headers(version=HANDSHAKE, session=session)
    call = {"jsonrpc": "2.0", "id": "req-1", "method": "tools/call", "params": {"name": "test_elicitation", "arguments": {"message": "hi"}}}
    first = Stream("POST", headers, json.dumps(call).encode())
    _, asked = await first.wait_for(lambda m: m.get("method") == "elicitation/create")
    await _log_on_the_stream(session, notes)
    answer = {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {"username": "u", "email": "e@x.org"}}}
    assert (await post_json(APP, answer, headers)).status == 202
    last_event_id, final = await first.wait_for(lambda m: m.get("id") == "req-1")
    await asyncio.wait_for(first.task, 10)
    assert last_event_id is not None and "result" in final, final
    count = sync_to_async(StreamEvent.objects.filter(session_id=session).count)
    stored = await count()
    for _ in range(2):
        resumed = Stream("GET", {**headers, "accept": "text/event-stream", "last-event-id": last_event_id})
        await asyncio.wait_for(resumed.task, 10)
        assert resumed.sent[0]["status"] == 200
        assert resumed.events() == [], resumed.text()
        assert await count() == stored


async def _log_on_the_stream(session: str, notes: int) -> list[int]:
    """``notes`` log notifications appended to the session's only stream as the server appends events
    (its retention trims included); their event ids."""
    from mcp_tools.models import StreamEvent
    from mcp_tools.store import sessions as sync_sessions

    note = json.dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x"}})

    def append() -> list[int]:
        stream_id = StreamEvent.objects.filter(session_id=session).values_list("stream_id", flat=True).first()
        return [sync_sessions.append_event(session, stream_id, note) for _ in range(notes)]

    return await sync_to_async(append)()


async def test_resuming_a_long_stream_before_its_response_replays_what_followed_and_the_response_once() -> None:
    """A stream longer than EVENT_RETENTION resumed after most of its events: the replay is what followed
    Last-Event-ID, the response included, once (a first version of the fix above read the stream's first
    EVENT_RETENTION events instead, skipped the rest and sent the response again under a new id)."""
    session = await open_session({"elicitation": {}})
    headers = post_headers(version=HANDSHAKE, session=session)
    call = {"jsonrpc": "2.0", "id": "req-2", "method": "tools/call", "params": {"name": "test_elicitation", "arguments": {"message": "hi"}}}
    first = Stream("POST", headers, json.dumps(call).encode())
    _, asked = await first.wait_for(lambda m: m.get("method") == "elicitation/create")
    note_ids = await _log_on_the_stream(session, 520)
    answer = {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {"username": "u", "email": "e@x.org"}}}
    assert (await post_json(APP, answer, headers)).status == 202
    response_event_id, _ = await first.wait_for(lambda m: m.get("id") == "req-2")
    await asyncio.wait_for(first.task, 10)
    resumed = Stream("GET", {**headers, "accept": "text/event-stream", "last-event-id": str(note_ids[509])})
    await asyncio.wait_for(resumed.task, 10)
    replayed = resumed.events()
    assert [event_id for event_id, _ in replayed] == [str(i) for i in note_ids[510:]] + [response_event_id], resumed.text()
    assert [message.get("id") for _, message in replayed if "result" in message] == ["req-2"]


@pytest.mark.parametrize("error", [{}, {"code": "x", "message": "m"}, {"code": 1.5}, {"code": -1}],
                         ids=["empty", "code-string", "code-float-no-message", "no-message"])
async def test_a_response_whose_error_is_no_error_object_is_refused_and_the_call_keeps_waiting(error: Any) -> None:
    """JSON-RPC 2.0 5.1: a response's error is an object with an integer "code" and a string "message". One
    that is not ({}, a string or float code, no message) was accepted (202) and failed the waiting step; it
    is refused (400, -32600, no id: a response's id is the server's own) and the call keeps waiting."""
    session = await open_session({"elicitation": {}})
    headers = post_headers(version=HANDSHAKE, session=session)
    call = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "test_elicitation", "arguments": {"message": "hi"}}}
    stream = Stream("POST", headers, json.dumps(call).encode())
    _, asked = await stream.wait_for(lambda m: m.get("method") == "elicitation/create")
    refused = await post_json(APP, {"jsonrpc": "2.0", "id": asked["id"], "error": error}, headers)
    body = refused.json()
    assert refused.status == 400 and body["error"]["code"] == -32600, (refused.status, body)
    assert body["error"]["message"].startswith("Invalid response: ") and body["id"] is None, body
    row = await sync_to_async(ToolCall.objects.get)()
    assert row.status == "input_required", row.status
    answer = {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {"username": "u", "email": "e@x.org"}}}
    assert (await post_json(APP, answer, headers)).status == 202
    _, final = await stream.wait_for(lambda m: m.get("id") == 9)
    await asyncio.wait_for(stream.task, 10)
    assert "result" in final and not final["result"].get("isError"), final


# -- 6. repeated routing headers: the server checks the last, an intermediary reads the first -----------


async def test_repeated_mcp_name_headers_with_different_values_are_refused() -> None:
    """2026-07-28 streamable-http, Server Validation: the header/body check exists so that an intermediary routing
    on the header and the server executing the body cannot disagree. Two Mcp-Name field lines ("forbidden_tool",
    then the real name) are, per RFC 9110 5.3, the value "forbidden_tool, test_simple_text": it does not match the
    body, so the request MUST be refused with 400 / -32020. The server keeps the last line only and runs the call."""
    message = modern_message("tools/call", {"name": "test_simple_text", "arguments": {}})
    headers = list(post_headers(extra={"mcp-method": "tools/call"}).items())
    headers += [("mcp-name", "allowed_by_gateway"), ("mcp-name", "test_simple_text")]
    r = await request(APP, "POST", headers=headers, body=json.dumps(message).encode())
    assert r.status == 400 and r.json()["error"]["code"] == -32020, (r.status, r.body)


# -- 7. DELETE leaves the session's waiting call stuck ---------------------------------------------------


async def test_deleting_the_session_ends_its_call_waiting_for_input() -> None:
    """2025-11-25 transports, Session Management: after DELETE the session is gone and every later request
    with its id gets 404, so nobody can ever answer the call's elicitation. Its row must not stay
    'input_required' (shown as waiting in the admin console) until CALL_TTL expires it."""
    session = await open_session({"elicitation": {}})
    headers = post_headers(version=HANDSHAKE, session=session)
    call = {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "test_elicitation", "arguments": {"message": "hi"}}}
    stream = Stream("POST", headers, json.dumps(call).encode())
    await stream.wait_for(lambda m: m.get("method") == "elicitation/create")
    stream.gone.set()
    await asyncio.wait_for(stream.task, 10)
    r = await request(APP, "DELETE", headers=headers)
    assert r.status == 204
    statuses = await sync_to_async(lambda: list(ToolCall.objects.filter(session_id=session).values_list("status", flat=True)))()
    assert statuses and all(s not in ("input_required", "working") for s in statuses), statuses


async def test_a_session_s_tasks_outlive_its_delete() -> None:
    """DELETE ends the session's calls, not its tasks: those belong to the caller (tasks/get
    from another session of the same caller still reaches them)."""
    from mcp_tools.states import CallStatus

    session = await open_session()
    background = await sync_to_async(ToolCall.objects.create)(
        tool_name="slow_report", session_id=session, background=True, is_task=True, status=CallStatus.WORKING, method="tools/call")
    r = await request(APP, "DELETE", headers=post_headers(version=HANDSHAKE, session=session))
    assert r.status == 204
    await sync_to_async(background.refresh_from_db)()
    assert background.status == CallStatus.WORKING


async def test_content_length_with_a_non_ascii_digit_is_not_a_500() -> None:
    message = modern_message("tools/call", {"name": "test_simple_text", "arguments": {}})
    headers = {**post_headers(extra={"mcp-method": "tools/call", "mcp-name": "test_simple_text"}), "content-length": "\xb2"}
    r = await request(APP, "POST", headers=headers, body=json.dumps(message).encode())
    assert r.status == 200 and "result" in r.json(), (r.status, r.body)


async def test_listen_acknowledges_only_what_it_honours() -> None:
    """2026-07-28 subscriptions, Acknowledgment: "the subset the server agreed to honor"."""
    filters = {"toolsListChanged": True, "promptsListChanged": False, "someFutureKind": True,
               "resourceSubscriptions": ["test://static-text", "test://no-such-resource", "test://static-text"]}
    message = modern_message("subscriptions/listen", {"notifications": filters}, request_id="sub-1")
    stream = Stream("POST", post_headers(extra={"mcp-method": "subscriptions/listen"}), json.dumps(message).encode())
    _, ack = await stream.wait_for(lambda m: m.get("method") == "notifications/subscriptions/acknowledged")
    stream.gone.set()
    await asyncio.wait_for(stream.task, 10)
    assert ack["params"]["notifications"] == {"toolsListChanged": True, "resourceSubscriptions": ["test://static-text"]}
    assert ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "sub-1"


def _idle_tool() -> str:
    return "idle"


async def test_an_idle_listen_stream_sends_keep_alives_and_still_delivers(monkeypatch: Any) -> None:
    """2026-07-28 streamable-http: "For long-lived streams — in particular the subscriptions/listen response
    stream — servers are encouraged to periodically emit an SSE comment line ... as a keep-alive" (intermediaries
    and client idle timeouts close a silent stream; the official Python client reads with a 300 s timeout).
    The listen stream sends one every KEEPALIVE_SECONDS when it has nothing to say, and a notification that
    comes after them still goes out."""
    from mcp_tools.registry import make_tool, registry
    from mcp_tools.transports import http as http_transport

    monkeypatch.setattr(http_transport, "KEEPALIVE_SECONDS", 0.05)
    message = modern_message("subscriptions/listen", {"notifications": {"toolsListChanged": True}}, request_id=1)
    stream = Stream("POST", post_headers(extra={"mcp-method": "subscriptions/listen"}), json.dumps(message).encode())
    try:
        await stream.wait_for(lambda m: m.get("method") == "notifications/subscriptions/acknowledged")

        async def two_keep_alives() -> None:
            while stream.text().count("\n: keep-alive\n\n") < 2:
                assert not stream.task.done(), stream.sent
                stream.got.clear()
                await stream.got.wait()

        await asyncio.wait_for(two_keep_alives(), 10)
        with registry.registered_temporarily(make_tool(_idle_tool, name="zz_idle_tool")):
            _, changed = await stream.wait_for(lambda m: m.get("method") == "notifications/tools/list_changed")
    finally:
        stream.gone.set()
        await asyncio.wait_for(stream.task, 10)
    assert changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == 1


@pytest.mark.parametrize("filters", [[], {"toolsListChanged": "yes"}, {"resourceSubscriptions": "test://static-text"},
                                     {"resourceSubscriptions": [1]}])
async def test_listen_filters_of_the_wrong_shape_are_refused(filters: Any) -> None:
    r = await call_modern(APP, "subscriptions/listen", {"notifications": filters})
    assert r.status == 400 and r.json()["error"]["code"] == -32602, (r.status, r.body)


async def test_a_broken_base64_mcp_name_is_refused() -> None:
    r = await call_modern(APP, "tools/call", {"name": "test_simple_text", "arguments": {}}, headers={"mcp-name": "=?base64?***?="})
    assert r.status == 400 and r.json()["error"]["code"] == -32020, (r.status, r.body)


async def test_repeated_cookie_lines_are_one_cookie_header() -> None:
    from mcp_tools.transports.http import _headers

    scope = {"headers": [(b"cookie", b"a=1"), (b"Cookie", b"b=2"), (b"accept", b"application/json"), (b"accept", b"text/event-stream")]}
    assert _headers(scope) == {"cookie": "a=1; b=2", "accept": "application/json, text/event-stream"}


def counted(count: Annotated[int, Field(json_schema_extra={"x-mcp-header": "Count"})],
            exact: Annotated[bool, Field(json_schema_extra={"x-mcp-header": "Exact"})] = False) -> str:
    # No float argument is mirrored: the spec allows string, integer and boolean properties only
    # (tests/test_param_headers.py: such a tool is refused).
    return f"{count}/{exact}"


@pytest.mark.parametrize(("headers", "status"), [
    ({"mcp-param-count": "42", "mcp-param-exact": "true"}, 200),
    ({"mcp-param-count": "42.0", "mcp-param-exact": "true"}, 200),  # numbers as numbers
    ({"mcp-param-count": "43", "mcp-param-exact": "true"}, 400),
    ({"mcp-param-count": "forty-two", "mcp-param-exact": "true"}, 400),
    ({"mcp-param-count": "42", "mcp-param-exact": "True"}, 400),  # booleans are true/false
])
async def test_mcp_param_numbers_compare_as_numbers(headers: dict[str, str], status: int) -> None:
    """2026-07-28 streamable-http, custom headers: integer values SHOULD be compared as numbers."""
    from mcp_tools.registry import make_tool, registry

    with registry.registered_temporarily(make_tool(counted)):
        r = await call_modern(APP, "tools/call", {"name": "counted", "arguments": {"count": 42, "exact": True}},
                              headers=headers)
    assert r.status == status, r.body
    if status == 400:
        assert r.json()["error"]["code"] == -32020


async def test_an_mcp_param_integer_past_2_53_is_compared_exactly() -> None:
    from mcp_tools.registry import make_tool, registry

    big = 2**53 + 1
    with registry.registered_temporarily(make_tool(counted)):
        right = await call_modern(APP, "tools/call", {"name": "counted", "arguments": {"count": big}}, headers={"mcp-param-count": str(big)})
        wrong = await call_modern(APP, "tools/call", {"name": "counted", "arguments": {"count": big}}, headers={"mcp-param-count": str(big - 1)})
    assert right.status == 200, right.body
    assert wrong.status == 400, wrong.body


TASKS_EXTENSION = "io.modelcontextprotocol/tasks"


@pytest.mark.parametrize("filters", [{"taskIds": ["00000000-0000-0000-0000-000000000000"]},
                                     {"toolsListChanged": True, "taskIds": []}])
async def test_listen_for_task_notifications_without_the_tasks_extension_is_refused(filters: Any) -> None:
    """SEP-2663: a client that asks subscriptions/listen for task status notifications (taskIds) but does
    not declare io.modelcontextprotocol/tasks MUST get -32021 naming the missing capability. The taskIds
    were dropped and the rest acknowledged, so the client waited for notifications that never come."""
    r = await call_modern(APP, "subscriptions/listen", {"notifications": filters}, capabilities={})
    assert r.status == 400, (r.status, r.body)
    error = r.json()["error"]
    assert error["code"] == -32021, error
    assert error["data"] == {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}}, error


async def test_listen_with_task_ids_and_the_tasks_extension_is_acknowledged() -> None:
    message = modern_message("subscriptions/listen", {"notifications": {"toolsListChanged": True, "taskIds": []}},
                             capabilities={"extensions": {TASKS_EXTENSION: {}}})
    stream = Stream("POST", post_headers(extra={"mcp-method": "subscriptions/listen"}), json.dumps(message).encode())
    _, ack = await stream.wait_for(lambda m: m.get("method") == "notifications/subscriptions/acknowledged")
    stream.gone.set()
    await asyncio.wait_for(stream.task, 10)
    assert ack["params"]["notifications"]["toolsListChanged"] is True, ack


async def test_a_newline_in_a_tool_or_method_name_writes_no_line_of_its_own_into_the_log(caplog: Any) -> None:
    """Found by an operations review: ``tools/call`` of a tool named ``"nosuch\\n2026-11-27 ... ERROR ...
    FORGED"`` put the forged line into the server log on a line of its own (the name was logged with %s)."""
    import logging

    http_logger = logging.getLogger("mcp_tools.http")
    http_logger.addHandler(caplog.handler)
    caplog.set_level(logging.INFO, logger="mcp_tools.http")
    forged = "2026-11-27 20:00:00,000 ERROR mcp_tools.auth: FORGED superuser login"
    try:
        session = await open_session()
        headers = post_headers(version=HANDSHAKE, session=session)
        await post_json(APP, handshake_message("tools/call", {"name": f"nosuch\n{forged}", "arguments": {}}), headers)
        await post_json(APP, handshake_message(f"nosuch\n{forged}", {}), headers)
    finally:
        http_logger.removeHandler(caplog.handler)
    logged = "\n".join(record.getMessage() for record in caplog.records if record.name == "mcp_tools.http")
    assert "FORGED" in logged  # it is logged...
    assert not any(line.startswith(forged) for line in logged.splitlines()), logged  # ...but never as a line of its own


@pytest.mark.parametrize("header", ["garbage", "2099-01-01", "2026-07-28x"])
async def test_initialize_under_an_unsupported_protocol_version_header_is_refused(header: str) -> None:
    """Found by a review of the 2025-11-25 era: ``initialize`` took any ``MCP-Protocol-Version`` header and made
    a session, whose next request under the same header got 400 (2025-11-25 transports: an invalid or
    unsupported version MUST get 400)."""
    from tests.asgi_client import handshake_message, post_headers, post_json

    message = handshake_message("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}})
    r = await post_json(APP, message, {**post_headers(version=None), "mcp-protocol-version": header})
    assert r.status == 400 and r.header("mcp-session-id") is None, (r.status, r.body)
