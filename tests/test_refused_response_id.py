"""How a 2025-11-25 client response the server refuses is answered: what the MCP schema allows.

A well-formed response the server cannot accept gets a JSON-RPC error with no ``id`` member: the
2025-11-25 transport says such a body "MAY comprise a JSON-RPC error response that has no id", and
the schema's ``JSONRPCErrorResponse.id`` is an optional ``RequestId`` (a string or an integer), so
``"id": null`` would not validate. A message that is not valid JSON-RPC at all (a response whose
``error`` is no error object) is answered as any such message, with ``"id": null``.
"""
from __future__ import annotations

from typing import Any

import pytest

from tests.asgi_client import HANDSHAKE, post_headers, post_json
from tests.test_http_spec_edges import APP, _in_memory_layer, open_session  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


async def refused(response: dict[str, Any]) -> dict[str, Any]:
    session = await open_session({"elicitation": {}})
    r = await post_json(APP, {"jsonrpc": "2.0", "id": "mcp_tools:999:1", **response}, post_headers(version=HANDSHAKE, session=session))
    assert r.status == 400, r.body
    body: dict[str, Any] = r.json()
    return body


@pytest.mark.parametrize("response", [{"result": {}}, {"error": {"code": -1, "message": "no"}}])
async def test_a_well_formed_response_no_request_waits_for_is_refused_without_an_id(response: dict[str, Any]) -> None:
    body = await refused(response)
    assert set(body) == {"jsonrpc", "error"}, body
    assert body["error"]["code"] == -32600, body


async def test_a_response_whose_error_is_no_error_object_is_an_invalid_message_with_a_null_id() -> None:
    body = await refused({"error": "boom"})
    assert body["id"] is None and body["error"]["code"] == -32600, body
    assert body["error"]["message"].startswith("Invalid response:"), body


@pytest.mark.parametrize("message", [
    {"jsonrpc": "2.0", "id": "mcp_tools:999:1", "result": {}},  # a response
    {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}},  # a notification
])
@pytest.mark.parametrize(("session", "status"), [("no-such-session", 404), (None, 400)])
async def test_a_notification_or_response_refused_before_its_session_is_found_has_no_id(
        message: dict[str, Any], session: str | None, status: int) -> None:
    """Refused at the session's lookup (unknown, or no Mcp-Session-Id), they answered ``"id": null``."""
    r = await post_json(APP, message, post_headers(version=HANDSHAKE, session=session))
    assert r.status == status, r.body
    body = r.json()
    assert set(body) == {"jsonrpc", "error"}, body


async def test_a_request_refused_before_its_session_is_found_keeps_its_id() -> None:
    r = await post_json(APP, {"jsonrpc": "2.0", "id": 42, "method": "tools/list", "params": {}},
                        post_headers(version=HANDSHAKE, session="no-such-session"))
    assert r.status == 404 and r.json()["id"] == 42, r.body


@pytest.mark.parametrize("message", [
    {"jsonrpc": "2.0", "id": "mcp_tools:999:1", "result": {}},
    {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}},
])
async def test_a_notification_or_response_with_credentials_that_fail_gets_401_without_an_id(message: dict[str, Any]) -> None:
    r = await post_json(APP, message, post_headers(version=HANDSHAKE, session="any-session", token="not-a-real-token"))
    assert r.status == 401, r.body
    assert set(r.json()) == {"jsonrpc", "error"}, r.body
