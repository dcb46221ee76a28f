"""A burst of notifications on a stream costs one look-up of its caller, not one per notification.

Each notification looked the stream's token up again (tests/test_get_stream_reauthentication.py):
a burst of 50 resource updates was 50 verifier calls (50 introspection requests with such a
verifier) on every stream that heard of them. One look-up now also vouches for the notifications
that were already waiting when it began, for ``REVERIFY_SECONDS``; one queued after it began
still waits for a look-up of its own, so a revoked token still hears of nothing that came after.
"""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

import mcp_tools
from tests.test_get_stream_reauthentication import GetStream, open_subscribed_session
from tests.test_listen_reauthentication import (  # noqa: F401  (resources: the autouse fixture)
    PUBLIC,
    Stream,
    configured,
    make_user,
    oauth_credentials,
    resources,
    take_away,
)

pytest.importorskip("oauth2_provider")
pytestmark = [pytest.mark.django_db(transaction=True)]

LIST_CHANGES = ["notifications/tools/list_changed", "notifications/prompts/list_changed", "notifications/resources/list_changed"]


@pytest.fixture
def verifier_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The tokens the verifier is asked about, in order."""
    from mcp_tools.contrib.oauth_toolkit import OAuthToolkitVerifier

    calls: list[str] = []
    original = OAuthToolkitVerifier.verify

    def counting(self: Any, token: str) -> Any:
        calls.append(token)
        return original(self, token)

    monkeypatch.setattr(OAuthToolkitVerifier, "verify", counting)
    return calls


def three_list_changes() -> None:
    """A tool, a prompt and a resource come and go, with no await between: three list changes
    wait in every stream's outbox before any stream takes the first."""
    from mcp_tools.registry.registry import registry

    mcp_tools.tool(name="rb_tool")(lambda: "x")
    mcp_tools.prompt(name="rb_prompt")(lambda: "x")
    mcp_tools.resource("rb://r", name="rb-r")(lambda: "x")
    registry.unregister_tool("rb_tool")
    registry.unregister_prompt("rb_prompt")
    registry.unregister_resource("rb://r")


def sent(stream: Any) -> list[str]:
    return [method for method in LIST_CHANGES if method in stream.text()]


async def new_stream(kind: str, authorization: str) -> Any:
    """A GET stream of a new session (subscribed to PUBLIC), or a listen stream asking for every list change."""
    if kind == "get":
        return GetStream(authorization, await open_subscribed_session(authorization, [PUBLIC]))
    return ListenAll(authorization)


@pytest.mark.parametrize("kind", ["get", "listen"])
async def test_a_burst_costs_one_look_up(kind: str, verifier_calls: list[str]) -> None:
    user = await sync_to_async(make_user)()
    authorization = await sync_to_async(oauth_credentials)(user)
    with configured(oauth=True):
        stream = await new_stream(kind, authorization)
        try:
            await stream.open()
            before = len(verifier_calls)
            three_list_changes()
            await stream.until(lambda: len(sent(stream)) == 3)
            assert len(verifier_calls) - before == 1
        finally:
            await stream.close()


@pytest.mark.parametrize("kind", ["get", "listen"])
async def test_what_comes_after_a_look_up_waits_for_one_of_its_own(kind: str, verifier_calls: list[str]) -> None:
    """A notification queued after the look-up that vouched for a burst began, however soon after,
    is not covered by it: revoked in between, the token hears of nothing more and the stream ends."""
    from mcp_tools.server.sessions import notify_resource_updated

    user = await sync_to_async(make_user)()
    authorization = await sync_to_async(oauth_credentials)(user)
    with configured(oauth=True):
        stream = await new_stream(kind, authorization)
        try:
            await stream.open()
            three_list_changes()
            await stream.until(lambda: len(sent(stream)) == 3)
            await sync_to_async(take_away)("revoke", user, authorization)
            await notify_resource_updated(PUBLIC)
            await stream.until(stream.ended.is_set)
            assert "notifications/resources/updated" not in stream.text()
        finally:
            await stream.close()


async def test_a_look_up_vouches_for_no_longer_than_reverify_seconds(verifier_calls: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Past REVERIFY_SECONDS (here 0) the notifications a look-up found waiting are looked up again
    (a client that reads slowly takes long to be sent a burst)."""
    from mcp_tools.transports import http

    monkeypatch.setattr(http, "REVERIFY_SECONDS", 0.0)
    user = await sync_to_async(make_user)()
    authorization = await sync_to_async(oauth_credentials)(user)
    with configured(oauth=True):
        stream = await new_stream("get", authorization)
        try:
            await stream.open()
            before = len(verifier_calls)
            three_list_changes()
            await stream.until(lambda: len(sent(stream)) == 3)
            assert len(verifier_calls) - before == 3
        finally:
            await stream.close()


class ListenAll(Stream):
    """A ``subscriptions/listen`` stream asking for every list change."""

    def __init__(self, authorization: str) -> None:
        import json

        super().__init__(authorization, [PUBLIC], list_changes=True)
        message = json.loads(self.body)
        message["params"]["notifications"].update({"promptsListChanged": True, "resourcesListChanged": True})
        self.body = json.dumps(message).encode()
