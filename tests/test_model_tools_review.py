"""Model tools: what a review of them found, each failing before its mend.

Admin actions that name a custom permission, cursors over datetimes and related fields, DRF
validation errors from ``perform_create``, ids out of the database's range or of the wrong JSON type.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib import admin
from rest_framework import serializers

import mcp_tools
from demo_site.shop.mcp_tools import OrderSerializer
from demo_site.shop.models import Order
from tests.asgi_client import argument_errors, call_modern

pytestmark = pytest.mark.django_db(transaction=True)


def seed() -> tuple[dict[str, str], dict[str, int]]:
    """The demo shop; API tokens of its clerk and viewer; order pk by number."""
    from django.contrib.auth.models import User
    from rest_framework.authtoken.models import Token

    from demo_site.shop.seed import seed_shop

    seed_shop()
    tokens = {name: Token.objects.get_or_create(user=User.objects.get(username=name))[0].key for name in ("clerk", "viewer")}
    return tokens, {order.number: order.pk for order in Order.objects.all()}


async def call(name: str, arguments: dict[str, Any], token: str | None = None) -> dict[str, Any]:
    from demo_site.asgi import application

    r = await call_modern(application, "tools/call", {"name": name, "arguments": arguments}, token=token)
    assert r.status in (200, 400), r.body
    return r.json()


def statuses() -> list[str]:
    return sorted(set(Order.objects.values_list("status", flat=True)))


# -- an admin action whose permission is a custom one ---------------------------------------------

site = admin.AdminSite(name="review_site")


class CancellingOrderAdmin(admin.ModelAdmin):
    actions = ["cancel_all"]

    def has_cancel_permission(self, request: Any) -> bool:
        return bool(request.user.is_superuser)  # as in Django's docs' "publish" example

    @admin.action(description="Cancel selected %(verbose_name_plural)s", permissions=["cancel"])
    def cancel_all(self, request: Any, queryset: Any) -> None:
        queryset.update(status=Order.Status.CANCELLED)


site.register(Order, CancellingOrderAdmin)


class CancellingOrderTools(mcp_tools.ModelToolset):
    queryset = Order.objects.all()
    basename = "review.orders"
    actions = ["retrieve"]
    admin_actions = ["cancel_all"]
    admin_site = site


@pytest.fixture
def cancelling_tools():  # type: ignore[no-untyped-def]
    mcp_tools.register_toolset(CancellingOrderTools)
    try:
        yield
    finally:
        mcp_tools.unregister_toolset(CancellingOrderTools)


@pytest.mark.parametrize("who", ["anonymous", "viewer", "clerk"])
async def test_a_custom_admin_action_permission_is_the_admin_s_has_permission(cancelling_tools, who: str) -> None:  # type: ignore[no-untyped-def]
    """The admin shows the action only to whom ``has_cancel_permission`` allows: the tool too."""
    tokens, orders = await sync_to_async(seed)()
    answer = await call("review.orders.cancel_all", {"ids": list(orders.values())}, token=tokens.get(who))
    assert answer.get("error", {}).get("code") == -32602, answer
    assert await sync_to_async(statuses)() == ["open"], "nothing changed"


def test_an_action_with_only_custom_permissions_still_needs_the_view_permission() -> None:
    from mcp_tools.modeltools.admin_actions import _permissions

    func = CancellingOrderAdmin.cancel_all
    assert _permissions(site._registry[Order], func) == ("shop.view_order",)


# -- cursors ------------------------------------------------------------------------------------------


def _same_millisecond() -> None:
    """Every order created within one millisecond, microseconds apart (as a bulk import does)."""
    base = datetime(2026, 1, 1, 12, 0, 0, 500000, tzinfo=timezone.utc)
    for i, pk in enumerate(Order.objects.order_by("pk").values_list("pk", flat=True)):
        Order.objects.filter(pk=pk).update(created_at=base.replace(microsecond=500000 + 100 * i))


async def _pages(name: str, arguments: dict[str, Any], token: str) -> list[str]:
    seen: list[str] = []
    cursor = None
    for _ in range(20):
        result = (await call(name, {**arguments, **({"cursor": cursor} if cursor else {})}, token=token))["result"]
        assert not result.get("isError"), result
        seen += [row["number"] for row in result["structuredContent"]["results"]]
        cursor = result["structuredContent"].get("nextCursor")
        if not cursor:
            return seen
    raise AssertionError(f"paging did not end: {seen}")


@pytest.mark.parametrize("ordering", ["-created_at", "created_at"])
async def test_paging_by_a_datetime_returns_every_row_once(ordering: str) -> None:
    tokens, orders = await sync_to_async(seed)()
    await sync_to_async(_same_millisecond)()
    seen = await _pages("shop.orders.list", {"limit": 2, "ordering": ordering}, tokens["clerk"])
    assert sorted(seen) == sorted(orders)


class ByCustomerOrderTools(mcp_tools.ModelToolset):
    queryset = Order.objects.select_related("customer")
    basename = "review.orders_by_customer"
    actions = ["list"]
    ordering_fields = ["customer__name", "total"]


async def test_paging_by_a_related_field() -> None:
    from mcp_tools.modeltools.base import known_permissions

    assert ByCustomerOrderTools.check_declaration(known_permissions()) == []
    tokens, orders = await sync_to_async(seed)()
    mcp_tools.register_toolset(ByCustomerOrderTools)
    try:
        seen = await _pages("review.orders_by_customer.list", {"ordering": "customer__name", "limit": 2}, tokens["clerk"])
    finally:
        mcp_tools.unregister_toolset(ByCustomerOrderTools)
    assert sorted(seen) == sorted(orders)


# -- arguments ------------------------------------------------------------------------------------------


class DrfStyleOrderTools(mcp_tools.ModelToolset):
    """``perform_create`` as a DRF view writes it: a business rule raises ``serializers.ValidationError``."""

    queryset = Order.objects.all()
    serializer_class = OrderSerializer
    basename = "review.drf_orders"
    actions = ["create"]

    def perform_create(self, serializer: Any) -> None:
        if serializer.validated_data["total"] > 1000:
            raise serializers.ValidationError({"total": ["Orders over 1000 need a manager."]})
        serializer.save()


def _customer() -> int:
    from demo_site.shop.models import Customer

    return int(Customer.objects.values_list("pk", flat=True).first())


async def test_a_drf_validation_error_from_perform_create_names_the_field() -> None:
    tokens, _ = await sync_to_async(seed)()
    mcp_tools.register_toolset(DrfStyleOrderTools)
    try:
        answer = await call("review.drf_orders.create", {"number": "X-9", "customer": await sync_to_async(_customer)(),
                                                          "store": "north", "total": "5000.00"}, token=tokens["clerk"])
    finally:
        mcp_tools.unregister_toolset(DrfStyleOrderTools)
    assert answer["result"]["isError"] is True
    assert answer["result"]["structuredContent"] == {"errors": {"total": ["Orders over 1000 need a manager."]}}
    assert not await sync_to_async(Order.objects.filter(number="X-9").exists)()


@pytest.mark.parametrize("tool", ["shop.orders.mark_shipped", "shop.orders.retrieve"])
async def test_an_id_past_64_bits_is_a_clear_error(tool: str) -> None:
    tokens, _ = await sync_to_async(seed)()
    arguments = {"ids": [10**30]} if tool.endswith("mark_shipped") else {"id": 10**30}
    answer = await call(tool, arguments, token=tokens["clerk"])
    assert [e["field"] for e in argument_errors(answer)] == ["ids" if tool.endswith("mark_shipped") else "id"], answer


@pytest.mark.parametrize("wrong", ["str", True])
async def test_an_id_of_the_wrong_json_type_is_refused(wrong: Any) -> None:
    """docs/model-tools.md: a wrong type (a string for an integer ``id``) is a tool error naming the argument."""
    tokens, orders = await sync_to_async(seed)()
    value = str(orders["N-1001"]) if wrong == "str" else True
    answer = await call("shop.orders.retrieve", {"id": value}, token=tokens["clerk"])
    assert argument_errors(answer)[0]["field"] == "id", answer


async def test_a_list_filter_value_outside_the_field_s_choices_is_refused() -> None:
    tokens, _ = await sync_to_async(seed)()
    refused = await call("shop.orders.list", {"status": "bogus"}, token=tokens["clerk"])
    assert argument_errors(refused)[0]["field"] == "status", refused
    listed = await call("shop.orders.list", {"status": "open"}, token=tokens["clerk"])
    assert listed["result"]["structuredContent"]["results"], listed
