"""Code written for DRF views reads the request as DRF gives it: ``request.query_params``, ``request.data``.

A toolset's ``self.request`` and the ``request`` of its serializer's context (and of a model action's)
were a bare Django ``HttpRequest``: a ``get_queryset`` or a serializer written for a DRF view that read
``self.request.query_params`` (dynamic fields, optional narrowing) raised ``AttributeError``, and every
call of the tool was an internal error. They are now DRF ``Request`` objects around it, with no query
parameters and no body, and the caller as ``user``. Admin actions keep the Django request the admin
gives them. Found by the model review.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from rest_framework import serializers

import mcp_tools
from demo_site.shop.models import Customer
from tests.asgi_client import call_modern

pytestmark = pytest.mark.django_db(transaction=True)


class CustomerSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    expanded = serializers.SerializerMethodField()

    class Meta:
        model = Customer
        fields = ["id", "name", "expanded"]

    def get_expanded(self, obj: Customer) -> bool:
        request = self.context["request"]
        assert request.auth is None and request.successful_authenticator is None  # read first: the user stays
        assert request.user.username == "drf-caller", request.user
        return request.query_params.get("expand") == "1" or bool(request.data)


class Customers(mcp_tools.ModelToolset):
    queryset = Customer.objects.all()
    serializer_class = CustomerSerializer
    basename = "drfrequest.customers"
    actions = ["list", "retrieve", "update"]
    permissions = {"list": [], "retrieve": [], "update": []}

    def get_queryset(self) -> Any:
        if self.request.query_params.get("locked") == "1":  # as a DRF view narrows by a query parameter
            return Customer.objects.filter(is_locked=True)
        return Customer.objects.all()


@pytest.fixture
def toolset() -> Iterator[Any]:
    mcp_tools.register_toolset(Customers)
    try:
        yield
    finally:
        mcp_tools.unregister_toolset(Customers)


def caller_token() -> str:
    from django.contrib.auth.models import User
    from rest_framework.authtoken.models import Token

    return str(Token.objects.create(user=User.objects.create_user("drf-caller")).key)


async def call(name: str, arguments: dict[str, Any], token: str) -> dict[str, Any]:
    from demo_site.asgi import application

    response = await call_modern(application, "tools/call", {"name": name, "arguments": arguments}, token=token)
    result: dict[str, Any] = response.json()["result"]
    return result


async def test_a_drf_views_code_reads_the_request_as_drf_gives_it(toolset: Any) -> None:
    pk = (await sync_to_async(Customer.objects.create)(name="Ada", email="ada-drf@example.com")).pk
    token = await sync_to_async(caller_token)()
    for name, arguments in (("drfrequest.customers.list", {}), ("drfrequest.customers.retrieve", {"id": pk}),
                            ("drfrequest.customers.update", {"id": pk, "name": "Ada L."})):
        result = await call(name, arguments, token)
        assert result.get("isError") is not True, (name, result)
    assert result["structuredContent"] == {"id": pk, "name": "Ada L.", "expanded": False}
