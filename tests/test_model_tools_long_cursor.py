"""A list ordered by a long text value: its ``nextCursor`` opens, and paging stays exact.

The cursor carries the last row's ordering value (JSON escaped to ASCII, six characters per
non-ASCII character, then base64), and every sealed token longer than 4,096 characters was
refused: a list ordered by a value of ~500 non-ASCII or ~3,000 ASCII characters (a TextField
title) handed out a ``nextCursor`` its next call refused with -32602 "Invalid cursor". A cursor's
bound is now a request's (``MAX_BODY_BYTES``); the other tokens keep theirs.
"""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connection

import mcp_tools
from mcp_tools.server import tokens
from tests.asgi_client import call_modern

pytestmark = pytest.mark.django_db(transaction=True)

#: 562 characters: a cursor of ~4,600. The demo has no TextField; Product.name, a varchar(200),
#: holds it on SQLite, which does not enforce max_length, standing for one.
LONG = "日本語の商品説明" * 70
sqlite_only = pytest.mark.skipif(connection.vendor != "sqlite",
                                 reason="stands a long value in for a TextField: only SQLite keeps it in a varchar(200)")


def seed(names: dict[str, str]) -> str:
    from django.contrib.auth.models import User
    from rest_framework.authtoken.models import Token

    from demo_site.inventory.models import Product

    user = User.objects.create_superuser("pager", "pager@example.com", "pw")
    for sku, name in names.items():
        Product.objects.create(sku=sku, name=name, price=1)
    return Token.objects.get_or_create(user=user)[0].key


async def every_page(ordering: str, token: str) -> list[list[str]]:
    """The SKUs of each page of one product a page, following ``nextCursor`` to the end."""
    from demo_site.asgi import application
    from demo_site.inventory.models import Product

    tools = type("LongNameProductTools", (mcp_tools.ModelToolset,), {
        "queryset": Product.objects.all(), "basename": "longnames.products", "actions": ["list"],
        "ordering_fields": ["name"], "fields": ["sku", "name"]})
    mcp_tools.register_toolset(tools)
    pages: list[list[str]] = []
    arguments: dict[str, Any] = {"limit": 1, "ordering": ordering}
    try:
        while len(pages) <= 10:
            answer = (await call_modern(application, "tools/call", {"name": "longnames.products.list", "arguments": arguments},
                                        token=token)).json()
            assert "error" not in answer, answer
            page = answer["result"]["structuredContent"]
            pages.append([row["sku"] for row in page["results"]])
            if "nextCursor" not in page:
                return pages
            assert len(page["nextCursor"]) > 4096  # what this test is about: the cap every token had
            arguments = {**arguments, "cursor": page["nextCursor"]}
    finally:
        mcp_tools.unregister_toolset(tools)
    raise AssertionError(f"no last page: {pages}")


@sqlite_only
async def test_the_next_pages_of_a_list_ordered_by_a_long_text_open() -> None:
    token = await sync_to_async(seed)({f"S{n}": f"{n} {LONG}" for n in range(3)})
    assert await every_page("name", token) == [["S0"], ["S1"], ["S2"]]
    assert await every_page("-name", token) == [["S2"], ["S1"], ["S0"]]


@sqlite_only
async def test_rows_of_the_same_long_text_are_each_served_once_in_key_order() -> None:
    # S1 and S2 tie; created in this order, their primary keys rise with their SKUs.
    token = await sync_to_async(seed)({"S1": f"a {LONG}", "S2": f"a {LONG}", "S3": f"b {LONG}", "S4": f"a {LONG}"})
    assert await every_page("name", token) == [["S1"], ["S2"], ["S4"], ["S3"]]
    assert await every_page("-name", token) == [["S3"], ["S4"], ["S2"], ["S1"]]


def test_other_tokens_keep_their_bound() -> None:
    """A requestState, saga or resume token holds ids and digests: one past 4,096 characters is refused
    before its signature is checked, unless its purpose passes a bound of its own."""
    long = tokens.seal("request", {"c": "1", "pad": "x" * tokens.MAX_TOKEN_CHARS})
    with pytest.raises(tokens.InvalidToken):
        tokens.unseal("request", long)
    assert tokens.unseal("request", long, max_chars=len(long))["c"] == "1"
    with pytest.raises(tokens.InvalidToken):
        tokens.unseal("request", long, max_chars=len(long) - 1)
