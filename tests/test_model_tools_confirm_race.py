"""A confirmed change acts on the row as it is when the change is made, not as it was when asked.

The row was read, the question checked against it, and only then the transaction of the change
opened: a row edited in between (in a 2025-11-25 session, any time while the user was answering)
was changed from its old copy. An order shipped meanwhile was cancelled (its stale status said
"open"), and a row that no longer read as the user was asked about was deleted all the same.
Now the change reads the row again in its transaction, locked, and runs on that.

The edit lands right after the question was checked (``base.confirm`` returned the yes) and
before the change: the narrowest window, the same code path as a long wait in a session.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from rest_framework import serializers

import mcp_tools
from demo_site.shop.models import Customer, Order
from mcp_tools.modeltools import base
from tests.asgi_client import call_modern

pytestmark = pytest.mark.django_db(transaction=True)

YES = {"confirm": {"action": "accept", "content": {"confirm": True}}}


def seed() -> tuple[str, int]:
    """The demo shop; the clerk's API token and the pk of the open order N-1002."""
    from django.contrib.auth.models import User
    from rest_framework.authtoken.models import Token

    from demo_site.shop.seed import seed_shop

    seed_shop()
    return Token.objects.get_or_create(user=User.objects.get(username="clerk"))[0].key, Order.objects.get(number="N-1002").pk


async def call(name: str, arguments: dict[str, Any], token: str, **params: Any) -> dict[str, Any]:
    from demo_site.asgi import application

    r = await call_modern(application, "tools/call", {"name": name, "arguments": arguments, **params}, token=token)
    assert r.status == 200, r.body
    return r.json()["result"]


def edit_after_the_yes(monkeypatch: pytest.MonkeyPatch, edit: Callable[[], Any]) -> None:
    """When the user's yes has been checked, another request edits the row."""
    confirm = base.confirm

    def confirm_then_edit(*args: Any, **kwargs: Any) -> None:
        confirm(*args, **kwargs)
        edit()

    monkeypatch.setattr(base, "confirm", confirm_then_edit)


async def confirmed(tool: str, pk: int, token: str) -> dict[str, Any]:
    asked = await call(tool, {"id": pk}, token)
    assert asked["resultType"] == "input_required", asked
    return await call(tool, {"id": pk}, token, inputResponses=YES, requestState=asked["requestState"])


def row(pk: int) -> list[tuple[str, str]]:
    return list(Order.objects.filter(pk=pk).values_list("number", "status"))


async def test_an_order_shipped_meanwhile_is_not_cancelled(monkeypatch: pytest.MonkeyPatch) -> None:
    token, pk = await sync_to_async(seed)()
    edit_after_the_yes(monkeypatch, lambda: Order.objects.filter(pk=pk).update(status="shipped"))
    answer = await confirmed("shop.orders.cancel", pk, token)
    assert answer["isError"] is True
    assert answer["structuredContent"] == {"errors": {"status": ["Order N-1002 is shipped; only open orders can be cancelled."]}}
    assert await sync_to_async(row)(pk) == [("N-1002", "shipped")]


@pytest.mark.parametrize("tool", ["shop.orders.cancel", "shop.orders.delete"])
async def test_a_row_that_no_longer_reads_as_asked_is_left_alone(monkeypatch: pytest.MonkeyPatch, tool: str) -> None:
    token, pk = await sync_to_async(seed)()
    edit_after_the_yes(monkeypatch, lambda: Order.objects.filter(pk=pk).update(number="N-1002b"))
    answer = await confirmed(tool, pk, token)
    assert answer["isError"] is True
    assert answer["content"][0]["text"] == f"The order with id {pk} changed since you were asked to confirm; nothing was done, call again."
    assert await sync_to_async(row)(pk) == [("N-1002b", "open")]


@pytest.mark.parametrize("tool", ["shop.orders.cancel", "shop.orders.delete"])
async def test_a_row_that_went_meanwhile_is_a_changed_row(monkeypatch: pytest.MonkeyPatch, tool: str) -> None:
    token, pk = await sync_to_async(seed)()
    edit_after_the_yes(monkeypatch, lambda: Order.objects.filter(pk=pk).delete())
    answer = await confirmed(tool, pk, token)
    assert answer["isError"] is True
    assert answer["content"][0]["text"] == f"The order with id {pk} changed since you were asked to confirm; nothing was done, call again."


async def test_an_unchanged_row_is_changed_as_confirmed(monkeypatch: pytest.MonkeyPatch) -> None:
    token, pk = await sync_to_async(seed)()
    edit_after_the_yes(monkeypatch, lambda: Order.objects.filter(pk=pk).update(note="seen by the packer"))  # not in the question
    cancelled = await confirmed("shop.orders.cancel", pk, token)
    assert cancelled.get("isError") is not True, cancelled
    assert await sync_to_async(row)(pk) == [("N-1002", "cancelled")]


# -- an update acts on the row as it is when it writes -------------------------------------------------
#
# A toolset's update read the row, then validated and saved it in a transaction of its own: DRF saves
# every field of its instance, so a change another request committed in between (an order shipped) was
# written back over, and a row deleted in between was inserted again (Django's save() of a row that
# updated nothing), its cascaded refunds gone, so the order could be refunded twice. Found by a review
# with two real requests on PostgreSQL; both tests failed before the fix.

def edit_after_the_read(monkeypatch: pytest.MonkeyPatch, edit: Callable[[int], Any]) -> None:
    """Once the update has read its row, another request edits it (commits)."""
    from demo_site.shop.mcp_tools import OrderTools

    get_object = OrderTools.get_object

    def get_object_then_edit(self: Any, lookup: Any) -> Any:
        found = get_object(self, lookup)
        if self.action == "update":
            edit(found.pk)
        return found

    monkeypatch.setattr(OrderTools, "get_object", get_object_then_edit)


@pytest.mark.parametrize("fields", [{"note": "gift wrap"}, {"total": "130.00"}], ids=["note", "total"])
async def test_an_update_does_not_write_back_over_a_change_made_since_it_read_the_row(
    monkeypatch: pytest.MonkeyPatch, fields: dict[str, str],
) -> None:
    token, pk = await sync_to_async(seed)()
    edit_after_the_read(monkeypatch, lambda pk: Order.objects.filter(pk=pk).update(status="shipped"))
    result = await call("shop.orders.update", {"id": pk, **fields}, token)
    row = await sync_to_async(lambda: Order.objects.values("status", "note", "total").get(pk=pk))()
    assert row["status"] == "shipped", row
    assert not result.get("isError"), result
    assert result["structuredContent"]["status"] == "shipped"  # what it answers is the row it wrote


async def test_an_update_of_a_row_deleted_since_it_read_it_does_not_insert_it_again(monkeypatch: pytest.MonkeyPatch) -> None:
    token, pk = await sync_to_async(seed)()
    edit_after_the_read(monkeypatch, lambda pk: Order.objects.filter(pk=pk).delete())
    result = await call("shop.orders.update", {"id": pk, "note": "gift wrap"}, token)
    assert result["isError"] is True and result["content"][0]["text"] == f"No order with id {pk}.", result
    assert not await sync_to_async(Order.objects.filter(pk=pk).exists)()


class _AuditedCustomer(serializers.ModelSerializer):  # type: ignore[type-arg]
    audited_by = serializers.SerializerMethodField()

    class Meta:
        model = Customer
        fields = ["id", "name", "audited_by"]

    def get_audited_by(self, obj: Any) -> Any:
        return getattr(obj, "audited_by", "missing")


class _ReachableCustomers(mcp_tools.ModelToolset):
    """Lists customers named A...; its get_object (a DRF hook) reaches any, and marks what it gave."""

    queryset = Customer.objects.filter(name__startswith="A")
    basename = "race.customers"
    serializer_class = _AuditedCustomer
    actions = ["update"]
    permissions = {"update": []}

    def get_object(self, lookup: Any) -> Any:
        found = base.get_object(Customer.objects.all(), "pk", lookup)
        found.audited_by = "get_object"
        return found


async def test_an_update_saves_the_instance_get_object_gave() -> None:
    """The diff review of the fix above: it saved another read of the queryset, so an overridden
    get_object's instance (and what it set on it) was dropped, and a row only it reaches was "No
    customer". Now that instance is refreshed in place, locked. Failed before the follow-up."""
    def seed_customers() -> dict[str, int]:
        return {name: Customer.objects.create(name=name, email=f"{name[0]}@example.com").pk for name in ("Ada", "Grace")}

    pks = await sync_to_async(seed_customers)()
    await sync_to_async(mcp_tools.register_toolset)(_ReachableCustomers)
    try:
        from demo_site.asgi import application

        answers = {name: (await call_modern(application, "tools/call", {"name": "race.customers.update",
                                                                         "arguments": {"id": pk, "name": name + "!"}})).json()["result"]
                   for name, pk in pks.items()}
    finally:
        await sync_to_async(mcp_tools.unregister_toolset)(_ReachableCustomers)
    assert {name: answer.get("structuredContent") for name, answer in answers.items()} == {
        "Ada": {"id": pks["Ada"], "name": "Ada!", "audited_by": "get_object"},
        "Grace": {"id": pks["Grace"], "name": "Grace!", "audited_by": "get_object"},
    }
