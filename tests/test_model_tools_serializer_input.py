"""A model tool whose input is a DRF serializer's takes only the fields, and the JSON types, it advertises.

A reviewer found two ways past the advertised ``inputSchema`` (``additionalProperties: false``):

- a toolset serializer's ``HiddenField`` (``created_by = HiddenField(default=CurrentUserDefault())``)
  is in no schema, yet ``"junk"`` was taken (and ignored), and ``2`` answered an error about a
  field the client was never shown;
- a model action registered with ``serializer=`` converted types (``"5"`` to 5, ``1.0`` to 1,
  ``"true"`` or ``1`` to True) and took a read-only field, where docs/protocol.md says such values
  are refused, not converted, and the toolsets' create and update refuse them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from rest_framework import serializers

import mcp_tools
from demo_site.shop.models import Order, Refund
from mcp_tools.modeltools import unregister_model_action
from tests.asgi_client import call_modern
from tests.test_model_tools_security import OwnedRefundSerializer, call, registered, seed

pytestmark = pytest.mark.django_db(transaction=True)

REFUSED = "Unknown or read-only field."


def refused(answer: dict[str, Any]) -> dict[str, list[str]]:
    assert "error" not in answer and answer["result"].get("isError") is True, answer
    errors: dict[str, list[str]] = answer["result"]["structuredContent"]["errors"]
    return errors


# -- a toolset serializer's HiddenField ------------------------------------------------------------


class StampedRefunds(mcp_tools.ModelToolset):
    queryset = Refund.objects.all()
    serializer_class = OwnedRefundSerializer  # created_by = HiddenField(default=CurrentUserDefault())
    basename = "stamped.refunds"
    actions = ["create", "update"]
    permissions = {"create": [], "update": []}


@pytest.fixture
def shop() -> Iterator[tuple[dict[str, str], dict[str, int], dict[str, int]]]:
    """The demo shop with the refunds toolset registered: tokens, orders' pks, users' pks."""
    from django.contrib.auth.models import User

    tokens, orders = seed()
    with registered(StampedRefunds):
        yield tokens, orders, {user.username: user.pk for user in User.objects.all()}


async def test_a_hidden_field_is_neither_shown_nor_taken(shop: tuple[dict[str, str], dict[str, int], dict[str, int]]) -> None:
    from demo_site.asgi import application

    tokens, orders, users = shop
    listed = (await call_modern(application, "tools/list", {}, token=tokens["clerk"])).json()["result"]["tools"]
    schemas = {tool["name"]: tool["inputSchema"] for tool in listed if tool["name"].startswith("stamped.")}
    assert all("created_by" not in schema["properties"] and schema["additionalProperties"] is False
               for schema in schemas.values()), schemas
    refund = {"order": orders["N-1001"], "amount": "1.00"}
    for created_by in ("junk", users["viewer"]):  # taken and ignored; "Expected string."
        assert refused(await call("stamped.refunds.create", {**refund, "created_by": created_by}, tokens["clerk"])) == {
            "created_by": [REFUSED]}
    assert not await Refund.objects.aexists()
    made = await call("stamped.refunds.create", refund, tokens["clerk"])
    assert made["result"].get("isError") is not True, made
    pk = made["result"]["structuredContent"]["id"]
    assert refused(await call("stamped.refunds.update", {"id": pk, "created_by": users["viewer"]}, tokens["clerk"])) == {
        "created_by": [REFUSED]}
    assert (await Refund.objects.aget(pk=pk)).created_by_id == users["clerk"]  # stamped by the default


# -- a model action's serializer= -----------------------------------------------------------------


class NoteSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    flag = serializers.BooleanField(required=False)
    stamp = serializers.CharField(read_only=True, default="x")
    by = serializers.HiddenField(default=serializers.CurrentUserDefault())


def add_note(self: Order, count: int, flag: bool = False, by: Any = None) -> None:
    self.note = f"{count!r} {flag!r}"
    self.save(update_fields=["note"])


@pytest.fixture
def note_action() -> Iterator[None]:
    Order.add_note = add_note  # type: ignore[attr-defined]
    action = mcp_tools.register_model_action(Order, "add_note", serializer=NoteSerializer)
    try:
        yield
    finally:
        unregister_model_action(action)
        del Order.add_note  # type: ignore[attr-defined]


@pytest.mark.parametrize(("arguments", "errors"), [
    ({"count": "5"}, {"count": ["Expected integer."]}), ({"count": 1.0}, {"count": ["Expected integer."]}),
    ({"count": 1, "flag": "true"}, {"flag": ["Expected boolean."]}), ({"count": 1, "flag": 1}, {"flag": ["Expected boolean."]}),
    ({"count": 1, "stamp": "y"}, {"stamp": [REFUSED]}), ({"count": 1, "by": 2}, {"by": [REFUSED]}),
    ({"count": 1, "zzz": 2}, {"zzz": [REFUSED]}),
], ids=repr)
@pytest.mark.usefixtures("note_action")
async def test_a_serializer_actions_arguments_are_refused_not_converted(arguments: dict[str, Any], errors: dict[str, list[str]]) -> None:
    tokens, orders = await sync_to_async(seed)()
    assert refused(await call("shop.orders.add_note", {"id": orders["N-1001"], **arguments}, tokens["clerk"])) == errors
    assert (await Order.objects.aget(pk=orders["N-1001"])).note == ""  # the method did not run


@pytest.mark.usefixtures("note_action")
async def test_a_serializer_actions_arguments_of_the_advertised_types_run_it() -> None:
    tokens, orders = await sync_to_async(seed)()
    done = await call("shop.orders.add_note", {"id": orders["N-1001"], "count": 5, "flag": True}, tokens["clerk"])
    assert done["result"].get("isError") is not True, done
    assert (await Order.objects.aget(pk=orders["N-1001"])).note == "5 True"


async def test_a_confirm_template_naming_an_optional_field_left_out_reads_it_as_empty() -> None:
    """Found by a review: ``confirm=`` naming an optional ``serializer=`` field the caller left out was a
    ``KeyError`` (an internal error); a method's own defaults were filled in, the serializer's were not."""
    from demo_site.asgi import application

    Order.add_note = add_note  # type: ignore[attr-defined]
    action = mcp_tools.register_model_action(Order, "add_note", serializer=NoteSerializer,
                                             confirm="Note {count} ({flag}){missing[0]:.2f}{missing.pk} {missing!r} on {obj}?")
    try:
        tokens, orders = await sync_to_async(seed)()
        r = await call_modern(application, "tools/call", {"name": "shop.orders.add_note", "arguments": {"id": orders["N-1001"], "count": 5}},
                              token=tokens["clerk"], capabilities={"elicitation": {"form": {}}})
        result = r.json()["result"]
        assert result["resultType"] == "input_required", result
        [question] = result["inputRequests"].values()
        # flag: the method's own default (what it runs with); missing: named by no field or parameter,
        # empty whatever the template does with it (a diff review: "{discount:.2f}" of an omitted field
        # was a ValueError, an internal error).
        assert question["params"]["message"] == "Note 5 (False) '' on N-1001?", question
    finally:
        unregister_model_action(action)
        del Order.add_note  # type: ignore[attr-defined]
