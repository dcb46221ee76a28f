"""A handler (or completer) that returns rows Django reads lazily: a ``QuerySet``, a ``RawQuerySet``, a ``Page`` of one.

Shaped on the event loop, such a value ran its query there, which Django refuses (``SynchronousOnlyOperation``):
a resource answered -32603, a tool "does not match its output schema", a completer -32603, and a
``RawQuerySet`` went out as its repr (its SQL). They are read on a thread now, as part of the handler's run:
a query that fails then is the handler's failure (the tool's error, its row ended), not an escape that left
the row ``working``.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from mcp_tools import Completions, ToolContext, resource
from mcp_tools.models import ToolCall
from mcp_tools.registry import make_tool, registry
from mcp_tools.registry.results import Page
from tests.asgi_client import call_modern

pytestmark = pytest.mark.django_db(transaction=True)

RAN: list[str] = []


def app() -> Any:
    from demo_site.asgi import application

    return application


async def call(name: str) -> dict[str, Any]:
    body: dict[str, Any] = (await call_modern(app(), "tools/call", {"name": name, "arguments": {}})).json()
    return body


@pytest.fixture
async def reader() -> None:
    from django.contrib.auth.models import User

    await sync_to_async(User.objects.create_user)("reader", password="x")


def names_page() -> Page[list[str]]:
    """A page of the users' names."""
    from django.contrib.auth.models import User

    return Page(User.objects.order_by("username").values_list("username", flat=True)[:10])


def raw_names() -> Any:
    """The users' names, by raw SQL."""
    from django.contrib.auth.models import User

    return User.objects.raw("SELECT id, username FROM auth_user ORDER BY username")  # its rows: each user as str()


async def async_names() -> Any:
    """The users' names, returned lazily from an async tool (completed in its first step)."""
    from django.contrib.auth.models import User

    return User.objects.order_by("username").values_list("username", flat=True)


@pytest.mark.parametrize("fn, text", [
    (names_page, '["reader"]'),
    (raw_names, '["reader"]'),
    (async_names, '["reader"]'),
], ids=["page-of-a-queryset", "raw-queryset", "async-first-step"])
async def test_returned_rows_are_read_on_a_thread(reader: None, fn: Any, text: str) -> None:
    with registry.registered_temporarily(make_tool(fn, paginate=fn is names_page)):
        body = await call(fn.__name__)
    result = body["result"]
    assert "isError" not in result, body
    assert text in result["content"][0]["text"], body


def broken_query(ctx: ToolContext) -> Any:
    """Journals a step (the call gets a row), then returns a query the database refuses when it runs."""
    from django.contrib.auth.models import User

    ctx.once("effect", lambda: RAN.append("effect") or 1)
    return User.objects.extra(where=["no_such_column = 1"]).values("username")


async def test_a_query_failing_when_read_is_the_tools_error_and_ends_its_row() -> None:
    """Read in finish(), outside the handler's run, the failure escaped: -32603 and the row left working."""
    RAN.clear()
    with registry.registered_temporarily(make_tool(broken_query)):
        body = await call("broken_query")
    assert body["result"]["isError"] is True, body
    assert await sync_to_async(lambda: list(ToolCall.objects.values_list("status", flat=True)))() == ["failed"]
    assert RAN == ["effect"]


def by_queryset(value: str, arguments: Any) -> Any:
    from demo_site.inventory.models import Product

    return Product.objects.filter(sku__istartswith=value).order_by("sku").values_list("sku", flat=True)


def by_completions(value: str, arguments: Any) -> Any:
    return Completions(by_queryset(value, arguments)[:100])


@pytest.mark.parametrize("completer", [by_queryset, by_completions])
async def test_a_completer_returning_a_queryset_offers_its_rows(completer: Any) -> None:
    from demo_site.inventory.models import Product

    await sync_to_async(Product.objects.create)(sku="QQ-1", name="One", price=Decimal("1.00"))
    resource("test://qs/{sku}", completions={"sku": completer})(lambda sku: sku)
    try:
        params = {"ref": {"type": "ref/resource", "uri": "test://qs/{sku}"}, "argument": {"name": "sku", "value": "QQ"}}
        body = (await call_modern(app(), "completion/complete", params)).json()
    finally:
        registry.unregister_resource("test://qs/{sku}")
    assert body["result"]["completion"]["values"] == ["QQ-1"], body
