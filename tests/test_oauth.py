"""MCP authorization: the endpoint as an OAuth resource server with django-oauth-toolkit as the authorization server.

Live: a daphne process serving the demo with ``MCP_TOOLS["OAUTH"]`` on and anonymous
callers refused; tokens come from DOT's real token endpoint (through the official
``mcp`` client's client-credentials provider) or are rows made in the shared test database.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx2
import pytest
from asgiref.sync import sync_to_async
from django.test import override_settings
from django.urls import include, path

from mcp_tools.server.oauth import audience_matches
from tests.asgi_client import modern_message, post_headers, request
from tests.clients import JSON_ACCEPT, LEGACY, MODERN, LegacySession, ModernClient, final_message, modern_headers, modern_meta
from tests.conftest import LiveServer

pytest.importorskip("oauth2_provider")

pytestmark = [pytest.mark.django_db(transaction=True)]

MODES = ["legacy", MODERN]
RESOURCE_METADATA = re.compile(r'resource_metadata="([^"]+)"')


@pytest.fixture(scope="module")
def oauth_server(django_db_setup: None) -> Iterator[LiveServer]:
    """The demo with OAuth on and no anonymous access (tests/settings.py reads both variables)."""
    server = LiveServer("daphne", env={"MCP_TESTS_OAUTH": "1", "MCP_TESTS_NO_ANON": "1"}).start()
    try:
        yield server
    finally:
        server.stop()


def origin(server: LiveServer) -> str:
    return f"http://127.0.0.1:{server.port}"


# -- the database: a service account, a DOT application, tokens ---------------------------------


def _client_app(perms: tuple[str, ...] = ("inventory.change_product",)) -> tuple[str, str, Any]:
    """A confidential client-credentials application owned by a user with ``perms`` (its id, secret and owner)."""
    from django.contrib.auth.models import Permission, User
    from oauth2_provider.models import Application

    user = User.objects.create_user(username=f"svc-{secrets.token_hex(4)}", password="x")
    for perm in perms:
        app_label, codename = perm.split(".")
        user.user_permissions.add(Permission.objects.get(content_type__app_label=app_label, codename=codename))
    secret = secrets.token_urlsafe(24)
    app = Application.objects.create(
        name="tests", user=user, client_type=Application.CLIENT_CONFIDENTIAL,
        authorization_grant_type=Application.GRANT_CLIENT_CREDENTIALS, client_secret=secret,
    )
    return app.client_id, secret, user


def _token(resource: list[str] | None, scope: str = "mcp inventory:write", expires_in: int = 600) -> str:
    """An access token row of a fresh application (``resource``: the RFC 8707 audience it was issued for)."""
    from django.utils import timezone
    from oauth2_provider.models import AccessToken, Application

    client_id, _, user = _client_app()
    value = secrets.token_urlsafe(30)
    AccessToken.objects.create(user=user, application=Application.objects.get(client_id=client_id), token=value,
                               expires=timezone.now() + timedelta(seconds=expires_in), scope=scope, resource=resource or [])
    return value


def _create_product() -> None:
    from demo_site.inventory.models import Product

    Product.objects.update_or_create(sku="OA-1", defaults={"name": "OAuth widget", "price": "1.00", "stock": 1})


def _stock() -> int:
    from demo_site.inventory.models import Product

    return Product.objects.get(sku="OA-1").stock


class MemoryStorage:
    """Token storage of the official client's OAuth provider (in memory)."""

    def __init__(self) -> None:
        self.tokens: Any = None
        self.client_info: Any = None

    async def get_tokens(self) -> Any:
        return self.tokens

    async def set_tokens(self, tokens: Any) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> Any:
        return self.client_info

    async def set_client_info(self, client_info: Any) -> None:
        self.client_info = client_info


def bearer(token: str) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)


async def modern_call(http: httpx2.AsyncClient, url: str, method: str, params: dict[str, Any]) -> httpx2.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": modern_meta()}}
    return await http.post(url, json=body, headers=modern_headers(method, params))


async def legacy_initialize(http: httpx2.AsyncClient, url: str) -> httpx2.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "tests", "version": "1"}}}
    return await http.post(url, json=body, headers={"Accept": JSON_ACCEPT, "Content-Type": "application/json"})


def challenge_of(response: httpx2.Response) -> dict[str, str]:
    header = response.headers.get("www-authenticate", "")
    assert header.startswith("Bearer "), (response.status_code, header)
    return dict(re.findall(r'(\w+)="([^"]*)"', header))


# -- discovery -------------------------------------------------------------------------------


async def test_metadata_is_discovered_from_the_401(oauth_server: LiveServer) -> None:
    async with httpx2.AsyncClient(timeout=30) as http:
        for response in (await legacy_initialize(http, oauth_server.url), await modern_call(http, oauth_server.url, "tools/list", {})):
            assert response.status_code == 401
            params = challenge_of(response)
            assert params["resource_metadata"] == f"{origin(oauth_server)}/.well-known/oauth-protected-resource/mcp"
            assert params["scope"] == "mcp inventory:write"  # what to ask for first: every supported scope
            assert "error" not in params  # no token was presented (RFC 6750 3.1)
        metadata = (await http.get(params["resource_metadata"])).json()
        assert metadata["resource"] == oauth_server.url
        assert metadata["authorization_servers"] == [f"{origin(oauth_server)}/o"]
        assert metadata["scopes_supported"] == ["mcp", "inventory:write"]
        assert metadata["bearer_methods_supported"] == ["header"]
        # The root form serves the same document; the authorization server publishes RFC 8414 metadata.
        assert (await http.get(f"{origin(oauth_server)}/.well-known/oauth-protected-resource")).json() == metadata
        server_metadata = (await http.get(f"{origin(oauth_server)}/.well-known/oauth-authorization-server/o")).json()
        assert server_metadata["issuer"] == f"{origin(oauth_server)}/o"
        assert server_metadata["token_endpoint"] == f"{origin(oauth_server)}/o/token/"


@pytest.mark.parametrize("mount", ["/mcp", "/mcp-via-django"])
@pytest.mark.parametrize("mode", MODES)
async def test_official_client_gets_a_token_from_dot_and_calls_a_scoped_tool(oauth_server: LiveServer, mode: str, mount: str) -> None:
    """401 -> resource metadata -> DOT metadata -> client-credentials token (with resource) -> the call.

    Also through the URLconf's include() at /mcp-via-django: the client refused metadata naming /mcp.
    """
    from mcp import Client
    from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
    from mcp.client.streamable_http import streamable_http_client

    url = oauth_server.url.removesuffix("/mcp") + mount

    client_id, secret, _ = await sync_to_async(_client_app)()
    await sync_to_async(_create_product)()
    storage = MemoryStorage()
    provider = ClientCredentialsOAuthProvider(server_url=url, storage=storage, client_id=client_id, client_secret=secret,
                                              scope="mcp inventory:write", issuer=f"{origin(oauth_server)}/o")
    async with httpx2.AsyncClient(auth=provider, timeout=30) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode, read_timeout_seconds=30) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert "restock" in names
            result = await client.call_tool("restock", {"sku": "OA-1", "quantity": 4})
            assert not result.is_error, result
    assert await sync_to_async(_stock)() == 5
    # DOT recorded the resource the client asked for: the token is bound to this endpoint.
    from oauth2_provider.models import AccessToken

    row = await sync_to_async(AccessToken.objects.get)(token_checksum__isnull=False, application__client_id=client_id)
    assert row.resource == [url]
    assert storage.tokens is not None


# -- refusals ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("case", "description"), [
    ("expired", "expired"),
    ("wrong_audience", "not issued for this resource"),
    ("no_audience", "names no resource"),
    ("unknown", "invalid"),
])
async def test_bad_tokens_get_401_invalid_token_in_both_eras(oauth_server: LiveServer, case: str, description: str) -> None:
    if case == "unknown":
        token = secrets.token_urlsafe(30)
    else:
        resource = {"expired": [oauth_server.url], "wrong_audience": ["http://127.0.0.1:1/mcp"], "no_audience": None}[case]
        token = await sync_to_async(_token)(resource, expires_in=-5 if case == "expired" else 600)
    async with bearer(token) as http:
        for response in (await legacy_initialize(http, oauth_server.url), await modern_call(http, oauth_server.url, "tools/list", {})):
            assert response.status_code == 401, response.text
            params = challenge_of(response)
            assert params["error"] == "invalid_token"
            assert description in params["error_description"]
            assert params["resource_metadata"].endswith("/.well-known/oauth-protected-resource/mcp")
            assert response.json()["error"]["message"].startswith("Unauthorized")


async def test_audience_of_a_parent_path_is_accepted_and_a_sibling_refused() -> None:
    assert audience_matches("https://Shop.example/", "https://shop.example/mcp")
    assert audience_matches("https://shop.example/api", "https://shop.example/api/mcp")
    assert not audience_matches("https://shop.example/ap", "https://shop.example/api/mcp")
    assert not audience_matches("https://shop.example.evil/mcp", "https://shop.example/mcp")
    assert not audience_matches("http://shop.example/mcp", "https://shop.example/mcp")


async def test_audience_with_its_schemes_default_port_names_the_resource_without_it() -> None:
    """RFC 3986 6.2.3: an explicit port that is the scheme's default (or empty) names the same URI,
    on either side; any other port is another resource, and the parent-path rule still holds."""
    assert audience_matches("https://shop.example:443/mcp", "https://shop.example/mcp")
    assert audience_matches("https://shop.example/mcp", "https://shop.example:443/mcp")
    assert audience_matches("http://shop.example:80/mcp", "http://shop.example/mcp")
    assert audience_matches("https://Shop.example:/mcp", "https://shop.example/mcp")
    assert audience_matches("https://[2001:db8::1]:443/mcp", "https://[2001:db8::1]/mcp")
    assert audience_matches("https://shop.example:443/api", "https://shop.example/api/mcp")
    assert not audience_matches("https://shop.example:443/ap", "https://shop.example/api/mcp")
    assert not audience_matches("https://shop.example:80/mcp", "https://shop.example/mcp")
    assert not audience_matches("http://shop.example:443/mcp", "http://shop.example/mcp")
    assert not audience_matches("https://shop.example:8443/mcp", "https://shop.example/mcp")
    assert not audience_matches("https://shop.example:4430/mcp", "https://shop.example:443/mcp")
    assert not audience_matches("https://shop.example/mcp", "https://shop.example:8443/mcp")


async def test_token_without_a_required_scope_gets_403(oauth_server: LiveServer) -> None:
    token = await sync_to_async(_token)([oauth_server.url], scope="inventory:write")
    async with bearer(token) as http:
        response = await modern_call(http, oauth_server.url, "tools/list", {})
    assert response.status_code == 403
    params = challenge_of(response)
    assert params["error"] == "insufficient_scope"
    assert params["scope"].split() == ["inventory:write", "mcp"]


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_tool_scope_hides_the_tool_and_a_call_gets_insufficient_scope(oauth_server: LiveServer, era: str) -> None:
    """Without inventory:write, restock is not listed and calling it asks for a step-up (403), changing nothing."""
    await sync_to_async(_create_product)()
    token = await sync_to_async(_token)([oauth_server.url], scope="mcp")
    call = {"name": "restock", "arguments": {"sku": "OA-1", "quantity": 2}}
    async with bearer(token) as http:
        if era == "modern":
            client = ModernClient(http, oauth_server.url)
            listed = await client.request("tools/list", {})
            response = await modern_call(http, oauth_server.url, "tools/call", call)
        else:
            response = await legacy_initialize(http, oauth_server.url)
            session = LegacySession(http, oauth_server.url, response.headers["mcp-session-id"])
            await session.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            listed = await session.request("tools/list", {})
            response = await session.send({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": call})
    names = {tool["name"] for tool in listed["tools"]}
    assert "search_products" in names and "restock" not in names
    assert response.status_code == 403, response.text
    params = challenge_of(response)
    assert params["error"] == "insufficient_scope"
    assert params["scope"].split() == ["inventory:write", "mcp"]  # granted + needed: a step-up keeps what it had
    assert await sync_to_async(_stock)() == 1


async def test_user_without_the_permission_sees_an_unknown_tool_whatever_the_scope(oauth_server: LiveServer) -> None:
    """Scopes narrow what a user may do; they never widen it, and a tool the user may not use stays unknown."""
    from django.utils import timezone
    from oauth2_provider.models import AccessToken, Application

    def make() -> str:
        client_id, _, user = _client_app(perms=())
        value = secrets.token_urlsafe(30)
        AccessToken.objects.create(user=user, application=Application.objects.get(client_id=client_id), token=value,
                                   expires=timezone.now() + timedelta(minutes=5), scope="mcp", resource=[oauth_server.url])
        return value

    token = await sync_to_async(make)()
    async with bearer(token) as http:
        response = await modern_call(http, oauth_server.url, "tools/call", {"name": "restock", "arguments": {"sku": "OA-1", "quantity": 2}})
    message = final_message(response, 1)
    assert message["error"]["code"] == -32602 and message["error"]["message"] == "Unknown tool: restock"


async def test_drf_token_still_works_with_oauth_on(oauth_server: LiveServer) -> None:
    from tests.clients import create_user_with_token, http_client

    key = await sync_to_async(create_user_with_token)(f"drf-{secrets.token_hex(3)}", ("inventory.change_product",))
    await sync_to_async(_create_product)()
    async with http_client(key) as http:
        result = await ModernClient(http, oauth_server.url).request("tools/call", {"name": "restock", "arguments": {"sku": "OA-1", "quantity": 1}})
    assert result.get("isError") is not True, result
    assert await sync_to_async(_stock)() == 2


def _ownerless_client_token() -> str:
    """A token from DOT's token endpoint (client credentials) of an application no user owns, with every scope."""
    from django.test import Client
    from oauth2_provider.models import Application

    secret = secrets.token_urlsafe(24)
    app = Application.objects.create(name="ownerless", user=None, client_type=Application.CLIENT_CONFIDENTIAL,
                                     authorization_grant_type=Application.GRANT_CLIENT_CREDENTIALS, client_secret=secret)
    answer = Client().post("/o/token/", {"grant_type": "client_credentials", "client_id": app.client_id, "client_secret": secret,
                                         "scope": "mcp inventory:write", "resource": "http://testserver/mcp"})
    assert answer.status_code == 200, answer.content
    assert set(answer.json()["scope"].split()) == {"mcp", "inventory:write"}
    return str(answer.json()["access_token"])


def only_scoped() -> str:
    """A tool gated by a scope alone (no Django permission)."""
    return "scoped"


def not_gated() -> str:
    """A tool anyone may call."""
    return "open"


async def test_an_ownerless_client_credentials_token_is_anonymous_even_for_a_tool_gated_by_a_scope_only() -> None:
    """docs/oauth.md "Scopes": a client-credentials token of an application with no owner acts for no user,
    and an anonymous caller holds no permission, so even a tool that asks only for a scope the token
    has stays hidden and unknown to it; a tool with no gate is served."""
    from mcp_tools.registry import make_tool, registry

    token = await sync_to_async(_ownerless_client_token)()
    app = _site()
    with _oauth_on(SCOPES_SUPPORTED=["mcp", "inventory:write"]), registry.registered_temporarily(
            make_tool(only_scoped, scopes=["inventory:write"]), make_tool(not_gated)):
        listed = await _list_tools(app, "/mcp", token)
        calls = {}
        for name in ("only_scoped", "not_gated"):
            body = json.dumps(modern_message("tools/call", {"name": name, "arguments": {}})).encode()
            headers = post_headers(extra={"mcp-method": "tools/call", "mcp-name": name, "authorization": f"Bearer {token}"})
            calls[name] = await request(app, "POST", "/mcp", headers=headers, body=body)
    names = {tool["name"] for tool in listed.json()["result"]["tools"]}
    assert "not_gated" in names and "only_scoped" not in names
    assert calls["not_gated"].status == 200 and calls["not_gated"].json()["result"]["content"][0]["text"] == "open"
    assert calls["only_scoped"].status == 200, calls["only_scoped"].body  # not a 403 step-up: no scope would help
    assert calls["only_scoped"].json()["error"] == {"code": -32602, "message": "Unknown tool: only_scoped"}


# -- an endpoint served at another path is its own resource ------------------------------------


def _oauth_on(**extra: Any) -> Any:
    """OAuth on (as the live server has it) for an in-process request, anonymous callers refused."""
    from django.conf import settings

    conf = {key: value for key, value in settings.MCP_TOOLS.items() if key != "OAUTH"}
    conf.update(ALLOW_ANONYMOUS=False, OAUTH={
        "AUTHORIZATION_SERVERS": ["/o"], "TOKEN_VERIFIER": "mcp_tools.contrib.oauth_toolkit.OAuthToolkitVerifier",
        "SCOPES_SUPPORTED": ["mcp"], "REQUIRED_SCOPES": ["mcp"], **extra})
    return override_settings(MCP_TOOLS=conf)


def _site(root_path: str = "") -> Any:
    """The demo's ASGI application (MCP at /mcp, Django's URLconf with /mcp-via-django behind it), below ``root_path``."""
    from django.core.handlers.asgi import ASGIHandler

    from mcp_tools.routing import mcp_asgi_app

    app = mcp_asgi_app(ASGIHandler())

    async def below_root(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await app({**scope, "root_path": root_path}, receive, send)

    return below_root


async def _list_tools(app: Any, path: str, token: str | None = None) -> Any:
    headers = post_headers(extra={"mcp-method": "tools/list", **({"authorization": f"Bearer {token}"} if token else {})})
    return await request(app, "POST", path, headers=headers, body=json.dumps(modern_message("tools/list", {})).encode())


def _challenge(response: Any) -> dict[str, str]:
    header = response.header("www-authenticate") or ""
    assert header.startswith("Bearer "), (response.status, header)
    return dict(re.findall(r'(\w+)="([^"]*)"', header))


@pytest.mark.parametrize(("root_path", "path"), [("", "/mcp-via-django"), ("/app", "/app/mcp")])
async def test_an_endpoint_at_another_path_names_its_own_url_as_the_resource(root_path: str, path: str) -> None:
    """Included under another path (URLconf) or below a root_path (ASGI), the endpoint is the URL clients use.

    The 401 pointed at the metadata of /mcp, whose resource (http://testserver/mcp) the client
    must refuse (RFC 9728 3.3: not the URL it called), and tokens were checked against /mcp: a
    token for this URL was refused, one for /mcp accepted.
    """
    app, here = _site(root_path), f"http://testserver{path}"
    mine = await sync_to_async(_token)([here], scope="mcp")
    other = await sync_to_async(_token)(["http://testserver/mcp"], scope="mcp")
    with _oauth_on():
        refused = await _list_tools(app, path)
        assert refused.status == 401, refused.body
        metadata_url = _challenge(refused)["resource_metadata"]
        assert metadata_url == f"http://testserver/.well-known/oauth-protected-resource{path}"
        accepted = await _list_tools(app, path, mine)
        foreign = await _list_tools(app, path, other)
        if not root_path:  # the URLconf mount's metadata is served by the site (below a root_path: the proxy's job)
            document = (await request(app, "GET", metadata_url.removeprefix("http://testserver"), headers={"host": "testserver"})).json()
            assert document["resource"] == here
    assert accepted.status == 200, accepted.body
    assert "search_products" in {tool["name"] for tool in accepted.json()["result"]["tools"]}
    assert foreign.status == 401
    assert "not issued for this resource" in _challenge(foreign)["error_description"]


#: This module as a URLconf: the endpoint included at /mcp/x, below the ASGI mount's /mcp.
urlpatterns = [path("mcp/x", include("mcp_tools.urls"))]


async def test_a_token_for_a_path_is_accepted_at_a_path_nested_below_it_and_not_the_reverse() -> None:
    """docs/oauth.md: an endpoint served at two paths is two resources, but the audience rule accepts a
    token issued for a parent path at a segment boundary: one for /mcp is served at /mcp/x (an include
    nested below it), one for /mcp/x is refused at /mcp, and siblings refuse each other's."""
    app = _site()
    for_mcp = await sync_to_async(_token)(["http://testserver/mcp"], scope="mcp")
    for_nested = await sync_to_async(_token)(["http://testserver/mcp/x"], scope="mcp")
    for_sibling = await sync_to_async(_token)(["http://testserver/mcp-via-django"], scope="mcp")
    with _oauth_on(), override_settings(ROOT_URLCONF=__name__):
        answers = {(path, name): (await _list_tools(app, path, token)).status
                   for path in ("/mcp", "/mcp/x") for name, token in (("mcp", for_mcp), ("nested", for_nested), ("sibling", for_sibling))}
    assert answers == {("/mcp", "mcp"): 200, ("/mcp", "nested"): 401, ("/mcp", "sibling"): 401,
                       ("/mcp/x", "mcp"): 200, ("/mcp/x", "nested"): 200, ("/mcp/x", "sibling"): 401}, answers


async def test_metadata_is_served_for_the_paths_of_the_endpoint_only() -> None:
    """The path-suffixed document names the resource of its suffix, for a path an endpoint is served at
    (the ASGI mount, an include(), RESOURCE's path); other suffixes fall through to the site."""

    async def document(path: str) -> tuple[int, Any]:
        response = await request(_site(), "GET", "/.well-known/oauth-protected-resource" + path, headers={"host": "testserver"})
        return response.status, response.json() if response.status == 200 else None

    with _oauth_on():
        assert (await document("/mcp"))[1]["resource"] == "http://testserver/mcp"
        assert (await document("/mcp-via-django"))[1]["resource"] == "http://testserver/mcp-via-django"
        assert (await document(""))[1]["resource"] == "http://testserver/mcp"  # the root form: the ASGI mount
        assert (await document("/admin/"))[0] == 404
        assert (await document("/mcp-via-djangox"))[0] == 404
    with _oauth_on(RESOURCE="http://testserver/public/mcp"):
        status, found = await document("/public/mcp")
    assert status == 200 and found["resource"] == "http://testserver/public/mcp"


# -- checks ------------------------------------------------------------------------------------


def test_checks_refuse_a_config_without_servers_or_verifier() -> None:
    from mcp_tools.checks import check_oauth

    with override_settings(MCP_TOOLS={"OAUTH": {"AUTHORIZATION_SERVERS": [], "TOKEN_VERIFIER": "nowhere.Verifier"}}):
        ids = {problem.id for problem in check_oauth()}
    assert {"mcp_tools.E041", "mcp_tools.E042"} <= ids
    good = {"AUTHORIZATION_SERVERS": ["/o"], "TOKEN_VERIFIER": "mcp_tools.contrib.oauth_toolkit.OAuthToolkitVerifier",
            "RESOURCE": "https://shop.example/mcp"}
    with override_settings(MCP_TOOLS={"OAUTH": good}):
        assert check_oauth() == []


@pytest.mark.parametrize("resource", ["https://shop.example/mcp?tenant=a", "https://shop.example/mcp?", "https://shop.example/mcp#top",
                                      "https://shop.example/mcp?tenant=a#top"])
def test_check_refuses_a_resource_with_a_query_or_a_fragment(resource: str) -> None:
    """RFC 8707 2: a resource "MUST NOT include a fragment component" and "SHOULD NOT include a query
    component". A query passed, and the metadata URL (RFC 9728 3.1, path-suffixed) dropped it: a
    token for ``?tenant=a`` named a resource whose metadata says another."""
    from mcp_tools.checks import check_oauth

    config = {"AUTHORIZATION_SERVERS": ["/o"], "TOKEN_VERIFIER": "mcp_tools.contrib.oauth_toolkit.OAuthToolkitVerifier",
              "RESOURCE": resource}
    with override_settings(MCP_TOOLS={"OAUTH": config}):
        problems = check_oauth()
    assert [problem.id for problem in problems] == ["mcp_tools.E043"], problems
    assert "query" in problems[0].msg and "fragment" in problems[0].msg and "RFC 8707" in problems[0].msg


# -- anonymous callers are not one principal --------------------------------------------------


@pytest.fixture(scope="module")
def anonymous_server(django_db_setup: None) -> Iterator[LiveServer]:
    """The demo as the test settings have it: anonymous callers allowed, OAuth off."""
    server = LiveServer("daphne").start()
    try:
        yield server
    finally:
        server.stop()


def anonymous(secret: str | None = None) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(headers={"X-MCP-Client-Secret": secret} if secret else {}, timeout=30)


DEPLOY = {"name": "deploy", "arguments": {"service": "anon-api"}}
TARGET = {"action": "accept", "content": {"env": "staging", "confirm": True}}
REFUSED_STATE = "Invalid or expired requestState"


async def test_anonymous_request_state_is_refused_to_another_anonymous_client(anonymous_server: LiveServer) -> None:
    """2026-07-28: the requestState of the client sending secret A is refused to B and to a client with no secret."""
    alice, bob = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
    async with anonymous(alice) as a_http, anonymous(bob) as b_http, anonymous() as n_http:
        first = await ModernClient(a_http, anonymous_server.url).request("tools/call", DEPLOY)
        assert first["resultType"] == "input_required"
        answer = {**DEPLOY, "requestState": first["requestState"], "inputResponses": {"target": TARGET}}
        for other in (b_http, n_http):
            _, message = await ModernClient(other, anonymous_server.url).post("tools/call", answer)
            assert message["error"]["code"] == -32602 and message["error"]["message"] == REFUSED_STATE, message
        second = await ModernClient(a_http, anonymous_server.url).request("tools/call", answer)
    assert second["resultType"] == "input_required" and list(second["inputRequests"]) == ["verdict"]


async def test_anonymous_saga_token_is_refused_to_another_session(anonymous_server: LiveServer) -> None:
    """2025-11-25: anonymous callers are told apart by their session; another session cannot resume the saga."""
    async with anonymous() as http:
        mine = await LegacySession.open(http, anonymous_server.url)
        theirs = await LegacySession.open(http, anonymous_server.url)
        first = await mine.request("tools/callSaga", {"name": "deploy", "arguments": {"service": "anon-saga"}})
        completed = [{"stepId": "target", "result": TARGET}]
        _, message = await theirs.post("tools/resumeSaga", {"sagaToken": first["sagaToken"], "completedSteps": completed})
        assert message["error"]["code"] == -32602, message
        second = await mine.request("tools/resumeSaga", {"sagaToken": first["sagaToken"], "completedSteps": completed})
    assert second["state"] == "suspended" and [s["stepId"] for s in second["steps"]] == ["verdict"]


async def test_a_short_client_secret_is_refused(anonymous_server: LiveServer) -> None:
    async with anonymous("short") as http:
        response, message = await ModernClient(http, anonymous_server.url).post("tools/list", {})
    assert response.status_code == 400
    assert "at least 16 characters" in message["error"]["message"]


async def test_the_metadata_document_behind_a_proxy_checks_the_host_the_client_called(settings: Any) -> None:
    """Behind nginx's default proxy (Host: the backend's address, X-Forwarded-Host: the public name) with
    USE_X_FORWARDED_HOST, the endpoint was reachable but its metadata document answered 403 "invalid Host
    header": it checked Host alone. It names the resource the client called; without the setting the
    forwarded header changes nothing (a client cannot spoof its way past ALLOWED_HOSTS with it)."""
    settings.ALLOWED_HOSTS = ["mcp.example.com"]
    proxied = {"host": "backend:8000", "x-forwarded-host": "mcp.example.com"}
    with _oauth_on():
        settings.USE_X_FORWARDED_HOST = True
        served = await request(_site(), "GET", "/.well-known/oauth-protected-resource/mcp", headers=proxied)
        settings.USE_X_FORWARDED_HOST = False
        refused = await request(_site(), "GET", "/.well-known/oauth-protected-resource/mcp", headers=proxied)
    assert served.status == 200 and served.json()["resource"] == "http://mcp.example.com/mcp", served.body
    assert refused.status == 403, refused.body
