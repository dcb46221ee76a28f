"""django-oauth-toolkit's DRF authenticator among the authenticators MCP uses, as DOT's docs set it up.

``REST_FRAMEWORK["DEFAULT_AUTHENTICATION_CLASSES"] = [OAuth2Authentication, TokenAuthentication]``
with ``MCP_TOOLS["AUTHENTICATION_CLASSES"]`` unset: DOT's authenticator reads ``request.POST``
(oauthlib's ``extract_body``). The DRF request MCP builds for authentication kept the POST's
``Content-Type: application/json`` and ``Content-Length`` over an empty body and had no parsers,
so that read raised ``UnsupportedMediaType`` and every request with credentials (a DRF token, a
cookie, Basic, a DOT bearer with OAuth off) answered 500 "Internal error", on both mounts.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import override_settings

from tests.asgi_client import AsgiResponse, modern_message, post_headers, request
from tests.clients import create_user_with_token
from tests.test_oauth_bearer_transport import DOT_DRF, RESOURCE, RESTOCK, challenge, make_token, product, site, stock

pytest.importorskip("oauth2_provider")
pytestmark = [pytest.mark.django_db(transaction=True)]

#: DOT's documented DRF setup (its "Getting started" with Django REST framework).
DOT_DOCUMENTED = {"DEFAULT_AUTHENTICATION_CLASSES": [DOT_DRF, "rest_framework.authentication.TokenAuthentication"]}
#: The ASGI mount and the URLconf include of the demo site.
MOUNTS = ["/mcp", "/mcp-via-django"]


def mcp_settings(oauth: bool, anonymous: bool) -> Any:
    """MCP's own authenticator list unset (REST_FRAMEWORK's defaults apply), OAuth on or off."""
    from django.conf import settings

    conf = {key: value for key, value in settings.MCP_TOOLS.items() if key not in ("OAUTH", "AUTHENTICATION_CLASSES")}
    conf["ALLOW_ANONYMOUS"] = anonymous
    if oauth:
        conf["OAUTH"] = {"AUTHORIZATION_SERVERS": ["/o"], "TOKEN_VERIFIER": "mcp_tools.contrib.oauth_toolkit.OAuthToolkitVerifier",
                         "SCOPES_SUPPORTED": ["mcp", "inventory:write"], "REQUIRED_SCOPES": ["mcp"]}
    return override_settings(MCP_TOOLS=conf, REST_FRAMEWORK=DOT_DOCUMENTED)


async def restock(path: str, credentials: dict[str, str]) -> AsgiResponse:
    """A restock call as a real client sends it: with its body's Content-Type and Content-Length."""
    body = json.dumps(modern_message("tools/call", RESTOCK)).encode()
    extra = {"mcp-method": "tools/call", "mcp-name": "restock", "content-length": str(len(body)), **credentials}
    return await request(site(), "POST", path, headers=post_headers(extra=extra), body=body)


def drf_token() -> str:
    return create_user_with_token(f"dot-drf-{secrets.token_hex(4)}", ("inventory.change_product",))


@pytest.fixture
async def tokens() -> dict[str, str]:
    await sync_to_async(product)()
    return {"drf": await sync_to_async(drf_token)(),
            # A DOT token for both mounts with every scope (the verifier's checks all pass).
            "dot": await sync_to_async(make_token)([RESOURCE, RESOURCE + "-via-django"], "mcp inventory:write")}


@pytest.mark.parametrize("path", MOUNTS)
@pytest.mark.parametrize("oauth", [False, True], ids=["oauth-off", "oauth-on"])
async def test_drf_token_is_served_with_dots_authenticator_listed(tokens: dict[str, str], oauth: bool, path: str) -> None:
    """TokenAuthentication accepts the DRF token; DOT's authenticator, asked first, finds nothing."""
    with mcp_settings(oauth, anonymous=False):
        response = await restock(path, {"authorization": f"Token {tokens['drf']}"})
    assert response.status == 200, (response.status, response.body[:300])
    assert "error" not in response.json() and not response.json()["result"].get("isError"), response.body[:300]
    assert await sync_to_async(stock)() == 6


@pytest.mark.parametrize("path", MOUNTS)
@pytest.mark.parametrize("oauth", [False, True], ids=["oauth-off", "oauth-on"])
@pytest.mark.parametrize("credentials", [{"cookie": "sessionid=nothing-of-ours"}, {"authorization": "Basic dXNlcjpwYXNz"},
                                         {"authorization": "Token not-a-key"}], ids=["cookie", "basic", "bad-token"])
async def test_credentials_none_accepts_are_refused_with_401(tokens: dict[str, str], oauth: bool, path: str,
                                                              credentials: dict[str, str]) -> None:
    with mcp_settings(oauth, anonymous=False):
        response = await restock(path, credentials)
    assert response.status == 401, (response.status, response.body[:300])
    if oauth:
        assert "resource_metadata" in challenge(response)
    assert await sync_to_async(stock)() == 1


@pytest.mark.parametrize("path", MOUNTS)
@pytest.mark.parametrize("oauth", [False, True], ids=["oauth-off", "oauth-on"])
@pytest.mark.parametrize("credentials", [{}, {"cookie": "sessionid=nothing-of-ours"}], ids=["none", "cookie"])
async def test_no_user_found_is_anonymous_where_allowed(oauth: bool, path: str, credentials: dict[str, str]) -> None:
    """No authenticator finds a user: anonymous (and restock stays hidden from it), not a 500."""
    body = json.dumps(modern_message("tools/list")).encode()
    extra = {"mcp-method": "tools/list", "content-length": str(len(body)), **credentials}
    with mcp_settings(oauth, anonymous=True):
        response = await request(site(), "POST", path, headers=post_headers(extra=extra), body=body)
    assert response.status == 200, (response.status, response.body[:300])
    names = {tool["name"] for tool in response.json()["result"]["tools"]}
    assert names and "restock" not in names


@pytest.mark.parametrize("path", MOUNTS)
async def test_dot_bearer_with_oauth_off_is_the_drf_authenticators(tokens: dict[str, str], path: str) -> None:
    """OAuth off: DRF's authenticators are MCP's authentication, DOT's among them (docs/oauth.md): its token
    authenticates its user with the user's full authority, as it does for the REST API."""
    with mcp_settings(False, anonymous=False):
        response = await restock(path, {"authorization": f"Bearer {tokens['dot']}"})
        assert response.status == 200, (response.status, response.body[:300])
        assert not response.json()["result"].get("isError"), response.body[:300]
        revoked = await restock(path, {"authorization": "Bearer revoked-or-unknown"})
    assert revoked.status == 401, (revoked.status, revoked.body[:300])
    assert await sync_to_async(stock)() == 6


@pytest.mark.parametrize("path", MOUNTS)
async def test_dot_bearer_with_oauth_on_is_the_verifiers(tokens: dict[str, str], path: str) -> None:
    with mcp_settings(True, anonymous=False):
        response = await restock(path, {"authorization": f"Bearer {tokens['dot']}"})
        assert response.status == 200, (response.status, response.body[:300])
        refused = await restock(path, {"authorization": "Bearer revoked-or-unknown"})
    assert refused.status == 401 and challenge(refused)["error"] == "invalid_token", (refused.status, refused.body[:300])
    assert await sync_to_async(stock)() == 6


class RaisingAuthentication:
    """A DRF authenticator that raises what DRF's ``APIException`` subclasses a view would answer itself."""

    raises: Exception = Exception()

    def authenticate(self, request: Any) -> Any:
        raise RaisingAuthentication.raises

    def authenticate_header(self, request: Any) -> str:
        return 'Token realm="api"'


@pytest.mark.parametrize("raised", ["NotAuthenticated", "Throttled", "PermissionDenied", "ParseError", "UnsupportedMediaType"])
async def test_an_authenticators_other_api_exception_refuses_with_401(tokens: dict[str, str], raised: str) -> None:
    """DRF stops at the authenticator that raised: the request is refused (401, its detail), never a 500
    and never anonymous."""
    from rest_framework import exceptions

    RaisingAuthentication.raises = getattr(exceptions, raised)(*(["text/plain"] if raised == "UnsupportedMediaType" else []))
    from django.conf import settings

    conf = {**settings.MCP_TOOLS, "ALLOW_ANONYMOUS": True, "AUTHENTICATION_CLASSES": [f"{__name__}.RaisingAuthentication"]}
    conf.pop("OAUTH", None)
    with override_settings(MCP_TOOLS=conf):
        response = await restock("/mcp", {"authorization": f"Token {tokens['drf']}"})
    assert response.status == 401, (raised, response.status, response.body[:300])
    assert response.header("www-authenticate") == 'Token realm="api"'
    assert str(RaisingAuthentication.raises.detail) in response.json()["error"]["message"]
    assert await sync_to_async(stock)() == 1
