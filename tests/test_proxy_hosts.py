"""Behind a reverse proxy, the endpoint reads the request's host and scheme as Django does.

nginx's default (``proxy_set_header Host $proxy_host``) sends the backend's address as ``Host`` and
the public name as ``X-Forwarded-Host``. With ``USE_X_FORWARDED_HOST`` Django's admin answered 200
while MCP answered 403 "invalid Host header": its check read ``Host`` alone. The OAuth resource
(the metadata's ``resource``, the audience a token must name) was built from ``Host`` and the ASGI
scheme too, so behind such a proxy it named ``http://backend:8000/mcp``, not the URL the client called.
"""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.core.exceptions import DisallowedHost
from django.core.handlers.asgi import ASGIRequest
from django.test import override_settings

from mcp_tools.server.oauth import origin_of
from mcp_tools.transports.http import HttpError, McpEndpoint, _headers, check_origin
from tests.asgi_client import modern_message, post_headers, request

pytestmark = pytest.mark.django_db(transaction=True)

PROXIED = {"host": "backend:8000", "x-forwarded-host": "mcp.example.com", "x-forwarded-proto": "https"}
BEHIND_PROXY = {"ALLOWED_HOSTS": ["mcp.example.com"], "USE_X_FORWARDED_HOST": True,
                "SECURE_PROXY_SSL_HEADER": ("HTTP_X_FORWARDED_PROTO", "https")}


def _scope(headers: dict[str, str], server: tuple[str, int] | None = ("backend", 8000)) -> dict[str, Any]:
    return {"type": "http", "method": "GET", "scheme": "http", "path": "/mcp", "root_path": "", "query_string": b"",
            "headers": [(name.encode(), value.encode()) for name, value in headers.items()],
            **({"server": server} if server else {})}


def _django_allows(headers: dict[str, str]) -> bool:
    try:
        ASGIRequest(_scope(headers), io.BytesIO()).get_host()
    except DisallowedHost:
        return False
    return True


def _mcp_allows(headers: dict[str, str]) -> bool:
    try:
        check_origin(_headers(_scope(headers)))
    except HttpError as exc:
        assert exc.status == 403 and "invalid Host header" in exc.error.message
        assert "ALLOWED_HOSTS" in exc.error.message  # what to do (a review of the first hour)
        return False
    return True


async def test_the_endpoint_answers_behind_a_proxy_that_rewrites_host() -> None:
    """The review's repro: Host backend:8000 + X-Forwarded-Host mcp.example.com got 403."""
    body = json.dumps(modern_message("tools/list", {})).encode()
    with override_settings(**BEHIND_PROXY):
        response = await request(McpEndpoint(), "POST", headers=post_headers(extra={"mcp-method": "tools/list", **PROXIED}), body=body)
    assert response.status == 200, response.body
    assert "tools" in response.json()["result"]


@pytest.mark.parametrize("forwarded", [True, False])
@pytest.mark.parametrize("headers", [
    PROXIED,
    {"host": "mcp.example.com", "x-forwarded-host": "evil.example"},
    {"host": "mcp.example.com:8443"},
    {"host": "backend:8000", "x-forwarded-host": "mcp.example.com:8443"},
    {"host": "backend:8000", "x-forwarded-host": "mcp.example.com, evil.example"},  # two proxies' values
    {"host": "backend:8000", "x-forwarded-host": ""},
    {"host": "evil.example"},
])
def test_the_host_check_gives_djangos_verdict(headers: dict[str, str], forwarded: bool) -> None:
    with override_settings(ALLOWED_HOSTS=["mcp.example.com"], USE_X_FORWARDED_HOST=forwarded):
        assert _mcp_allows(headers) == _django_allows(headers)


def test_the_verdict_follows_a_change_of_use_x_forwarded_host() -> None:
    with override_settings(ALLOWED_HOSTS=["mcp.example.com"]):
        assert not _mcp_allows(PROXIED)
        with override_settings(USE_X_FORWARDED_HOST=True):
            assert _mcp_allows(PROXIED)
        assert not _mcp_allows(PROXIED)


@pytest.mark.parametrize("proxy", [
    {},
    {"USE_X_FORWARDED_HOST": True},
    {"SECURE_PROXY_SSL_HEADER": ("HTTP_X_FORWARDED_PROTO", "https")},
    BEHIND_PROXY,
    {"USE_X_FORWARDED_PORT": True},
])
@pytest.mark.parametrize(("headers", "server"), [
    (PROXIED, ("backend", 8000)),
    ({"host": "backend:8000", "x-forwarded-proto": "http"}, ("backend", 8000)),
    ({"x-forwarded-proto": "https, http"}, ("backend", 443)),
    ({"x-forwarded-proto": "https"}, ("backend", 8000)),
    ({"x-forwarded-port": "8443"}, ("backend", 80)),
    ({}, ("testserver", 80)),
])
def test_the_oauth_origin_is_djangos_absolute_uri(proxy: dict[str, Any], headers: dict[str, str], server: tuple[str, int]) -> None:
    """What ``request.build_absolute_uri`` gives, behind whatever proxy Django is told to trust."""
    with override_settings(**{**proxy, "ALLOWED_HOSTS": ["*"]}):
        django = ASGIRequest(_scope(headers, server), io.BytesIO()).build_absolute_uri("/").rstrip("/")
        assert origin_of(_scope(headers, server), _headers(_scope(headers, server))) == django


async def test_the_resource_behind_a_proxy_is_the_url_the_client_called() -> None:
    from tests.test_oauth import _challenge, _oauth_on, _site

    with override_settings(**BEHIND_PROXY), _oauth_on():
        body = json.dumps(modern_message("tools/list", {})).encode()
        response = await request(_site(), "POST", "/mcp", headers=post_headers(extra={"mcp-method": "tools/list", **PROXIED}), body=body)
    assert response.status == 401, response.body
    assert _challenge(response)["resource_metadata"] == "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
