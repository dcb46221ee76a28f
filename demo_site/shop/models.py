"""The shop: customers, their orders (each belongs to a store), refunds and support tickets.

``Order.cancel`` and ``Order.refund`` are model actions: MCP tools named
``shop.orders.cancel`` and ``shop.orders.refund``.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Sum
from pydantic import BaseModel, Field

import mcp_tools
from mcp_tools import ToolContext


class Store(models.TextChoices):
    NORTH = "north", "North"
    SOUTH = "south", "South"


class Customer(models.Model):
    name = models.CharField("name", max_length=100)
    email = models.EmailField("email", unique=True)
    is_locked = models.BooleanField("locked", default=False, help_text="Locked out after too many failed logins.")
    failed_logins = models.PositiveIntegerField("failed logins", default=0)

    class Meta:
        verbose_name = "customer"
        verbose_name_plural = "customers"
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class StaffMember(models.Model):
    """Which store a member of staff works in (the object-level refund rule reads it)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="shop_staff", verbose_name="user")
    store = models.CharField("store", max_length=10, choices=Store.choices)

    class Meta:
        verbose_name = "staff member"
        verbose_name_plural = "staff members"

    def __str__(self) -> str:
        return f"{self.user} ({self.store})"


class RefundReceipt(BaseModel):
    """What ``shop.orders.refund`` returns."""

    refund_id: int = Field(description="The id of the new refund")
    order: str = Field(description="The order's number")
    amount: Decimal = Field(description="The amount refunded now")
    refunded_total: Decimal = Field(description="Everything refunded on this order so far")


class OrderQuerySet(models.QuerySet["Order"]):
    def visible_to(self, user: object) -> OrderQuerySet:
        """Everyone sees their own store's orders; ``shop.view_all_stores`` sees every store's."""
        if getattr(user, "is_authenticated", False) and user.has_perm("shop.view_all_stores"):  # type: ignore[attr-defined]
            return self.all()
        staff = StaffMember.objects.filter(user_id=getattr(user, "pk", 0) or 0).first()
        return self.filter(store=staff.store) if staff else self.none()


def may_make_orders_in(user: object, store: str) -> bool:
    """Whether ``user`` may make an order in ``store``: any store with ``shop.view_all_stores``, else their own."""
    if getattr(user, "is_authenticated", False) and user.has_perm("shop.view_all_stores"):  # type: ignore[attr-defined]
        return True
    staff = StaffMember.objects.filter(user_id=getattr(user, "pk", 0) or 0).first()
    return staff is not None and staff.store == store


class Order(models.Model):
    class Status(models.TextChoices):
        OPEN = "open", "Open"
        SHIPPED = "shipped", "Shipped"
        CANCELLED = "cancelled", "Cancelled"

    number = models.CharField("number", max_length=20, unique=True)
    customer = models.ForeignKey(Customer, on_delete=models.PROTECT, related_name="orders", verbose_name="customer")
    store = models.CharField("store", max_length=10, choices=Store.choices)
    status = models.CharField("status", max_length=10, choices=Status.choices, default=Status.OPEN)
    total = models.DecimalField("total", max_digits=10, decimal_places=2)
    note = models.CharField("note", max_length=200, blank=True, default="")
    created_at = models.DateTimeField("created at", auto_now_add=True)

    objects = OrderQuerySet.as_manager()

    class Meta:
        verbose_name = "order"
        verbose_name_plural = "orders"
        ordering = ["-created_at"]
        permissions = [("view_all_stores", "Can see the orders of every store")]

    def __str__(self) -> str:
        return self.number

    @mcp_tools.model_action(
        confirm="Cancel order {obj}? The customer is told at once.",
        permissions=["shop.change_order"],
        queryset=lambda ctx: Order.objects.visible_to(ctx.user),
        idempotent=True,
    )
    def cancel(self, reason: str = "") -> None:
        """Cancel an open order.

        Args:
            reason: Why the order is cancelled (kept in the order's note).
        """
        if self.status != self.Status.OPEN:
            raise ValidationError({"status": f"Order {self.number} is {self.status}; only open orders can be cancelled."})
        self.status = self.Status.CANCELLED
        self.note = reason[:200]
        self.save(update_fields=["status", "note"])

    @mcp_tools.model_action(permissions=["shop.add_refund"], queryset=lambda ctx: Order.objects.visible_to(ctx.user))
    def refund(self, amount: Annotated[Decimal, Field(gt=0, max_digits=10, decimal_places=2)], ctx: ToolContext) -> RefundReceipt:
        """Refund part or all of an order. Staff may refund only their own store's orders.

        Args:
            amount: How much to refund, at most what is left of the order's total.
        """
        # One refund of an order at a time (the method runs in a transaction): two concurrent
        # refunds would both read the same total refunded so far and together exceed the order.
        # The total compared is the locked row's: self was read before the transaction, and an
        # update (OrderSerializer.update, which takes the same lock) may have lowered it since.
        total = Order.objects.select_for_update().filter(pk=self.pk).values_list("total", flat=True).first()
        if total is None:
            raise mcp_tools.ToolError(f"Order {self.number} no longer exists.")
        # In cents, as stored ("1.5" is 1.50; SQLite sums decimals as floats: 3.60000000000000).
        cents = Decimal("0.01")
        amount = amount.quantize(cents)
        refunded = (self.refunds.aggregate(total=Sum("amount"))["total"] or Decimal("0")).quantize(cents)
        if refunded + amount > total:
            raise ValidationError({"amount": f"At most {total - refunded} is left to refund on order {self.number}."})
        refund = Refund.objects.create(order=self, amount=amount, created_by=ctx.user)
        return RefundReceipt(refund_id=refund.pk, order=self.number, amount=amount, refunded_total=refunded + amount)




class Refund(models.Model):
    order = models.ForeignKey(Order, on_delete=models.CASCADE, related_name="refunds", verbose_name="order")
    amount = models.DecimalField("amount", max_digits=10, decimal_places=2)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, verbose_name="created by")
    created_at = models.DateTimeField("created at", auto_now_add=True)

    class Meta:
        verbose_name = "refund"
        verbose_name_plural = "refunds"

    def __str__(self) -> str:
        return f"{self.amount} on {self.order}"


class Ticket(models.Model):
    """A support ticket a human agent picks up (created by ``initiate_human_handoff``)."""

    class Urgency(models.TextChoices):
        LOW = "low", "Low"
        MEDIUM = "medium", "Medium"
        HIGH = "high", "High"

    customer = models.ForeignKey(Customer, on_delete=models.CASCADE, related_name="tickets", verbose_name="customer")
    issue_type = models.CharField("issue type", max_length=40)
    urgency = models.CharField("urgency", max_length=10, choices=Urgency.choices)
    created_at = models.DateTimeField("created at", auto_now_add=True)

    class Meta:
        verbose_name = "ticket"
        verbose_name_plural = "tickets"

    def __str__(self) -> str:
        return f"{self.issue_type} for {self.customer}"
