"""A 2026-07-28 ``subscriptions/listen`` stream is for its caller as the caller is now.

The stream kept receiving ``notifications/resources/updated`` after its token was revoked, its
user made inactive or the read permission taken away: the caller was authenticated once, when
the stream opened. Now it is authenticated again before each notification goes out.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import override_settings

import mcp_tools
from tests.asgi_client import modern_message, post_headers

pytest.importorskip("oauth2_provider")
pytestmark = [pytest.mark.django_db(transaction=True)]

SECRET, PUBLIC = "lr://secret", "lr://public"
RESOURCE = "http://testserver/mcp"


@pytest.fixture(autouse=True)
def resources() -> Iterator[None]:
    from mcp_tools.registry.registry import registry

    mcp_tools.resource(SECRET, name="lr-secret", permissions=["inventory.change_product"])(lambda: "s")
    mcp_tools.resource(PUBLIC, name="lr-public")(lambda: "p")
    try:
        yield
    finally:
        registry.unregister_resource(SECRET)
        registry.unregister_resource(PUBLIC)


def configured(oauth: bool) -> Any:
    from django.conf import settings

    conf = {key: value for key, value in settings.MCP_TOOLS.items() if key not in ("OAUTH", "AUTHENTICATION_CLASSES")}
    conf["ALLOW_ANONYMOUS"] = False
    conf["AUTHENTICATION_CLASSES"] = ["rest_framework.authentication.TokenAuthentication"]
    if oauth:
        conf["OAUTH"] = {"AUTHORIZATION_SERVERS": ["/o"], "TOKEN_VERIFIER": "mcp_tools.contrib.oauth_toolkit.OAuthToolkitVerifier",
                         "SCOPES_SUPPORTED": ["mcp"], "REQUIRED_SCOPES": ["mcp"]}
    return override_settings(MCP_TOOLS=conf)


def make_user() -> Any:
    from django.contrib.auth.models import Permission, User

    user = User.objects.create_user(username=f"lr-{secrets.token_hex(4)}", password="x")
    user.user_permissions.add(Permission.objects.get(content_type__app_label="inventory", codename="change_product"))
    return user


def oauth_credentials(user: Any, expires_in: int = 600) -> str:
    from django.utils import timezone
    from oauth2_provider.models import AccessToken, Application

    app = Application.objects.create(name="lr", user=user, client_type=Application.CLIENT_CONFIDENTIAL,
                                     authorization_grant_type=Application.GRANT_CLIENT_CREDENTIALS,
                                     client_secret=secrets.token_urlsafe(20))
    value = secrets.token_urlsafe(30)
    AccessToken.objects.create(user=user, application=app, token=value, expires=timezone.now() + timedelta(seconds=expires_in),
                               scope="mcp", resource=[RESOURCE])
    return f"Bearer {value}"


def drf_credentials(user: Any) -> str:
    from rest_framework.authtoken.models import Token

    return f"Token {Token.objects.create(user=user).key}"


def take_away(change: str, user: Any, authorization: str) -> None:
    from django.contrib.auth.models import Permission
    from django.utils import timezone
    from oauth2_provider.models import AccessToken
    from rest_framework.authtoken.models import Token

    scheme, value = authorization.split(" ", 1)
    if change == "revoke":
        (AccessToken.objects.filter(token=value) if scheme == "Bearer" else Token.objects.filter(key=value)).delete()
    elif change == "expire":
        AccessToken.objects.filter(token=value).update(expires=timezone.now() - timedelta(seconds=1))
    elif change == "deactivate":
        user.is_active = False
        user.save()
    elif change == "remove_permission":
        user.user_permissions.remove(Permission.objects.get(content_type__app_label="inventory", codename="change_product"))


class Stream:
    """A ``subscriptions/listen`` request held open in process."""

    def __init__(self, authorization: str, uris: list[str], list_changes: bool = False) -> None:
        from django.core.handlers.asgi import ASGIHandler

        from mcp_tools.routing import mcp_asgi_app

        filters: dict[str, Any] = {"resourceSubscriptions": uris}
        if list_changes:
            filters["toolsListChanged"] = True
        headers = post_headers(extra={"mcp-method": "subscriptions/listen", "authorization": authorization})
        self.body = json.dumps(modern_message("subscriptions/listen", {"notifications": filters})).encode()
        self.scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
                      "path": "/mcp", "raw_path": b"/mcp", "root_path": "", "query_string": b"",
                      "headers": [(k.encode(), v.encode("latin-1")) for k, v in headers.items()],
                      "client": ("127.0.0.1", 1), "server": ("testserver", 80)}
        self.sent: list[dict[str, Any]] = []
        self.gone = asyncio.Event()
        self.ended = asyncio.Event()
        self.app = mcp_asgi_app(ASGIHandler())
        self.task: asyncio.Future[Any] | None = None

    async def receive(self) -> dict[str, Any]:
        if self.body:
            body, self.body = self.body, b""
            return {"type": "http.request", "body": body, "more_body": False}
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body"):
            self.ended.set()

    def text(self) -> str:
        return b"".join(m.get("body", b"") for m in self.sent if m["type"] == "http.response.body").decode()

    async def open(self) -> None:
        self.task = asyncio.ensure_future(self.app(self.scope, self.receive, self.send))
        await self.until(lambda: "notifications/subscriptions/acknowledged" in self.text())

    async def until(self, condition: Any, timeout: float = 10) -> None:
        async def wait() -> None:
            while not condition():
                await asyncio.sleep(0.02)

        await asyncio.wait_for(wait(), timeout)

    async def close(self) -> None:
        self.gone.set()
        if self.task is not None:
            await asyncio.wait_for(self.task, 10)


async def notify(uri: str) -> None:
    from mcp_tools.server.sessions import notify_resource_updated

    await notify_resource_updated(uri)


def updates(stream: Stream, uri: str) -> int:
    return stream.text().count(f'"method":"notifications/resources/updated","params":{{"uri":"{uri}"')


@pytest.mark.parametrize("era_auth", ["oauth", "drf"])
@pytest.mark.parametrize("change", ["revoke", "expire", "deactivate", "remove_permission", "nothing"])
async def test_listen_stream_follows_the_caller(era_auth: str, change: str) -> None:
    if era_auth == "drf" and change == "expire":
        pytest.skip("DRF tokens do not expire")
    user = await sync_to_async(make_user)()
    authorization = await sync_to_async(oauth_credentials if era_auth == "oauth" else drf_credentials)(user)
    with configured(oauth=era_auth == "oauth"):
        stream = Stream(authorization, [SECRET, PUBLIC], list_changes=True)
        try:
            await stream.open()
            assert SECRET in stream.text()  # acknowledged: the caller may read it now
            await sync_to_async(take_away)(change, user, authorization)
            await notify(SECRET)
            await notify(PUBLIC)  # goes out after SECRET's, if anything does
            if change in ("revoke", "expire", "deactivate"):
                await stream.until(stream.ended.is_set)  # the stream ends, with nothing more on it
                assert updates(stream, SECRET) == updates(stream, PUBLIC) == 0, stream.text()[-400:]
                assert '"result"' not in stream.text()  # no response: the client reconnects and meets the 401
            elif change == "remove_permission":
                await stream.until(lambda: updates(stream, PUBLIC) == 1)  # the stream goes on ...
                assert updates(stream, SECRET) == 0, stream.text()[-400:]  # ... without what the caller may no longer read
                assert not stream.ended.is_set()
            else:
                await stream.until(lambda: updates(stream, PUBLIC) == 1)
                assert updates(stream, SECRET) == 1
        finally:
            await stream.close()


async def test_an_expired_token_ends_an_idle_stream_at_a_keep_alive(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing to send: the token's own expiry, read without a lookup at each keep-alive, ends the stream."""
    from mcp_tools.transports import http

    monkeypatch.setattr(http, "KEEPALIVE_SECONDS", 0.05)
    user = await sync_to_async(make_user)()
    authorization = await sync_to_async(oauth_credentials)(user, 600)
    with configured(oauth=True):
        stream = Stream(authorization, [PUBLIC])
        try:
            await stream.open()
            await stream.until(lambda: ": keep-alive" in stream.text())
            assert not stream.ended.is_set()
            # The token the stream was opened with expires (as if its time came): its expires_at, kept with the caller.
            from mcp_tools.server import oauth

            monkeypatch.setattr(oauth, "expired", lambda info: True, raising=False)
            await stream.until(stream.ended.is_set)
        finally:
            await stream.close()
