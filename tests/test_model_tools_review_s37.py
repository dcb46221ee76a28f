"""Model tools: what the session 37 review found, each failing before its mend.

An admin action its ``ModelAdmin.get_actions(request)`` withholds from the caller.
"""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib import admin

import mcp_tools
from demo_site.shop.models import Order
from tests.asgi_client import call_modern

pytestmark = pytest.mark.django_db(transaction=True)


def seed() -> tuple[dict[str, str], dict[str, int]]:
    """The demo shop, plus a superuser; API tokens of its clerk, viewer and the superuser; order pk by number."""
    from django.contrib.auth.models import User
    from rest_framework.authtoken.models import Token

    from demo_site.shop.seed import seed_shop

    seed_shop()
    User.objects.create_superuser("boss", "boss@example.com", "boss")
    tokens = {name: Token.objects.get_or_create(user=User.objects.get(username=name))[0].key for name in ("clerk", "viewer", "boss")}
    return tokens, {order.number: order.pk for order in Order.objects.all()}


async def call(name: str, arguments: dict[str, Any], token: str | None = None) -> dict[str, Any]:
    from demo_site.asgi import application

    r = await call_modern(application, "tools/call", {"name": name, "arguments": arguments}, token=token)
    assert r.status in (200, 400), r.body
    return r.json()


def statuses() -> list[str]:
    return sorted(set(Order.objects.values_list("status", flat=True)))


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
