"""An unconfirmed delete, a model action and an admin action ask the object's permissions again of the rows they locked.

Commit e8752f6 closed the window for a toolset's ``update``: the object permissions were asked in
``get_object`` of the row read before the transaction, and a permission the row no longer gave by the
time of the write (a rule that reads the row, the row changed meanwhile) was not seen. A toolset's
``delete`` with ``confirm_delete = False``, a model action without ``confirm=`` and an admin action had
the same window: the row was deleted, or the method run on it, with no lock and no second check. (A
confirmed delete or action already read the row again, locked, after the yes, and asked again.) The
move lands where the code goes on right after the check (``base.changed_since_asked`` for the first
two, ``base.refused_at_commit`` around the admin action's transaction), as
tests/test_model_tools_update_permission_lock.py lands it in an overridden ``get_object``.
"""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import override_settings

import mcp_tools
from demo_site.shop.backends import StoreRulesBackend
from demo_site.shop.models import Order, Refund
from demo_site.shop.mcp_tools import OrderSerializer, OrderTools
from mcp_tools.modeltools import base
from tests.test_model_tools_confirm_race import call, seed

pytestmark = pytest.mark.django_db(transaction=True)


class RefundRuleOrders(mcp_tools.ModelToolset):
    queryset = Order.objects.all()
    serializer_class = OrderSerializer
    basename = "deletelock.orders"
    actions = ["delete"]
    permissions = {"delete": ["shop.add_refund"]}  # the store rule's permission, asked of the row
    object_permissions = True
    confirm_delete = False


class StoreRuleForChanges(StoreRulesBackend):
    """The demo's store rule, asked of ``shop.change_order`` too (what the admin action asks)."""

    def has_perm(self, user_obj: Any, perm: str, obj: Any = None) -> bool:
        if perm == "shop.change_order" and isinstance(obj, Order):
            return super().has_perm(user_obj, "shop.add_refund", obj) and user_obj.has_perm(perm)
        return super().has_perm(user_obj, perm, obj)


class ShippingOrders(OrderTools):
    basename = "deletelock.shipping"
    actions = ["retrieve"]
    admin_actions = ["mark_shipped"]
    object_permissions = True


@pytest.fixture
def guarded() -> Any:
    mcp_tools.register_toolset(RefundRuleOrders)
    mcp_tools.register_toolset(ShippingOrders)
    try:
        with override_settings(AUTHENTICATION_BACKENDS=[
                "django.contrib.auth.backends.ModelBackend", f"{__name__}.StoreRuleForChanges"]):
            yield
    finally:
        mcp_tools.unregister_toolset(RefundRuleOrders)
        mcp_tools.unregister_toolset(ShippingOrders)


def after_the_check(monkeypatch: pytest.MonkeyPatch, where: str, edit: Any) -> None:
    """Right after the code checked the row's permissions, another request edits the row."""
    original = getattr(base, where)

    def edit_then(*args: Any, **kwargs: Any) -> Any:
        edit()
        return original(*args, **kwargs)

    monkeypatch.setattr(base, where, edit_then)


def move(pk: int, store: str) -> Any:
    return lambda: Order.objects.filter(pk=pk).update(store=store)


def rows(pk: int) -> list[Any]:
    return list(Order.objects.filter(pk=pk).values_list("store", "status"))


async def test_an_unconfirmed_delete_of_a_row_the_caller_may_no_longer_delete_is_refused(
        guarded: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    token, pk = await sync_to_async(seed)()  # the clerk (north store) and a north order
    await sync_to_async(lambda: Refund.objects.filter(order_id=pk).delete())()  # nothing holds the row
    after_the_check(monkeypatch, "changed_since_asked", move(pk, "south"))
    result = await call("deletelock.orders.delete", {"id": pk}, token)
    assert result["isError"] is True, result
    assert result["content"][0]["text"] == (
        f"You may not delete the order with id {pk}: permission shop.add_refund refused for this object.")
    assert await sync_to_async(rows)(pk) == [("south", "open")]


async def test_an_unconfirmed_delete_of_a_row_the_caller_may_still_delete_deletes_it(
        guarded: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    token, pk = await sync_to_async(seed)()
    await sync_to_async(lambda: Refund.objects.filter(order_id=pk).delete())()
    after_the_check(monkeypatch, "changed_since_asked", lambda: Order.objects.filter(pk=pk).update(note="meanwhile"))
    result = await call("deletelock.orders.delete", {"id": pk}, token)
    assert result.get("isError") is not True, result
    assert await sync_to_async(rows)(pk) == []


async def test_a_model_action_on_a_row_the_caller_may_no_longer_act_on_is_refused(
        guarded: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    token, pk = await sync_to_async(seed)()
    before = await sync_to_async(lambda: Refund.objects.filter(order_id=pk).count())()
    after_the_check(monkeypatch, "changed_since_asked", move(pk, "south"))
    result = await call("shop.orders.refund", {"id": pk, "amount": "1"}, token)
    assert result["isError"] is True, result
    assert result["content"][0]["text"] == (
        f"You may not refund the order with id {pk}: permission shop.add_refund refused for this object.")
    assert await sync_to_async(lambda: Refund.objects.filter(order_id=pk).count())() == before


async def test_a_model_action_on_a_row_the_caller_may_still_act_on_runs(
        guarded: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    token, pk = await sync_to_async(seed)()
    before = await sync_to_async(lambda: Refund.objects.filter(order_id=pk).count())()
    after_the_check(monkeypatch, "changed_since_asked", lambda: Order.objects.filter(pk=pk).update(note="meanwhile"))
    result = await call("shop.orders.refund", {"id": pk, "amount": "1"}, token)
    assert result.get("isError") is not True, result
    assert await sync_to_async(lambda: Refund.objects.filter(order_id=pk).count())() == before + 1


async def test_an_admin_action_on_a_row_the_caller_may_no_longer_change_is_refused(
        guarded: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    token, pk = await sync_to_async(seed)()
    after_the_check(monkeypatch, "refused_at_commit", move(pk, "south"))
    result = await call("deletelock.shipping.mark_shipped", {"ids": [pk]}, token)
    assert result["isError"] is True, result
    assert result["content"][0]["text"] == (
        f"You may not mark shipped the order with id {pk}: permission shop.change_order refused for this object.")
    assert await sync_to_async(rows)(pk) == [("south", "open")]


async def test_an_admin_action_on_a_row_the_caller_may_still_change_runs(
        guarded: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    token, pk = await sync_to_async(seed)()
    after_the_check(monkeypatch, "refused_at_commit", lambda: Order.objects.filter(pk=pk).update(note="meanwhile"))
    result = await call("deletelock.shipping.mark_shipped", {"ids": [pk]}, token)
    assert result.get("isError") is not True, result
    assert await sync_to_async(rows)(pk) == [("north", "shipped")]
