"""Review of the Streamable HTTP wire (what the conformance suite does not pin): the status of a
missing tasks extension, the id of an Invalid Request, media types, and CORS for allowed browser
origins. Each test failed before its fix."""
from __future__ import annotations

import asyncio
import io
import json
from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings

from mcp_tools.registry import make_tool, registry
from mcp_tools.server.auth import ANONYMOUS
from mcp_tools.transports.stdio import StdioServer
from tests.asgi_client import HANDSHAKE, MODERN, call_modern, modern_message, post_headers, request
from tests.test_http_spec_edges import APP, Stream, _in_memory_layer, open_session  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


def _meta(**extra: Any) -> dict[str, Any]:
    return {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}, **extra}


# -- 1. MissingRequiredClientCapability of the tasks extension is a 400 ---------------------------------


def tasks_only() -> str:
    """Runs only as a task."""
    return "done"


@pytest.mark.parametrize("method, params", [
    ("tasks/get", {"taskId": "00000000-0000-0000-0000-000000000000"}),
    ("tasks/cancel", {"taskId": "00000000-0000-0000-0000-000000000000"}),
    ("tools/call", {"name": "review_tasks_only", "arguments": {}}),
])
async def test_missing_tasks_extension_is_a_400(method: str, params: dict[str, Any]) -> None:
    """2026-07-28 basic/index, Per-request protocol fields: a request that needs a capability the client did
    not declare gets MissingRequiredClientCapabilityError (-32021), and on HTTP "the response status MUST be
    400 Bad Request", as ctx.elicit's -32021 is. The tasks extension's (tasks/get, tasks/cancel and a
    taskSupport="required" tool without the extension) answered 200."""
    with registry.registered_temporarily(make_tool(tasks_only, name="review_tasks_only", task_support="required")):
        headers = {"mcp-name": params["taskId"]} if "taskId" in params else None  # the extension's Mcp-Name
        response = await call_modern(APP, method, params, capabilities={}, headers=headers)
    body = response.json()
    assert body["error"]["code"] == -32021, body
    assert response.status == 400, (response.status, body)



def gated_echo(text: str) -> str:
    """Echo, for callers with a permission the anonymous caller lacks."""
    return text


@pytest.mark.parametrize("task_support, era, task", [
    ("required", MODERN, False),  # would be -32021: declare the tasks extension
    ("required", HANDSHAKE, False),  # would be -32601: add "task"
    ("forbidden", HANDSHAKE, True),  # would be -32601: cannot run as a task
])
async def test_task_support_refusals_do_not_reveal_a_tool_the_caller_may_not_use(task_support: str, era: str, task: bool) -> None:
    """A tool the caller may not use answers "Unknown tool", as one that does not exist. The refusals of a
    call that does not fit the tool's taskSupport came first and named the tool, telling an anonymous
    caller that a permission-gated tool exists (and how it must be called)."""
    tool = make_tool(gated_echo, name="review_gated_task_tool", permissions=["auth.view_user"], task_support=task_support)
    params: dict[str, Any] = {"name": "review_gated_task_tool", "arguments": {"text": "x"}}
    with registry.registered_temporarily(tool):
        if era == MODERN:
            response = await call_modern(APP, "tools/call", params, capabilities={})
        else:
            session = await open_session()
            message = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {**params, **({"task": {}} if task else {})}}
            response = await request(APP, "POST", headers=post_headers(version=HANDSHAKE, session=session), body=json.dumps(message).encode())
    body = response.json()
    assert body["error"] == {"code": -32602, "message": "Unknown tool: review_gated_task_tool"}, body

# -- 2. an Invalid Request whose id is readable is answered with that id --------------------------------

READABLE_ID_CHANGES = [{"params": [1]}, {"params": None}, {"jsonrpc": "1.0"}, {"method": ""}, {"method": 5}]


@pytest.mark.parametrize("change", READABLE_ID_CHANGES)
async def test_invalid_request_with_a_readable_id_answers_with_that_id(change: dict[str, Any]) -> None:
    """2026-07-28 basic/index, Responses: "Error responses MUST include the same ID as the request they
    correspond to (except in error cases where the ID could not be read due a malformed request)"
    (JSON-RPC 2.0 5: null only "if there was an error in detecting the id"). A request with a valid id 7 and
    params that are an array (or null, or a wrong jsonrpc / method) was answered with "id": null."""
    message = {"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {"_meta": _meta()}, **change}
    response = await request(APP, "POST", headers=post_headers(extra={"mcp-method": "tools/list"}), body=json.dumps(message).encode())
    body = response.json()
    assert response.status == 400 and body["error"]["code"] == -32600, body
    assert body["id"] == 7, body


@pytest.mark.parametrize("message", [
    {"jsonrpc": "2.0", "id": True, "method": "tools/list"},  # an id that is no RequestId
    {"jsonrpc": "2.0", "id": 1.5, "method": "tools/list"},
    {"jsonrpc": "2.0", "id": 7, "error": "boom"},  # a response: its id is the server's request's, not one to answer
    [{"jsonrpc": "2.0", "id": 7, "method": "tools/list"}],  # a batch
])
async def test_invalid_request_whose_id_cannot_be_read_answers_null(message: Any) -> None:
    """The control: an id that is not a string or integer, a response's id and a batch's are not answered."""
    response = await request(APP, "POST", headers=post_headers(version=HANDSHAKE), body=json.dumps(message).encode())
    body = response.json()
    assert response.status == 400 and body["error"]["code"] == -32600 and body["id"] is None, body


@pytest.mark.parametrize("case", ["unknown-session", "ended-session", "no-session-header", "other-version"])
async def test_a_response_refused_for_its_session_answers_no_id(case: str) -> None:
    """A client response (to the server's request "mcp_tools:<call>:<step>") that its session refuses (unknown
    or ended session, no Mcp-Session-Id, another MCP-Protocol-Version): the error named the response's id, the
    server's own request's. As for any well-formed response refused (an unknown id), it names none: no ``id``
    member, as the 2025-11-25 transport has it ("a JSON-RPC error response that has no id"; RequestId is never null)."""
    session = await open_session()
    headers = post_headers(version=HANDSHAKE, session=session)
    if case == "unknown-session":
        headers["mcp-session-id"] = "no-such-session"
    elif case == "ended-session":
        assert (await request(APP, "DELETE", headers=headers)).status == 204
    elif case == "no-session-header":
        del headers["mcp-session-id"]
    else:
        headers["mcp-protocol-version"] = "2025-06-18"
    message = {"jsonrpc": "2.0", "id": "mcp_tools:x:0", "result": {}}
    response = await request(APP, "POST", headers=headers, body=json.dumps(message).encode())
    body = response.json()
    assert response.status in (400, 404) and body["error"]["code"] == -32600, (response.status, body)
    assert "id" not in body, body


@pytest.mark.parametrize("change", READABLE_ID_CHANGES)
async def test_stdio_invalid_request_with_a_readable_id_answers_with_that_id(change: dict[str, Any]) -> None:
    """The stdio transport reads a line the same way and answers with the id too."""
    writer = io.BytesIO()
    server = StdioServer(ANONYMOUS, io.BytesIO(), writer)
    await server.receive(json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/list", **change}).encode())
    answer = json.loads(writer.getvalue())
    assert answer["error"]["code"] == -32600 and answer["id"] == 7, answer


async def _start(stream: Stream) -> dict[str, Any]:
    """The ``http.response.start`` a :class:`Stream` got, waited for."""
    async def started() -> dict[str, Any]:
        while not stream.sent:
            stream.got.clear()
            await stream.got.wait()
        return stream.sent[0]
    return await asyncio.wait_for(started(), 10)


def _header(start: dict[str, Any], name: str) -> str | None:
    return next((v.decode("latin-1") for k, v in start["headers"] if k.decode("latin-1").lower() == name), None)


# -- 3. media types are case-insensitive, and matched whole ----------------------------------------------


@pytest.mark.parametrize("header, value", [
    ("content-type", "Application/JSON"),
    ("content-type", "application/json ; charset=UTF-8"),
    ("accept", "Application/JSON, Text/Event-Stream"),
    ("accept", "text/event-stream;q=0.9,application/json"),
    ("accept", "application/*, text/*"),
    ("accept", "*/*"),
])
async def test_media_types_are_case_insensitive(header: str, value: str) -> None:
    """RFC 9110 8.3.1: "The type and subtype tokens are case-insensitive" (Content-Type and Accept alike);
    the 2026-07-28 transport only asks that Accept list both types. "Application/JSON" got 415 and an
    upper-case Accept 406."""
    response = await call_modern(APP, "tools/list", headers={header: value})
    assert response.status == 200, (response.status, response.body)


@pytest.mark.parametrize("header, value, status", [
    ("content-type", "application/jsonx", 415),
    ("content-type", "application/json-seq", 415),
    ("accept", "application/jsonx, text/event-streamy", 406),
    ("accept", "application/json", 406),
])
async def test_media_types_are_matched_whole(header: str, value: str, status: int) -> None:
    """A media type that only starts with (or contains) application/json is another type: refused."""
    response = await call_modern(APP, "tools/list", headers={header: value})
    assert response.status == status, (response.status, response.body)


async def test_get_stream_accept_is_case_insensitive() -> None:
    """The GET stream's Accept is read the same way (406 only when text/event-stream is not listed)."""
    session = await open_session()
    refused = await request(APP, "GET", headers={"host": "testserver", "accept": "text/event-streamy", "mcp-session-id": session})
    assert refused.status == 406, refused.body
    stream = Stream("GET", {"host": "testserver", "accept": "Text/Event-Stream", "mcp-session-id": session})
    try:
        assert (await _start(stream))["status"] == 200
    finally:
        stream.gone.set()


# -- 4. CORS for allowed browser origins ----------------------------------------------------------------

ORIGIN = "http://localhost:3000"  # allowed: derived from the test ALLOWED_HOSTS, as the origin tests use it


async def test_an_allowed_browser_origin_can_preflight_and_read_the_answer() -> None:
    """docs/settings.md: ALLOWED_ORIGINS are the "Browser origins allowed" (None derives them from
    ALLOWED_HOSTS). A browser's POST with Content-Type application/json and Mcp-* headers is preceded by a
    CORS preflight (OPTIONS), which got 405; and the POST's answer carried no Access-Control-Allow-Origin
    (nor Access-Control-Expose-Headers: Mcp-Session-Id), so a browser client at an allowed origin could use
    neither era. The endpoint is a bare ASGI app, so Django CORS middleware cannot add them."""
    preflight = await request(APP, "OPTIONS", headers={
        "host": "testserver", "origin": ORIGIN, "access-control-request-method": "POST",
        "access-control-request-headers": "content-type, mcp-protocol-version, mcp-method, Mcp-Param-Zone"})
    assert preflight.status == 204, (preflight.status, preflight.body)
    assert preflight.header("access-control-allow-origin") == ORIGIN
    assert "Origin" in preflight.header("vary").split(", ")
    assert set(preflight.header("access-control-allow-methods").split(", ")) == {"GET", "POST", "DELETE"}
    allowed = {name.strip().lower() for name in preflight.header("access-control-allow-headers").split(",")}
    assert {"content-type", "mcp-protocol-version", "mcp-method", "mcp-param-zone"} <= allowed, allowed
    assert int(preflight.header("access-control-max-age")) > 0
    answer = await call_modern(APP, "tools/list", headers={"origin": ORIGIN})
    assert answer.status == 200
    assert answer.header("access-control-allow-origin") == ORIGIN, answer.headers
    assert answer.header("vary") == "Origin"
    exposed = {name.strip().lower() for name in answer.header("access-control-expose-headers").split(",")}
    assert {"mcp-session-id", "mcp-protocol-version", "www-authenticate"} <= exposed


async def test_a_preflight_without_request_headers_gets_the_fixed_list() -> None:
    """No Access-Control-Request-Headers (or an unreadable one): the headers the transport reads."""
    for extra in ({}, {"access-control-request-headers": "content-type, bad header"}):
        preflight = await request(APP, "OPTIONS", headers={
            "host": "testserver", "origin": ORIGIN, "access-control-request-method": "POST", **extra})
        assert preflight.status == 204
        allowed = {name.strip() for name in preflight.header("access-control-allow-headers").split(",")}
        assert {"content-type", "accept", "authorization", "mcp-protocol-version", "mcp-session-id",
                "last-event-id", "mcp-method", "mcp-name", "x-mcp-client-secret"} <= allowed, allowed
        assert "bad header" not in allowed


async def test_error_answers_and_handshake_streams_carry_cors_headers() -> None:
    """An error answer (here a 400 and a 404) and a 2025-11-25 session's answers carry them too, as does
    the initialize that hands the Mcp-Session-Id out."""
    bad = await request(APP, "POST", headers=post_headers(extra={"origin": ORIGIN}), body=b"{")
    assert bad.status == 400 and bad.header("access-control-allow-origin") == ORIGIN
    unknown = await request(APP, "GET", headers={"host": "testserver", "accept": "text/event-stream",
                                                 "mcp-session-id": "nope", "origin": ORIGIN})
    assert unknown.status == 404 and unknown.header("access-control-allow-origin") == ORIGIN
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": HANDSHAKE, "capabilities": {}, "clientInfo": {"name": "b", "version": "1"}}}
    opened = await request(APP, "POST", headers=post_headers(version=None, extra={"origin": ORIGIN}), body=json.dumps(init).encode())
    assert opened.status == 200 and opened.header("mcp-session-id")
    assert opened.header("access-control-allow-origin") == ORIGIN
    stream = Stream("GET", {"host": "testserver", "accept": "text/event-stream",
                            "mcp-session-id": opened.header("mcp-session-id") or "", "origin": ORIGIN})
    try:
        start = await _start(stream)
        assert start["status"] == 200 and _header(start, "access-control-allow-origin") == ORIGIN
    finally:
        stream.gone.set()


async def test_no_origin_no_cors_headers_and_a_disallowed_origin_is_refused() -> None:
    """Without Origin (not a browser's cross-origin request) nothing is added; a disallowed origin's preflight
    and request are refused (403) as before, without CORS headers; a plain OPTIONS is still a 405."""
    plain = await call_modern(APP, "tools/list")
    assert plain.status == 200 and not any(name.startswith("access-control-") for name, _ in plain.headers)
    options = await request(APP, "OPTIONS", headers={"host": "testserver"})
    assert options.status == 405 and options.header("access-control-allow-origin") is None
    for method in ("OPTIONS", "POST"):
        refused = await request(APP, method, headers=post_headers(extra={
            "origin": "http://evil.example", "access-control-request-method": "POST"}), body=b"{}")
        assert refused.status == 403 and refused.header("access-control-allow-origin") is None, method
    with override_settings(MCP_TOOLS={**settings.MCP_TOOLS, "ALLOWED_ORIGINS": ["https://app.example"]}):
        preflight = await request(APP, "OPTIONS", headers={
            "host": "testserver", "origin": "https://app.example", "access-control-request-method": "POST"})
        assert preflight.status == 204 and preflight.header("access-control-allow-origin") == "https://app.example"
        refused = await request(APP, "OPTIONS", headers={
            "host": "testserver", "origin": ORIGIN, "access-control-request-method": "POST"})
        assert refused.status == 403


async def test_the_urlconf_mount_answers_cors_too() -> None:
    """``include("mcp_tools.urls")`` runs the same endpoint behind Django's middleware: the same preflight
    and headers."""
    from django.core.handlers.asgi import ASGIHandler

    django_app = ASGIHandler()
    preflight = await request(django_app, "OPTIONS", "/mcp-via-django", headers={
        "host": "testserver", "origin": ORIGIN, "access-control-request-method": "POST",
        "access-control-request-headers": "content-type, mcp-method"})
    assert preflight.status == 204 and preflight.header("access-control-allow-origin") == ORIGIN, preflight.headers
    answer = await request(django_app, "POST", "/mcp-via-django", headers=post_headers(extra={"mcp-method": "tools/list", "origin": ORIGIN}),
                           body=json.dumps(modern_message("tools/list")).encode())
    assert answer.status == 200 and answer.header("access-control-allow-origin") == ORIGIN, answer.headers


# -- a finished request's disconnect watcher is freed by reference counting -----------------------------


async def waits_then_echoes(text: str) -> str:
    """Waits once (so the request starts its disconnect watcher), then echoes."""
    await asyncio.sleep(0.01)
    return text


async def test_a_finished_requests_disconnect_watcher_is_freed_without_the_garbage_collector(monkeypatch: pytest.MonkeyPatch) -> None:
    """The handler held its cancelled watcher task, whose CancelledError's traceback holds the watcher's
    frame and so the handler: a cycle per waiting request (every durable round) that only the garbage
    collector freed, with the frames, tracebacks and closures around it (~18 µs a round in its
    collections, docs/performance-durable.md). With the collector off, the task must be gone once the
    request is answered and its cancellation has run."""
    import gc
    import weakref

    from mcp_tools.transports import http

    watchers: list[weakref.ref[Any]] = []
    start_watcher = http._Handler.start_watcher

    def recording(self: Any) -> None:
        start_watcher(self)
        watchers.append(weakref.ref(self.watcher))

    monkeypatch.setattr(http._Handler, "start_watcher", recording)
    with registry.registered_temporarily(make_tool(waits_then_echoes, name="review_waits_then_echoes")):
        gc.collect()
        gc.disable()
        try:
            response = await call_modern(APP, "tools/call", {"name": "review_waits_then_echoes", "arguments": {"text": "hi"}}, capabilities={})
            for _ in range(5):  # the cancelled watcher's own steps
                await asyncio.sleep(0)
            alive = [ref for ref in watchers if ref() is not None]
        finally:
            gc.enable()
    assert response.json()["result"]["content"][0]["text"] == "hi", response.json()
    assert len(watchers) == 1
    assert alive == []


async def test_a_session_request_answered_in_json_leaves_no_cycle_for_the_garbage_collector() -> None:
    """A 2025-11-25 session request's handler gives its response a hook for the stream's keep-alive
    (``Response.on_streaming``): response -> bound method -> handler -> response, a cycle per request
    (every session ``tools/call``, even one answered at once in JSON) that only the collector freed.
    With the collector off, no response of the endpoint's may outlive its request."""
    import gc
    import weakref

    from mcp_tools.transports import http

    responses: list[weakref.ref[Any]] = []
    original_init = http.Response.__init__

    def recording(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        responses.append(weakref.ref(self))

    session = await open_session()
    headers = post_headers(version=HANDSHAKE, session=session)
    body = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "hi"}}}).encode()
    http.Response.__init__ = recording  # type: ignore[method-assign]
    gc.collect()
    gc.disable()
    try:
        answer = await request(APP, "POST", headers=headers, body=body)
        alive = [ref for ref in responses if ref() is not None]
    finally:
        gc.enable()
        http.Response.__init__ = original_init  # type: ignore[method-assign]
    assert answer.status == 200 and answer.json()["result"]["content"][0]["text"] == "hi", answer.body
    assert len(responses) == 1
    assert alive == []
