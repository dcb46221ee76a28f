"""The Streamable HTTP endpoint in-process: bad input gets the right status and JSON-RPC error, never a 500,
and leaves the database alone; sessions, permissions and pagination behave."""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Callable
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.test import override_settings

from demo_site.inventory.models import Product
from mcp_tools.models import CallStep, McpSession, StreamEvent, ToolCall
from mcp_tools.registry import make_tool, registry
from mcp_tools.transports.http import McpEndpoint
from tests.asgi_client import (
    HANDSHAKE,
    MODERN,
    AsgiResponse,
    argument_errors,
    call_modern,
    handshake_message,
    modern_message,
    post_headers,
    post_json,
    request,
)

pytestmark = pytest.mark.django_db(transaction=True)

APP = McpEndpoint()


# -- helpers ------------------------------------------------------------------------------------


def db_counts() -> dict[str, int]:
    return {model.__name__: model.objects.count() for model in (ToolCall, CallStep, McpSession, StreamEvent)}


def create_user_token(username: str, perms: tuple[str, ...] = ()) -> str:
    from django.contrib.auth.models import Permission, User
    from rest_framework.authtoken.models import Token

    user = User.objects.create_user(username, password="pw")
    for perm in perms:
        app_label, codename = perm.split(".")
        user.user_permissions.add(Permission.objects.get(content_type__app_label=app_label, codename=codename))
    return Token.objects.create(user=user).key


def assert_rpc_error(response: AsgiResponse, status: int, code: int, request_id: Any = ...) -> dict[str, Any]:
    """The response is a JSON (not SSE) JSON-RPC error with this HTTP status and code."""
    assert response.status == status, (response.status, response.body)
    assert response.content_type.startswith("application/json")
    body = response.json()
    assert body["jsonrpc"] == "2.0"
    assert "result" not in body
    assert body["error"]["code"] == code, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    if request_id is not ...:
        assert body["id"] == request_id
    return body["error"]


def modern_headers(method: str = "tools/list", **extra: str | None) -> dict[str, str]:
    return post_headers(extra={"mcp-method": method, **extra})


def dumps(message: Any) -> bytes:
    return json.dumps(message).encode()


async def open_session(token: str | None = None) -> str:
    response = await post_json(
        APP,
        handshake_message("initialize", {"protocolVersion": HANDSHAKE, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
        post_headers(version=None, token=token),
    )
    assert response.status == 200, response.body
    session = response.header("mcp-session-id")
    assert session
    return session


# -- rejected requests: a table -------------------------------------------------------------------

LIST = modern_message("tools/list", request_id=1)


def _case(method: str, headers: dict[str, str], body: bytes, status: int, code: int, session: bool = False) -> dict[str, Any]:
    return {"method": method, "headers": headers, "body": body, "status": status, "code": code, "session": session}


BAD_REQUESTS: dict[str, Callable[[], dict[str, Any]]] = {
    "malformed-json": lambda: _case("POST", modern_headers(), b'{"jsonrpc": "2.0", "id": 1,', 400, -32700),
    "invalid-utf8": lambda: _case("POST", modern_headers(), b"\xff\xfe{}", 400, -32700),
    "empty-body": lambda: _case("POST", modern_headers(), b"", 400, -32700),
    "batch": lambda: _case("POST", modern_headers(), dumps([LIST, LIST]), 400, -32600),
    "not-an-object": lambda: _case("POST", modern_headers(), b'"tools/list"', 400, -32600),
    "wrong-jsonrpc": lambda: _case("POST", modern_headers(), dumps({**LIST, "jsonrpc": "1.0"}), 400, -32600),
    "bool-id": lambda: _case("POST", modern_headers(), dumps({**LIST, "id": True}), 400, -32600),
    "params-not-object": lambda: _case("POST", modern_headers(), dumps({**LIST, "params": [1]}), 400, -32600),
    "content-type-text": lambda: _case("POST", modern_headers(**{"content-type": "text/plain"}), dumps(LIST), 415, -32600),
    "content-type-missing": lambda: _case("POST", modern_headers(**{"content-type": None}), dumps(LIST), 415, -32600),
    "content-type-form": lambda: _case("POST", modern_headers(**{"content-type": "application/x-www-form-urlencoded"}), dumps(LIST), 415, -32600),
    "accept-json-only": lambda: _case("POST", modern_headers(accept="application/json"), dumps(LIST), 406, -32600),
    "accept-sse-only": lambda: _case("POST", modern_headers(accept="text/event-stream"), dumps(LIST), 406, -32600),
    "accept-missing": lambda: _case("POST", modern_headers(accept=None), dumps(LIST), 406, -32600),
    "modern-missing-meta": lambda: _case(
        "POST", modern_headers(), dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}), 400, -32602
    ),
    "modern-missing-params": lambda: _case("POST", modern_headers(), dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}), 400, -32602),
    "modern-meta-without-capabilities": lambda: _case(
        "POST", modern_headers(),
        dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": MODERN}}}),
        400, -32602,
    ),
    "modern-header-mismatch": lambda: _case("POST", modern_headers(), dumps(modern_message("tools/list", version=HANDSHAKE, request_id=1)), 400, -32020),
    # The reverse: a 2026-07-28 body under a handshake-era header, or none (was -32600 "Mcp-Session-Id required").
    "modern-body-handshake-header": lambda: _case(
        "POST", modern_headers(**{"mcp-protocol-version": HANDSHAKE}), dumps(modern_message("tools/list", request_id=1)), 400, -32020
    ),
    "modern-body-no-version-header": lambda: _case(
        "POST", modern_headers(**{"mcp-protocol-version": None}), dumps(modern_message("tools/list", request_id=1)), 400, -32020
    ),
    "modern-unsupported-version": lambda: _case(
        "POST", modern_headers(**{"mcp-protocol-version": "2099-01-01"}), dumps(modern_message("tools/list", version="2099-01-01", request_id=1)), 400, -32022
    ),
    "modern-initialize-removed": lambda: _case(
        "POST", modern_headers("initialize"), dumps(modern_message("initialize", {"protocolVersion": MODERN, "capabilities": {}}, request_id=1)), 404, -32601
    ),
    "modern-ping-removed": lambda: _case("POST", modern_headers("ping"), dumps(modern_message("ping", request_id=1)), 404, -32601),
    "modern-unknown-method": lambda: _case("POST", modern_headers("nope/nothing"), dumps(modern_message("nope/nothing", request_id=1)), 404, -32601),
    "modern-mcp-method-mismatch": lambda: _case("POST", modern_headers("tools/call"), dumps(LIST), 400, -32020),
    "modern-mcp-name-mismatch": lambda: _case(
        "POST", modern_headers("tools/call", **{"mcp-name": "deploy"}),
        dumps(modern_message("tools/call", {"name": "echo", "arguments": {"text": "x"}}, request_id=1)), 400, -32020,
    ),
    "handshake-missing-session": lambda: _case("POST", post_headers(version=HANDSHAKE), dumps(handshake_message("tools/list", request_id=1)), 400, -32600),
    "handshake-unknown-session": lambda: _case(
        "POST", post_headers(version=HANDSHAKE, session="no-such-session"), dumps(handshake_message("tools/list", request_id=1)), 404, -32600
    ),
    "handshake-unsupported-version": lambda: _case(
        "POST", post_headers(version="1999-01-01"), dumps(handshake_message("tools/list", request_id=1)), 400, -32600, session=True
    ),
    "handshake-initialize-without-version": lambda: _case(
        "POST", post_headers(version=None), dumps(handshake_message("initialize", {"capabilities": {}}, request_id=1)), 400, -32602
    ),
    "bad-origin": lambda: _case("POST", modern_headers(origin="http://evil.example"), dumps(LIST), 403, -32600),
    "null-origin": lambda: _case("POST", modern_headers(origin="null"), dumps(LIST), 403, -32600),
    "bad-host": lambda: _case("POST", modern_headers(host="evil.example"), dumps(LIST), 403, -32600),
    "bad-host-on-get": lambda: _case("GET", {"host": "evil.example:8000", "accept": "text/event-stream"}, b"", 403, -32600),
    "put": lambda: _case("PUT", modern_headers(), dumps(LIST), 405, -32600),
    "patch": lambda: _case("PATCH", modern_headers(), dumps(LIST), 405, -32600),
    "modern-get": lambda: _case("GET", {"host": "testserver", "accept": "text/event-stream", "mcp-protocol-version": MODERN}, b"", 405, -32600),
    "modern-delete": lambda: _case("DELETE", {"host": "testserver", "mcp-protocol-version": MODERN}, b"", 405, -32600),
    "handshake-get-without-session": lambda: _case("GET", {"host": "testserver", "accept": "text/event-stream"}, b"", 400, -32600),
    "handshake-get-not-accepting-sse": lambda: _case("GET", {"host": "testserver", "accept": "application/json"}, b"", 406, -32600),
    "handshake-get-unknown-session": lambda: _case("GET", {"host": "testserver", "accept": "text/event-stream", "mcp-session-id": "nope"}, b"", 404, -32600),
    "handshake-delete-without-session": lambda: _case("DELETE", {"host": "testserver"}, b"", 400, -32600),
    "handshake-delete-unknown-session": lambda: _case("DELETE", {"host": "testserver", "mcp-session-id": "nope"}, b"", 404, -32600),
}


@pytest.mark.parametrize("name", list(BAD_REQUESTS))
async def test_endpoint_rejects_bad_request_with_status_and_jsonrpc_error(name: str) -> None:
    case = BAD_REQUESTS[name]()
    headers = dict(case["headers"])
    if case["session"]:
        headers["mcp-session-id"] = await open_session()
    before = await sync_to_async(db_counts)()
    response = await request(APP, case["method"], headers=headers, body=case["body"])
    assert_rpc_error(response, case["status"], case["code"])
    assert await sync_to_async(db_counts)() == before


async def test_endpoint_rejection_echoes_the_request_id() -> None:
    response = await post_json(APP, modern_message("tools/list", request_id="req-7"), modern_headers("tools/call"))
    assert_rpc_error(response, 400, -32020, request_id="req-7")
    response = await request(APP, headers=modern_headers(), body=b"{")
    assert_rpc_error(response, 400, -32700, request_id=None)


async def test_endpoint_unsupported_version_lists_supported_and_requested() -> None:
    response = await post_json(APP, modern_message("tools/list", version="2099-01-01"), modern_headers(**{"mcp-protocol-version": "2099-01-01"}))
    error = assert_rpc_error(response, 400, -32022)
    assert error["data"] == {"supported": [MODERN], "requested": "2099-01-01"}


async def test_endpoint_405_names_allowed_methods() -> None:
    put = await request(APP, "PUT", headers=modern_headers(), body=dumps(LIST))
    assert put.header("allow") == "GET, POST, DELETE"
    get = await request(APP, "GET", headers={"host": "testserver", "accept": "text/event-stream", "mcp-protocol-version": MODERN})
    assert get.header("allow") == "POST"


async def test_endpoint_allowed_origin_and_configured_origins() -> None:
    for origin in ("http://localhost:3000", "http://127.0.0.1", "http://[::1]:8000"):
        ok = await call_modern(APP, "tools/list", headers={"origin": origin})
        assert ok.status == 200 and "tools" in ok.json()["result"], origin
    with override_settings(MCP_TOOLS={**settings.MCP_TOOLS, "ALLOWED_ORIGINS": ["https://app.example"]}):
        listed = await call_modern(APP, "tools/list", headers={"origin": "https://app.example"})
        assert listed.status == 200
        refused = await call_modern(APP, "tools/list", headers={"origin": "http://localhost:3000"})
        assert_rpc_error(refused, 403, -32600)


async def test_endpoint_allowed_origins_match_whole_origins_only() -> None:
    """ALLOWED_ORIGINS given as one string let in every origin that was a substring of it
    ("https://app.example.co", "https://app", "h"): now such a value answers no origin (a 500,
    ImproperlyConfigured logged; mcp_tools.E009), and a list matches whole origins, in any case."""
    with override_settings(MCP_TOOLS={**settings.MCP_TOOLS, "ALLOWED_ORIGINS": "https://app.example.com"}):
        for origin in ("https://app.example.co", "https://app.example.com"):
            answer = await call_modern(APP, "tools/list", headers={"origin": origin})
            assert answer.status == 500 and answer.header("access-control-allow-origin") is None, origin
    with override_settings(MCP_TOOLS={**settings.MCP_TOOLS, "ALLOWED_ORIGINS": ["https://App.Example.com"]}):
        assert (await call_modern(APP, "tools/list", headers={"origin": "https://app.example.com"})).status == 200
        for origin in ("https://app.example.co", "https://app", "https://app.example.com.evil.test"):
            assert_rpc_error(await call_modern(APP, "tools/list", headers={"origin": origin}), 403, -32600)
    # A set, as some sites wrote it before the settings table: still whole origins.
    with override_settings(MCP_TOOLS={**settings.MCP_TOOLS, "ALLOWED_ORIGINS": {"https://app.example.com"}}):
        assert (await call_modern(APP, "tools/list", headers={"origin": "https://app.example.com"})).status == 200
        assert_rpc_error(await call_modern(APP, "tools/list", headers={"origin": "https://app.example.co"}), 403, -32600)


async def test_endpoint_allowed_origins_bare_wildcard_allows_any_origin() -> None:
    """docs/settings.md: ALLOWED_ORIGINS "*" allows any origin (W001), as ["*"] does. The bare string
    was refused when read, so every request, with an Origin or without, was a 500."""
    with override_settings(MCP_TOOLS={**settings.MCP_TOOLS, "ALLOWED_ORIGINS": "*"}):
        for origin in ("https://evil.example", "http://localhost:3000"):
            answer = await call_modern(APP, "tools/list", headers={"origin": origin})
            assert answer.status == 200 and "tools" in answer.json()["result"], origin
            assert answer.header("access-control-allow-origin") == origin
        assert (await call_modern(APP, "tools/list")).status == 200


# -- body size ---------------------------------------------------------------------------------

SMALL_LIMIT = {**settings.MCP_TOOLS, "MAX_BODY_BYTES": 256}


async def test_endpoint_body_over_limit_declared_is_413() -> None:
    body = dumps(modern_message("tools/call", {"name": "echo", "arguments": {"text": "x" * 400}}))
    with override_settings(MCP_TOOLS=SMALL_LIMIT):
        headers = modern_headers("tools/call", **{"mcp-name": "echo", "content-length": str(len(body))})
        response = await request(APP, headers=headers, body=body)
    error = assert_rpc_error(response, 413, -32600)
    assert "256" in error["message"]


async def test_endpoint_body_over_limit_streamed_without_length_is_413() -> None:
    body = dumps(modern_message("tools/call", {"name": "echo", "arguments": {"text": "x" * 400}}))
    with override_settings(MCP_TOOLS=SMALL_LIMIT):
        response = await request(APP, headers=modern_headers("tools/call", **{"mcp-name": "echo"}), chunks=[body[:200], body[200:], b""])
    assert_rpc_error(response, 413, -32600)


async def test_endpoint_body_under_limit_in_chunks_is_served() -> None:
    body = dumps(modern_message("tools/call", {"name": "echo", "arguments": {"text": "hi"}}))
    with override_settings(MCP_TOOLS={**settings.MCP_TOOLS, "MAX_BODY_BYTES": len(body)}):
        response = await request(APP, headers=modern_headers("tools/call", **{"mcp-name": "echo"}), chunks=[body[:10], body[10:]])
    assert response.status == 200
    assert response.json()["result"]["content"] == [{"type": "text", "text": "hi"}]


async def test_endpoint_limit_follows_setting_changes() -> None:
    body = dumps(modern_message("tools/list"))
    with override_settings(MCP_TOOLS={**settings.MCP_TOOLS, "MAX_BODY_BYTES": len(body) - 1}):
        assert (await request(APP, headers=modern_headers(), body=body)).status == 413
    assert (await request(APP, headers=modern_headers(), body=body)).status == 200


# -- tools/call errors (HTTP 200: a JSON-RPC error, or a tool error for invalid arguments) -----------


async def test_tools_call_unknown_tool_is_invalid_params() -> None:
    before = await sync_to_async(db_counts)()
    response = await call_modern(APP, "tools/call", {"name": "no_such_tool", "arguments": {}})
    error = assert_rpc_error(response, 200, -32602)
    assert error["message"] == "Unknown tool: no_such_tool"
    assert await sync_to_async(db_counts)() == before


@pytest.mark.parametrize(
    ("name", "arguments", "field"),
    [
        ("search_products", {"limit": 1000}, "limit"),
        ("search_products", {"limit": "many"}, "limit"),
        ("search_products", {"query": 5}, "query"),
        ("search_products", {"surprise": 1}, "surprise"),
        ("echo", {}, "text"),
        ("deploy", {"service": ["a"]}, "service"),
    ],
    ids=["above-max", "wrong-type", "int-for-string", "unknown-argument", "missing", "ctx-tool"],
)
async def test_tools_call_invalid_arguments_name_the_field(name: str, arguments: dict[str, Any], field: str) -> None:
    """A tool execution error (isError) the model can correct, not -32602 (server/tools, Error Handling)."""
    before = await sync_to_async(db_counts)()
    response = await call_modern(APP, "tools/call", {"name": name, "arguments": arguments})
    assert response.status == 200
    assert field in [entry["field"] for entry in argument_errors(response.json())]
    assert await sync_to_async(db_counts)() == before


@pytest.mark.parametrize("arguments", [["x"], "x", 3])
async def test_tools_call_arguments_not_an_object(arguments: Any) -> None:
    response = await call_modern(APP, "tools/call", {"name": "echo", "arguments": arguments})
    assert "must be an object" in assert_rpc_error(response, 200, -32602)["message"]


async def test_tools_call_name_not_a_string() -> None:
    # 2026-07-28: no Mcp-Name header can mirror a non-string name.
    response = await post_json(APP, modern_message("tools/call", {"name": 5}), modern_headers("tools/call", **{"mcp-name": "5"}))
    assert_rpc_error(response, 400, -32020)
    session = await open_session()
    response = await post_json(APP, handshake_message("tools/call", {"name": 5}), post_headers(version=HANDSHAKE, session=session))
    assert '"name"' in assert_rpc_error(response, 200, -32602)["message"]


async def test_permission_tool_hidden_from_anonymous_and_not_callable() -> None:
    listed = await call_modern(APP, "tools/list")
    names = [t["name"] for t in listed.json()["result"]["tools"]]
    assert "restock" not in names and "echo" in names
    before = await sync_to_async(db_counts)()
    response = await call_modern(APP, "tools/call", {"name": "restock", "arguments": {"sku": "A", "quantity": 1}})
    error = assert_rpc_error(response, 200, -32602)
    assert error["message"] == "Unknown tool: restock"  # indistinguishable from a tool that does not exist
    assert await sync_to_async(db_counts)() == before


async def test_permission_tool_hidden_from_user_without_the_permission() -> None:
    token = await sync_to_async(create_user_token)("plain")
    listed = await call_modern(APP, "tools/list", token=token)
    assert "restock" not in [t["name"] for t in listed.json()["result"]["tools"]]
    response = await call_modern(APP, "tools/call", {"name": "restock", "arguments": {"sku": "A", "quantity": 1}}, token=token)
    assert_rpc_error(response, 200, -32602)


async def test_permission_tool_listed_and_callable_with_the_permission() -> None:
    token = await sync_to_async(create_user_token)("clerk", ("inventory.change_product",))
    await sync_to_async(Product.objects.create)(sku="A-1", name="Anvil", price=10, stock=2)
    listed = await call_modern(APP, "tools/list", token=token)
    result = listed.json()["result"]
    assert "restock" in [t["name"] for t in result["tools"]]
    assert result["cacheScope"] == "private"
    response = await call_modern(APP, "tools/call", {"name": "restock", "arguments": {"sku": "A-1", "quantity": 3}}, token=token)
    assert response.json()["result"]["structuredContent"]["stock"] == 5


async def test_invalid_token_is_401_with_challenge() -> None:
    response = await call_modern(APP, "tools/list", token="not-a-real-token")
    assert_rpc_error(response, 401, -32600)
    assert response.header("www-authenticate") == "Token"


# -- 2025-11-25 session flow -------------------------------------------------------------------------


async def test_handshake_session_lifecycle() -> None:
    init = await post_json(
        APP,
        handshake_message("initialize", {"protocolVersion": HANDSHAKE, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}, request_id=0),
        post_headers(version=None),
    )
    assert init.status == 200
    body = init.json()
    assert body["id"] == 0
    assert body["result"]["protocolVersion"] == HANDSHAKE
    assert "tools" in body["result"]["capabilities"]
    session = init.header("mcp-session-id")
    assert session and len(session) >= 16
    assert all(0x21 <= ord(ch) <= 0x7E for ch in session), "Mcp-Session-Id must be visible ASCII"

    headers = post_headers(version=HANDSHAKE, session=session)
    initialized = await post_json(APP, handshake_message("notifications/initialized", notification=True), headers)
    assert (initialized.status, initialized.body) == (202, b"")

    listed = await post_json(APP, handshake_message("tools/list", request_id=1), headers)
    assert listed.status == 200
    assert listed.header("mcp-session-id") == session
    assert "echo" in [t["name"] for t in listed.json()["result"]["tools"]]

    ping = await post_json(APP, handshake_message("ping", request_id=2), headers)
    assert ping.json() == {"jsonrpc": "2.0", "id": 2, "result": {}}

    deleted = await request(APP, "DELETE", headers={"host": "testserver", "mcp-session-id": session, "mcp-protocol-version": HANDSHAKE})
    assert (deleted.status, deleted.body) == (204, b"")
    assert not await sync_to_async(McpSession.objects.filter(id=session).exists)()

    after = await post_json(APP, handshake_message("tools/list", request_id=3), headers)
    assert_rpc_error(after, 404, -32600, request_id=3)
    again = await request(APP, "DELETE", headers={"host": "testserver", "mcp-session-id": session})
    assert_rpc_error(again, 404, -32600)


async def test_handshake_negotiates_down_to_a_known_version() -> None:
    for asked, answered in (("2025-06-18", "2025-06-18"), ("2031-01-01", HANDSHAKE)):
        init = await post_json(APP, handshake_message("initialize", {"protocolVersion": asked, "capabilities": {}}), post_headers(version=None))
        assert init.json()["result"]["protocolVersion"] == answered


async def test_handshake_session_is_bound_to_its_principal() -> None:
    token = await sync_to_async(create_user_token)("owner")
    session = await open_session(token)
    mine = await post_json(APP, handshake_message("tools/list"), post_headers(version=HANDSHAKE, session=session, token=token))
    assert mine.status == 200
    anonymous = await post_json(APP, handshake_message("tools/list"), post_headers(version=HANDSHAKE, session=session))
    assert_rpc_error(anonymous, 404, -32600)
    other = await sync_to_async(create_user_token)("intruder")
    theirs = await request(APP, "DELETE", headers={"host": "testserver", "mcp-session-id": session, "authorization": f"Token {other}"})
    assert_rpc_error(theirs, 404, -32600)
    assert await sync_to_async(McpSession.objects.filter(id=session).exists)()


async def test_handshake_unknown_method_is_method_not_found_with_200() -> None:
    session = await open_session()
    response = await post_json(APP, handshake_message("server/discover", request_id=9), post_headers(version=HANDSHAKE, session=session))
    assert_rpc_error(response, 200, -32601, request_id=9)


async def test_full_asgi_application_routes_mcp_and_django() -> None:
    from demo_site.asgi import application

    response = await post_json(application, modern_message("tools/list"), modern_headers())
    assert response.status == 200
    assert "echo" in [t["name"] for t in response.json()["result"]["tools"]]
    page = await request(application, "GET", "/", headers={"host": "testserver"})
    assert page.status == 200
    assert b"/mcp" in page.body


# -- pagination --------------------------------------------------------------------------------


def _numbered(i: int) -> Any:
    def fn() -> str:
        return str(i)

    fn.__name__ = fn.__qualname__ = f"page_probe_{i:02d}"
    return fn


async def _walk(method: str = "tools/list", key: str = "tools") -> list[list[str]]:
    pages: list[list[str]] = []
    cursor = None
    while True:
        params = {"cursor": cursor} if cursor is not None else {}
        response = await call_modern(APP, method, params)
        assert response.status == 200
        result = response.json()["result"]
        pages.append([item["name"] for item in result[key]])
        cursor = result.get("nextCursor")
        if cursor is None:
            return pages
        assert isinstance(cursor, str)
        assert len(pages) < 100, "pagination does not terminate"


async def test_tools_list_pagination_walks_every_visible_tool_once() -> None:
    extra = [make_tool(_numbered(i)) for i in range(12)]
    with registry.registered_temporarily(*extra), override_settings(MCP_TOOLS={**settings.MCP_TOOLS, "PAGE_SIZE": 7}):
        pages = await _walk()
        expected = [t.name for t in registry.tools if not t.permissions]
    assert all(len(page) == 7 for page in pages[:-1])
    assert 1 <= len(pages[-1]) <= 7
    assert len(pages) == math.ceil(len(expected) / 7)
    flat = [name for page in pages for name in page]
    assert flat == expected
    assert len(set(flat)) == len(flat)
    assert {f"page_probe_{i:02d}" for i in range(12)} <= set(flat)


async def test_tools_list_without_pagination_fits_one_page() -> None:
    pages = await _walk()
    assert len(pages) == 1
    assert pages[0] == [t.name for t in registry.tools if not t.permissions]


@pytest.mark.parametrize(
    "cursor",
    ["!!!", base64.urlsafe_b64encode(b"abc").decode(), base64.urlsafe_b64encode(b"-1").decode(), base64.urlsafe_b64encode(b"100000").decode(), 5, ["x"]],
    ids=["not-base64", "not-a-number", "negative", "past-the-end", "int", "list"],
)
async def test_list_invalid_cursor_is_invalid_params(cursor: Any) -> None:
    for method in ("tools/list", "prompts/list", "resources/list"):
        response = await call_modern(APP, method, {"cursor": cursor})
        error = assert_rpc_error(response, 200, -32602)
        assert error["message"] == "Invalid cursor"


async def test_internal_failure_is_a_json_rpc_error_without_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure of the server itself (here: the session store) answers -32603 with no stack trace."""
    from mcp_tools import store

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("database is on fire")

    monkeypatch.setattr(store, "create_session", broken)
    response = await post_json(
        APP,
        handshake_message("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
        post_headers(version=None),
    )
    assert response.status == 500
    body = response.json()
    assert body["error"] == {"code": -32603, "message": "Internal error"}
    assert b"fire" not in response.body and b"Traceback" not in response.body


async def test_server_info_holds_strings_only() -> None:
    """SERVER_VERSION = 2 went out as a number in serverInfo, which the official client's
    Implementation model refuses (every handshake failed there): the value is refused where it is
    read (an internal error, logged naming the setting; mcp_tools.E011), and a string version goes out as given."""
    from mcp.types import Implementation

    with override_settings(MCP_TOOLS={**settings.MCP_TOOLS, "SERVER_VERSION": 2}):
        assert (await call_modern(APP, "server/discover")).json()["error"]["code"] == -32603
    with override_settings(MCP_TOOLS={**settings.MCP_TOOLS, "SERVER_VERSION": "2"}):
        result = (await call_modern(APP, "server/discover")).json()["result"]
    info = result.get("serverInfo") or result["_meta"]["io.modelcontextprotocol/serverInfo"]
    assert Implementation.model_validate(info).version == "2"
