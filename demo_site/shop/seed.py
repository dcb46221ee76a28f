"""Demo data for the shop: customers, orders in two stores, and two members of staff with different permissions
(in the shop, and in the admin's calls console)."""

from __future__ import annotations

from decimal import Decimal

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db import transaction

CUSTOMERS = [
    ("Ada Lovelace", "ada@example.com", False, 0),
    ("Grace Hopper", "grace@example.com", True, 7),
    ("Alan Turing", "alan@example.com", False, 1),
]

ORDERS = [
    ("N-1001", "ada@example.com", "north", Decimal("120.00")),
    ("N-1002", "grace@example.com", "north", Decimal("35.50")),
    ("N-1003", "alan@example.com", "north", Decimal("9.99")),
    ("S-2001", "ada@example.com", "south", Decimal("250.00")),
    ("S-2002", "alan@example.com", "south", Decimal("64.00")),
]

#: username -> (store, permissions). The clerk works in the north store, sees every store,
#: changes orders and refunds (its own store's only); the viewer sees the south store's orders.
STAFF = {
    "clerk": ("north", ["shop.view_order", "shop.change_order", "shop.add_order", "shop.delete_order", "shop.add_refund",
                        "shop.view_all_stores", "shop.view_customer", "shop.add_ticket"]),
    "viewer": ("south", ["shop.view_order", "shop.view_customer"]),
}

#: The same two are staff, with the roles of docs/admin.md in the calls console: the clerk may act
#: (cancel, expire, retry), the viewer may only look. demo_setup prints them as admin logins.
CONSOLE = {
    "clerk": ["mcp_tools.view_toolcall", "mcp_tools.change_toolcall"],
    "viewer": ["mcp_tools.view_toolcall"],
}


def seed_shop(password: str | None = None) -> dict[str, int]:
    """Create what is missing (safe to run again); returns how many rows of each kind were created."""
    from .models import Customer, Order, StaffMember

    created = {"customers": 0, "orders": 0, "staff": 0}
    with transaction.atomic():
        for name, email, locked, failed in CUSTOMERS:
            _, new = Customer.objects.get_or_create(email=email, defaults={"name": name, "is_locked": locked, "failed_logins": failed})
            created["customers"] += new
        for number, email, store, total in ORDERS:
            _, new = Order.objects.get_or_create(number=number, defaults={
                "customer": Customer.objects.get(email=email), "store": store, "total": total})
            created["orders"] += new
        User = get_user_model()
        for username, (store, perms) in STAFF.items():
            user, new = User.objects.get_or_create(username=username, defaults={"email": f"{username}@example.com"})
            if new:
                user.set_password(password or username)
            if new or not user.is_staff:
                user.is_staff = True
                user.save()
            created["staff"] += new
            StaffMember.objects.get_or_create(user=user, defaults={"store": store})
            for perm in [*perms, *CONSOLE[username]]:
                app_label, codename = perm.split(".")
                user.user_permissions.add(Permission.objects.get(content_type__app_label=app_label, codename=codename))
    return created
