"""A toolset's update asks the object's permissions again of the row it has locked.

``update`` asked ``user.has_perm(perm, obj)`` in ``get_object``, of the row read before its
transaction, then locked the row (``select_for_update``), read it again and saved it: a permission
that no longer held for the row by then (here ``StoreRulesBackend``'s refund rule, which depends on
the order's store: the order moved to another store in between) was not seen, and the caller's
update was written to a row it may no longer act on. The window is milliseconds, so the move lands
where a DRF hook runs, in an overridden ``get_object`` right after the check (the same place
tests/test_model_tools_confirm_race.py edits a row). Now the locked row is checked as get_object
checks it, and refused the same way, nothing written.
"""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

import mcp_tools
from demo_site.shop.models import Order
from demo_site.shop.mcp_tools import OrderSerializer
from tests.test_model_tools_confirm_race import call, seed

pytestmark = pytest.mark.django_db(transaction=True)

#: What another request does to the row right after get_object checked it (set by each test).
MEANWHILE: list[Any] = []


class RefundRuleOrders(mcp_tools.ModelToolset):
    queryset = Order.objects.all()
    serializer_class = OrderSerializer
    basename = "updatelock.orders"
    actions = ["update"]
    permissions = {"update": ["shop.add_refund"]}  # the store rule's permission, asked of the row
    object_permissions = True

    def get_object(self, lookup: Any) -> Any:
        found = super().get_object(lookup)  # checked here, before the transaction
        for edit in MEANWHILE:
            edit(found.pk)
        return found


@pytest.fixture
def guarded() -> Any:
    mcp_tools.register_toolset(RefundRuleOrders)
    try:
        yield
    finally:
        mcp_tools.unregister_toolset(RefundRuleOrders)
        MEANWHILE.clear()


async def test_an_update_of_a_row_the_caller_may_no_longer_act_on_is_refused(guarded: Any) -> None:
    token, pk = await sync_to_async(seed)()  # the clerk (north store) and a north order
    MEANWHILE.append(lambda pk: Order.objects.filter(pk=pk).update(store="south"))
    result = await call("updatelock.orders.update", {"id": pk, "note": "refund approved"}, token)
    assert result["isError"] is True, result
    assert result["content"][0]["text"] == (
        f"You may not update the order with id {pk}: permission shop.add_refund refused for this object.")
    row = await sync_to_async(lambda: list(Order.objects.filter(pk=pk).values_list("store", "note")))()
    assert row == [("south", "")]


async def test_an_update_of_a_row_the_caller_may_still_act_on_is_saved(guarded: Any) -> None:
    token, pk = await sync_to_async(seed)()
    MEANWHILE.append(lambda pk: Order.objects.filter(pk=pk).update(status="shipped"))
    result = await call("updatelock.orders.update", {"id": pk, "note": "refund approved"}, token)
    assert result.get("isError") is not True, result
    row = await sync_to_async(lambda: list(Order.objects.filter(pk=pk).values_list("store", "status", "note")))()
    assert row == [("north", "shipped", "refund approved")]
