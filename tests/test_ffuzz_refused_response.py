"""A 2025-11-25 client response the server refuses is answered with ``"id": null``.

JSON-RPC 2.0 (5): an error response MUST carry ``id`` (null when it cannot name the request). A
refused client response answered a JSON-RPC error with no ``id`` member at all, while one whose
``error`` is malformed already answered ``"id": null`` (docs/protocol.md says so of both).
"""
from __future__ import annotations

from typing import Any

import pytest

from tests.asgi_client import HANDSHAKE, post_headers, post_json
from tests.test_http_spec_edges import APP, _in_memory_layer, open_session  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("response", [
    {"result": {}},  # a response to a call the server never made
    {"error": {"code": -1, "message": "no"}},
    {"error": "boom"},  # not a JSON-RPC error object (parse_body's refusal)
])
async def test_a_refused_client_response_is_answered_with_a_null_id(response: dict[str, Any]) -> None:
    session = await open_session({"elicitation": {}})
    r = await post_json(APP, {"jsonrpc": "2.0", "id": "mcp_tools:999:1", **response}, post_headers(version=HANDSHAKE, session=session))
    assert r.status == 400, r.body
    body = r.json()
    assert set(body) == {"jsonrpc", "id", "error"} and body["id"] is None, body
    assert body["error"]["code"] == -32600, body
