"""The shop's MCP tools: an orders toolset and the tool-chaining pair of seed 001.

``Order.cancel`` and ``Order.refund`` (models.py) are model actions and need
nothing here.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Literal, TypedDict

from django.db import router, transaction
from django.db.models import Sum

from rest_framework import serializers

import mcp_tools
from mcp_tools import ToolError, ToolResult

from .models import Customer, Order, Ticket, may_make_orders_in


class OrderSerializer(serializers.ModelSerializer):
    customer_name = serializers.CharField(source="customer.name", read_only=True)
    total = serializers.DecimalField(max_digits=10, decimal_places=2, min_value=0)

    class Meta:
        model = Order
        fields = ["id", "number", "customer", "customer_name", "store", "status", "total", "note", "created_at"]
        read_only_fields = ["status", "created_at"]

    def validate_store(self, value: str) -> str:
        """An order stays in the store it was made in, and staff who see one store make orders there.

        The store decides who may refund an order (backends.StoreRulesBackend): an order a clerk
        could move into their store, refund, and move back, would be refunded by any clerk.
        """
        if self.instance is not None:
            if value != self.instance.store:
                raise serializers.ValidationError("An order's store cannot be changed.")
            return value
        user = self.context.get("user")
        if not may_make_orders_in(user, value):
            raise serializers.ValidationError("You may make orders in your own store only.")
        return value

    def validate_total(self, value: Decimal) -> Decimal:
        """``-0`` is ``0`` (that it is not below what was refunded is :meth:`update`'s to check)."""
        return value + Decimal("0.00")  # -0.00 + 0.00 is 0.00

    def update(self, instance: Order, validated_data: dict[str, Any]) -> Order:
        """A total not below what the order has been refunded already, read with the order locked.

        Read in ``validate_total``, before the write's transaction, the refunds would be those of
        then: a refund made meanwhile (``Order.refund``, which takes the same lock) could leave
        the order refunded more than its new total.
        """
        with transaction.atomic(using=router.db_for_write(Order, instance=instance)):
            if "total" in validated_data:
                Order.objects.select_for_update().filter(pk=instance.pk).exists()
                refunded = instance.refunds.aggregate(total=Sum("amount"))["total"] or Decimal("0")
                if validated_data["total"] < refunded:
                    raise serializers.ValidationError(
                        {"total": [f"The order has been refunded {refunded:.2f}: its total cannot be less."]})
            updated: Order = super().update(instance, validated_data)
            return updated


@mcp_tools.register_toolset
class OrderTools(mcp_tools.ModelToolset):
    """``shop.orders.list``, ``.retrieve``, ``.create``, ``.update``, ``.delete`` and ``.mark_shipped``."""

    queryset = Order.objects.select_related("customer")
    serializer_class = OrderSerializer
    actions = ["list", "retrieve", "create", "update", "delete"]
    filterset_fields = {"status": ["exact"], "store": ["exact"], "total": ["gte", "lte"]}
    search_fields = ["number", "customer__name", "note"]
    ordering_fields = ["created_at", "total", "number"]
    ordering = "-created_at"
    admin_actions = ["mark_shipped"]

    def get_queryset(self) -> Any:
        # A row outside this queryset answers exactly like a row that does not exist.
        return Order.objects.visible_to(self.user).select_related("customer")


# -- tool chaining (seed 001) ---------------------------------------------------------------


class TicketOut(TypedDict):
    """The support ticket a handoff opened."""

    ticket_id: int
    customer_id: int
    issue_type: str
    urgency: str


@mcp_tools.tool(permissions=["shop.view_customer"])
def check_account_issue(customer_id: int) -> ToolResult:
    """Look at a customer's account; when a human must take over, chain to initiate_human_handoff.

    Args:
        customer_id: The customer's id.
    """
    customer = Customer.objects.filter(pk=customer_id).first()
    if customer is None:
        raise ToolError(f"No customer with id {customer_id}.")
    if customer.is_locked:
        return ToolResult(
            content=[f"{customer.name}'s account is locked after {customer.failed_logins} failed logins: "
                     "this needs a specialist."],
            next_tool=("initiate_human_handoff", {"customer_id": customer.pk, "issue_type": "account_locked", "urgency": "high"}),
        )
    return ToolResult(content=[f"{customer.name}'s account is in good standing: nothing to do."])


@mcp_tools.tool(permissions=["shop.add_ticket"])
def initiate_human_handoff(
    customer_id: int,
    issue_type: Literal["account_locked", "billing", "other"],
    urgency: Literal["low", "medium", "high"],
) -> TicketOut:
    """Hand the customer over to a human agent: opens a support ticket.

    Args:
        customer_id: The customer's id.
        issue_type: What the issue is.
        urgency: How soon an agent should pick it up.
    """
    customer = Customer.objects.filter(pk=customer_id).first()
    if customer is None:
        raise ToolError(f"No customer with id {customer_id}.")
    ticket = Ticket.objects.create(customer=customer, issue_type=issue_type, urgency=urgency)
    return TicketOut(ticket_id=ticket.pk, customer_id=customer.pk, issue_type=issue_type, urgency=urgency)
