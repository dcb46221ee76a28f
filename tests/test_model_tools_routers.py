"""Model tools on a site whose models live on another database (``DATABASE_ROUTERS``).

Their writes ran in ``transaction.atomic()`` on ``default`` while Django sent the writes to the
model's own alias: there they committed at once, so a failure after the write (a result that
cannot be built, a delete or an admin action that fails after changing rows) no longer rolled
it back. And the row a write changes was read from the router's read alias (a replica that may
lag), then saved over the newer row, with any confirmation checked against it.

The shop's tables are reached here through a second alias, ``shop_db``: another connection to
the test database, so what it commits is visible from ``default`` and what it would have rolled
back is not.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib import admin
from django.db import IntegrityError, connections
from django.http import HttpResponse
from django.test import override_settings

import mcp_tools
from demo_site.shop.models import Order, Refund
from mcp_tools.modeltools import unregister_model_action
from tests.asgi_client import call_modern
from tests.test_model_tools_security import FailingRepresentationSerializer, _refund_with_a_bad_receipt

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "shop_db"])


@pytest.fixture(scope="module", autouse=True)
def shop_db(django_db_setup: None) -> Iterator[None]:
    """The alias ``shop_db`` for this module's tests (module-scoped: set before Django's test case
    looks up the aliases it may use): the test database again, through connections of its own,
    closed at each request's end (``CONN_MAX_AGE = 0``), so none outlives the test."""
    alias = copy.deepcopy(connections["default"].settings_dict)
    alias["CONN_MAX_AGE"] = 0
    connections.settings["shop_db"] = alias
    try:
        yield
    finally:
        connections["shop_db"].close()
        del connections.settings["shop_db"]


class ShopOnItsOwnDatabase:
    """The shop's reads and writes to ``shop_db``; everything else (auth, mcp_tools) to ``default``."""

    read_alias = "shop_db"

    def db_for_read(self, model: Any, **hints: Any) -> str | None:
        return self.read_alias if model._meta.app_label == "shop" else None

    def db_for_write(self, model: Any, **hints: Any) -> str | None:
        return "shop_db" if model._meta.app_label == "shop" else None

    def allow_relation(self, obj1: Any, obj2: Any, **hints: Any) -> bool:
        return True


class ShopReadFromAReplica(ShopOnItsOwnDatabase):
    """Reads of the shop to ``shop_replica``, which is not configured: any query sent there fails.
    A row's related rows are read where the row was (``instance`` hint), as routers commonly do."""

    read_alias = "shop_replica"

    def db_for_read(self, model: Any, **hints: Any) -> str | None:
        instance = hints.get("instance")
        if instance is not None and instance._state.db:
            return str(instance._state.db)
        return super().db_for_read(model, **hints)


def seed() -> tuple[dict[str, str], dict[str, int]]:
    """The demo shop (on ``default``, before any router); API tokens of its clerk; order pk by number."""
    from django.contrib.auth.models import User
    from rest_framework.authtoken.models import Token

    from demo_site.shop.seed import seed_shop

    seed_shop()
    tokens = {"clerk": Token.objects.get_or_create(user=User.objects.get(username="clerk"))[0].key}
    return tokens, {order.number: order.pk for order in Order.objects.all()}


async def call(name: str, arguments: dict[str, Any], token: str) -> dict[str, Any]:
    from demo_site.asgi import application

    r = await call_modern(application, "tools/call", {"name": name, "arguments": arguments}, token=token)
    assert r.status in (200, 400), r.body
    return r.json()["result"]


def refund_amounts() -> list[Decimal]:
    return sorted(Refund.objects.using("default").values_list("amount", flat=True))


def order_rows() -> list[tuple[str, str]]:
    return sorted(Order.objects.using("default").values_list("number", "status"))


# -- a failure after the write rolls it back on the model's database ------------------------------


async def test_a_model_action_whose_result_does_not_fit_writes_nothing() -> None:
    tokens, orders = await sync_to_async(seed)()
    Order.bad_receipt_refund = _refund_with_a_bad_receipt  # type: ignore[attr-defined]
    action = mcp_tools.register_model_action(Order, "bad_receipt_refund", name="routed.orders.refund",
                                             permissions=["shop.add_refund"], queryset=Order.objects.all())
    try:
        with override_settings(DATABASE_ROUTERS=[ShopOnItsOwnDatabase()]):
            answer = await call("routed.orders.refund", {"id": orders["N-1001"], "amount": "5.25"}, tokens["clerk"])
    finally:
        unregister_model_action(action)
        del Order.bad_receipt_refund  # type: ignore[attr-defined]
    assert answer["isError"] is True
    assert await sync_to_async(refund_amounts)() == []


class FailingRefundTools(mcp_tools.ModelToolset):
    queryset = Refund.objects.all()
    serializer_class = FailingRepresentationSerializer
    basename = "routed.failing_refunds"
    actions = ["create", "update"]
    permissions = {"update": ["shop.add_refund"]}  # the clerk's


async def test_a_toolset_write_whose_representation_fails_writes_nothing() -> None:
    tokens, orders = await sync_to_async(seed)()
    existing = await sync_to_async(lambda: Refund.objects.create(order_id=orders["N-1001"], amount=Decimal("1.00")).pk)()
    mcp_tools.register_toolset(FailingRefundTools)
    try:
        with override_settings(DATABASE_ROUTERS=[ShopOnItsOwnDatabase()]):
            created = await call("routed.failing_refunds.create", {"order": orders["N-1001"], "amount": "2.00"}, tokens["clerk"])
            updated = await call("routed.failing_refunds.update", {"id": existing, "amount": "3.00"}, tokens["clerk"])
    finally:
        mcp_tools.unregister_toolset(FailingRefundTools)
    assert created["isError"] is True and updated["isError"] is True
    assert await sync_to_async(refund_amounts)() == [Decimal("1.00")]


class AuditedRefundTools(mcp_tools.ModelToolset):
    """A delete whose audit record (written after the row is gone) conflicts with an existing one."""

    queryset = Refund.objects.all()
    basename = "routed.audited_refunds"
    actions = ["delete"]
    permissions = {"delete": ["shop.add_refund"]}
    confirm_delete = False

    def perform_destroy(self, instance: Any) -> None:
        instance.delete()
        raise IntegrityError("UNIQUE constraint failed: audit.refund_id")


async def test_a_delete_refused_after_the_row_went_leaves_the_row() -> None:
    tokens, orders = await sync_to_async(seed)()
    existing = await sync_to_async(lambda: Refund.objects.create(order_id=orders["N-1001"], amount=Decimal("1.00")).pk)()
    mcp_tools.register_toolset(AuditedRefundTools)
    try:
        with override_settings(DATABASE_ROUTERS=[ShopOnItsOwnDatabase()]):
            answer = await call("routed.audited_refunds.delete", {"id": existing}, tokens["clerk"])
    finally:
        mcp_tools.unregister_toolset(AuditedRefundTools)
    assert answer["isError"] is True and "refused by the database" in answer["content"][0]["text"]
    assert await sync_to_async(refund_amounts)() == [Decimal("1.00")]


site = admin.AdminSite(name="routed_site")


class PageAfterShippingAdmin(admin.ModelAdmin):
    actions = ["ship_and_show"]

    @admin.action(description="Ship and show %(verbose_name_plural)s")
    def ship_and_show(self, request: Any, queryset: Any) -> HttpResponse:
        queryset.update(status=Order.Status.SHIPPED)
        return HttpResponse("shipped: here is the page")  # needs a browser: the tool refuses, and rolls back


site.register(Order, PageAfterShippingAdmin)


class PageAfterShippingTools(mcp_tools.ModelToolset):
    queryset = Order.objects.all()
    basename = "routed.orders"
    actions = ["retrieve"]
    admin_actions = ["ship_and_show"]
    admin_site = site


async def test_an_admin_action_refused_after_its_update_leaves_the_rows() -> None:
    tokens, orders = await sync_to_async(seed)()
    before = await sync_to_async(order_rows)()
    mcp_tools.register_toolset(PageAfterShippingTools)
    try:
        with override_settings(DATABASE_ROUTERS=[ShopOnItsOwnDatabase()]):
            answer = await call("routed.orders.ship_and_show", {"ids": [orders["N-1001"]]}, tokens["clerk"])
    finally:
        mcp_tools.unregister_toolset(PageAfterShippingTools)
    assert answer["isError"] is True and "needs a web page" in answer["content"][0]["text"]
    assert await sync_to_async(order_rows)() == before


# -- the row a write changes is read where it is written ------------------------------------------


class RefundTools(mcp_tools.ModelToolset):
    queryset = Refund.objects.all()
    basename = "routed.refunds"
    actions = ["retrieve", "update", "delete"]
    permissions = {"retrieve": ["shop.add_refund"], "update": ["shop.add_refund"], "delete": ["shop.add_refund"]}
    # Not asked here: on SQLite, the journal's transaction on default would lock the file that
    # shop_db, the same file, then writes to (two databases on one file is this test's setup, not a site's).
    confirm_delete = False


async def test_writes_read_their_row_where_they_write_it() -> None:
    """The replica alias fails any query: only reads (retrieve) may go there."""
    tokens, orders = await sync_to_async(seed)()
    refunds = await sync_to_async(lambda: [Refund.objects.create(order_id=orders["N-1001"], amount=Decimal(amount)).pk
                                           for amount in ("1.00", "2.00")])()
    action = mcp_tools.register_model_action(Order, "cancel", name="routed.orders.cancel", queryset=Order.objects.all())
    mcp_tools.register_toolset(RefundTools)
    try:
        with override_settings(DATABASE_ROUTERS=[ShopReadFromAReplica()]):
            retrieved = await call("routed.refunds.retrieve", {"id": refunds[0]}, tokens["clerk"])
            updated = await call("routed.refunds.update", {"id": refunds[0], "amount": "3.00"}, tokens["clerk"])
            deleted = await call("routed.refunds.delete", {"id": refunds[1]}, tokens["clerk"])
            cancelled = await call("routed.orders.cancel", {"id": orders["N-1002"]}, tokens["clerk"])
    finally:
        mcp_tools.unregister_toolset(RefundTools)
        unregister_model_action(action)
    assert retrieved["isError"] is True  # the read went to the replica, as the router says
    assert updated.get("isError") is not True and updated["structuredContent"]["amount"] == "3.00", updated
    assert deleted.get("isError") is not True and deleted["structuredContent"] == {"deleted": True, "id": refunds[1]}, deleted
    assert cancelled.get("isError") is not True, cancelled
    assert await sync_to_async(refund_amounts)() == [Decimal("3.00")]
    assert ("N-1002", "cancelled") in await sync_to_async(order_rows)()
