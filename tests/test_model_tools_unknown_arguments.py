"""A toolset's retrieve and delete and an admin action refuse arguments their inputSchema does not
list (``"additionalProperties": false``), as every other tool does.

They took them and ignored them: ``shop.orders.retrieve {"id": 1, "extra": 2}`` answered the row,
``shop.orders.mark_shipped {"ids": [1], "extra": 2}`` shipped it, while a plain tool or a model
action answered "Invalid arguments ... Extra inputs are not permitted". Their validator typed the
lookup and let every other key through.
"""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from demo_site.shop.models import Order
from tests.asgi_client import argument_errors, call_modern

pytestmark = pytest.mark.django_db(transaction=True)

EXTRA = [{"field": "extra", "message": "Extra inputs are not permitted", "type": "extra_forbidden"}]


def seed() -> tuple[str, int]:
    """The demo shop; the clerk's API token and the pk of the open order N-1002."""
    from django.contrib.auth.models import User
    from rest_framework.authtoken.models import Token

    from demo_site.shop.seed import seed_shop

    seed_shop()
    return Token.objects.get_or_create(user=User.objects.get(username="clerk"))[0].key, Order.objects.get(number="N-1002").pk


async def call(name: str, arguments: dict[str, Any], token: str) -> dict[str, Any]:
    from demo_site.asgi import application

    r = await call_modern(application, "tools/call", {"name": name, "arguments": arguments}, token=token)
    assert r.status == 200, r.body
    body: dict[str, Any] = r.json()
    return body


def status(pk: int) -> str:
    return str(Order.objects.get(pk=pk).status)


@pytest.mark.parametrize("tool, lookup", [
    ("shop.orders.retrieve", "id"), ("shop.orders.delete", "id"), ("shop.orders.mark_shipped", "ids"),
    ("shop.orders.cancel", "id"),  # a model action: refused before, the same way
])
async def test_an_unknown_argument_is_refused_as_by_any_tool(tool: str, lookup: str) -> None:
    token, pk = await sync_to_async(seed)()
    answer = await call(tool, {lookup: [pk] if lookup == "ids" else pk, "extra": 2}, token)
    assert argument_errors(answer) == EXTRA, answer
    assert await sync_to_async(status)(pk) == "open"  # not shipped, cancelled or deleted (nor asked about)


async def test_many_unknown_arguments_are_listed_in_order_and_counted() -> None:
    from mcp_tools.protocol.errors import MAX_ARGUMENT_ERRORS

    token, pk = await sync_to_async(seed)()
    extra = {f"x{i:03d}": i for i in range(MAX_ARGUMENT_ERRORS + 5)}
    answer = await call("shop.orders.retrieve", {"id": pk, **extra}, token)
    assert [e["field"] for e in argument_errors(answer)] == sorted(extra)[:MAX_ARGUMENT_ERRORS], answer
    assert answer["result"]["content"][0]["text"].endswith("(and 5 more)"), answer
