"""Model tools given what they cannot take: a clear error, nothing changed, never "Internal error".

Each test failed before its fix (a review of mcp_tools/modeltools): a search of a thousand words
ran for seconds and ended in SQLite's "Expression tree is too large"; a delete the database
refused (rows still refer to the row) and a unique value only the database checked were internal
errors; a fractional id was truncated to another row's; a confirmed action with an argument named
``obj`` raised TypeError; an ordering through a relation to many rows passed the system check and
broke paging.
"""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from rest_framework import serializers

import mcp_tools
from demo_site.shop.models import Customer, Order
from mcp_tools.modeltools import unregister_model_action
from mcp_tools.modeltools.base import known_permissions
from mcp_tools.modeltools.toolsets import MAX_SEARCH_TERMS
from tests.asgi_client import argument_errors, call_modern

pytestmark = pytest.mark.django_db(transaction=True)


def seed() -> tuple[dict[str, str], dict[str, int]]:
    """The demo shop; the clerk's and the viewer's API tokens, and the customers' ids by email."""
    from django.contrib.auth.models import User
    from rest_framework.authtoken.models import Token

    from demo_site.shop.seed import seed_shop

    seed_shop()
    tokens = {name: Token.objects.get_or_create(user=User.objects.get(username=name))[0].key for name in ("clerk", "viewer")}
    return tokens, {c.email: c.pk for c in Customer.objects.all()}


async def call(name: str, arguments: Any, token: str, **more: Any) -> dict[str, Any]:
    from demo_site.asgi import application

    response = await call_modern(application, "tools/call", {"name": name, "arguments": arguments, **more}, token=token)
    assert response.status in (200, 400), response.body
    message: dict[str, Any] = response.json()
    return message


def tool_error(message: dict[str, Any]) -> dict[str, Any]:
    """The structured errors of a tool error result (never the catch-all "Internal error")."""
    result = message["result"]
    assert result["isError"] is True, result
    assert "Internal error" not in result["content"][0]["text"], result
    errors: dict[str, Any] = result.get("structuredContent", {}).get("errors", {})
    return errors


async def test_a_search_is_bounded_in_words_and_length() -> None:
    tokens, _ = await sync_to_async(seed)()
    many = " ".join(f"w{i}" for i in range(MAX_SEARCH_TERMS + 1))
    result = (await call("shop.orders.list", {"search": many}, tokens["viewer"]))["result"]
    assert result["isError"] is True and result["content"][0]["text"] == f"Search for at most {MAX_SEARCH_TERMS} words at a time."
    long = await call("shop.orders.list", {"search": " ".join(["x"] * 1000)}, tokens["viewer"])
    assert argument_errors(long)[0]["field"] == "search", long
    within = await call("shop.orders.list", {"search": " ".join(["ada"] * MAX_SEARCH_TERMS)}, tokens["viewer"])
    assert within["result"].get("isError") is not True, within


class CustomerTools(mcp_tools.ModelToolset):
    queryset = Customer.objects.all()
    basename = "review.customers"
    actions = ["create", "delete"]
    confirm_delete = False
    permissions = {"create": ["shop.view_customer"], "delete": ["shop.view_customer"]}


class ConfirmedCustomerTools(CustomerTools):
    basename = "review.customers_confirmed"
    actions = ["delete"]
    confirm_delete = True  # the delete runs in a ctx.once step of the answering round


class EmailWithoutUniqueCheck(serializers.ModelSerializer):  # type: ignore[type-arg]
    email = serializers.EmailField()  # declared here: DRF adds no UniqueValidator, only the database refuses

    class Meta:
        model = Customer
        fields = ["id", "name", "email"]


class CustomerCreateTools(mcp_tools.ModelToolset):
    queryset = Customer.objects.all()
    basename = "review.customers_plain"
    serializer_class = EmailWithoutUniqueCheck
    actions = ["create"]
    permissions = {"create": ["shop.view_customer"]}


@pytest.fixture
def customer_tools() -> Any:
    toolsets = (CustomerTools, ConfirmedCustomerTools, CustomerCreateTools)
    for toolset in toolsets:
        mcp_tools.register_toolset(toolset)
    try:
        yield
    finally:
        for toolset in toolsets:
            mcp_tools.unregister_toolset(toolset)


async def test_deleting_a_row_other_rows_protect_is_a_tool_error_and_deletes_nothing(customer_tools: Any) -> None:
    tokens, customers = await sync_to_async(seed)()
    ada = {"id": customers["ada@example.com"]}
    refused = ["Deleting customer Ada Lovelace refused: orders still refer to it."]
    assert tool_error(await call("review.customers.delete", ada, tokens["clerk"]))["non_field_errors"] == refused
    asked = (await call("review.customers_confirmed.delete", ada, tokens["clerk"]))["result"]
    answers = {"confirm": {"action": "accept", "content": {"confirm": True}}}
    for _ in range(2):  # a retry of the answering round reads the journaled refusal: the same answer
        answered = await call("review.customers_confirmed.delete", ada, tokens["clerk"],
                              inputResponses=answers, requestState=asked["requestState"])
        assert tool_error(answered)["non_field_errors"] == refused
    assert await sync_to_async(Customer.objects.filter(email="ada@example.com").exists)()


async def test_a_unique_value_only_the_database_checks_is_a_tool_error(customer_tools: Any) -> None:
    tokens, _ = await sync_to_async(seed)()
    before = await sync_to_async(Customer.objects.count)()
    errors = tool_error(await call("review.customers_plain.create", {"name": "Ada 2", "email": "ada@example.com"}, tokens["clerk"]))
    assert "conflicts with existing data" in errors["non_field_errors"][0], errors
    assert await sync_to_async(Customer.objects.count)() == before


async def test_arguments_of_another_json_type_than_advertised_are_refused_not_converted() -> None:
    tokens, customers = await sync_to_async(seed)()
    order = {"number": "Z-1", "store": "north", "total": "1.00"}
    for customer in (customers["ada@example.com"] + 0.5, str(customers["ada@example.com"]), True):
        errors = tool_error(await call("shop.orders.create", {**order, "customer": customer}, tokens["clerk"]))
        assert errors == {"customer": ["Expected integer."]}, (customer, errors)
    assert not await sync_to_async(Order.objects.filter(number="Z-1").exists)()
    limit = await call("shop.orders.list", {"limit": True}, tokens["viewer"])
    assert [e["field"] for e in argument_errors(limit)] == ["limit"], limit
    created = await call("shop.orders.create", {**order, "customer": customers["ada@example.com"]}, tokens["clerk"])
    assert created["result"].get("isError") is not True, created


async def test_a_confirmed_action_with_an_argument_named_obj_asks_for_confirmation() -> None:
    tokens, customers = await sync_to_async(seed)()

    def relabel(self: Customer, obj: str = "") -> None:
        self.name = obj or self.name
        self.save(update_fields=["name"])

    Customer.relabel = relabel  # type: ignore[attr-defined]
    action = mcp_tools.register_model_action(Customer, "relabel", name="review.customers.relabel", confirm=True,
                                             permissions=["shop.view_customer"])
    try:
        answer = await call("review.customers.relabel", {"id": customers["ada@example.com"], "obj": "Ada L."}, tokens["clerk"])
    finally:
        unregister_model_action(action)
        del Customer.relabel  # type: ignore[attr-defined]
    assert answer["result"].get("resultType") == "input_required", answer


class ByOrderTotal(mcp_tools.ModelToolset):
    queryset = Customer.objects.all()
    basename = "review.customers_by_total"
    actions = ["list"]
    ordering_fields = ["orders__total", "name"]
    permissions = {"list": ["shop.view_customer"]}


def test_an_ordering_through_a_relation_to_many_rows_is_a_system_check_error() -> None:
    messages = ByOrderTotal.check_declaration(known_permissions())
    assert [(m.id, "relation to many rows" in m.msg) for m in messages] == [("mcp_tools.E030", True)], messages
