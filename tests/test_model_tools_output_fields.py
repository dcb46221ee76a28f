"""A toolset's outputSchema says what its serializer writes, for the fields DRF's OpenAPI mapping
cannot type. Found by a review of model tools: a ``SerializerMethodField`` (even annotated ``-> int``),
a ``ReadOnlyField`` and a read-only field with ``default=None`` were advertised as ``{"type":
"string"}``; the server sent ints, objects and nulls, and the official client refused every result
("Invalid structured content returned by tool"). Each result here is checked against the advertised
outputSchema with jsonschema, as that client checks it."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import jsonschema
import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from rest_framework import serializers

import mcp_tools
from demo_site.shop.models import Customer, Order, Refund
from tests.asgi_client import call_modern

pytestmark = pytest.mark.django_db(transaction=True)


class RefundOut(serializers.ModelSerializer):
    order_number = serializers.CharField(source="order.number", read_only=True)
    creator = serializers.CharField(source="created_by.username", read_only=True, default=None)
    cents = serializers.SerializerMethodField()
    share = serializers.SerializerMethodField()
    half = serializers.SerializerMethodField()
    halves = serializers.SerializerMethodField()
    extra = serializers.SerializerMethodField()
    label = serializers.ReadOnlyField(source="__str__")

    class Meta:
        model = Refund
        fields = ["id", "amount", "created_by", "order_number", "creator", "cents", "share", "half", "halves", "extra", "label"]

    def get_cents(self, obj: Refund) -> int:
        return int(obj.amount * 100)

    def get_share(self, obj: Refund) -> float:
        return obj.amount / 10  # a Decimal, as Sum() or Avg() of a DecimalField gives: written as a string

    def get_half(self, obj: Refund) -> float | None:
        return obj.amount / 2  # a Decimal in an Optional's branch (a diff review: '1.25' refused)

    def get_halves(self, obj: Refund) -> list[float]:
        return [obj.amount / 2, obj.amount / 2]  # Decimals in a list's items

    def get_extra(self, obj: Refund):  # type: ignore[no-untyped-def]  # unannotated on purpose
        return {"kinds": [1, True, None]}


class RefundTools(mcp_tools.ModelToolset):
    queryset = Refund.objects.all()
    serializer_class = RefundOut
    basename = "review.refunds"
    actions = ["list", "retrieve"]
    permissions = {"list": [], "retrieve": []}


@pytest.fixture
def refund_tools() -> Any:
    mcp_tools.register_toolset(RefundTools)
    try:
        yield
    finally:
        mcp_tools.unregister_toolset(RefundTools)


def _setup() -> tuple[str, int]:
    from rest_framework.authtoken.models import Token

    user = User.objects.create_superuser("root", "root@example.com", "x")
    customer = Customer.objects.create(name="Ann", email="ann@example.com")
    order = Order.objects.create(number="N-1", customer=customer, store="north", total=Decimal("10.00"))
    Refund.objects.create(order=order, amount=Decimal("2.50"), created_by=user)
    orphan = Refund.objects.create(order=order, amount=Decimal("1.00"), created_by=None)
    return Token.objects.get_or_create(user=user)[0].key, orphan.pk


async def test_results_fit_the_advertised_output_schema(refund_tools: Any) -> None:
    from demo_site.asgi import application

    token, orphan = await sync_to_async(_setup)()
    listed = (await call_modern(application, "tools/list", {}, token=token)).json()["result"]["tools"]
    schemas = {t["name"]: t["outputSchema"] for t in listed if t["name"].startswith("review.refunds.")}
    row = schemas["review.refunds.retrieve"]["properties"]
    assert row["cents"]["type"] == ["integer", "string"], row  # the method's annotation (or a Decimal's text)
    assert row["share"]["type"] == ["number", "string"], row  # found by a diff review: "0.1" refused as no number
    assert row["extra"] == {} and row["label"] == {}, row  # any JSON value: nothing says more
    assert "null" in row["creator"]["type"], row

    retrieved = (await call_modern(application, "tools/call", {"name": "review.refunds.retrieve", "arguments": {"id": orphan}},
                                   token=token)).json()["result"]
    assert retrieved.get("isError") is not True, retrieved
    assert retrieved["structuredContent"]["creator"] is None and retrieved["structuredContent"]["cents"] == 100
    assert retrieved["structuredContent"]["share"] == "0.10"
    jsonschema.validate(retrieved["structuredContent"], schemas["review.refunds.retrieve"])

    page = (await call_modern(application, "tools/call", {"name": "review.refunds.list", "arguments": {}}, token=token)).json()["result"]
    assert page.get("isError") is not True, page
    assert {r["creator"] for r in page["structuredContent"]["results"]} == {"root", None}
    jsonschema.validate(page["structuredContent"], schemas["review.refunds.list"])


class Upper(serializers.Field):
    """A project's own writable field: it reads text (``strip``) and writes it back upper-cased."""

    def to_internal_value(self, data: Any) -> str:
        return str(data.strip())

    def to_representation(self, value: Any) -> Any:
        return {"text": str(value).upper()}


class OrderNote(serializers.ModelSerializer):
    note = Upper(required=False)

    class Meta:
        model = Order
        fields = ["id", "number", "note"]


def test_a_writable_field_of_the_projects_own_class_is_a_string_in_and_anything_out() -> None:
    """Found by a diff review: typing a project's field class as any JSON value on input too let ``5``
    reach its ``to_internal_value`` (an internal error) where ``Expected string`` refused it before."""
    from mcp_tools.modeltools.base import serializer_schema

    assert serializer_schema(OrderNote(), writable=True)["properties"]["note"] == {"type": "string"}
    assert serializer_schema(OrderNote(), writable=False)["properties"]["note"] == {}
