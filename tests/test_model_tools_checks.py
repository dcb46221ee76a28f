"""``manage.py check`` for model tools: unknown field, method or permission, duplicate tool name (ids mcp_tools.E030-E034)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.core import checks
from django.core.management import call_command

import mcp_tools
from demo_site.shop.models import Order
from mcp_tools.modeltools import actions, register_model_action, register_toolset, unregister_model_action, unregister_toolset
from mcp_tools.registry import AlreadyRegistered, make_tool, registry


def model_tool_errors() -> list[checks.CheckMessage]:
    return [message for message in checks.run_checks() if message.id and message.id.startswith("mcp_tools.E03")]


@pytest.fixture
def registered() -> Iterator[list[Any]]:
    """Toolsets and actions a test registers; all removed afterwards."""
    done: list[Any] = []
    yield done
    for item in done:
        if isinstance(item, actions.ModelAction):
            unregister_model_action(item)
        else:
            unregister_toolset(item)


def test_the_demo_site_passes_the_checks() -> None:
    assert model_tool_errors() == []
    call_command("check", "--fail-level", "ERROR")


def test_unknown_fields_of_a_toolset_are_errors(registered: list[Any]) -> None:
    class Broken(mcp_tools.ModelToolset):
        queryset = Order.objects.all()
        basename = "broken.orders"
        filterset_fields = ["colour"]
        search_fields = ["customer__nickname"]
        ordering_fields = ["total", "weight"]

    registered.append(register_toolset(Broken))
    errors = model_tool_errors()
    assert [error.id for error in errors] == ["mcp_tools.E030"] * 3
    assert "filterset_fields names 'colour', which is not a field of Order" in errors[0].msg
    assert "'customer__nickname'" in errors[1].msg and "'weight'" in errors[2].msg


def test_an_unknown_method_or_permission_of_a_model_action_is_an_error(registered: list[Any]) -> None:
    registered.append(register_model_action(Order, "teleport", name="broken.teleport"))
    registered.append(register_model_action(Order, "cancel", name="broken.cancel", permissions=["shop.launch_order"]))
    errors = model_tool_errors()
    assert [(error.id, error.msg) for error in errors] == [
        ("mcp_tools.E031", "Model action 'broken.teleport': Order has no method 'teleport'."),
        ("mcp_tools.E033", "Model action 'broken.cancel' requires unknown permission 'shop.launch_order'."),
    ]


def test_unknown_toolset_actions_and_admin_actions_are_errors(registered: list[Any]) -> None:
    class Odd(mcp_tools.ModelToolset):
        queryset = Order.objects.all()
        basename = "odd.orders"
        admin_actions = ["mark_shipped", "archive_everything", "delete_selected"]
        permissions = {"list": ["shop.peek_order"]}

    registered.append(register_toolset(Odd))
    assert registry.get_tool("odd.orders.mark_shipped") is not None  # the action that exists is offered
    errors = model_tool_errors()
    assert [error.id for error in errors] == ["mcp_tools.E033", "mcp_tools.E031", "mcp_tools.E031"]
    assert "'archive_everything'" in errors[1].msg and "'delete_selected' works only through its confirmation page" in errors[2].msg


def test_an_admin_action_registered_after_its_toolset_is_an_error(registered: list[Any]) -> None:
    """With ``mcp_tools`` before ``django.contrib.admin`` in ``INSTALLED_APPS`` (or admin modules imported
    late), a toolset's ``admin_actions`` found no ``ModelAdmin`` when it was registered: no tool was
    made, and the check, run once the admin was loaded, said nothing (found by the model review)."""
    from django.contrib import admin

    from demo_site.shop.admin import OrderAdmin

    site = admin.AdminSite(name="late")

    class Late(mcp_tools.ModelToolset):
        queryset = Order.objects.all()
        basename = "late.orders"
        admin_actions = ["mark_shipped"]
        admin_site = site

    registered.append(register_toolset(Late))  # before the ModelAdmin: nothing to expose yet
    site.register(Order, OrderAdmin)
    assert registry.get_tool("late.orders.mark_shipped") is None
    errors = model_tool_errors()
    assert [error.id for error in errors] == ["mcp_tools.E031"], errors
    assert "'mark_shipped'" in errors[0].msg and "before the ModelAdmin" in errors[0].msg


@pytest.mark.parametrize("style", ["hints", "serializer"])
def test_a_model_action_argument_named_like_its_lookup_is_an_error(registered: list[Any], style: str) -> None:
    """An argument named like the lookup (``id``) cannot reach the method: the lookup takes it. With type
    hints the schema build refused it (E034); with ``serializer=`` the check passed, the schema listed
    ``"required": ["id", "id"]`` under the serializer's description, and every call answered
    ``id: This field is required.`` (found by the model review)."""
    from rest_framework import serializers

    class Shelve(serializers.Serializer):  # type: ignore[type-arg]
        id = serializers.IntegerField(help_text="The shelf to put it on.")

    def shelve(self: Any, id: int) -> None:  # noqa: A002 - the name is the point
        """Shelve it."""

    Order.shelve = shelve  # type: ignore[attr-defined]
    try:
        options: dict[str, Any] = {"serializer": Shelve} if style == "serializer" else {}
        registered.append(register_model_action(Order, "shelve", name="broken.shelve", **options))
        errors = model_tool_errors()
        assert [error.id for error in errors] == ["mcp_tools.E034"], errors
        assert "named like its lookup 'id'" in errors[0].msg
    finally:
        del Order.shelve  # type: ignore[attr-defined]


def test_a_duplicate_toolset_name_raises_before_anything_is_registered(registered: list[Any]) -> None:
    class Clash(mcp_tools.ModelToolset):
        queryset = Order.objects.all()
        actions = ["list", "retrieve"]
        basename = "clash.orders"

    with registry.registered_temporarily(make_tool(lambda: "taken", name="clash.orders.retrieve")):
        with pytest.raises(AlreadyRegistered):
            register_toolset(Clash)
        assert registry.get_tool("clash.orders.list") is None  # all or nothing
    registered.append(register_toolset(Clash))
    with pytest.raises(AlreadyRegistered):
        register_toolset(Clash)


def test_a_duplicate_name_of_a_declared_model_action_is_reported_by_check() -> None:
    saved = [registry.get_tool(name) for name in ("shop.orders.cancel", "shop.orders.refund")]
    saved_declarations = [d for d in mcp_tools.modeltools.declarations if getattr(d, "model", None) is Order]
    for tool in saved:
        assert tool is not None
        registry.unregister_tool(tool.name)
    for declaration in saved_declarations:
        mcp_tools.modeltools.declarations.remove(declaration)
    squatter = make_tool(lambda: "not the action", name="shop.orders.cancel")
    registry.register_tool(squatter)
    try:
        actions._register_declared(Order)  # what class_prepared does when models load
        errors = model_tool_errors()
        assert [error.id for error in errors] == ["mcp_tools.E032"]
        assert "'shop.orders.cancel' not registered" in errors[0].msg
        assert registry.get_tool("shop.orders.refund") is not None  # the other action still registered
    finally:
        actions.registration_problems.clear()
        for declaration in [d for d in mcp_tools.modeltools.declarations if getattr(d, "model", None) is Order]:
            unregister_model_action(declaration)  # type: ignore[arg-type]
        registry.unregister_tool("shop.orders.cancel")
        for tool in saved:
            assert tool is not None
            registry.register_tool(tool)
        mcp_tools.modeltools.declarations.extend(saved_declarations)
