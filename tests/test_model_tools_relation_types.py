"""Arguments that name a row through a relation other than a foreign key are typed as the key they
compare. Found by a review of model tools: a one-to-one primary key (a multi-table child's, a profile's),
a many-to-many and a reverse relation were typed as strings, so ``retrieve {"id": 8}`` of a row that
``list`` showed as ``"id": 8`` was refused, ``{"groups": 1}`` was refused, and ``{"groups": "x"}`` was
an internal error (Django's ``ValueError`` at the query)."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Group, User
from django.db import models
from django.test.utils import isolate_apps

import mcp_tools
from demo_site.shop.models import Customer
from mcp_tools.models import ToolCall
from tests.asgi_client import call_modern

pytestmark = pytest.mark.django_db(transaction=True)


class UserTools(mcp_tools.ModelToolset):
    queryset = User.objects.all()
    basename = "review.users"
    actions = ["list"]
    permissions = {"list": []}
    filterset_fields = {"groups": ["exact", "in"], "shop_staff": ["exact"]}


class CustomerTools(mcp_tools.ModelToolset):
    queryset = Customer.objects.all()
    basename = "review.customers"
    actions = ["list"]
    permissions = {"list": []}
    filterset_fields = {"orders": ["exact"]}


@pytest.fixture
def toolsets() -> Any:
    for toolset in (UserTools, CustomerTools):
        mcp_tools.register_toolset(toolset)
    try:
        yield
    finally:
        for toolset in (UserTools, CustomerTools):
            mcp_tools.unregister_toolset(toolset)


def _setup() -> tuple[str, int]:
    from rest_framework.authtoken.models import Token

    root = User.objects.create_superuser("root", "root@example.com", "x")
    group = Group.objects.create(name="ops")
    User.objects.create_user("ann").groups.add(group)
    return Token.objects.get_or_create(user=root)[0].key, group.pk


def test_relations_are_typed_as_the_key_they_compare() -> None:
    users = UserTools.input_spec("list").schema["properties"]
    assert "integer" in str(users["groups"]["type"]) and users["groups__in"]["items"]["type"] == "integer", users
    assert "integer" in str(users["shop_staff"]["type"]), users
    assert "integer" in str(CustomerTools.input_spec("list").schema["properties"]["orders"]["type"])


@isolate_apps("demo_site.shop")
def test_a_one_to_one_primary_key_is_looked_up_as_its_parent_key() -> None:
    profile = type("Profile", (models.Model,), {
        "__module__": __name__, "Meta": type("Meta", (), {"app_label": "shop"}),
        "customer": models.OneToOneField(Customer, on_delete=models.CASCADE, primary_key=True)})

    class ProfileTools(mcp_tools.ModelToolset):
        queryset = profile.objects.all()
        basename = "review.profiles"
        actions = ["retrieve"]
        permissions = {"retrieve": []}

    assert ProfileTools.input_spec("retrieve").schema["properties"]["id"]["type"] == "integer"


async def test_a_many_to_many_filter_takes_the_key_and_refuses_text(toolsets: Any) -> None:
    from demo_site.asgi import application

    token, group = await sync_to_async(_setup)()
    found = (await call_modern(application, "tools/call", {"name": "review.users.list", "arguments": {"groups": group}},
                               token=token)).json()["result"]
    assert found.get("isError") is not True, found
    assert [row["username"] for row in found["structuredContent"]["results"]] == ["ann"], found
    for arguments in ({"groups": "x"}, {"groups__in": ["x"]}, {"shop_staff": "x"}):
        body = (await call_modern(application, "tools/call", {"name": "review.users.list", "arguments": arguments}, token=token)).json()
        refusal = body.get("error") or body["result"]
        assert "Internal error" not in str(refusal), (arguments, body)
        assert body.get("error", {}).get("code") == -32602 or body["result"].get("isError") is True, (arguments, body)
    assert await sync_to_async(ToolCall.objects.count)() == 0  # refused before anything ran


class DatedUsers(mcp_tools.ModelToolset):
    queryset = User.objects.all()
    basename = "review.dated_users"
    actions = ["list"]
    permissions = {"list": []}
    filterset_fields = {"date_joined": ["exact", "gte", "lt", "range"]}


@pytest.mark.parametrize("arguments", [
    {"date_joined__gte": "0001-01-01T00:00:00+01:00"}, {"date_joined__lt": "9999-12-31T23:59:59-01:00"},
    {"date_joined": "9999-12-31T23:59:59-01:00"}, {"date_joined__range": ["0001-01-01T00:00:00+01:00", "2000-01-01T00:00:00Z"]},
], ids=["gte-year-1", "lt-year-9999", "exact-year-9999", "range"])
async def test_a_datetime_filter_whose_utc_time_leaves_the_years_1_to_9999_is_an_invalid_argument(arguments: dict[str, Any]) -> None:
    """Found by a diff review: the value passed the argument's type and failed converting to UTC at the
    query (OverflowError): an internal error."""
    from demo_site.asgi import application

    token, _ = await sync_to_async(_setup)()
    mcp_tools.register_toolset(DatedUsers)
    try:
        body = (await call_modern(application, "tools/call", {"name": "review.dated_users.list", "arguments": arguments}, token=token)).json()
    finally:
        mcp_tools.unregister_toolset(DatedUsers)
    refusal = body.get("error") or body["result"]
    assert "Internal error" not in str(refusal) and "years 1 to 9999" in str(refusal), body
