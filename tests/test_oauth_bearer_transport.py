"""With ``MCP_TOOLS["OAUTH"]`` on, a bearer token reaches the tools only through the token verifier.

A site whose REST API uses django-oauth-toolkit lists DOT's DRF ``OAuth2Authentication`` among
its authenticators. A token sent where the verifier did not look (``?access_token=``,
``Bearer<TAB>token``) went to the DRF authenticators, and DOT accepted it without the
resource-server checks: no audience, no required scope, no tool scope (docs/oauth.md).
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import override_settings

from tests.asgi_client import AsgiResponse, modern_message, post_headers, request

pytest.importorskip("oauth2_provider")
pytestmark = [pytest.mark.django_db(transaction=True)]

DOT_DRF = "oauth2_provider.contrib.rest_framework.OAuth2Authentication"
RESOURCE = "http://testserver/mcp"
RESTOCK = {"name": "restock", "arguments": {"sku": "BT-1", "quantity": 5}}

#: Requests the spy authenticator saw (it authenticates any request that has an Authorization header).
seen: list[str] = []


class SpyAuthentication:
    """A DRF authenticator that accepts any ``Authorization`` header as its user's: what must never
    see a bearer token (DOT's accepts a valid one whatever its audience and scopes)."""

    user: Any = None

    def authenticate(self, request: Any) -> Any:
        value = request.META.get("HTTP_AUTHORIZATION")
        if value is None:
            return None
        seen.append(value)
        return (SpyAuthentication.user, None)

    def authenticate_header(self, request: Any) -> str:
        return "Spy"


def oauth_on(classes: list[str], anonymous: bool = False) -> Any:
    from django.conf import settings

    conf = {key: value for key, value in settings.MCP_TOOLS.items() if key not in ("OAUTH", "AUTHENTICATION_CLASSES")}
    conf.update(ALLOW_ANONYMOUS=anonymous, AUTHENTICATION_CLASSES=classes, OAUTH={
        "AUTHORIZATION_SERVERS": ["/o"], "TOKEN_VERIFIER": "mcp_tools.contrib.oauth_toolkit.OAuthToolkitVerifier",
        "SCOPES_SUPPORTED": ["mcp", "inventory:write"], "REQUIRED_SCOPES": ["mcp"]})
    return override_settings(MCP_TOOLS=conf)


def site(query: bytes = b"") -> Any:
    from django.core.handlers.asgi import ASGIHandler

    from mcp_tools.routing import mcp_asgi_app

    app = mcp_asgi_app(ASGIHandler())

    async def with_query(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await app({**scope, "query_string": query}, receive, send)

    return with_query


def _user() -> Any:
    from django.contrib.auth.models import Permission, User

    user = User.objects.create_user(username=f"bt-{secrets.token_hex(4)}", password="x")
    user.user_permissions.add(Permission.objects.get(content_type__app_label="inventory", codename="change_product"))
    return user


def make_token(resource: list[str], scope: str) -> str:
    """A DOT access token of a user who may restock (``resource``: its audience)."""
    from django.utils import timezone
    from oauth2_provider.models import AccessToken, Application

    user = _user()
    SpyAuthentication.user = user
    app = Application.objects.create(name="bt", user=user, client_type=Application.CLIENT_CONFIDENTIAL,
                                     authorization_grant_type=Application.GRANT_CLIENT_CREDENTIALS,
                                     client_secret=secrets.token_urlsafe(20))
    value = secrets.token_urlsafe(30)
    AccessToken.objects.create(user=user, application=app, token=value, expires=timezone.now() + timedelta(seconds=600),
                               scope=scope, resource=resource)
    return value


def product() -> None:
    from demo_site.inventory.models import Product

    Product.objects.update_or_create(sku="BT-1", defaults={"name": "Bearer widget", "price": "1.00", "stock": 1})


def stock() -> int:
    from demo_site.inventory.models import Product

    return Product.objects.get(sku="BT-1").stock


async def restock(app: Any, authorization: str | None) -> AsgiResponse:
    extra = {"mcp-method": "tools/call", "mcp-name": "restock"}
    if authorization is not None:
        extra["authorization"] = authorization
    return await request(app, "POST", "/mcp", headers=post_headers(extra=extra),
                         body=json.dumps(modern_message("tools/call", RESTOCK)).encode())


def challenge(response: AsgiResponse) -> dict[str, str]:
    header = response.header("www-authenticate") or ""
    assert header.startswith("Bearer "), (response.status, header)
    return dict(re.findall(r'(\w+)="([^"]*)"', header))


@pytest.fixture
async def foreign_token() -> str:
    """A token for no resource with scope ``read`` only: the verifier refuses it, DOT's DRF authenticator takes it."""
    await sync_to_async(product)()
    seen.clear()
    return await sync_to_async(make_token)([], "read")


async def test_query_access_token_is_refused_and_never_reaches_drf(foreign_token: str) -> None:
    for anonymous in (False, True):
        with oauth_on([DOT_DRF, "rest_framework.authentication.TokenAuthentication"], anonymous=anonymous):
            assert (await restock(site(), f"Bearer {foreign_token}")).status == 401  # the verifier: no audience
            for query in (f"access_token={foreign_token}", f"x=1&access%5Ftoken={foreign_token}", "access_token"):
                response = await restock(site(query.encode()), None)
                assert response.status == 400, (anonymous, query, response.status, response.body[:300])
                assert challenge(response)["error"] == "invalid_request"
                assert "resource_metadata" in challenge(response)
    assert await sync_to_async(stock)() == 1


@pytest.mark.parametrize("separator", ["\t", "  ", " \t ", "\xa0"])
async def test_bearer_with_other_whitespace_goes_to_the_verifier_only(foreign_token: str, separator: str) -> None:
    """Split on any whitespace, as oauthlib and DRF split it: the verifier refuses a token DOT would take."""
    with oauth_on([DOT_DRF, "rest_framework.authentication.TokenAuthentication"]):
        for scheme in ("Bearer", "bearer", "BEARER"):
            response = await restock(site(), f"{scheme}{separator}{foreign_token}")
            assert response.status == 401, (scheme, separator, response.status, response.body[:300])
            assert challenge(response)["error"] == "invalid_token"
    assert await sync_to_async(stock)() == 1


async def test_a_good_token_after_a_tab_is_served() -> None:
    await sync_to_async(product)()
    token = await sync_to_async(make_token)([RESOURCE], "mcp inventory:write")
    with oauth_on([DOT_DRF]):
        response = await restock(site(), f"Bearer\t{token}")
    assert response.status == 200, response.body[:300]
    assert await sync_to_async(stock)() == 6


@pytest.mark.parametrize("value", ["Bearer", "Bearer ", "bearer \t ", "Bearer a b", "Bearer t\xe9st", "Bearer a,b",
                                   "Bearer abc, Token def", "Bearer =abc"])
async def test_malformed_bearer_is_400_invalid_request_and_never_reaches_drf(value: str) -> None:
    """RFC 6750 3.1: a malformed request is 400 invalid_request; no DRF authenticator is asked instead."""
    await sync_to_async(product)()
    await sync_to_async(make_token)([], "read")  # the spy's user, who may restock
    seen.clear()
    with oauth_on([f"{__name__}.SpyAuthentication"]):
        response = await restock(site(), value)
        assert response.status == 400, (value, response.status, response.body[:300])
        params = challenge(response)
        assert params["error"] == "invalid_request" and "resource_metadata" in params
        # Another scheme still goes to the DRF authenticators.
        assert (await restock(site(), "Spy abc")).status == 200
    assert seen == ["Spy abc"]
    assert await sync_to_async(stock)() == 6


def test_check_warns_of_a_bearer_authenticator_used_for_mcp() -> None:
    from mcp_tools.checks import check_oauth

    oauth = {"AUTHORIZATION_SERVERS": ["/o"], "TOKEN_VERIFIER": "mcp_tools.contrib.oauth_toolkit.OAuthToolkitVerifier",
             "RESOURCE": "https://shop.example/mcp"}
    with override_settings(MCP_TOOLS={"OAUTH": oauth, "AUTHENTICATION_CLASSES": [DOT_DRF]}):
        problems = check_oauth()
    assert [problem.id for problem in problems] == ["mcp_tools.W041"]
    assert DOT_DRF in problems[0].msg
    drf = {"DEFAULT_AUTHENTICATION_CLASSES": ["rest_framework.authentication.TokenAuthentication", DOT_DRF]}
    with override_settings(MCP_TOOLS={"OAUTH": oauth}, REST_FRAMEWORK=drf):
        assert [problem.id for problem in check_oauth()] == ["mcp_tools.W041"]
    # The REST API keeps DOT; MCP's own list leaves it out: nothing to say.
    with override_settings(MCP_TOOLS={"OAUTH": oauth, "AUTHENTICATION_CLASSES": ["rest_framework.authentication.TokenAuthentication"]},
                           REST_FRAMEWORK=drf):
        assert check_oauth() == []
    # OAuth off: DRF's authenticators are MCP's authentication, DOT's among them.
    with override_settings(MCP_TOOLS={"AUTHENTICATION_CLASSES": [DOT_DRF]}):
        assert check_oauth() == []


@pytest.mark.parametrize(("body", "headers", "expected"), [
    (modern_message("tools/call", RESTOCK, request_id=77), {}, {"id": 77}),
    (modern_message("tools/call", RESTOCK, request_id="r-1"), {"content-type": "text/plain"}, {"id": "r-1"}),  # 400 before 415
    ({"jsonrpc": "2.0", "method": "notifications/initialized"}, {}, {}),  # a notification: no id
    (b"{not json", {}, {"id": None}),
], ids=["request", "request-wrong-content-type", "notification", "not-json"])
async def test_query_access_token_is_refused_with_the_requests_id(body: Any, headers: dict[str, str], expected: dict[str, Any]) -> None:
    """The 400 for ``?access_token=`` came before the body was read, so it said ``"id": null`` for a
    request that had an id (found from the known-defects list, with the raw ASGI client). The body is
    read (bounded by MAX_BODY_BYTES, as any POST's) for its id; the refusal still comes first, whatever
    else is wrong with the request."""
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    with oauth_on([DOT_DRF]):
        response = await request(site(b"access_token=abc"), "POST", "/mcp",
                                 headers=post_headers(extra={"mcp-method": "tools/call", "mcp-name": "restock", **headers}), body=raw)
    assert response.status == 400, (response.status, response.body[:300])
    assert challenge(response)["error"] == "invalid_request"
    answer = response.json()
    assert {key: value for key, value in answer.items() if key == "id"} == expected, answer
    assert answer["error"]["code"] == -32600, answer


async def test_query_access_token_refusal_does_not_wait_for_a_body_that_never_comes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Since the 400 for ``?access_token=`` reads the body for its request's id, a client that declared a
    body and never sent it got no answer at all (before, the 400 went at once): found by driving the ASGI
    app with a ``receive`` that never gives the body. The body is waited for only so long
    (``QUERY_TOKEN_BODY_SECONDS``): past that the refusal goes, ``"id": null`` as before."""
    from mcp_tools.transports import http

    monkeypatch.setattr(http, "QUERY_TOKEN_BODY_SECONDS", 0.2, raising=False)
    sent: list[dict[str, Any]] = []
    client_left = asyncio.Event()

    async def receive() -> dict[str, Any]:
        await client_left.wait()  # the body never comes
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    headers = [(name.encode(), value.encode()) for name, value in {**post_headers(), "content-length": "40"}.items()]
    scope = {"type": "http", "method": "POST", "path": "/mcp", "raw_path": b"/mcp", "query_string": b"access_token=abc",
             "headers": headers, "scheme": "http", "server": ("testserver", 80), "client": ("127.0.0.1", 1), "root_path": "",
             "http_version": "1.1", "asgi": {"version": "3.0"}}
    with oauth_on([DOT_DRF]):
        served = asyncio.ensure_future(site(b"access_token=abc")(scope, receive, send))
        try:
            deadline = asyncio.get_running_loop().time() + 30
            while not any(message.get("type") == "http.response.start" for message in sent):
                assert asyncio.get_running_loop().time() < deadline, "no answer while the body does not come"
                await asyncio.sleep(0.05)
        finally:
            client_left.set()
            await asyncio.wait_for(served, 10)
    assert sent[0]["status"] == 400, sent
    body = json.loads(b"".join(message.get("body", b"") for message in sent[1:]))
    assert body["id"] is None and body["error"]["code"] == -32600, body
