"""Authentication and OAuth: what a review found, each failing before its mend.

A background call lost its token's scopes (a scoped tool ran on the worker without the scope);
subscriptions named resources the caller may not read; a naive DOT expiry (USE_TZ = False) was a
500; DRF's SessionAuthentication never saw the session's user; the metadata document's
authorization servers ignored RESOURCE; 2026-07-28 notifications skipped authentication.
"""

from __future__ import annotations

import json
import secrets
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.test import override_settings

import mcp_tools
from mcp_tools.registry import registry
from mcp_tools.transports.http import McpEndpoint
from mcp_tools.transports.oauth import ProtectedResourceMetadata
from tests.asgi_client import HANDSHAKE, call_modern, handshake_message, post_headers, post_json, request

pytestmark = pytest.mark.django_db(transaction=True)

APP = McpEndpoint()
SECRET_URI = "secret://payroll"


@pytest.fixture
def gated_resource():
    @mcp_tools.resource(SECRET_URI, permissions=["shop.view_customer"])
    def payroll() -> str:
        return "salaries"

    yield SECRET_URI
    registry.unregister_resource(SECRET_URI)


def _user_token(username: str) -> str:
    from django.contrib.auth.models import User
    from rest_framework.authtoken.models import Token

    user = User.objects.create_user(username, password="pw")
    return Token.objects.create(user=user).key


async def _open_session(token: str) -> str:
    response = await post_json(
        APP,
        handshake_message("initialize", {"protocolVersion": HANDSHAKE, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
        post_headers(version=None, token=token),
    )
    assert response.status == 200, response.body
    return response.header("mcp-session-id")


# -- 1. resources/subscribe ignores the resource's permissions (2025-11-25) ------------------------


async def test_subscribe_to_a_resource_the_caller_may_not_read_is_refused(gated_resource: str) -> None:
    token = await sync_to_async(_user_token)("nobody")
    session = await _open_session(token)
    headers = post_headers(version=HANDSHAKE, session=session, token=token)
    read = await post_json(APP, handshake_message("resources/read", {"uri": SECRET_URI}), headers)
    assert read.json()["error"]["message"] == "Resource not found"  # read is refused: the resource is hidden
    sub = await post_json(APP, handshake_message("resources/subscribe", {"uri": SECRET_URI}), headers)
    body = sub.json()
    # Expected: the same "Resource not found" as resources/read; actual: {} (subscribed, existence revealed).
    assert "error" in body and body["error"]["message"] == "Resource not found", body


# -- 1b. subscriptions/listen acknowledges a resource the caller may not read (2026-07-28) --------


async def test_listen_does_not_acknowledge_a_resource_the_caller_may_not_read(gated_resource: str) -> None:
    import asyncio

    from tests.asgi_client import modern_message

    token = await sync_to_async(_user_token)("nobody2")
    message = modern_message("subscriptions/listen", {"notifications": {"resourceSubscriptions": [SECRET_URI]}})
    headers = post_headers(token=token, extra={"mcp-method": "subscriptions/listen"})
    sent: list[dict[str, Any]] = []
    got_ack = asyncio.Event()
    body_given = False

    async def receive() -> dict[str, Any]:
        nonlocal body_given
        if not body_given:
            body_given = True
            return {"type": "http.request", "body": json.dumps(message).encode(), "more_body": False}
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    async def send(msg: dict[str, Any]) -> None:
        sent.append(msg)
        if msg["type"] == "http.response.body" and b"acknowledged" in msg.get("body", b""):
            got_ack.set()

    scope = {"type": "http", "method": "POST", "scheme": "http", "path": "/mcp", "root_path": "", "query_string": b"",
             "headers": [(k.encode(), v.encode()) for k, v in headers.items()], "server": ("testserver", 80)}
    task = asyncio.ensure_future(APP(scope, receive, send))
    try:
        await asyncio.wait_for(got_ack.wait(), 10)
    finally:
        task.cancel()
    data = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body").decode()
    ack = json.loads([line for line in data.splitlines() if line.startswith("data:") and "acknowledged" in line][0][5:])
    # Expected: the hidden resource is left out like an unknown one; actual: it is acknowledged (and its updates sent).
    assert SECRET_URI not in ack["params"]["notifications"].get("resourceSubscriptions", []), ack


# -- 2. RFC 9728 metadata: relative authorization server resolved against the request, not RESOURCE --


def _oauth_settings(**extra: Any) -> dict[str, Any]:
    conf = dict(settings.MCP_TOOLS)
    conf["OAUTH"] = {
        "AUTHORIZATION_SERVERS": ["/o"],
        "TOKEN_VERIFIER": "mcp_tools.contrib.oauth_toolkit.OAuthToolkitVerifier",
        "SCOPES_SUPPORTED": ["mcp"],
        **extra,
    }
    return conf


async def test_metadata_authorization_server_follows_the_configured_resource() -> None:
    with override_settings(MCP_TOOLS=_oauth_settings(RESOURCE="https://shop.example/mcp"),
                           ALLOWED_HOSTS=[*settings.ALLOWED_HOSTS, "shop.example"]):
        # A TLS-terminating proxy forwards to daphne over plain http (the case RESOURCE exists for, W040).
        response = await request(ProtectedResourceMetadata(), "GET", "/.well-known/oauth-protected-resource/mcp",
                                 headers={"host": "shop.example"})
    document = json.loads(response.body)
    assert document["resource"] == "https://shop.example/mcp"
    # Expected: "/o" is hosted by the site whose public URL is RESOURCE -> https://shop.example/o;
    # actual: http://shop.example/o (the internal scheme), which the MCP spec forbids (AS endpoints over HTTPS).
    assert document["authorization_servers"] == ["https://shop.example/o"], document


# -- 3. USE_TZ=False: every DOT bearer token answers 500 -----------------------------------------


def _dot_token() -> str:
    from django.contrib.auth.models import User
    from django.utils import timezone
    from oauth2_provider.models import AccessToken, Application

    user = User.objects.create_user(f"svc-{secrets.token_hex(4)}", password="x")
    app = Application.objects.create(name="t", user=user, client_type=Application.CLIENT_CONFIDENTIAL,
                                     authorization_grant_type=Application.GRANT_CLIENT_CREDENTIALS,
                                     client_secret=secrets.token_urlsafe(24))
    value = secrets.token_urlsafe(30)
    AccessToken.objects.create(user=user, application=app, token=value, expires=timezone.now() + timedelta(seconds=600),
                               scope="mcp", resource=["http://testserver/mcp"])
    return value


async def test_dot_token_with_use_tz_false_is_served_not_500() -> None:
    pytest.importorskip("oauth2_provider")
    with override_settings(USE_TZ=False, MCP_TOOLS=_oauth_settings()):
        token = await sync_to_async(_dot_token)()
        response = await call_modern(APP, "tools/list", {}, headers={"authorization": f"Bearer {token}"})
    # Expected: 200 (a valid, unexpired token); actual: 500 Internal error (naive vs aware datetime compare).
    assert response.status == 200, (response.status, response.body)


# -- 4. 2026-07-28: a notification with an invalid bearer token (or none) gets 202, not 401 -------


async def test_modern_notification_with_an_invalid_token_gets_401() -> None:
    conf = _oauth_settings()
    conf["ALLOW_ANONYMOUS"] = False
    with override_settings(MCP_TOOLS=conf):
        message = {"jsonrpc": "2.0", "method": "notifications/initialized",
                   "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                        "io.modelcontextprotocol/clientCapabilities": {}}}}
        response = await post_json(APP, message, post_headers(extra={"mcp-method": "notifications/initialized",
                                                                     "authorization": "Bearer not-a-real-token"}))
        no_creds = await post_json(APP, message, post_headers(extra={"mcp-method": "notifications/initialized"}))
    # MCP authorization 2025-11-25 "Token Handling": "Invalid or expired tokens MUST receive a HTTP 401 response";
    # a request (not a notification) with the same headers does get 401.
    assert (response.status, no_creds.status) == (401, 401), (response.status, response.body, no_creds.status)
    assert "invalid_token" in (response.header("www-authenticate") or "")


# -- 5. a background call forgets the token's scopes: scoped tools run in the worker's sampling loop --


async def test_background_call_keeps_the_tokens_scopes() -> None:
    from mcp_tools.engine.sampling import run_tool_use
    from mcp_tools.models import ToolCall
    from mcp_tools.server import background

    ran: list[str] = []

    @mcp_tools.tool(name="helper_e_wipe", scopes=["inventory:write"])
    def wipe() -> str:
        ran.append("wipe")
        return "wiped"

    @mcp_tools.tool(name="helper_e_agent", background=True)
    async def agent(ctx: mcp_tools.ToolContext) -> str:
        # What ctx.sample(tools=["helper_e_wipe"]) does with the tool_use block the *client* answers with.
        block = await run_tool_use(ctx, [registry.get_tool("helper_e_wipe")], {"id": "u1", "name": "helper_e_wipe", "input": {}})
        return json.dumps(block)

    try:
        conf = _oauth_settings()
        with override_settings(MCP_TOOLS=conf):
            token = await sync_to_async(_dot_token)()  # scope "mcp" only: no inventory:write
            bearer = {"authorization": f"Bearer {token}"}
            # Sanity: in the request, the token cannot call the scoped tool (403 insufficient_scope).
            direct = await call_modern(APP, "tools/call", {"name": "helper_e_wipe", "arguments": {}}, headers=bearer)
            assert direct.status == 403, (direct.status, direct.body)
            init = await post_json(APP, handshake_message("initialize", {"protocolVersion": HANDSHAKE, "capabilities": {},
                                                                        "clientInfo": {"name": "t", "version": "1"}}),
                                   post_headers(version=None, extra=bearer))
            session = init.header("mcp-session-id")
            created = await post_json(APP, handshake_message("tools/call", {"name": "helper_e_agent", "arguments": {}, "task": {}}),
                                      post_headers(version=HANDSHAKE, session=session, extra=bearer))
            task_id = created.json()["result"]["task"]["taskId"]
            await background.run_in_worker(task_id, "helper-e-worker")
            row = await ToolCall.objects.aget(pk=task_id)
    finally:
        registry.unregister_tool("helper_e_wipe")
        registry.unregister_tool("helper_e_agent")
    # Expected: the tool refused (the token lacks inventory:write), as in a request;
    # actual: the worker's principal has scopes=None, so the scoped tool runs.
    assert ran == [], (ran, row.result)


# -- 6. DRF SessionAuthentication never authenticates on the MCP endpoint -------------------------


def _session_cookie() -> str:
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.auth.models import User
    from django.contrib.sessions.backends.db import SessionStore

    user = User.objects.create_user(f"web-{secrets.token_hex(4)}", password="pw")
    store = SessionStore()
    store[SESSION_KEY] = str(user.pk)
    store[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    store[HASH_SESSION_KEY] = user.get_session_auth_hash()
    store.save()
    return f"{settings.SESSION_COOKIE_NAME}={store.session_key}"


async def test_session_cookie_of_a_logged_in_user_authenticates() -> None:
    conf = dict(settings.MCP_TOOLS)
    conf["ALLOW_ANONYMOUS"] = False
    conf["AUTHENTICATION_CLASSES"] = ["rest_framework.authentication.SessionAuthentication"]
    with override_settings(MCP_TOOLS=conf):
        cookie = await sync_to_async(_session_cookie)()
        response = await call_modern(APP, "tools/list", {}, headers={"cookie": cookie})
    # Expected: 200 (SessionAuthentication is configured, auth.py even disables its CSRF check for this);
    # actual: 401: the ASGIRequest built by authenticate_scope has no .user, so DRF's SessionAuthentication returns None.
    assert response.status == 200, (response.status, response.body)


async def test_authentication_classes_given_as_one_string_is_a_named_misconfiguration(caplog: pytest.LogCaptureFixture) -> None:
    """One dotted path given for the list made every request a 500 with a ValueError from importing
    its characters ("." is no module). Now the request still fails (500: nobody can be
    authenticated), but what is logged names the setting, and manage.py check reports E004."""
    with override_settings(MCP_TOOLS={**settings.MCP_TOOLS, "ALLOW_ANONYMOUS": False,
                                      "AUTHENTICATION_CLASSES": "rest_framework.authentication.TokenAuthentication"}):
        answer = await call_modern(APP, "tools/list")
    assert answer.status == 500
    failures = [record.exc_info[1] for record in caplog.records if record.exc_info]
    assert any("MCP_TOOLS['AUTHENTICATION_CLASSES'] must be None or a list" in str(exc) for exc in failures), failures
