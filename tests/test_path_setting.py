"""A review of the docs found it: docs/settings.md: PATH is "URL path of the endpoint (used by mcp_tools.routing)". A Django-style
path with a trailing slash must be served where it says (demo_setup even prints that URL)."""
from __future__ import annotations

import json

import pytest
from django.test import override_settings

from mcp_tools.routing import mcp_asgi_app
from tests.asgi_client import modern_message, post_headers, request

pytestmark = pytest.mark.django_db(transaction=True)


async def django_app(scope, receive, send):  # type: ignore[no-untyped-def]
    await send({"type": "http.response.start", "status": 418, "headers": []})
    await send({"type": "http.response.body", "body": b"django"})


async def test_path_with_trailing_slash_is_served_at_that_path() -> None:
    with override_settings(MCP_TOOLS={"ALLOW_ANONYMOUS": True, "PATH": "/api/mcp/"}):
        app = mcp_asgi_app(django_app)
        body = json.dumps(modern_message("tools/list", {})).encode()
        response = await request(app, "POST", path="/api/mcp/", headers=post_headers(extra={"mcp-method": "tools/list"}), body=body)
    assert response.status == 200, (response.status, response.body[:80])  # 418: handed to Django; MCP went to /api/mcp


async def test_a_path_without_trailing_slash_is_served_there_only() -> None:
    with override_settings(MCP_TOOLS={"ALLOW_ANONYMOUS": True, "PATH": "/api/mcp"}):
        app = mcp_asgi_app(django_app)
        body = json.dumps(modern_message("tools/list", {})).encode()
        served = await request(app, "POST", path="/api/mcp", headers=post_headers(extra={"mcp-method": "tools/list"}), body=body)
        other = await request(app, "POST", path="/api/mcp/", headers=post_headers(extra={"mcp-method": "tools/list"}), body=body)
    assert (served.status, other.status) == (200, 418)
