"""The shortcuts of the plain HTTP path (docs/performance.md, issue 9) answer exactly as the long way did."""

from __future__ import annotations

import json
from typing import Annotated, Any

import pytest
from django.test import override_settings
from pydantic import Field

from mcp_tools.protocol import jsonrpc
from mcp_tools.protocol.errors import HEADER_MISMATCH, McpError
from mcp_tools.routing import McpRouter, mcp_asgi_app
from mcp_tools.transports.http import McpEndpoint, _headers
from tests.asgi_client import call_modern, post_headers, request

pytestmark = pytest.mark.django_db(transaction=True)


class Recorder:
    """An ASGI app that remembers the scopes it was called with and answers 200."""

    def __init__(self) -> None:
        self.scopes: list[dict[str, Any]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        self.scopes.append(scope)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"django"})


# -- McpRouter ----------------------------------------------------------------------------------


def test_mcp_router_finds_the_endpoint_mounted_at_the_configured_path() -> None:
    router = mcp_asgi_app(Recorder())
    assert isinstance(router, McpRouter)
    assert isinstance(router.endpoint, McpEndpoint)
    assert router.path == "/mcp"
    with override_settings(MCP_TOOLS={"PATH": "/api/v1/mcp/"}):
        assert mcp_asgi_app(Recorder()).path == "/api/v1/mcp/"  # served as written (tests/test_path_setting.py)


async def test_mcp_router_serves_the_mcp_path_with_the_endpoint() -> None:
    django_app = Recorder()
    response = await call_modern(mcp_asgi_app(django_app), "tools/call", {"name": "echo", "arguments": {"text": "hi"}})
    assert response.status == 200, response.body
    assert response.json()["result"]["content"] == [{"type": "text", "text": "hi"}]
    assert django_app.scopes == []


@pytest.mark.parametrize("path", ["/", "/admin/", "/mcp/", "/mcpx", "//mcp", "/.well-known/oauth-protected-resource/mcp"])
async def test_mcp_router_sends_other_paths_through_the_url_router(path: str) -> None:
    django_app = Recorder()
    router = mcp_asgi_app(django_app)
    response = await request(router, "GET", path, headers={"host": "testserver"})
    if path == "//mcp":  # the URLRouter strips leading slashes: still the endpoint (GET without a session)
        assert response.status == 406
        assert django_app.scopes == []
    elif path.startswith("/.well-known/"):  # the metadata app (404 while OAuth is off)
        assert response.status == 404
        assert django_app.scopes == []
    else:
        assert (response.status, response.body) == (200, b"django")
        assert django_app.scopes[0]["path"] == path


async def test_mcp_router_leaves_a_root_path_to_the_url_router() -> None:
    django_app = Recorder()
    router = mcp_asgi_app(django_app)
    endpoint_calls: list[dict[str, Any]] = []
    real_endpoint = router.endpoint

    async def endpoint(scope: dict[str, Any], receive: Any, send: Any) -> None:
        endpoint_calls.append(scope)
        await real_endpoint(scope, receive, send)

    router.endpoint = endpoint
    # Served as /prefix/mcp behind a proxy: the URLRouter strips root_path and routes "mcp"
    # to the endpoint it mounts (not this wrapper, which only the shortcut calls).
    scope_path = "/prefix/mcp"
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await router({"type": "http", "method": "GET", "path": scope_path, "root_path": "/prefix", "headers": [(b"host", b"testserver")],
                  "query_string": b""}, receive, send)
    assert endpoint_calls == []
    assert sent[0]["status"] == 406  # answered by McpEndpoint all the same
    assert django_app.scopes == []


# -- headers ------------------------------------------------------------------------------------


def test_headers_are_read_case_insensitively_and_repeats_are_combined() -> None:
    scope = {"headers": [(b"Host", b"testserver"), (b"MCP-Protocol-Version", b"2026-07-28"), (b"X-Thing", b"a"), (b"x-thing", b"b"),
                         (b"Accept", b"caf\xe9")]}
    assert _headers(scope) == {"host": "testserver", "mcp-protocol-version": "2026-07-28", "x-thing": "a, b", "accept": "caf\u00e9"}
    assert _headers(scope) == _headers(scope)  # remembered names give the same answer
    assert _headers({}) == {}


async def test_mixed_case_header_names_reach_the_protocol_checks() -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "echo", "arguments": {"text": "x"},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}}).encode()
    raw_headers = [(key.title().encode(), value.encode()) for key, value in post_headers().items()]
    endpoint = McpEndpoint()

    def with_raw_headers(extra: list[tuple[bytes, bytes]]) -> Any:
        async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
            await endpoint({**scope, "headers": raw_headers + extra}, receive, send)
        return app

    # Mcp-Method is missing: the 2026-07-28 header check still applies.
    response = await request(with_raw_headers([]), "POST", body=body)
    assert response.status == 400, response.body
    assert response.json()["error"]["code"] == HEADER_MISMATCH
    response = await request(with_raw_headers([(b"Mcp-Method", b"tools/call"), (b"MCP-NAME", b"echo")]), "POST", body=body)
    assert response.status == 200, response.body
    assert response.json()["result"]["content"] == [{"type": "text", "text": "x"}]


# -- JSON-RPC parsing ---------------------------------------------------------------------------


@pytest.mark.parametrize("body", [
    b'{"jsonrpc": "2.0", "id": 1, "method": "ping"} x',
    b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}{}',
    b'{"jsonrpc": "2.0", "id": 1, "method": ',
    b'{"jsonrpc": "2.0", "id": 1, "method": "ping", }',
    b'{\xff}',
    b'{' * 100_000,
])
def test_parse_body_fails_as_json_loads_does(body: bytes) -> None:
    try:
        json.loads(body)
    except RecursionError:
        expected = "Parse error: the JSON nests too deeply"
    except (ValueError, UnicodeDecodeError) as exc:
        expected = f"Parse error: {exc}"
    with pytest.raises(McpError) as caught:
        jsonrpc.parse_body(body)
    assert caught.value.code == -32700
    assert caught.value.message == expected


@pytest.mark.parametrize("body", [
    b'{"jsonrpc":"2.0","id":1,"method":"ping"}',
    b'{"jsonrpc":"2.0","id":1,"method":"ping"}  \r\n\t',
    b'{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"echo","arguments":{"text":"\\ud83d\\ude00 \xc3\xa9 1234567890123456789"}}}',
    b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
    b'{"jsonrpc":"2.0","id":3,"result":{}}',
])
def test_parse_body_reads_what_json_loads_reads(body: bytes) -> None:
    message = jsonrpc.parse_body(body)
    assert message.raw == json.loads(body)
    assert message == jsonrpc.classify(json.loads(body))
    assert message.id == message.raw.get("id")
    assert message.method == message.raw.get("method", "")
    assert message.params == (message.raw.get("params") or {})


# -- JSON-RPC encoding --------------------------------------------------------------------------


class Opaque:
    def __str__(self) -> str:
        return "opaque!"


def _reference_dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str).encode()


@pytest.mark.parametrize("value", [
    {"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "caf\u00e9 \u2028 \U0001f600"}], "_meta": {}}},
    {"n": None, "t": True, "f": 1.5, "nan": float("nan"), "big": 10**30, "o": Opaque(), "keys": {1: "a", None: "b", 2.5: "c"}},
    {"shared": [[1]] * 3},
])
def test_dumps_writes_what_json_dumps_writes(value: Any) -> None:
    assert jsonrpc.dumps(value) == _reference_dumps(value)


def test_dumps_fails_as_json_dumps_does() -> None:
    cyclic: dict[str, Any] = {"a": [1]}
    cyclic["a"].append(cyclic)
    deep: list[Any] = []
    inner = deep
    for _ in range(20_000):
        inner.append([])
        inner = inner[0]
    for value, error in ((cyclic, ValueError), (deep, RecursionError), ({"k": {(1,): 2}}, TypeError)):
        with pytest.raises(error) as expected:
            _reference_dumps(value)
        with pytest.raises(error) as got:
            jsonrpc.dumps(value)
        assert str(got.value) == str(expected.value)


# -- framing ------------------------------------------------------------------------------------


async def test_json_answers_carry_their_length() -> None:
    from tests.asgi_client import handshake_message, post_json

    answer = await call_modern(McpEndpoint(), "tools/call", {"name": "echo", "arguments": {"text": "sized"}})
    assert answer.status == 200
    assert answer.header("content-length") == str(len(answer.body))
    assert [m.get("more_body", False) for m in answer.messages if m["type"] == "http.response.body"] == [False]
    error = await call_modern(McpEndpoint(), "tools/call", {"name": "no-such-tool", "arguments": {}})
    assert error.header("content-length") == str(len(error.body))
    notified = await post_json(McpEndpoint(), handshake_message("notifications/cancelled", {"requestId": 1}, notification=True))
    assert (notified.status, notified.body, notified.header("content-length")) == (202, b"", "0")


async def test_a_deleted_session_answers_204_without_content_length() -> None:
    from tests.asgi_client import handshake_message, post_json

    endpoint = McpEndpoint()
    opened = await post_json(endpoint, handshake_message("initialize", {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}), headers=post_headers(version=None))
    session = opened.header("mcp-session-id")
    assert session
    deleted = await request(endpoint, "DELETE", headers={"host": "testserver", "mcp-session-id": session})
    assert deleted.status == 204
    assert deleted.header("content-length") is None
    assert deleted.body == b""


# -- Mcp-Param-* headers (read from the tool's schema once per tool) ----------------------------


MirroredRegion = Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})]


async def _mirrored(region: MirroredRegion, count: int = 1) -> str:
    return f"{region}:{count}"


async def _plain(region: str, count: int = 1) -> str:
    return f"{region}:{count}"


def _regional_tool(mirrored: bool) -> Any:
    from mcp_tools.registry.registry import make_tool

    return make_tool(_mirrored if mirrored else _plain, name="regional")


async def test_param_headers_follow_the_tool_registered_under_the_name() -> None:
    from mcp_tools.registry import registry

    mirrored = _regional_tool(True)
    assert mirrored.param_headers == ((("region",), "Region"),)
    params = {"name": "regional", "arguments": {"region": "eu-west", "count": 2}}
    with registry.registered_temporarily(mirrored):
        missing = await call_modern(McpEndpoint(), "tools/call", params)
        assert missing.status == 400
        assert missing.json()["error"]["code"] == HEADER_MISMATCH
        assert "Missing Mcp-Param-Region header" in missing.json()["error"]["message"]
        wrong = await call_modern(McpEndpoint(), "tools/call", params, headers={"mcp-param-region": "us-east"})
        assert (wrong.status, wrong.json()["error"]["code"]) == (400, HEADER_MISMATCH)
        right = await call_modern(McpEndpoint(), "tools/call", params, headers={"mcp-param-region": "eu-west"})
        assert right.status == 200
        assert right.json()["result"]["content"] == [{"type": "text", "text": "eu-west:2"}]
    # Another tool under the same name, whose schema mirrors nothing: no header is asked for.
    plain = _regional_tool(False)
    assert plain.param_headers == ()
    with registry.registered_temporarily(plain):
        answer = await call_modern(McpEndpoint(), "tools/call", params)
        assert answer.status == 200
        assert answer.json()["result"]["content"] == [{"type": "text", "text": "eu-west:2"}]


# -- the call core's lazy parts ------------------------------------------------------------------


async def test_target_binds_the_params_without_the_unbound_keys() -> None:
    from mcp_tools.engine.journal import digest
    from mcp_tools.server import core
    from mcp_tools.server.auth import ANONYMOUS

    params = {"name": "echo", "arguments": {"text": "x"}, "_meta": {"progressToken": 1}, "inputResponses": {},
              "requestState": "s", "task": None, "resumeToken": None}
    target = await core.resolve_target("tools/call", params, ANONYMOUS)
    assert target.bound_params == {"name": "echo", "arguments": {"text": "x"}}
    assert target.params_digest == digest(["tools/call", {"name": "echo", "arguments": {"text": "x"}}])


# -- anonymous callers answered without the authentication coroutine -----------------------------


@pytest.mark.parametrize("extra", [{}, {"authorization": "Basic dTpw"}, {"cookie": "sessionid=x"}])
@pytest.mark.parametrize("allow", [True, False])
async def test_anonymous_at_once_only_where_authenticate_answers_anonymous(settings, allow: bool, extra: dict[str, str]) -> None:  # type: ignore[no-untyped-def]
    from mcp_tools.server.auth import ANONYMOUS
    from mcp_tools.transports.http import HttpError, anonymous_at_once, authenticate

    headers = {"host": "testserver", "content-type": "application/json", **extra}
    scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": [(k.encode(), v.encode()) for k, v in headers.items()]}
    with override_settings(MCP_TOOLS={**settings.MCP_TOOLS, "ALLOW_ANONYMOUS": allow}):
        quick = anonymous_at_once(headers)
        try:
            principal = await authenticate(scope, headers)
        except HttpError:
            principal = None
    assert quick == (allow and not extra)
    if quick:
        assert principal is ANONYMOUS
