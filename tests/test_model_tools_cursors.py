"""A list's ``nextCursor`` is a sealed token: the project's signing keys, an age limit, bound to its list.

It was ``signing.dumps`` with ``SECRET_KEY``: ``MCP_TOOLS["SIGNING_KEYS"]`` (and their rotation)
did not apply, a cursor never expired, one list's cursor was taken by another (whose keys may be of
another type: an error inside the query), and a cursor that did not open was a tool error, where
any other argument that is wrong is a -32602 error.
"""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.core import signing
from django.test import override_settings

import mcp_tools
from demo_site.shop.models import Order
from mcp_tools.conf import mcp_settings
from tests.asgi_client import call_modern

pytestmark = pytest.mark.django_db(transaction=True)

KEY = "k3Jd9-a-long-random-signing-key-of-the-first-generation-0123456789"
NEW_KEY = "p8Qx2-a-long-random-signing-key-of-the-second-generation-987654321"
PAGE = {"store": "north", "ordering": "total", "limit": 2}


def seed() -> str:
    from django.contrib.auth.models import User
    from rest_framework.authtoken.models import Token

    from demo_site.shop.seed import seed_shop

    seed_shop()
    return Token.objects.get_or_create(user=User.objects.get(username="clerk"))[0].key


async def call(name: str, arguments: dict[str, Any], token: str) -> dict[str, Any]:
    from demo_site.asgi import application

    r = await call_modern(application, "tools/call", {"name": name, "arguments": arguments}, token=token)
    assert r.status in (200, 400), r.body
    return r.json()


async def first_cursor(token: str) -> str:
    first = await call("shop.orders.list", PAGE, token)
    return str(first["result"]["structuredContent"]["nextCursor"])


def keys(*signing_keys: str) -> Any:
    from django.conf import settings

    return override_settings(MCP_TOOLS={**settings.MCP_TOOLS, "SIGNING_KEYS": list(signing_keys)})


def refused(answer: dict[str, Any]) -> str:
    assert "error" in answer, answer
    assert answer["error"]["code"] == -32602, answer
    return str(answer["error"]["message"])


async def test_a_cursor_is_signed_with_the_signing_keys_and_follows_their_rotation() -> None:
    token = await sync_to_async(seed)()
    with keys(KEY):
        cursor = await first_cursor(token)
    with keys(NEW_KEY, KEY):  # rotated: the old key still opens what it signed
        second = await call("shop.orders.list", {**PAGE, "cursor": cursor}, token)
    assert [row["number"] for row in second["result"]["structuredContent"]["results"]] == ["N-1001"]
    with keys(NEW_KEY):  # retired: what it signed no longer opens
        message = refused(await call("shop.orders.list", {**PAGE, "cursor": cursor}, token))
    assert message.startswith("Invalid cursor: pass the nextCursor of a previous page unchanged")


async def test_a_forged_or_tampered_cursor_is_an_invalid_argument() -> None:
    token = await sync_to_async(seed)()
    cursor = await first_cursor(token)
    forged = signing.dumps({"t": "shop.orders.list", "o": "total", "v": "0", "pk": 0}, salt="mcp_tools.modeltools.cursor")
    payload, _, signature = cursor.rpartition(":")
    tampered = payload.replace(payload[0], "x" if payload[0] != "x" else "y", 1) + ":" + signature
    for bad in ("not-a-cursor", forged, tampered, cursor + "x"):
        assert refused(await call("shop.orders.list", {**PAGE, "cursor": bad}, token)).startswith("Invalid cursor"), bad


async def test_an_expired_cursor_is_an_invalid_argument(monkeypatch: pytest.MonkeyPatch) -> None:
    token = await sync_to_async(seed)()
    ttl = int(mcp_settings.TOKEN_TTL)
    with monkeypatch.context() as patched:  # the cursor is stamped as given a second more than TOKEN_TTL ago
        patched.setattr(signing.TimestampSigner, "timestamp", lambda self: signing.b62_encode(int(signing.time.time()) - ttl - 1))
        cursor = await first_cursor(token)
    message = refused(await call("shop.orders.list", {**PAGE, "cursor": cursor}, token))
    assert message == (f"Invalid cursor: pass the nextCursor of a previous page unchanged, within {ttl} seconds, "
                       "or list again without a cursor.")


async def test_the_cursor_of_another_list_or_ordering_is_an_invalid_argument() -> None:
    token = await sync_to_async(seed)()
    cursor = await first_cursor(token)
    other = type("OtherOrderTools", (mcp_tools.ModelToolset,), {
        "queryset": Order.objects.all(), "basename": "cursors.orders", "actions": ["list"], "ordering_fields": ["total"]})
    mcp_tools.register_toolset(other)
    try:
        elsewhere = refused(await call("cursors.orders.list", {"ordering": "total", "cursor": cursor}, token))
    finally:
        mcp_tools.unregister_toolset(other)
    assert elsewhere == "Invalid cursor: it is not a cursor of cursors.orders.list."
    reordered = refused(await call("shop.orders.list", {**PAGE, "ordering": "-total", "cursor": cursor}, token))
    assert reordered == "This cursor belongs to another ordering: keep the ordering while paging."
