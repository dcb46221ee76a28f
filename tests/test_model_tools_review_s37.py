"""Model tools: what the session 37 review found, each failing before its mend.

An admin action its ``ModelAdmin.get_actions(request)`` withholds from the caller; a row shown with
a URL (a file field, a hyperlinked field).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any
from urllib.parse import urlsplit

import pytest
from asgiref.sync import sync_to_async
from django.contrib import admin
from rest_framework import serializers

import mcp_tools
from mcp_tools.modeltools.actions import unregister_model_action
from mcp_tools.registry import registry
from demo_site.shop.models import Order
from tests.asgi_client import call_modern
from tests.test_model_tools_review import call, statuses
from tests.test_model_tools_review import seed as seed_shop_with_tokens

pytestmark = pytest.mark.django_db(transaction=True)


def seed() -> tuple[dict[str, str], dict[str, int]]:
    """The demo shop (tests.test_model_tools_review's), plus a superuser; API tokens of its clerk, viewer and
    the superuser; order pk by number."""
    from django.contrib.auth.models import User
    from rest_framework.authtoken.models import Token

    tokens, orders = seed_shop_with_tokens()
    User.objects.create_superuser("boss", "boss@example.com", "boss")
    return {**tokens, "boss": Token.objects.get_or_create(user=User.objects.get(username="boss"))[0].key}, orders


# -- an admin action get_actions withholds -----------------------------------------------------------

site = admin.AdminSite(name="review_s37_site")


class SuperusersShipAdmin(admin.ModelAdmin):
    actions = ["ship"]

    @admin.action(description="Ship selected %(verbose_name_plural)s")
    def ship(self, request: Any, queryset: Any) -> None:
        queryset.update(status=Order.Status.SHIPPED)

    def get_actions(self, request: Any) -> dict[str, Any]:
        # Django's documented way to offer an action to some users only
        # ("Conditionally enabling or disabling actions").
        actions = super().get_actions(request)
        if not request.user.is_superuser:
            actions.pop("ship", None)
        return actions


site.register(Order, SuperusersShipAdmin)


class SuperusersShipTools(mcp_tools.ModelToolset):
    queryset = Order.objects.all()
    basename = "review_s37.orders"
    actions = ["retrieve"]
    admin_actions = ["ship"]
    admin_site = site


@pytest.fixture
def ship_tools():  # type: ignore[no-untyped-def]
    mcp_tools.register_toolset(SuperusersShipTools)
    try:
        yield
    finally:
        mcp_tools.unregister_toolset(SuperusersShipTools)


async def test_an_admin_action_get_actions_withholds_is_an_unknown_tool(ship_tools) -> None:  # type: ignore[no-untyped-def]
    """The admin does not offer ``ship`` to the clerk (``get_actions`` drops it), who holds the change
    permission: the tool ran for them all the same, shipping every order. Found by a review."""
    tokens, orders = await sync_to_async(seed)()
    answer = await call("review_s37.orders.ship", {"ids": list(orders.values())}, token=tokens["clerk"])
    assert answer.get("error", {}).get("code") == -32602, answer
    assert "Unknown tool" in answer["error"]["message"]
    assert await sync_to_async(statuses)() == ["open"], "nothing changed"
    answer = await call("review_s37.orders.ship", {"ids": list(orders.values())}, token=tokens["boss"])
    assert answer["result"]["structuredContent"]["count"] == len(orders), answer
    assert await sync_to_async(statuses)() == ["shipped"]


# -- a row shown with a URL (a file field, a hyperlinked field) -----------------------------------------


class ReceiptField(serializers.FileField):
    """A file field of each order (as a model's ``FileField`` holding a file gives DRF a ``FieldFile``)."""

    def get_attribute(self, instance: Any) -> Any:
        return SimpleNamespace(url=f"/media/receipts/{instance.number}.pdf")


class LinkedOrderSerializer(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="admin:shop_order_change", lookup_url_kwarg="object_id")
    receipt = ReceiptField(read_only=True)

    class Meta:
        model = Order
        fields = ["id", "number", "url", "receipt"]


class LinkedOrderTools(mcp_tools.ModelToolset):
    queryset = Order.objects.all()
    serializer_class = LinkedOrderSerializer
    basename = "review_s37.linked_orders"
    actions = ["list", "retrieve"]


@pytest.fixture
def linked_tools():  # type: ignore[no-untyped-def]
    mcp_tools.register_toolset(LinkedOrderTools)
    try:
        yield
    finally:
        mcp_tools.unregister_toolset(LinkedOrderTools)


def assert_absolute(url: str, path: str) -> None:
    parts = urlsplit(url)
    assert parts.scheme == "http" and parts.netloc and parts.path == path, url


@pytest.mark.parametrize("action", ["list", "retrieve", "order_action"])
async def test_a_row_with_a_file_or_a_hyperlinked_field_is_shown_with_absolute_urls(linked_tools, action: str) -> None:  # type: ignore[no-untyped-def]
    """DRF's FileField and hyperlinked fields write ``request.build_absolute_uri(url)``: the request
    the serializer's context had no host (no SERVER_NAME, no Host header), so every tool showing
    such a row failed with a KeyError, an internal error. Found by a review."""
    tokens, orders = await sync_to_async(seed)()
    pk = orders["N-1001"]
    if action == "list":
        answer = await call("review_s37.linked_orders.list", {"limit": 1}, token=tokens["clerk"])
    elif action == "retrieve":
        answer = await call("review_s37.linked_orders.retrieve", {"id": pk}, token=tokens["clerk"])
    else:  # a model action answering the object
        action_tool = mcp_tools.register_model_action(Order, "cancel", name="review_s37.orders.cancel", confirm=False,
                                                      output_serializer=LinkedOrderSerializer)
        try:
            answer = await call("review_s37.orders.cancel", {"id": pk}, token=tokens["clerk"])
        finally:
            unregister_model_action(action_tool)
    assert "error" not in answer and not answer["result"].get("isError"), answer
    row = answer["result"]["structuredContent"]
    if action == "list":
        row = row["results"][0]
    assert_absolute(row["url"], f"/admin/shop/order/{row['id']}/change/")
    assert_absolute(row["receipt"], f"/media/receipts/{row['number']}.pdf")


@pytest.mark.parametrize(("changes", "origin"), [
    ({}, "http://localhost"),  # tests/settings.py: the first of ALLOWED_HOSTS
    ({"ALLOWED_HOSTS": ["*", ".shop.example", "other.example"]}, "http://shop.example"),
    ({"ALLOWED_HOSTS": ["shop.example:8443"], "SECURE_SSL_REDIRECT": True}, "https://shop.example:8443"),
    ({"ALLOWED_HOSTS": ["*"]}, "http://localhost"),
    ({"MCP_TOOLS": {"OAUTH": {"RESOURCE": "https://mcp.shop.example/mcp"}}}, "https://mcp.shop.example"),
])
def test_the_urls_of_a_tool_s_answer_are_on_the_site_s_origin(changes: dict[str, Any], origin: str) -> None:
    from django.test import override_settings

    from mcp_tools.modeltools.base import tool_request

    with override_settings(**changes):
        request = tool_request(None, "GET")
        assert request.build_absolute_uri("/media/a.pdf") == f"{origin}/media/a.pdf"


# -- the outputSchema of rows the database holds ---------------------------------------------------------


class LegacyOrderSerializer(serializers.ModelSerializer):
    """Input constraints a stored row need not meet: a blank choice, a choice no longer offered, a
    slug, a length, an email, a bound (the serializer's or the model's validators)."""

    kind = serializers.ChoiceField(choices=["a", "b"], allow_blank=True, source="note")
    slug = serializers.SlugField(source="number", max_length=6)
    contact = serializers.EmailField(source="customer.email", read_only=True)
    logins = serializers.IntegerField(source="customer.failed_logins", read_only=True, min_value=0, max_value=10)
    numbers = serializers.ListField(child=serializers.CharField(min_length=7), source="number_list", read_only=True,
                                    min_length=2, max_length=3)

    class Meta:
        model = Order
        fields = ["id", "status", "kind", "slug", "contact", "logins", "numbers"]


class LegacyOrderTools(mcp_tools.ModelToolset):
    queryset = Order.objects.select_related("customer")
    serializer_class = LegacyOrderSerializer
    basename = "review_s37.legacy_orders"
    actions = ["list", "retrieve"]


def legacy_rows() -> None:
    """Rows as a database may hold them: written before a rule, by a migration, by SQL."""
    from demo_site.shop.models import Customer

    Order.objects.filter(number="N-1001").update(status="held", note="")  # a choice since removed; a blank one
    Order.objects.filter(number="N-1002").update(number="N 1002 (old)")  # no slug, past max_length
    for customer in Customer.objects.all():
        Customer.objects.filter(pk=customer.pk).update(failed_logins=20, email=f"not an email {customer.pk}")


def _number_list(self: Order) -> list[str]:
    return [self.number]  # one item (minItems 2), shorter than 7 characters (minLength)


async def test_a_row_the_database_holds_fits_the_output_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    """The outputSchema carried the input's constraints (a choice's enum without "", minimum and
    maximum, a slug's pattern, maxLength...): the official MCP client validates structuredContent
    against it and refused valid rows ("'' is not one of ['a', 'b']", "20 is greater than the
    maximum of 10"). Found by a review."""
    from jsonschema.validators import validator_for

    from demo_site.asgi import application

    monkeypatch.setattr(Order, "number_list", property(_number_list), raising=False)
    tokens, orders = await sync_to_async(seed)()
    await sync_to_async(legacy_rows)()
    mcp_tools.register_toolset(LegacyOrderTools)
    try:
        listed = (await call_modern(application, "tools/list", {}, token=tokens["clerk"])).json()["result"]["tools"]
        tools = {tool["name"]: tool for tool in listed if tool["name"].startswith("review_s37.legacy_orders.")}
        answers = {
            "review_s37.legacy_orders.list": await call("review_s37.legacy_orders.list", {}, token=tokens["clerk"]),
            "review_s37.legacy_orders.retrieve": await call("review_s37.legacy_orders.retrieve", {"id": orders["N-1001"]},
                                                            token=tokens["clerk"]),
        }
    finally:
        mcp_tools.unregister_toolset(LegacyOrderTools)
    for name, answer in answers.items():
        result = answer["result"]
        assert not result.get("isError"), result
        schema = tools[name]["outputSchema"]
        # As the official client checks it (mcp.client.session.validate_tool_result), and with formats too.
        validator_class = validator_for(schema)
        for validator in (validator_class(schema), validator_class(schema, format_checker=validator_class.FORMAT_CHECKER)):
            errors = [error.message for error in validator.iter_errors(result["structuredContent"])]
            assert errors == [], (name, errors)
    row = tools["review_s37.legacy_orders.retrieve"]["outputSchema"]["properties"]
    assert row["status"]["type"] == "string" and "integer" in row["logins"]["type"], row  # the types stay
    assert "array" in row["numbers"]["type"] and row["numbers"]["items"] == {"type": "string"}, row
    # The input keeps the constraints, and takes the blank choice DRF takes.
    assert tools["review_s37.legacy_orders.list"]["inputSchema"]["properties"]["limit"]["maximum"] == 200


def test_the_input_schema_keeps_its_constraints_and_takes_a_blank_choice() -> None:
    from mcp_tools.modeltools.base import serializer_schema

    properties = serializer_schema(LegacyOrderSerializer(), writable=True)["properties"]
    assert properties["kind"]["enum"] == ["a", "b", ""], properties["kind"]
    assert properties["slug"]["maxLength"] == 6 and "pattern" in properties["slug"], properties["slug"]


@pytest.mark.parametrize("lookup", ["exact", "in"])
def test_a_list_filter_takes_the_blank_value_of_a_blank_choice_field(lookup: str) -> None:
    """A text field with choices and ``blank=True`` holds "" (its default, often): the filter's
    type was the choices alone, and ``{"kind": ""}`` was refused as no choice. Found by a review."""
    from django.db import models
    from pydantic import TypeAdapter, ValidationError

    kind = models.CharField(max_length=5, choices=[("a", "A"), ("b", "B")], blank=True, default="")
    strict = models.CharField(max_length=5, choices=[("a", "A"), ("b", "B")])
    value: Any = "" if lookup == "exact" else ["", "a"]
    assert TypeAdapter(mcp_tools.ModelToolset.filter_type(kind, lookup)).validate_python(value) == value
    with pytest.raises(ValidationError):  # not blank: "" is still refused, as any value no row can have
        TypeAdapter(mcp_tools.ModelToolset.filter_type(strict, lookup)).validate_python(value)


# -- a review of these fixes ---------------------------------------------------------------------------

unlisted_site = admin.AdminSite(name="review_s37_unlisted_site")


class ListedOnlyAdmin(admin.ModelAdmin):
    actions = ["listed"]

    @admin.action(description="Listed")
    def listed(self, request: Any, queryset: Any) -> None:
        queryset.update(status=Order.Status.SHIPPED)

    @admin.action(description="Unlisted")
    def unlisted(self, request: Any, queryset: Any) -> None:
        queryset.update(status=Order.Status.SHIPPED)


unlisted_site.register(Order, ListedOnlyAdmin)


class UnlistedTools(mcp_tools.ModelToolset):
    queryset = Order.objects.all()
    basename = "review_s37.unlisted"
    actions = ["retrieve"]
    admin_actions = ["unlisted"]
    admin_site = unlisted_site


async def test_an_action_the_changelist_never_offers_runs_as_the_toolset_exposes_it() -> None:
    """An action the ModelAdmin's ``actions`` leaves out (or ``actions = None``) is in no user's ``get_actions``:
    the fix above answered every call of it "Unknown tool", though the check passed and tools/list listed it
    (a review of the fix). Only an action the changelist offers is withheld by ``get_actions``."""
    tokens, orders = await sync_to_async(seed)()
    mcp_tools.register_toolset(UnlistedTools)
    try:
        answer = await call("review_s37.unlisted.unlisted", {"ids": list(orders.values())}, token=tokens["boss"])
    finally:
        mcp_tools.unregister_toolset(UnlistedTools)
    assert answer["result"]["structuredContent"]["count"] == len(orders), answer
    assert await sync_to_async(statuses)() == ["shipped"]


class EmptyReceiptField(serializers.FileField):
    """A file field with no file (a model's ``FileField(blank=True)`` holding ""): DRF writes null."""

    def get_attribute(self, instance: Any) -> Any:
        return ""  # as a FieldFile without a name is falsy


class ReceiptlessOrderSerializer(serializers.ModelSerializer):
    receipt = EmptyReceiptField(required=False)

    class Meta:
        model = Order
        fields = ["id", "number", "receipt"]


class ReceiptlessTools(mcp_tools.ModelToolset):
    queryset = Order.objects.all()
    serializer_class = ReceiptlessOrderSerializer
    basename = "review_s37.receiptless"
    actions = ["retrieve"]


async def test_a_file_field_without_a_file_is_null_in_the_output_schema() -> None:
    """DRF writes null for a file field with no file; the output schema said string, and the official client
    refused every such row (a review of the fixes)."""
    import jsonschema

    tokens, orders = await sync_to_async(seed)()
    mcp_tools.register_toolset(ReceiptlessTools)
    try:
        tool = registry.get_tool("review_s37.receiptless.retrieve")
        assert tool is not None and tool.output is not None
        answer = await call("review_s37.receiptless.retrieve", {"id": next(iter(orders.values()))}, token=tokens["boss"])
        schema = tool.output.schema
    finally:
        mcp_tools.unregister_toolset(ReceiptlessTools)
    content = answer["result"]["structuredContent"]
    assert content["receipt"] is None, content
    jsonschema.validate(content, schema)
