"""The URLconf mount (``path("mcp", include("mcp_tools.urls"))``) served by WSGI (plain runserver,
gunicorn) cannot answer: it says why and what to do, to the client and once in the server log,
instead of a bare 500 and Django's 'Internal Server Error'."""

from __future__ import annotations

import json
import logging

import pytest
from django.test import Client

from tests.clients import create_user_with_token

pytestmark = pytest.mark.django_db(transaction=True)


def post(token: str) -> tuple[int, str, dict[str, object]]:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    response = Client().post(  # Django's test client is a WSGI-style handler: no ASGI scope
        "/mcp-via-django", json.dumps(body), content_type="application/json",
        HTTP_ACCEPT="application/json, text/event-stream", HTTP_AUTHORIZATION=f"Token {token}",
        HTTP_MCP_PROTOCOL_VERSION="2025-11-25",
    )
    return response.status_code, response["Content-Type"], json.loads(response.content)


def test_the_urlconf_mount_under_wsgi_says_to_serve_the_site_over_asgi(
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    from mcp_tools.transports import view

    monkeypatch.setattr(view, "_said_needs_asgi", False)
    token = create_user_with_token("visitor")
    with caplog.at_level(logging.INFO, logger="mcp_tools.transports.view"):
        status, content_type, reply = post(token)
        assert post(token)[0] == 500
    assert status == 500
    assert content_type == "application/json"
    assert reply["jsonrpc"] == "2.0" and reply["id"] is None
    message = reply["error"]["message"]  # type: ignore[index]
    assert "ASGI" in message and "daphne" in message and "uvicorn" in message and "INSTALLED_APPS" in message
    said = [r for r in caplog.records if r.name == "mcp_tools.transports.view"]
    assert [(r.levelno, r.getMessage()) for r in said] == [(logging.ERROR, message)], "said once per process, at error level"
