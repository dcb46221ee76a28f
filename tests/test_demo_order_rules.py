"""The demo shop's store rule holds through every order tool, not the refund alone.

A reviewer found that a north clerk could refund a south order: ``update`` moved it into the
clerk's store, ``refund`` passed the store rule, and ``update`` moved it back. An order now
stays in its store, staff who see one store make orders only there, a total cannot fall below
what was refunded, and refunds answer in cents.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from demo_site.shop.models import Order, Refund
from tests.test_model_tools_security import call, seed

pytestmark = pytest.mark.django_db(transaction=True)


def structured(answer: dict[str, Any]) -> dict[str, Any]:
    assert "error" not in answer and not answer["result"].get("isError"), answer
    result: dict[str, Any] = answer["result"]["structuredContent"]
    return result


def refused(answer: dict[str, Any], field: str) -> str:
    assert answer["result"].get("isError") is True, answer
    errors = answer["result"]["structuredContent"]["errors"]
    assert field in errors, errors
    return " ".join(errors[field])


async def test_a_clerk_cannot_move_another_stores_order_into_theirs_to_refund_it() -> None:
    tokens, orders = await sync_to_async(seed)()
    south = orders["S-2001"]
    moved = await call("shop.orders.update", {"id": south, "store": "north"}, tokens["clerk"])
    assert "cannot be changed" in refused(moved, "store")
    assert await Order.objects.filter(pk=south, store="south").aexists()
    denied = await call("shop.orders.refund", {"id": south, "amount": "10"}, tokens["clerk"])
    assert denied["result"].get("isError") is True and not await Refund.objects.filter(order_id=south).aexists(), denied
    kept = await call("shop.orders.update", {"id": south, "store": "south", "note": "same store"}, tokens["clerk"])
    assert structured(kept)["store"] == "south"


async def test_staff_who_see_one_store_make_orders_only_there() -> None:
    from django.contrib.auth.models import Permission, User
    from rest_framework.authtoken.models import Token

    from demo_site.shop.models import StaffMember

    tokens, _ = await sync_to_async(seed)()

    def north_only() -> str:
        user = User.objects.create_user("north-only", password="x")
        user.user_permissions.add(*Permission.objects.filter(content_type__app_label="shop", codename__in=["view_order", "add_order"]))
        StaffMember.objects.create(user=user, store="north")
        return Token.objects.create(user=user).key

    token = await sync_to_async(north_only)()
    customer = (await Order.objects.select_related("customer").afirst()).customer_id  # type: ignore[union-attr]
    order = {"number": "R-1", "customer": customer, "total": "5.00"}
    assert "own store" in refused(await call("shop.orders.create", {**order, "store": "south"}, token), "store")
    assert structured(await call("shop.orders.create", {**order, "store": "north"}, token))["store"] == "north"
    # The clerk sees every store (shop.view_all_stores) and may make orders in any.
    assert structured(await call("shop.orders.create", {**order, "number": "R-2", "store": "south"}, tokens["clerk"]))["store"] == "south"


async def test_a_total_cannot_fall_below_what_was_refunded_and_minus_zero_is_zero() -> None:
    tokens, orders = await sync_to_async(seed)()
    north = orders["N-1002"]  # 35.50
    structured(await call("shop.orders.refund", {"id": north, "amount": "30"}, tokens["clerk"]))
    assert "refunded 30.00" in refused(await call("shop.orders.update", {"id": north, "total": "0"}, tokens["clerk"]), "total")
    other = orders["N-1003"]
    assert structured(await call("shop.orders.update", {"id": other, "total": "-0"}, tokens["clerk"]))["total"] == "0.00"


async def test_refunds_answer_in_cents() -> None:
    tokens, orders = await sync_to_async(seed)()
    north = orders["N-1001"]  # 120.00
    answers = [structured(await call("shop.orders.refund", {"id": north, "amount": amount}, tokens["clerk"]))
               for amount in (1.5, "1E+0", "0.10", 1)]
    assert [(a["amount"], a["refunded_total"]) for a in answers] == [
        ("1.50", "1.50"), ("1.00", "2.50"), ("0.10", "2.60"), ("1.00", "3.60")]
    assert await Refund.objects.filter(order_id=north).acount() == 4
    assert sum([r.amount async for r in Refund.objects.filter(order_id=north)], Decimal("0")) == Decimal("3.60")


async def test_a_refund_compares_with_the_total_of_the_locked_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """The refund locked the order but compared with ``self.total``, read before its transaction:
    lowered to 50.00 by another call in between, the order was refunded 100.00."""
    from mcp_tools.modeltools import base

    tokens, orders = await sync_to_async(seed)()
    north = orders["N-1001"]  # 120.00, nothing refunded
    real = base.check_object

    def then_lowered(*args: Any, **kwargs: Any) -> None:  # after the action read the order, before its transaction
        real(*args, **kwargs)
        Order.objects.filter(pk=north).update(total=Decimal("50.00"))

    monkeypatch.setattr(base, "check_object", then_lowered)
    assert "At most 50.00 is left" in refused(await call("shop.orders.refund", {"id": north, "amount": "100.00"}, tokens["clerk"]), "amount")
    assert not await Refund.objects.filter(order_id=north).aexists()


async def test_a_total_is_compared_with_the_refunds_made_until_the_order_is_locked(monkeypatch: pytest.MonkeyPatch) -> None:
    """The update compared the new total with the refunds read while validating, before its
    transaction and unlocked: a refund made in between left the order refunded past its total."""
    from demo_site.shop.mcp_tools import OrderSerializer

    tokens, orders = await sync_to_async(seed)()
    north = orders["N-1002"]  # 35.50, nothing refunded
    real = OrderSerializer.validate_total

    def then_refunded(self: OrderSerializer, value: Decimal) -> Decimal:  # another call's refund, committed meanwhile
        checked = real(self, value)
        Refund.objects.create(order_id=north, amount=Decimal("30.00"))
        return checked

    monkeypatch.setattr(OrderSerializer, "validate_total", then_refunded)
    assert "refunded 30.00" in refused(await call("shop.orders.update", {"id": north, "total": "10.00"}, tokens["clerk"]), "total")
    assert (await Order.objects.aget(pk=north)).total == Decimal("35.50")
