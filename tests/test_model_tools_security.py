"""Model tools from an attacker's and a careless integrator's side: each test failed before its mend.

Permission backends that answer ``has_perm`` alone or veto with ``PermissionDenied``, object-level
refusals that named a hidden row, writes that committed when their result failed, DRF's
``CurrentUserDefault``, ordering by a foreign key, filter lookups, and a row that changed while
the user was asked to confirm.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from decimal import Decimal
from typing import Any, TypedDict

import pytest
from asgiref.sync import sync_to_async
from django.core.exceptions import PermissionDenied
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from rest_framework import serializers

import mcp_tools
from demo_site.shop.models import Customer, Order, Refund
from mcp_tools.modeltools import unregister_model_action
from mcp_tools.modeltools.base import known_permissions
from mcp_tools.server.auth import Principal
from tests.asgi_client import argument_errors, call_modern

pytestmark = pytest.mark.django_db(transaction=True)


def seed() -> tuple[dict[str, str], dict[str, int]]:
    """The demo shop; API tokens of its clerk and viewer; order pk by number."""
    from django.contrib.auth.models import User
    from rest_framework.authtoken.models import Token

    from demo_site.shop.seed import seed_shop

    seed_shop()
    tokens = {name: Token.objects.get_or_create(user=User.objects.get(username=name))[0].key for name in ("clerk", "viewer")}
    return tokens, {order.number: order.pk for order in Order.objects.all()}


async def call(name: str, arguments: dict[str, Any], token: str | None = None, **params: Any) -> dict[str, Any]:
    from demo_site.asgi import application

    r = await call_modern(application, "tools/call", {"name": name, "arguments": arguments, **params}, token=token)
    assert r.status in (200, 400), r.body
    return r.json()


async def list_tools(token: str) -> set[str]:
    from demo_site.asgi import application

    r = await call_modern(application, "tools/list", {}, token=token)
    return {tool["name"] for tool in r.json()["result"]["tools"]}


@contextlib.contextmanager
def registered(toolset: type[mcp_tools.ModelToolset]) -> Iterator[None]:
    """The toolset's tools, registered for a test."""
    mcp_tools.register_toolset(toolset)
    try:
        yield
    finally:
        mcp_tools.unregister_toolset(toolset)


def text_of(answer: dict[str, Any]) -> str:
    if "error" in answer:
        return "JSONRPC " + str(answer["error"])
    return " ".join(block.get("text", "") for block in answer["result"]["content"])


# -- model permissions: every backend is asked as Django asks it --------------------------------------


class RulesStyleBackend:
    """Like django-rules' ObjectPermissionBackend: answers has_perm (model-level too), no get_all_permissions."""

    calls: list[str] = []

    def authenticate(self, request: Any, **kwargs: Any) -> None:
        return None

    def has_perm(self, user_obj: Any, perm: str, obj: Any = None) -> bool:
        RulesStyleBackend.calls.append(perm)
        return bool(user_obj.is_active and user_obj.username == "viewer" and perm in ("shop.change_order", "shop.view_order"))


class SuspendedBackend:
    """Django's documented veto: listed first, it raises PermissionDenied for the clerk's shop permissions."""

    def authenticate(self, request: Any, **kwargs: Any) -> None:
        return None

    def has_perm(self, user_obj: Any, perm: str, obj: Any = None) -> bool:
        if user_obj.username == "clerk" and perm.startswith("shop."):
            raise PermissionDenied
        return False


RULES = ["django.contrib.auth.backends.ModelBackend", f"{__name__}.RulesStyleBackend"]
SUSPENDED = [f"{__name__}.SuspendedBackend", "django.contrib.auth.backends.ModelBackend"]


async def test_a_has_perm_only_backend_grants_model_tools() -> None:
    """django-rules grants with has_perm alone: the viewer may change orders, so the tool is theirs."""
    tokens, orders = await sync_to_async(seed)()
    with override_settings(AUTHENTICATION_BACKENDS=RULES):
        tools = await list_tools(tokens["viewer"])
        answer = await call("shop.orders.update", {"id": orders["S-2001"], "note": "granted by a rule"}, token=tokens["viewer"])
    assert "shop.orders.update" in tools
    assert answer["result"].get("isError") is not True, answer
    assert await sync_to_async(lambda: Order.objects.get(number="S-2001").note)() == "granted by a rule"


async def test_a_backend_veto_holds_for_model_tools() -> None:
    """A backend raising PermissionDenied from has_perm stops Django's check: the tools follow it."""
    tokens, _ = await sync_to_async(seed)()
    customer = await sync_to_async(lambda: Customer.objects.first().pk)()  # type: ignore[union-attr]
    with override_settings(AUTHENTICATION_BACKENDS=SUSPENDED):
        tools = await list_tools(tokens["clerk"])
        created = await call("shop.orders.create", {"number": "V-1", "customer": customer, "store": "north", "total": "1.00"},
                             token=tokens["clerk"])
    assert not [name for name in tools if name.startswith("shop.orders.")], sorted(tools)
    assert "error" in created or created["result"]["isError"] is True, created
    assert not await sync_to_async(Order.objects.filter(number="V-1").exists)()


def test_each_permission_set_is_asked_once_per_principal() -> None:
    """tools/list asks about the same few sets once per tool: the backends hear each set once."""
    seed()
    from django.contrib.auth.models import User

    RulesStyleBackend.calls.clear()
    with override_settings(AUTHENTICATION_BACKENDS=RULES):
        principal = Principal(user=User.objects.get(username="viewer"), id="user:viewer")
        answers = [principal.has_perms(["shop.change_order"]) for _ in range(5)]
    assert answers == [True] * 5
    assert RulesStyleBackend.calls == ["shop.change_order"]


def test_the_model_backend_queries_once_per_user_not_per_check() -> None:
    """The plain ModelBackend keeps a user's permissions on the user object: later checks, other
    sets included, are answered without a query."""
    seed()
    from django.contrib.auth.models import User

    principal = Principal(user=User.objects.get(username="clerk"), id="user:clerk")
    assert principal.has_perms(["shop.view_order"]) is True
    with CaptureQueriesContext(connection) as queries:
        assert principal.has_perms(["shop.change_order", "shop.add_refund"]) is True
        assert principal.has_perms(["shop.delete_customer"]) is False
        assert principal.has_perms(("shop.view_order", "oauth-scope:mcp")) is True
    assert len(queries) == 0, [q["sql"] for q in queries]


# -- object permissions: a row the caller may not view is a row that does not exist -------------------


class NorthOnlyBackend:
    """Object-level rules like django-guardian's: the south store's orders are nobody's here."""

    def authenticate(self, request: Any, **kwargs: Any) -> None:
        return None

    def has_perm(self, user_obj: Any, perm: str, obj: Any = None) -> bool:
        return isinstance(obj, Order) and obj.store == "north" and user_obj.is_active


class ViewOnlySouthBackend:
    """Everyone may view every order; only the north store's may be changed or deleted."""

    def authenticate(self, request: Any, **kwargs: Any) -> None:
        return None

    def has_perm(self, user_obj: Any, perm: str, obj: Any = None) -> bool:
        return isinstance(obj, Order) and (perm == "shop.view_order" or obj.store == "north")


class GuardedOrderTools(mcp_tools.ModelToolset):
    queryset = Order.objects.all()
    basename = "security.guarded_orders"
    actions = ["retrieve", "update", "delete"]
    object_permissions = True
    admin_actions = ["mark_shipped"]


@pytest.fixture
def guarded() -> Iterator[None]:
    with registered(GuardedOrderTools):
        yield


def backends(extra: type) -> Any:
    return override_settings(AUTHENTICATION_BACKENDS=["django.contrib.auth.backends.ModelBackend", f"{__name__}.{extra.__name__}"])


@pytest.mark.parametrize("tool", ["retrieve", "update", "delete", "mark_shipped", "shop.orders.cancel"])
async def test_a_row_the_caller_may_not_view_answers_like_a_missing_row(guarded: None, tool: str) -> None:
    """docs/model-tools.md: callers cannot probe for rows they may not see. Without the object's view
    permission the refusal was "You may not retrieve order S-2001", naming the row by its __str__."""
    tokens, orders = await sync_to_async(seed)()
    name = tool if "." in tool else f"security.guarded_orders.{tool}"
    arg = "ids" if tool == "mark_shipped" else "id"

    def args(pk: int) -> dict[str, Any]:
        return {arg: [pk] if arg == "ids" else pk}

    with backends(NorthOnlyBackend):
        hidden = await call(name, args(orders["S-2001"]), token=tokens["clerk"])
        missing = await call(name, args(999999), token=tokens["clerk"])
    assert hidden["result"]["isError"] is True
    assert text_of(hidden) == text_of(missing).replace("999999", str(orders["S-2001"]))
    assert text_of(hidden) == f"No order with id {orders['S-2001']}."
    assert await sync_to_async(lambda: Order.objects.get(number="S-2001").status)() == "open"


@pytest.mark.parametrize("tool", ["update", "delete", "mark_shipped", "shop.orders.cancel"])
async def test_a_row_the_caller_may_view_is_refused_by_its_lookup_not_its_str(guarded: None, tool: str) -> None:
    tokens, orders = await sync_to_async(seed)()
    name = tool if "." in tool else f"security.guarded_orders.{tool}"
    pk = orders["S-2001"]
    with backends(ViewOnlySouthBackend):
        refused = await call(name, {"ids": [pk]} if tool == "mark_shipped" else {"id": pk}, token=tokens["clerk"])
    what = {"shop.orders.cancel": "cancel", "mark_shipped": "mark shipped"}.get(tool, tool)
    perm = "shop.delete_order" if tool == "delete" else "shop.change_order"
    assert text_of(refused) == f"You may not {what} the order with id {pk}: permission {perm} refused for this object."
    assert await sync_to_async(lambda: Order.objects.get(number="S-2001").status)() == "open"


# -- a result that cannot be built rolls the write back ----------------------------------------------


class Receipt(TypedDict):
    refund_id: int
    amount: int


def _refund_with_a_bad_receipt(self: Order, amount: str) -> Receipt:
    """Refund (the receipt's amount is a Decimal with cents, where the annotation says int)."""
    refund = Refund.objects.create(order=self, amount=Decimal(amount))
    return {"refund_id": refund.pk, "amount": refund.amount}  # type: ignore[typeddict-item]


async def test_a_model_action_whose_result_does_not_fit_writes_nothing() -> None:
    """The refund committed, then its receipt failed: the client saw an internal error, and each
    retry wrote another refund."""
    tokens, orders = await sync_to_async(seed)()
    Order.bad_receipt_refund = _refund_with_a_bad_receipt  # type: ignore[attr-defined]
    action = mcp_tools.register_model_action(Order, "bad_receipt_refund", name="security.orders.refund",
                                             permissions=["shop.add_refund"])
    try:
        first = await call("security.orders.refund", {"id": orders["N-1001"], "amount": "5.25"}, token=tokens["clerk"])
        again = await call("security.orders.refund", {"id": orders["N-1001"], "amount": "5.25"}, token=tokens["clerk"])
    finally:
        unregister_model_action(action)
        del Order.bad_receipt_refund  # type: ignore[attr-defined]
    assert first["result"]["isError"] is True and again["result"]["isError"] is True
    assert await sync_to_async(Refund.objects.count)() == 0


class FailingRepresentationSerializer(serializers.ModelSerializer):
    shipping = serializers.SerializerMethodField()

    class Meta:
        model = Refund
        fields = ["id", "order", "amount", "shipping"]

    def get_shipping(self, refund: Refund) -> str:
        if refund.pk is not None:  # the written row's representation fails (a bug, a missing related row)
            raise LookupError("no shipping record")
        return ""


class FailingRefundTools(mcp_tools.ModelToolset):
    queryset = Refund.objects.all()
    serializer_class = FailingRepresentationSerializer
    basename = "security.failing_refunds"
    actions = ["create", "update"]
    permissions = {"update": ["shop.add_refund"]}  # the clerk's


async def test_a_toolset_write_whose_representation_fails_writes_nothing() -> None:
    tokens, orders = await sync_to_async(seed)()
    existing = await sync_to_async(lambda: Refund.objects.create(order_id=orders["N-1001"], amount=Decimal("1.00")).pk)()
    mcp_tools.register_toolset(FailingRefundTools)
    try:
        created = await call("security.failing_refunds.create", {"order": orders["N-1001"], "amount": "2.00"}, token=tokens["clerk"])
        updated = await call("security.failing_refunds.update", {"id": existing, "amount": "3.00"}, token=tokens["clerk"])
    finally:
        mcp_tools.unregister_toolset(FailingRefundTools)
    assert created["result"]["isError"] is True and updated["result"]["isError"] is True
    assert await sync_to_async(lambda: list(Refund.objects.values_list("amount", flat=True)))() == [Decimal("1.00")]


# -- DRF's CurrentUserDefault stamps the caller -------------------------------------------------------


class OwnedRefundSerializer(serializers.ModelSerializer):
    created_by = serializers.HiddenField(default=serializers.CurrentUserDefault())

    class Meta:
        model = Refund
        fields = ["id", "order", "amount", "created_by"]


class OwnedRefundTools(mcp_tools.ModelToolset):
    queryset = Refund.objects.all()
    serializer_class = OwnedRefundSerializer
    basename = "security.owned_refunds"
    actions = ["create"]


async def test_current_user_default_stamps_the_caller_in_a_toolset() -> None:
    """The idiom that stamps a row's owner was an internal error (KeyError 'request')."""
    tokens, orders = await sync_to_async(seed)()
    mcp_tools.register_toolset(OwnedRefundTools)
    try:
        answer = await call("security.owned_refunds.create", {"order": orders["N-1001"], "amount": "1.00"}, token=tokens["clerk"])
    finally:
        mcp_tools.unregister_toolset(OwnedRefundTools)
    assert answer["result"].get("isError") is not True, answer
    assert await sync_to_async(lambda: Refund.objects.get().created_by.username)() == "clerk"  # type: ignore[union-attr]


class StampedNoteSerializer(serializers.Serializer):
    note = serializers.CharField()
    by = serializers.HiddenField(default=serializers.CurrentUserDefault())


def _stamp_note(self: Order, note: str, by: Any) -> None:
    """Note who wrote what."""
    self.note = f"{note} ({by.username})"
    self.save(update_fields=["note"])


async def test_current_user_default_stamps_the_caller_in_a_model_action() -> None:
    tokens, orders = await sync_to_async(seed)()
    Order.stamp_note = _stamp_note  # type: ignore[attr-defined]
    action = mcp_tools.register_model_action(Order, "stamp_note", name="security.orders.stamp_note",
                                             serializer=StampedNoteSerializer)
    try:
        answer = await call("security.orders.stamp_note", {"id": orders["N-1001"], "note": "checked"}, token=tokens["clerk"])
    finally:
        unregister_model_action(action)
        del Order.stamp_note  # type: ignore[attr-defined]
    assert answer["result"].get("isError") is not True, answer
    assert await sync_to_async(lambda: Order.objects.get(number="N-1001").note)() == "checked (clerk)"


# -- ordering by a foreign key ------------------------------------------------------------------------


class ByCustomerTools(mcp_tools.ModelToolset):
    queryset = Order.objects.all()
    basename = "security.orders_by_customer"
    actions = ["list"]
    ordering_fields = ["customer", "total"]


@pytest.mark.parametrize("ordering", ["customer", "-customer"])
async def test_paging_ordered_by_a_foreign_key(ordering: str) -> None:
    """The cursor held the related Customer itself: a TypeError when there was a next page."""
    assert ByCustomerTools.check_declaration(known_permissions()) == []
    tokens, orders = await sync_to_async(seed)()
    mcp_tools.register_toolset(ByCustomerTools)
    try:
        seen: list[int] = []
        cursor = None
        for _ in range(10):
            answer = await call("security.orders_by_customer.list",
                                {"ordering": ordering, "limit": 2, **({"cursor": cursor} if cursor else {})}, token=tokens["clerk"])
            result = answer["result"]
            assert not result.get("isError"), result
            seen += [row["customer"] for row in result["structuredContent"]["results"]]
            cursor = result["structuredContent"].get("nextCursor")
            if not cursor:
                break
    finally:
        mcp_tools.unregister_toolset(ByCustomerTools)
    assert len(seen) == len(orders)
    assert seen == sorted(seen, reverse=ordering.startswith("-"))


# -- filter lookups: typed as what they compare, or refused by the check --------------------------------


class LookupTools(mcp_tools.ModelToolset):
    queryset = Order.objects.all()
    basename = "security.lookup_orders"
    actions = ["list"]
    filterset_fields = {"status": ["in"], "total": ["range", "isnull"], "number": ["startswith"],
                        "created_at": ["year", "month__gte", "date__range"], "customer": ["in"], "customer__email": ["iexact"]}


@pytest.fixture
def lookup_tools() -> Iterator[None]:
    with registered(LookupTools):
        yield


async def numbers(arguments: dict[str, Any], token: str) -> list[str]:
    answer = await call("security.lookup_orders.list", {**arguments, "ordering": "pk"}, token=token)
    assert answer["result"].get("isError") is not True, answer
    return sorted(row["number"] for row in answer["result"]["structuredContent"]["results"])


@pytest.mark.usefixtures("filter_backend")
async def test_lookups_are_typed_as_what_they_compare(lookup_tools: None) -> None:
    """`in` was advertised as a string (and iterated as characters), `range` and `year` were
    internal errors, `year` was typed as a datetime."""
    from django.utils import timezone

    tokens, orders = await sync_to_async(seed)()
    schema = LookupTools.input_spec("list").schema["properties"]
    assert schema["status__in"]["type"] == "array" and schema["status__in"]["items"]["enum"] == ["open", "shipped", "cancelled"]
    assert (schema["total__range"]["type"], schema["total__range"]["minItems"], schema["total__range"]["maxItems"]) == ("array", 2, 2)
    assert schema["created_at__year"]["type"] == "integer" and schema["created_at__month__gte"]["type"] == "integer"
    assert schema["created_at__date__range"]["items"] == {"format": "date", "type": "string"}
    assert schema["customer__in"]["items"]["type"] == "integer"
    await sync_to_async(lambda: Order.objects.filter(number="N-1002").update(status="shipped"))()
    ada = await sync_to_async(lambda: Customer.objects.get(email="ada@example.com").pk)()
    now = timezone.localtime()
    clerk = tokens["clerk"]
    everything = sorted(orders)
    assert await numbers({"status__in": ["shipped", "cancelled"]}, clerk) == ["N-1002"]
    assert await numbers({"total__range": ["10", "100"]}, clerk) == ["N-1002", "S-2002"]
    assert await numbers({"total__isnull": False}, clerk) == everything
    assert await numbers({"created_at__year": now.year}, clerk) == everything
    assert await numbers({"created_at__year": now.year - 1}, clerk) == []
    assert await numbers({"created_at__month__gte": now.month}, clerk) == everything
    assert await numbers({"created_at__date__range": [str(now.date()), str(now.date())]}, clerk) == everything
    assert await numbers({"customer__in": [ada]}, clerk) == ["N-1001", "S-2001"]
    assert await numbers({"customer__email__iexact": "ADA@example.com"}, clerk) == ["N-1001", "S-2001"]
    assert await numbers({"number__startswith": "S-"}, clerk) == ["S-2001", "S-2002"]


@pytest.mark.usefixtures("filter_backend")
@pytest.mark.parametrize(("arguments", "field"), [
    ({"status__in": "open"}, "status__in"),
    ({"status__in": ["open", "lost"]}, "status__in"),
    ({"status__in": []}, "status__in"),
    ({"total__range": ["10"]}, "total__range"),
    ({"total__range": "10"}, "total__range"),
    ({"total__isnull": "false"}, "total__isnull"),
    ({"created_at__year": "2026"}, "created_at__year"),
    ({"created_at__year": "2026-01-01T00:00:00Z"}, "created_at__year"),
    ({"customer__in": ["1"]}, "customer__in"),
])
async def test_a_lookup_argument_of_another_shape_is_an_argument_error(lookup_tools: None, arguments: dict[str, Any],
                                                                       field: str) -> None:
    tokens, _ = await sync_to_async(seed)()
    answer = await call("security.lookup_orders.list", arguments, token=tokens["clerk"])
    assert [error["field"] for error in argument_errors(answer)] == [field]


def test_the_check_refuses_lookups_it_cannot_type() -> None:
    """An unknown lookup passed `manage.py check`, then each call was a FieldError."""

    class TypoTools(mcp_tools.ModelToolset):
        queryset = Order.objects.all()
        actions = ["list"]
        filterset_fields = {"total": ["gte", "greater_than", "year"], "created_at": ["time", "year__isnull"],
                            "number": ["search"], "customer": ["contains"]}

    problems = TypoTools.check_declaration(known_permissions())
    assert {problem.id for problem in problems} == {"mcp_tools.E030"}
    where = f"Toolset {__name__}.test_the_check_refuses_lookups_it_cannot_type.<locals>.TypoTools.filterset_fields names lookup"
    assert [problem.msg.removeprefix(where).split(":")[0] for problem in problems] == [
        " 'greater_than' of 'total'", " 'year' of 'total'", " 'time' of 'created_at'", " 'year__isnull' of 'created_at'",
        " 'search' of 'number'", " 'contains' of 'customer'"]
    assert "Django knows no lookup 'greater_than' for a DecimalField" in problems[0].msg
    assert "model tools cannot type its value" in problems[2].msg


class TypoTools(mcp_tools.ModelToolset):
    queryset = Order.objects.all()
    basename = "security.typo_orders"
    actions = ["list"]
    filterset_fields = {"total": ["gte", "greater_than"]}


@pytest.mark.usefixtures("filter_backend")
async def test_a_lookup_the_check_refuses_is_left_out_of_the_tool() -> None:
    """Until the check is heeded the tool works without it: the lookup is an unknown argument,
    not a FieldError at every call (nor a schema that cannot be built, failing tools/list)."""
    tokens, _ = await sync_to_async(seed)()
    with registered(TypoTools):
        tools = await list_tools(tokens["clerk"])
        typo = await call("security.typo_orders.list", {"total__greater_than": "1.00"}, token=tokens["clerk"])
        fine = await call("security.typo_orders.list", {"total__gte": "100.00"}, token=tokens["clerk"])
    assert "security.typo_orders.list" in tools
    assert [error["field"] for error in argument_errors(typo)] == ["total__greater_than"]
    assert sorted(row["number"] for row in fine["result"]["structuredContent"]["results"]) == ["N-1001", "S-2001"]


# -- the row changes between the confirmation question and the answer ----------------------------------

YES = {"confirm": {"action": "accept", "content": {"confirm": True}}}


@pytest.mark.parametrize("tool", ["shop.orders.cancel", "shop.orders.delete"])
async def test_a_row_edited_while_the_user_was_asked(tool: str, caplog: pytest.LogCaptureFixture) -> None:
    """The question shows the row ("Cancel order N-1002?"): edited before the yes came, the answer was
    "NonDeterministicHandler: ..." and an ERROR log, blaming the handler."""
    tokens, orders = await sync_to_async(seed)()
    pk = orders["N-1002"]
    asked = (await call(tool, {"id": pk}, token=tokens["clerk"]))["result"]
    assert asked["resultType"] == "input_required", asked
    await sync_to_async(lambda: Order.objects.filter(pk=pk).update(number="N-1002b"))()
    with caplog.at_level("WARNING"):
        answer = await call(tool, {"id": pk}, token=tokens["clerk"], inputResponses=YES, requestState=asked["requestState"])
    assert answer["result"]["isError"] is True
    assert text_of(answer) == f"The order with id {pk} changed since you were asked to confirm; nothing was done, call again."
    assert [record.getMessage() for record in caplog.records if record.levelname == "ERROR"] == []
    assert await sync_to_async(lambda: list(Order.objects.filter(pk=pk).values_list("number", "status")))() == [("N-1002b", "open")]

    again = (await call(tool, {"id": pk}, token=tokens["clerk"]))["result"]  # called again: asked about the row as it is
    done = await call(tool, {"id": pk}, token=tokens["clerk"], inputResponses=YES, requestState=again["requestState"])
    assert done["result"].get("isError") is not True, done
