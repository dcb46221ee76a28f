"""Model tools of the demo shop, called with the official ``mcp`` client in both eras, as two users.

``clerk`` (north store; sees every store; may change, delete and refund orders, and open
tickets) and ``viewer`` (south store; may only view its own store's orders and customers):
see ``demo_site/shop/seed.py``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import mcp_types as t
import pytest
from asgiref.sync import sync_to_async
from mcp import MCPError
from mcp.client.session import ClientRequestContext

from mcp_tools.client import call_tool_chain
from tests.asgi_client import ARGUMENT_ERRORS_META
from tests.clients import MODERN, sdk_client
from tests.conftest import LiveServer

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

MODES = ["legacy", MODERN]

CLERK_TOOLS = {
    "shop.orders.list", "shop.orders.retrieve", "shop.orders.create", "shop.orders.update", "shop.orders.delete",
    "shop.orders.cancel", "shop.orders.refund", "shop.orders.mark_shipped", "check_account_issue", "initiate_human_handoff",
}
VIEWER_TOOLS = {"shop.orders.list", "shop.orders.retrieve", "check_account_issue"}


@pytest.fixture(scope="module")
def server_url(django_db_setup: None) -> Iterator[str]:
    server = LiveServer("daphne").start()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


def _seed() -> dict[str, Any]:
    from rest_framework.authtoken.models import Token

    from demo_site.shop.models import Customer, Order
    from demo_site.shop.seed import seed_shop

    seed_shop()
    tokens = {name: Token.objects.get_or_create(user__username=name, defaults={"user_id": _user_id(name)})[0].key
              for name in ("clerk", "viewer")}
    orders = {order.number: order.pk for order in Order.objects.all()}
    customers = {customer.email: customer.pk for customer in Customer.objects.all()}
    return {"tokens": tokens, "orders": orders, "customers": customers}


def _user_id(username: str) -> int:
    from django.contrib.auth.models import User

    return User.objects.get(username=username).pk


@pytest.fixture
async def shop() -> dict[str, Any]:
    return await sync_to_async(_seed, thread_sensitive=True)()


async def db(fn: Any) -> Any:
    return await sync_to_async(fn, thread_sensitive=True)()


def order_field(number: str, field: str) -> Any:
    from demo_site.shop.models import Order

    return Order.objects.filter(number=number).values_list(field, flat=True).first()


class Confirmer:
    """The human on the client side: answers each confirmation and records the questions."""

    def __init__(self, action: str = "accept", confirm: bool = True) -> None:
        self.action = action
        self.confirm = confirm
        self.asked: list[str] = []

    async def __call__(self, ctx: ClientRequestContext, params: t.ElicitRequestParams) -> t.ElicitResult:
        self.asked.append(params.message)
        if self.action != "accept":
            return t.ElicitResult(action=self.action)
        return t.ElicitResult(action="accept", content={"confirm": self.confirm})


# -- what each user sees and may call ----------------------------------------------------------


async def test_tools_list_shows_each_user_only_their_tools(server_url: str, mode: str, shop: dict[str, Any]) -> None:
    async with sdk_client(server_url, mode, token=shop["tokens"]["clerk"]) as client:
        clerk = {tool.name: tool for tool in (await client.list_tools()).tools}
    async with sdk_client(server_url, mode, token=shop["tokens"]["viewer"]) as client:
        viewer = {tool.name for tool in (await client.list_tools()).tools}
    assert CLERK_TOOLS <= set(clerk)
    assert {name for name in viewer if name.startswith("shop.") or name in CLERK_TOOLS} == VIEWER_TOOLS

    listing = clerk["shop.orders.list"]
    assert listing.title == "List orders"
    assert listing.annotations.read_only_hint is True
    assert set(listing.input_schema["properties"]) >= {"status", "store", "total__gte", "search", "ordering", "limit", "cursor"}
    delete = clerk["shop.orders.delete"].annotations
    assert (delete.read_only_hint, delete.destructive_hint, delete.idempotent_hint) == (False, True, True)
    assert clerk["shop.orders.cancel"].annotations.title == "Cancel order"
    assert clerk["shop.orders.cancel"].annotations.destructive_hint is True  # it asks first
    refund = clerk["shop.orders.refund"]
    assert refund.input_schema["required"] == ["id", "amount"]
    assert refund.output_schema is not None and "refund_id" in refund.output_schema["properties"]


async def test_a_hidden_tool_answers_like_an_unknown_one(server_url: str, mode: str, shop: dict[str, Any]) -> None:
    north = shop["orders"]["N-1001"]
    async with sdk_client(server_url, mode, token=shop["tokens"]["viewer"]) as client:
        with pytest.raises(MCPError) as hidden:
            await client.call_tool("shop.orders.refund", {"id": north, "amount": "1.00"})
        with pytest.raises(MCPError) as unknown:
            await client.call_tool("shop.orders.nonexistent", {"id": north})
    assert hidden.value.error.code == unknown.value.error.code == -32602
    assert hidden.value.error.message == "Unknown tool: shop.orders.refund"
    assert unknown.value.error.message == "Unknown tool: shop.orders.nonexistent"
    assert await db(lambda: order_field("N-1001", "refunds__id")) is None


# -- list, retrieve and lookups ----------------------------------------------------------------


async def test_list_filters_searches_orders_and_pages_with_a_cursor(server_url: str, mode: str, shop: dict[str, Any]) -> None:
    async with sdk_client(server_url, mode, token=shop["tokens"]["clerk"]) as client:
        first = await client.call_tool("shop.orders.list", {"store": "north", "ordering": "total", "limit": 2})
        assert first.is_error is False, first
        assert [row["number"] for row in first.structured_content["results"]] == ["N-1003", "N-1002"]
        assert first.structured_content["results"][0]["total"] == "9.99"
        cursor = first.structured_content["nextCursor"]
        second = await client.call_tool("shop.orders.list", {"store": "north", "ordering": "total", "limit": 2, "cursor": cursor})
        assert [row["number"] for row in second.structured_content["results"]] == ["N-1001"]
        assert "nextCursor" not in second.structured_content

        found = await client.call_tool("shop.orders.list", {"search": "grace"})
        assert [row["customer_name"] for row in found.structured_content["results"]] == ["Grace Hopper"]
        big = await client.call_tool("shop.orders.list", {"total__gte": 100, "ordering": "-total"})
        assert [row["number"] for row in big.structured_content["results"]] == ["S-2001", "N-1001"]

        with pytest.raises(MCPError) as forged:  # a wrong argument: -32602, as any other
            await client.call_tool("shop.orders.list", {"cursor": "not-a-cursor"})
        assert forged.value.error.code == -32602 and forged.value.error.message.startswith("Invalid cursor")

    async with sdk_client(server_url, mode, token=shop["tokens"]["viewer"]) as client:
        mine = await client.call_tool("shop.orders.list", {})
        assert sorted(row["store"] for row in mine.structured_content["results"]) == ["south", "south"]


async def test_a_row_outside_the_queryset_answers_like_a_missing_row(server_url: str, mode: str, shop: dict[str, Any]) -> None:
    north, south = shop["orders"]["N-1001"], shop["orders"]["S-2001"]
    missing = max(shop["orders"].values()) + 1000
    async with sdk_client(server_url, mode, token=shop["tokens"]["viewer"]) as client:
        own = await client.call_tool("shop.orders.retrieve", {"id": south})
        assert own.is_error is False and own.structured_content["number"] == "S-2001"
        outside = await client.call_tool("shop.orders.retrieve", {"id": north})
        absent = await client.call_tool("shop.orders.retrieve", {"id": missing})
    assert outside.is_error is True and absent.is_error is True
    assert outside.content[0].text == f"No order with id {north}."
    assert re.sub(r"\d+", "N", outside.content[0].text) == re.sub(r"\d+", "N", absent.content[0].text)
    assert outside.structured_content == absent.structured_content


async def test_a_pk_of_the_wrong_type_is_a_tool_error_naming_the_argument(server_url: str, mode: str, shop: dict[str, Any]) -> None:
    async with sdk_client(server_url, mode, token=shop["tokens"]["clerk"]) as client:
        wrong = await client.call_tool("shop.orders.retrieve", {"id": "N-1001"})
        action = await client.call_tool("shop.orders.refund", {"id": [1], "amount": "1"})
    for refused in (wrong, action):  # invalid arguments: a tool execution error (server/tools, Error Handling)
        assert refused.is_error is True and "- id: " in refused.content[0].text, refused
        assert [error["field"] for error in refused.meta[ARGUMENT_ERRORS_META]] == ["id"]


# -- writes: validation, object permissions, confirmation ----------------------------------------


async def test_validation_errors_name_each_field(server_url: str, mode: str, shop: dict[str, Any]) -> None:
    ada = shop["customers"]["ada@example.com"]
    async with sdk_client(server_url, mode, token=shop["tokens"]["clerk"]) as client:
        bad = await client.call_tool("shop.orders.create", {"number": "N-1001", "store": "east", "total": "-5", "customer": ada})
        assert bad.is_error is True
        errors = bad.structured_content["errors"]
        assert set(errors) == {"number", "store", "total"}
        assert errors["number"] == ["order with this number already exists."]
        assert errors["store"] == ['"east" is not a valid choice.']
        assert "total: Ensure this value is greater than or equal to 0." in bad.content[0].text

        created = await client.call_tool("shop.orders.create", {"number": f"N-9{len(mode)}", "store": "north", "total": 12.5, "customer": ada})
        assert created.is_error is False, created
        assert created.structured_content["total"] == "12.50" and created.structured_content["status"] == "open"

        updated = await client.call_tool("shop.orders.update", {"id": shop["orders"]["N-1002"], "note": "gift wrap"})
        assert updated.structured_content["note"] == "gift wrap" and updated.structured_content["total"] == "35.50"
        read_only = await client.call_tool("shop.orders.update", {"id": shop["orders"]["N-1002"], "status": "shipped"})
        assert read_only.is_error is True and read_only.structured_content["errors"] == {"status": ["Unknown or read-only field."]}

        too_much = await client.call_tool("shop.orders.refund", {"id": shop["orders"]["N-1003"], "amount": "10.00"})
        assert too_much.is_error is True, too_much
        assert too_much.structured_content["errors"] == {"amount": ["At most 9.99 is left to refund on order N-1003."]}
    assert await db(lambda: order_field("N-1002", "status")) == "open"


async def test_refunds_follow_the_object_level_store_rule(server_url: str, mode: str, shop: dict[str, Any]) -> None:
    from demo_site.shop.models import Refund

    async with sdk_client(server_url, mode, token=shop["tokens"]["clerk"]) as client:
        own = await client.call_tool("shop.orders.refund", {"id": shop["orders"]["N-1001"], "amount": "20.00"})
        assert own.is_error is False, own
        assert own.structured_content["order"] == "N-1001"
        assert Decimal(own.structured_content["refunded_total"]) == Decimal("20.00")
        other = await client.call_tool("shop.orders.refund", {"id": shop["orders"]["S-2001"], "amount": "20.00"})
    assert other.is_error is True
    # The clerk may view the south store's order, so it is refused by its id (not its __str__).
    assert other.content[0].text == (f"You may not refund the order with id {shop['orders']['S-2001']}: "
                                     "permission shop.add_refund refused for this object.")
    refunds = await db(lambda: list(Refund.objects.values_list("order__number", "amount", "created_by__username")))
    assert refunds == [("N-1001", Decimal("20.00"), "clerk")]


@pytest.mark.parametrize("answer", [("accept", True), ("accept", False), ("decline", None), ("cancel", None)])
async def test_cancel_asks_for_confirmation_first(server_url: str, mode: str, shop: dict[str, Any], answer: tuple[str, Any]) -> None:
    user = Confirmer(*answer) if answer[1] is not None else Confirmer(answer[0])
    async with sdk_client(server_url, mode, token=shop["tokens"]["clerk"], elicitation_callback=user) as client:
        result = await client.call_tool("shop.orders.cancel", {"id": shop["orders"]["N-1002"], "reason": "customer asked"})
    assert user.asked == ["Cancel order N-1002? The customer is told at once."]
    if answer == ("accept", True):
        assert result.is_error is False, result
        assert result.structured_content["status"] == "cancelled"
        assert await db(lambda: order_field("N-1002", "note")) == "customer asked"
        assert await db(lambda: order_field("N-1002", "status")) == "cancelled"
    else:
        assert result.is_error is True
        assert result.content[0].text == "Not confirmed: order N-1002 was left unchanged."
        assert await db(lambda: order_field("N-1002", "status")) == "open"


async def test_delete_without_confirmation_changes_nothing(server_url: str, mode: str, shop: dict[str, Any]) -> None:
    order = shop["orders"]["N-1003"]
    async with sdk_client(server_url, mode, token=shop["tokens"]["clerk"]) as client:  # cannot answer elicitation
        with pytest.raises(MCPError):
            await client.call_tool("shop.orders.delete", {"id": order})
    declined = Confirmer("decline")
    async with sdk_client(server_url, mode, token=shop["tokens"]["clerk"], elicitation_callback=declined) as client:
        result = await client.call_tool("shop.orders.delete", {"id": order})
        assert result.is_error is True and result.content[0].text == "Not confirmed: order N-1003 was not deleted."
    assert await db(lambda: order_field("N-1003", "id")) == order

    agreed = Confirmer("accept", True)
    async with sdk_client(server_url, mode, token=shop["tokens"]["clerk"], elicitation_callback=agreed) as client:
        result = await client.call_tool("shop.orders.delete", {"id": order})
    assert result.is_error is False and result.structured_content == {"deleted": True, "id": order}
    assert agreed.asked == ["Delete order N-1003? This cannot be undone."]
    assert await db(lambda: order_field("N-1003", "id")) is None


async def test_an_admin_action_runs_on_the_rows_the_caller_names(server_url: str, mode: str, shop: dict[str, Any]) -> None:
    async with sdk_client(server_url, mode, token=shop["tokens"]["clerk"]) as client:
        result = await client.call_tool("shop.orders.mark_shipped", {"ids": [shop["orders"]["N-1001"], shop["orders"]["S-2002"]]})
        missing = await client.call_tool("shop.orders.mark_shipped", {"ids": [shop["orders"]["N-1002"], 10**9]})
        again = await client.call_tool("shop.orders.mark_shipped", {"ids": [shop["orders"]["N-1001"]]})
    assert result.is_error is False, result
    assert result.structured_content == {"count": 2, "messages": ["2 order(s) marked as shipped."]}
    # An order already shipped is counted as named, and the message says it was left alone.
    assert again.structured_content == {"count": 1, "messages": ["0 of 1 order(s) marked as shipped (1 not open, left unchanged)."]}
    assert missing.is_error is True and missing.content[0].text == f"No order with id {10**9}."
    statuses = await db(lambda: {n: order_field(n, "status") for n in ("N-1001", "S-2002", "N-1002")})
    assert statuses == {"N-1001": "shipped", "S-2002": "shipped", "N-1002": "open"}


# -- tool chaining -------------------------------------------------------------------------------


def tickets() -> list[tuple[str, str, str]]:
    from demo_site.shop.models import Ticket

    return list(Ticket.objects.values_list("customer__email", "issue_type", "urgency"))


async def test_the_chain_is_followed_end_to_end_and_opens_a_ticket(server_url: str, mode: str, shop: dict[str, Any]) -> None:
    grace = shop["customers"]["grace@example.com"]
    async with sdk_client(server_url, mode, token=shop["tokens"]["clerk"]) as client:
        chain = await call_tool_chain(client, "check_account_issue", {"customer_id": grace})
        calm = await call_tool_chain(client, "check_account_issue", {"customer_id": shop["customers"]["ada@example.com"]})
    assert chain.tools == ["check_account_issue", "initiate_human_handoff"]
    assert chain.steps[1].arguments == {"customer_id": grace, "issue_type": "account_locked", "urgency": "high"}
    assert chain.result.structured_content["issue_type"] == "account_locked"
    assert calm.tools == ["check_account_issue"]
    assert await db(tickets) == [("grace@example.com", "account_locked", "high")]


async def test_a_next_tool_hidden_from_the_caller_is_dropped(server_url: str, mode: str, shop: dict[str, Any]) -> None:
    grace = shop["customers"]["grace@example.com"]
    async with sdk_client(server_url, mode, token=shop["tokens"]["viewer"]) as client:
        chain = await call_tool_chain(client, "check_account_issue", {"customer_id": grace})
    assert chain.tools == ["check_account_issue"]  # viewer may not open tickets: the hint never reached them
    assert chain.result.meta is None or "nextTool" not in chain.result.meta
    assert "needs a specialist" in chain.result.content[0].text
    assert await db(tickets) == []
