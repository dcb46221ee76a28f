"""Model tools from an attacker's and a careless integrator's side: each test failed before its mend.

Permission backends that answer ``has_perm`` alone or veto with ``PermissionDenied``, object-level
refusals that named a hidden row, writes that committed when their result failed, DRF's
``CurrentUserDefault``, ordering by a foreign key, filter lookups, and a row that changed while
the user was asked to confirm.
"""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.core.exceptions import PermissionDenied
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from demo_site.shop.models import Customer, Order
from mcp_tools.server.auth import Principal
from tests.asgi_client import call_modern

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
