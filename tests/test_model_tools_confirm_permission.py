"""A confirmed change asks the object's permissions again of the row as it is after the yes.

The object-level permission (``user.has_perm(perm, obj)``) was asked once, of the row read before the
question; after the yes the change read the row again (locked) and checked that it was still in the
queryset and still read as asked, but not that the caller still held the permission on it. In a
2025-11-25 session the user may take minutes to answer: a refund rule that depends on the order's
store (``StoreRulesBackend``: staff refund their own store's orders) held for the order when asked, the
order moved to another store meanwhile, and the change was made on a row the caller may no longer act
on. Now such a row ends the call as a row changed since asked, nothing done (calling again is refused
by the permission). Found by the model review.

The move lands right after the yes (as in tests/test_model_tools_confirm_race.py): the same code path
as a long wait in a session.
"""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

import mcp_tools
from demo_site.shop.models import Order
from mcp_tools.modeltools.actions import unregister_model_action
from tests.test_model_tools_confirm_race import confirmed, edit_after_the_yes, seed

pytestmark = pytest.mark.django_db(transaction=True)


class RefundableOrders(mcp_tools.ModelToolset):
    queryset = Order.objects.all()
    basename = "confirmperm.orders"
    actions = ["delete"]
    permissions = {"delete": ["shop.add_refund"]}  # the store rule's permission, asked of the row


@pytest.fixture
def guarded() -> Any:
    action = mcp_tools.register_model_action(Order, "cancel", name="confirmperm.orders.cancel",
                                             permissions=["shop.add_refund"], confirm=True, object_permissions=True)
    mcp_tools.register_toolset(RefundableOrders)
    try:
        yield
    finally:
        mcp_tools.unregister_toolset(RefundableOrders)
        unregister_model_action(action)


@pytest.mark.parametrize("tool", ["confirmperm.orders.cancel", "confirmperm.orders.delete"])
async def test_a_row_the_caller_may_no_longer_act_on_is_left_alone(monkeypatch: pytest.MonkeyPatch, guarded: Any, tool: str) -> None:
    token, pk = await sync_to_async(seed)()  # the clerk (north store) and a north order
    edit_after_the_yes(monkeypatch, lambda: Order.objects.filter(pk=pk).update(store="south"))
    answer = await confirmed(tool, pk, token)
    assert answer["isError"] is True, answer
    assert answer["content"][0]["text"] == f"The order with id {pk} changed since you were asked to confirm; nothing was done, call again."
    row = await sync_to_async(lambda: list(Order.objects.filter(pk=pk).values_list("store", "status")))()
    assert row == [("south", "open")]


@pytest.mark.parametrize("tool", ["confirmperm.orders.cancel", "confirmperm.orders.delete"])
async def test_a_row_the_caller_may_still_act_on_is_changed(monkeypatch: pytest.MonkeyPatch, guarded: Any, tool: str) -> None:
    token, pk = await sync_to_async(seed)()
    edit_after_the_yes(monkeypatch, lambda: Order.objects.filter(pk=pk).update(note="seen"))
    answer = await confirmed(tool, pk, token)
    assert answer.get("isError") is not True, answer
    row = await sync_to_async(lambda: list(Order.objects.filter(pk=pk).values_list("status", flat=True)))()
    assert row == ([] if tool.endswith("delete") else ["cancelled"])
