"""A 2025-11-25 session's standalone (GET) stream is for its caller as the caller is now.

The stream kept receiving notifications (resource updates, list changes) after the token it was
opened with was revoked or expired, or its user was made inactive: the caller was authenticated
once, when the GET came. Now it is authenticated again before each notification goes out, as the
2026-07-28 ``subscriptions/listen`` stream is (tests/test_listen_reauthentication.py).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import override_settings

import mcp_tools
from tests.asgi_client import HANDSHAKE, handshake_message, post_headers, post_json
from tests.test_listen_reauthentication import (  # noqa: F401  (resources: the autouse fixture)
    PUBLIC,
    SECRET,
    configured,
    drf_credentials,
    make_user,
    notify,
    oauth_credentials,
    resources,
    take_away,
)

pytest.importorskip("oauth2_provider")
pytestmark = [pytest.mark.django_db(transaction=True)]


def app() -> Any:
    from django.core.handlers.asgi import ASGIHandler

    from mcp_tools.routing import mcp_asgi_app

    return mcp_asgi_app(ASGIHandler())


def session_headers(authorization: str | None, session: str | None = None, **extra: str) -> dict[str, str]:
    return post_headers(version=HANDSHAKE if session else None, session=session,
                        extra={**({"authorization": authorization} if authorization else {}), **extra})


async def open_subscribed_session(authorization: str | None, uris: list[str]) -> str:
    """A 2025-11-25 session of the caller ``authorization`` names, subscribed to ``uris``."""
    initialize = handshake_message("initialize", {"protocolVersion": HANDSHAKE, "capabilities": {},
                                                  "clientInfo": {"name": "t", "version": "1"}})
    r = await post_json(app(), initialize, session_headers(authorization))
    assert r.status == 200, r.body
    session = r.header("mcp-session-id")
    assert session
    for uri in uris:
        r = await post_json(app(), handshake_message("resources/subscribe", {"uri": uri}), session_headers(authorization, session))
        assert r.status == 200 and r.json()["result"] == {}, r.body
    return session


class GetStream:
    """A session's standalone stream held open in process."""

    def __init__(self, authorization: str | None, session: str) -> None:
        headers = session_headers(authorization, session, accept="text/event-stream")
        self.scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
                      "path": "/mcp", "raw_path": b"/mcp", "root_path": "", "query_string": b"",
                      "headers": [(k.encode(), v.encode("latin-1")) for k, v in headers.items()],
                      "client": ("127.0.0.1", 1), "server": ("testserver", 80)}
        self.sent: list[dict[str, Any]] = []
        self.requested = False
        self.gone = asyncio.Event()
        self.ended = asyncio.Event()
        self.task: asyncio.Future[Any] | None = None

    async def receive(self) -> dict[str, Any]:
        if not self.requested:
            self.requested = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body"):
            self.ended.set()

    def status(self) -> int | None:
        return next((m["status"] for m in self.sent if m["type"] == "http.response.start"), None)

    def text(self) -> str:
        return b"".join(m.get("body", b"") for m in self.sent if m["type"] == "http.response.body").decode()

    def methods(self) -> list[str]:
        found = []
        for line in self.text().splitlines():
            if line.startswith("data:") and line[5:].strip():
                found.append(json.loads(line[5:])["method"])
        return found

    async def open(self) -> None:
        self.task = asyncio.ensure_future(app()(self.scope, self.receive, self.send))
        await self.until(lambda: "id: " in self.text())  # the priming event: the stream is in its session's group
        assert self.status() == 200

    async def until(self, condition: Any, timeout: float = 10) -> None:
        async def wait() -> None:
            while not condition():
                await asyncio.sleep(0.02)

        await asyncio.wait_for(wait(), timeout)

    async def close(self) -> None:
        self.gone.set()
        if self.task is not None:
            await asyncio.wait_for(self.task, 10)


def updates(stream: GetStream, uri: str) -> int:
    return stream.text().count(f'"method":"notifications/resources/updated","params":{{"uri":"{uri}"')


def list_change() -> None:
    """A tool comes and goes: ``notifications/tools/list_changed`` for every standalone stream of the process."""
    from mcp_tools.registry.registry import registry

    mcp_tools.tool(name="gr_passing_tool")(lambda: "x")
    registry.unregister_tool("gr_passing_tool")


@pytest.mark.parametrize("era_auth", ["oauth", "drf"])
@pytest.mark.parametrize("change", ["revoke", "expire", "deactivate", "remove_permission", "nothing"])
async def test_get_stream_follows_the_caller(era_auth: str, change: str) -> None:
    if era_auth == "drf" and change == "expire":
        pytest.skip("DRF tokens do not expire")
    user = await sync_to_async(make_user)()
    authorization = await sync_to_async(oauth_credentials if era_auth == "oauth" else drf_credentials)(user)
    with configured(oauth=era_auth == "oauth"):
        session = await open_subscribed_session(authorization, [SECRET, PUBLIC])
        stream = GetStream(authorization, session)
        try:
            await stream.open()
            await sync_to_async(take_away)(change, user, authorization)
            list_change()
            await notify(SECRET)
            await notify(PUBLIC)
            if change in ("revoke", "expire", "deactivate"):
                await stream.until(stream.ended.is_set)  # the stream ends, with nothing more on it
                assert stream.methods() == [], stream.text()[-400:]
            elif change == "remove_permission":
                await stream.until(lambda: updates(stream, PUBLIC) == 1)  # the stream goes on ...
                assert updates(stream, SECRET) == 0, stream.text()[-400:]  # ... without what the caller may no longer read
                assert "notifications/tools/list_changed" in stream.methods()
                assert not stream.ended.is_set()
            else:
                await stream.until(lambda: updates(stream, PUBLIC) == 1)
                assert updates(stream, SECRET) == 1
                assert "notifications/tools/list_changed" in stream.methods()
                assert not stream.ended.is_set()
        finally:
            await stream.close()


async def test_an_anonymous_sessions_stream_goes_on() -> None:
    """An anonymous caller is its session's (``anonymous:session:<id>``): authenticated again, still the same one."""
    from django.conf import settings

    conf = {key: value for key, value in settings.MCP_TOOLS.items() if key != "OAUTH"}
    with override_settings(MCP_TOOLS={**conf, "ALLOW_ANONYMOUS": True}):
        session = await open_subscribed_session(None, [PUBLIC])
        stream = GetStream(None, session)
        try:
            await stream.open()
            list_change()
            await notify(PUBLIC)
            await stream.until(lambda: updates(stream, PUBLIC) == 1)
            assert "notifications/tools/list_changed" in stream.methods()
            assert not stream.ended.is_set()
        finally:
            await stream.close()


async def test_an_expired_token_ends_an_idle_get_stream_at_a_keep_alive(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing to send: the token's own expiry, read without a lookup at each keep-alive, ends the stream."""
    from mcp_tools.server import oauth
    from mcp_tools.transports import http

    monkeypatch.setattr(http, "KEEPALIVE_SECONDS", 0.05)
    user = await sync_to_async(make_user)()
    authorization = await sync_to_async(oauth_credentials)(user, 600)
    with configured(oauth=True):
        session = await open_subscribed_session(authorization, [PUBLIC])
        stream = GetStream(authorization, session)
        try:
            await stream.open()
            await stream.until(lambda: ": keep-alive" in stream.text())
            assert not stream.ended.is_set()
            monkeypatch.setattr(oauth, "expired", lambda info: True)  # its time came
            await stream.until(stream.ended.is_set)
        finally:
            await stream.close()
