"""An unconfirmed model action that writes runs on its row read again through its queryset, locked.

Commit b0cff60 made such an action lock its row and ask its object permissions again, reading the row
with ``refresh_from_db`` (the base manager): that drops what the action's ``queryset`` gave the row,
its ``prefetch_related`` among it. An action whose queryset prefetches only what the caller may see
(``Prefetch("refunds", queryset=<the caller's>)``) then ran its method, and answered, with every
refund of the order: other users' too. Before b0cff60, and with ``confirm=`` (``current_row``: the
row read again through the queryset), the method saw the caller's refunds only. Found reviewing
b0cff60, through the demo ASGI app (2026-07-28 ``tools/call``).

Now the unconfirmed path reads the row as the confirmed one does, through the action's queryset,
locked (``current_row``): the queryset's prefetches hold, and a row gone from it meanwhile (deleted,
or moved out of the caller's queryset) is answered as :meth:`run` answers a row outside it, "No ...".
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db.models import Prefetch

import mcp_tools
from demo_site.shop.models import Order, Refund
from mcp_tools.modeltools import base, unregister_model_action
from tests.test_model_tools_confirm_race import call, seed

pytestmark = pytest.mark.django_db(transaction=True)


def _acknowledge(self: Order) -> list[str]:
    """Mark the order seen; the amounts of the caller's refunds of it."""
    self.note = "seen"
    self.save(update_fields=["note"])
    return [str(refund.amount) for refund in self.refunds.all()]


def _theirs(ctx: Any) -> Any:
    """The caller's store's orders (the clerk sees every store's elsewhere), each with the caller's own refunds only."""
    return Order.objects.filter(store=ctx.user.shop_staff.store).prefetch_related(
        Prefetch("refunds", queryset=Refund.objects.filter(created_by=ctx.user).order_by("pk")))


@pytest.fixture(params=[False, True], ids=["unconfirmed", "confirmed"])
def acknowledge(request: pytest.FixtureRequest) -> Iterator[tuple[str, bool]]:
    Order.acknowledge = _acknowledge  # type: ignore[attr-defined]
    action = mcp_tools.register_model_action(Order, "acknowledge", name="lockedrow.orders.acknowledge",
                                             permissions=["shop.view_order"], queryset=_theirs,
                                             confirm="Acknowledge {obj}?" if request.param else None)
    try:
        yield action.name, request.param
    finally:
        unregister_model_action(action)
        del Order.acknowledge  # type: ignore[attr-defined]


def refunds(pk: int) -> None:
    from django.contrib.auth.models import User

    Refund.objects.create(order_id=pk, amount=Decimal("1.00"), created_by=User.objects.get(username="clerk"))
    Refund.objects.create(order_id=pk, amount=Decimal("2.00"), created_by=User.objects.create(username="someone-else"))


async def answer(name: str, pk: int, token: str) -> dict[str, Any]:
    result = await call(name, {"id": pk}, token)
    if result.get("resultType") == "input_required":  # confirmed: say yes
        request_state = result.get("requestState")
        (key, _request), = result["inputRequests"].items()
        result = await call(name, {"id": pk}, token, inputResponses={key: {"action": "accept", "content": {"confirm": True}}},
                            **({"requestState": request_state} if request_state else {}))
    return result


async def test_the_method_sees_the_rows_its_queryset_prefetches(acknowledge: tuple[str, bool]) -> None:
    token, pk = await sync_to_async(seed)()
    await sync_to_async(lambda: Refund.objects.filter(order_id=pk).delete())()
    await sync_to_async(refunds)(pk)
    result = await answer(acknowledge[0], pk, token)
    assert result.get("isError") is not True, result
    assert result["structuredContent"] == {"result": ["1.00"]}, result  # the clerk's refund, not someone else's
    assert await sync_to_async(lambda: Order.objects.get(pk=pk).note)() == "seen"


async def test_a_row_moved_out_of_the_queryset_meanwhile_is_not_found(acknowledge: tuple[str, bool],
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    if acknowledge[1]:
        pytest.skip("the confirmed path answers its own 'changed' error")
    token, pk = await sync_to_async(seed)()
    original = base.changed_since_asked

    def moved_then(*args: Any, **kwargs: Any) -> Any:
        Order.objects.filter(pk=pk).update(store="south")  # out of the north clerk's queryset
        return original(*args, **kwargs)

    monkeypatch.setattr(base, "changed_since_asked", moved_then)
    result = await answer(acknowledge[0], pk, token)
    assert result["isError"] is True, result
    assert result["content"][0]["text"] == f"No order with id {pk}.", result
    assert await sync_to_async(lambda: Order.objects.get(pk=pk).note)() == ""


async def test_a_row_still_in_the_queryset_the_caller_may_no_longer_act_on_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """The permission asked again of the row read through the queryset (every order here): the store rule refuses."""
    action = mcp_tools.register_model_action(Order, "refund", name="lockedrow.orders.refund", permissions=["shop.add_refund"],
                                             queryset=Order.objects.all())
    try:
        token, pk = await sync_to_async(seed)()
        before = await sync_to_async(lambda: Refund.objects.filter(order_id=pk).count())()
        original = base.changed_since_asked

        def moved_then(*args: Any, **kwargs: Any) -> Any:
            Order.objects.filter(pk=pk).update(store="south")  # still in the queryset, no longer the clerk's store
            return original(*args, **kwargs)

        monkeypatch.setattr(base, "changed_since_asked", moved_then)
        result = await call(action.name, {"id": pk, "amount": "1"}, token)
    finally:
        unregister_model_action(action)
    assert result["isError"] is True, result
    assert result["content"][0]["text"] == (
        f"You may not refund the order with id {pk}: permission shop.add_refund refused for this object."), result
    assert await sync_to_async(lambda: Refund.objects.filter(order_id=pk).count())() == before
