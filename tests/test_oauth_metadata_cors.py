"""The protected resource metadata (RFC 9728) answers a browser's CORS preflight.

A browser client (the TypeScript SDK, the MCP Inspector) sends ``MCP-Protocol-Version`` with
the metadata GET: the browser asks with ``OPTIONS`` first, which was answered 405, and then
never fetched the document.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.test import RequestFactory, override_settings

from tests.asgi_client import request

pytestmark = [pytest.mark.django_db]

PREFLIGHT = {"host": "testserver", "origin": "http://localhost:6274", "access-control-request-method": "GET",
             "access-control-request-headers": "MCP-Protocol-Version, x-custom"}


def oauth_on() -> Any:
    from django.conf import settings

    conf = {key: value for key, value in settings.MCP_TOOLS.items() if key != "OAUTH"}
    conf["OAUTH"] = {"AUTHORIZATION_SERVERS": ["/o"], "TOKEN_VERIFIER": "mcp_tools.contrib.oauth_toolkit.OAuthToolkitVerifier"}
    return override_settings(MCP_TOOLS=conf)


def site() -> Any:
    from django.core.handlers.asgi import ASGIHandler

    from mcp_tools.routing import mcp_asgi_app

    return mcp_asgi_app(ASGIHandler())


def assert_preflight_answered(status: int, headers: dict[str, str], allowed: str) -> None:
    assert status == 204, (status, headers)
    assert headers["access-control-allow-origin"] == "*"
    assert {m.strip() for m in headers["access-control-allow-methods"].split(",")} == {"GET", "HEAD", "OPTIONS"}
    assert headers["access-control-allow-headers"] == allowed
    assert int(headers["access-control-max-age"]) > 0


@pytest.mark.parametrize("path", ["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"])
async def test_asgi_metadata_answers_a_preflight(path: str) -> None:
    with oauth_on():
        response = await request(site(), "OPTIONS", path, headers=PREFLIGHT)
        headers = {name: response.header(name) or "" for name in (
            "access-control-allow-origin", "access-control-allow-methods", "access-control-allow-headers", "access-control-max-age")}
        assert_preflight_answered(response.status, headers, "mcp-protocol-version, x-custom")
        assert response.body == b""
        # Something that is no list of header names: any header (no credentials are sent).
        response = await request(site(), "OPTIONS", path, headers={**PREFLIGHT, "access-control-request-headers": "a b"})
        assert response.header("access-control-allow-headers") == "*"
        # The GET it allows.
        response = await request(site(), "GET", path, headers={"host": "testserver", "mcp-protocol-version": "2025-11-25"})
        assert response.status == 200 and response.header("access-control-allow-origin") == "*"
        response = await request(site(), "POST", path, headers={"host": "testserver"})
        assert response.status == 405 and response.header("allow") == "GET, HEAD, OPTIONS"


def test_django_view_answers_a_preflight() -> None:
    from mcp_tools.transports.oauth import protected_resource_metadata

    factory = RequestFactory()
    meta = {"HTTP_ORIGIN": PREFLIGHT["origin"], "HTTP_ACCESS_CONTROL_REQUEST_METHOD": "GET",
            "HTTP_ACCESS_CONTROL_REQUEST_HEADERS": "mcp-protocol-version"}
    with oauth_on():
        response = protected_resource_metadata(factory.options("/.well-known/oauth-protected-resource/mcp-via-django", **meta),
                                               "mcp-via-django")
        assert_preflight_answered(response.status_code, {k.lower(): v for k, v in response.items()}, "mcp-protocol-version")
        assert response.content == b""
        assert protected_resource_metadata(factory.put("/.well-known/oauth-protected-resource"))["Allow"] == "GET, HEAD, OPTIONS"


@pytest.mark.parametrize("path", ["/.well-known/oauth-protected-resource/mcp-via-django", "/.well-known/oauth-protected-resource"])
@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE"])
async def test_the_urlconf_metadata_answers_an_unsafe_method_405_behind_csrf_middleware(path: str, method: str) -> None:
    """Through Django's middleware (the demo's CsrfViewMiddleware), as the URLconf mount serves it: the
    view answered a POST with Django's CSRF 403 HTML page where the ASGI mount answers 405 with Allow.
    The document is public and read-only: no CSRF token is asked of a cross-site reader."""
    from django.conf import settings
    from django.core.handlers.asgi import ASGIHandler

    assert "django.middleware.csrf.CsrfViewMiddleware" in settings.MIDDLEWARE
    with oauth_on():
        response = await request(ASGIHandler(), method, path, headers={"host": "testserver", "origin": "https://elsewhere.example"})
        assert response.status == 405, (response.status, response.body[:200])
        assert response.header("allow") == "GET, HEAD, OPTIONS"
        assert response.header("access-control-allow-origin") == "*"  # as the ASGI mount's 405
        assert (await request(ASGIHandler(), "GET", path, headers={"host": "testserver"})).status == 200
