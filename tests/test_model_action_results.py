"""What a model action answers: its method's annotated return value, or the object through the
serializer of the model's toolset.

A method annotated ``-> str`` (or ``ToolResult``, or any type pydantic cannot adapt) had its value
dropped: the action answered the object through a serializer of every field instead, with
structuredContent, fields its toolset's serializer hides included. Now an annotated return is the
answer, shaped as a plain ``@mcp_tools.tool`` with that annotation shapes it; a method without
one (or ``-> None``) answers the object through ``output_serializer=``, else its toolset's serializer
(of several, what each of them shows).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from rest_framework import serializers

import mcp_tools
from demo_site.shop.models import Customer
from mcp_tools import ToolResult
from mcp_tools.modeltools import unregister_model_action, unregister_toolset
from tests.asgi_client import call_modern

pytestmark = pytest.mark.django_db(transaction=True)

YES = {"confirm": {"action": "accept", "content": {"confirm": True}}}


def seed() -> tuple[str, int]:
    """The demo shop; the clerk's API token and the pk of the customer Ada."""
    from django.contrib.auth.models import User
    from rest_framework.authtoken.models import Token

    from demo_site.shop.seed import seed_shop

    seed_shop()
    Customer.objects.filter(email="ada@example.com").update(failed_logins=3)
    token = Token.objects.get_or_create(user=User.objects.get(username="clerk"))[0].key
    return token, Customer.objects.get(email="ada@example.com").pk


async def call(name: str, arguments: dict[str, Any], token: str, **params: Any) -> dict[str, Any]:
    from demo_site.asgi import application

    r = await call_modern(application, "tools/call", {"name": name, "arguments": arguments, **params}, token=token)
    assert r.status == 200, r.body
    return r.json()["result"]


async def listed(name: str, token: str) -> dict[str, Any] | None:
    from demo_site.asgi import application

    r = await call_modern(application, "tools/list", {}, token=token)
    return next((tool for tool in r.json()["result"]["tools"] if tool["name"] == name), None)


def customer_tools(basename: str, fields: list[str] | None) -> type[mcp_tools.ModelToolset]:
    """A toolset of customers (retrieve, ``shop.view_customer``) whose serializer shows ``fields``
    (None: no serializer_class, every field)."""
    attrs: dict[str, Any] = {"queryset": Customer.objects.all(), "basename": basename, "actions": ["retrieve"],
                             "permissions": {"retrieve": ["shop.view_customer"]}}
    if fields is not None:
        meta = type("Meta", (), {"model": Customer, "fields": fields})
        attrs["serializer_class"] = type("CustomerSerializer", (serializers.ModelSerializer,), {"Meta": meta})
    return type("CustomerTools", (mcp_tools.ModelToolset,), attrs)


#: Customers as the toolset shows them: no email, no failed logins.
PublicCustomerTools = customer_tools("results.customers", ["id", "name"])
EveryFieldCustomerTools = customer_tools("results.all_customers", None)
EmailCustomerTools = customer_tools("results.customer_emails", ["id", "email"])


def _logins(self: Customer) -> str:
    """How many failed logins, in words."""
    return f"{self.name} failed {self.failed_logins} logins"


def _receipt(self: Customer) -> ToolResult:
    """A hand-built result that chains to the toolset's retrieve."""
    return ToolResult(content=[f"{self.name} checked"], next_tool=("results.customers.retrieve", {"id": self.pk}))


def _touch(self: Customer) -> None:
    """Save the customer."""
    self.save(update_fields=["name"])


def _touch_unannotated(self):  # type: ignore[no-untyped-def]
    """Save the customer (no annotation)."""
    self.save(update_fields=["name"])


METHODS = {"logins": _logins, "receipt": _receipt, "touch": _touch, "touch_unannotated": _touch_unannotated}


@pytest.fixture
def actions() -> Iterator[None]:
    """The methods above as read-only actions (``shop.view_customer``), ``touch`` confirmed,
    with the restricting toolset of customers registered."""
    registered = []
    for method, fn in METHODS.items():
        setattr(Customer, method, fn)
        registered.append(mcp_tools.register_model_action(
            Customer, method, name=f"results.customers.{method}", permissions=["shop.view_customer"],
            read_only=method in ("logins", "receipt"), confirm=method == "touch"))
    mcp_tools.register_toolset(PublicCustomerTools)
    try:
        yield
    finally:
        unregister_toolset(PublicCustomerTools)
        for action in registered:
            unregister_model_action(action)
        for method in METHODS:
            delattr(Customer, method)


async def test_a_str_annotated_action_answers_its_return_value_as_text(actions: None) -> None:
    token, pk = await sync_to_async(seed)()
    tool = await listed("results.customers.logins", token)
    assert tool is not None and "outputSchema" not in tool, tool
    answer = await call("results.customers.logins", {"id": pk}, token)
    assert answer["content"] == [{"type": "text", "text": "Ada Lovelace failed 3 logins"}], answer
    assert "structuredContent" not in answer and not answer.get("isError"), answer


async def test_a_tool_result_annotated_action_answers_its_tool_result_with_its_hint(actions: None) -> None:
    token, pk = await sync_to_async(seed)()
    answer = await call("results.customers.receipt", {"id": pk}, token)
    assert answer["content"] == [{"type": "text", "text": "Ada Lovelace checked"}] and "structuredContent" not in answer, answer
    # The hint still goes through the server's check (the caller may call the retrieve tool).
    assert answer["_meta"]["nextTool"] == {"tool": "results.customers.retrieve", "arguments": {"id": pk}}, answer


@pytest.mark.parametrize("method", ["touch", "touch_unannotated"])
async def test_an_action_answering_the_object_shows_only_the_toolset_s_fields(actions: None, method: str) -> None:
    """``-> None`` and no annotation answer the object, through the toolset's serializer (confirmed
    or not: the confirmed one's result is journaled), never with the fields it hides."""
    token, pk = await sync_to_async(seed)()
    tool = await listed(f"results.customers.{method}", token)
    assert tool is not None and set(tool["outputSchema"]["properties"]) == {"id", "name"}, tool
    answer = await call(f"results.customers.{method}", {"id": pk}, token)
    if answer.get("resultType") == "input_required":
        answer = await call(f"results.customers.{method}", {"id": pk}, token, inputResponses=YES, requestState=answer["requestState"])
    assert answer["structuredContent"] == {"id": pk, "name": "Ada Lovelace"}, answer


@pytest.mark.parametrize("other", [EveryFieldCustomerTools, EmailCustomerTools])
async def test_of_two_toolsets_the_object_shows_only_what_both_show(actions: None, other: type[mcp_tools.ModelToolset]) -> None:
    token, pk = await sync_to_async(seed)()
    mcp_tools.register_toolset(other)
    try:
        tool = await listed("results.customers.touch_unannotated", token)
        answer = await call("results.customers.touch_unannotated", {"id": pk}, token)
    finally:
        unregister_toolset(other)
    shown = {"id", "name"} if other is EveryFieldCustomerTools else {"id"}
    assert tool is not None and set(tool["outputSchema"]["properties"]) == shown, tool
    assert set(answer["structuredContent"]) == shown, answer
    tool = await listed("results.customers.touch_unannotated", token)  # one toolset again: its serializer
    assert tool is not None and set(tool["outputSchema"]["properties"]) == {"id", "name"}, tool


async def test_without_a_toolset_the_object_has_every_field(actions: None) -> None:
    token, pk = await sync_to_async(seed)()
    unregister_toolset(PublicCustomerTools)
    try:
        answer = await call("results.customers.touch_unannotated", {"id": pk}, token)
    finally:
        mcp_tools.register_toolset(PublicCustomerTools)
    assert set(answer["structuredContent"]) == {"id", "name", "email", "is_locked", "failed_logins"}, answer


class ShownAsSerializer(serializers.ModelSerializer):
    """Code written for the toolset's own views: it reads the toolset and the request's method."""

    shown_by = serializers.SerializerMethodField()

    class Meta:
        model = Customer
        fields = ["id", "name", "shown_by"]

    def get_shown_by(self, obj: Customer) -> str:
        return f"{self.context['toolset'].action} {self.context['request'].method}"


ContextReadingCustomerTools = type("CustomerTools", (mcp_tools.ModelToolset,), {
    "queryset": Customer.objects.all(), "basename": "results.context_customers", "actions": ["retrieve"],
    "permissions": {"retrieve": ["shop.view_customer"]}, "serializer_class": ShownAsSerializer})


async def test_the_toolset_s_serializer_gets_the_context_its_retrieve_gives_it(actions: None) -> None:
    """A review of the change above: the toolset's serializer, given the action's own context, raised
    KeyError on ``context["toolset"]`` and every un-annotated action of the model failed ("Internal
    error"), where it answered before the change. It gets what the toolset's retrieve gives it."""
    token, pk = await sync_to_async(seed)()
    unregister_toolset(PublicCustomerTools)
    mcp_tools.register_toolset(ContextReadingCustomerTools)
    try:
        shown = await call("results.context_customers.retrieve", {"id": pk}, token)
        answer = await call("results.customers.touch_unannotated", {"id": pk}, token)
    finally:
        unregister_toolset(ContextReadingCustomerTools)
        mcp_tools.register_toolset(PublicCustomerTools)
    assert shown["structuredContent"]["shown_by"] == "retrieve GET", shown
    assert not answer.get("isError") and answer["structuredContent"] == {"id": pk, "name": "Ada Lovelace", "shown_by": "retrieve GET"}, answer
