"""A write the database refuses when its transaction commits is a tool error, as one it refuses at once.

Django makes foreign keys ``DEFERRABLE INITIALLY DEFERRED`` on PostgreSQL and SQLite: a row still
referred to by an ``on_delete=DO_NOTHING`` key (a legacy or unmanaged table's), or a key set to a row
that does not exist, is refused at ``COMMIT``, not at the statement. Where the commit is not the
model tool's own savepoint (a confirmed delete or model action, journaled by ``ctx.once`` in its
transaction; a toolset's update, which locks its row in an outer transaction; an admin action) the
``IntegrityError`` came past the tool's refusal handling: "Internal error while running ...", where the
same refusal without confirmation, or in a create, answered "refused by the database". Found by the
model review (a confirmed ``delete`` of a book a loan still referred to, on PostgreSQL).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib import admin
from django.db import connection, models
from django.test.utils import isolate_apps
from rest_framework import serializers

import mcp_tools
from mcp_tools.modeltools.actions import unregister_model_action
from tests.asgi_client import call_modern

pytestmark = pytest.mark.django_db(transaction=True)

YES = {"confirm": {"action": "accept", "content": {"confirm": True}}}


def scrap(self: Any) -> str:
    """Scrap the shelf."""
    self.delete()
    return "scrapped"


@pytest.fixture
def shelves() -> Iterator[dict[str, Any]]:
    with isolate_apps("demo_site.shop"):
        meta = type("Meta", (), {"app_label": "shop"})
        shelf: Any = type("DeferredShelf", (models.Model,), {"__module__": __name__, "Meta": meta,
                                                            "name": models.CharField(max_length=20), "scrap": scrap})
        slot: Any = type("DeferredSlot", (models.Model,), {"__module__": __name__, "Meta": meta,
                                                          "shelf": models.ForeignKey(shelf, on_delete=models.DO_NOTHING)})
        with connection.schema_editor() as editor:
            editor.create_model(shelf)
            editor.create_model(slot)

        site = admin.AdminSite(name="deferred")

        class ShelfAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
            actions = ["scrap_selected"]

            @admin.action(description="Scrap selected shelves", permissions=["delete"])
            def scrap_selected(self, request: Any, queryset: Any) -> None:
                queryset.delete()

        site.register(shelf, ShelfAdmin)

        class SlotSerializer(serializers.ModelSerializer):
            shelf_id = serializers.IntegerField()

            class Meta:
                model = slot
                fields = ["id", "shelf_id"]

        class Shelves(mcp_tools.ModelToolset):
            queryset = shelf.objects.all()
            basename = "deferred.shelves"
            actions = ["delete"]
            permissions = {"delete": []}
            admin_actions = ["scrap_selected"]
            admin_site = site

        class UnconfirmedShelves(Shelves):
            basename = "deferred.unconfirmed"
            confirm_delete = False
            admin_actions = ()

        class Slots(mcp_tools.ModelToolset):
            queryset = slot.objects.all()
            serializer_class = SlotSerializer
            basename = "deferred.slots"
            actions = ["create", "update"]
            permissions = {"create": [], "update": []}

        toolsets = (Shelves, UnconfirmedShelves, Slots)
        for toolset in toolsets:
            mcp_tools.register_toolset(toolset)
        action = mcp_tools.register_model_action(shelf, "scrap", name="deferred.shelves.scrap", permissions=[], confirm=True)
        try:
            yield {"shelf": shelf, "slot": slot}
        finally:
            unregister_model_action(action)
            for toolset in toolsets:
                mcp_tools.unregister_toolset(toolset)
            with connection.schema_editor() as editor:
                editor.delete_model(slot)
                editor.delete_model(shelf)


def referred_shelf(models_: dict[str, Any]) -> tuple[int, int]:
    """A shelf, and a slot that still refers to it (DO_NOTHING)."""
    shelf = models_["shelf"].objects.create(name="top")
    return shelf.pk, models_["slot"].objects.create(shelf=shelf).pk


async def call(name: str, arguments: dict[str, Any], **params: Any) -> dict[str, Any]:
    from demo_site.asgi import application

    from django.contrib.auth.models import User
    from rest_framework.authtoken.models import Token

    def token() -> str:
        user = User.objects.filter(username="root").first() or User.objects.create_superuser("root", "root@example.com", "x")
        return Token.objects.get_or_create(user=user)[0].key

    response = await call_modern(application, "tools/call", {"name": name, "arguments": arguments, **params},
                                 token=await sync_to_async(token)())
    assert response.status == 200, response.body
    assert "result" in response.json(), response.json()
    result: dict[str, Any] = response.json()["result"]
    if result.get("resultType") == "input_required":  # the confirmation: yes
        return await call(name, arguments, inputResponses=YES, requestState=result["requestState"])
    return result


def refused(result: dict[str, Any]) -> str:
    assert result.get("isError") is True, result
    text: str = result["content"][0]["text"]
    assert "Internal error" not in text, text
    return text


@pytest.mark.parametrize("tool", ["deferred.shelves.delete", "deferred.unconfirmed.delete", "deferred.shelves.scrap"])
async def test_a_delete_refused_at_commit_is_a_tool_error(shelves: dict[str, Any], tool: str) -> None:
    pk, _ = await sync_to_async(referred_shelf)(shelves)
    text = refused(await call(tool, {"id": pk}))
    assert "refused" in text and "conflicts with existing data" in text, text
    assert await sync_to_async(shelves["shelf"].objects.filter(pk=pk).exists)()  # nothing deleted


async def test_an_admin_action_refused_at_commit_is_a_tool_error(shelves: dict[str, Any]) -> None:
    pk, _ = await sync_to_async(referred_shelf)(shelves)
    text = refused(await call("deferred.shelves.scrap_selected", {"ids": [pk]}))
    assert "conflicts with existing data" in text, text
    assert await sync_to_async(shelves["shelf"].objects.filter(pk=pk).exists)()


@pytest.mark.parametrize("tool", ["deferred.slots.create", "deferred.slots.update"])
async def test_a_key_to_no_row_refused_at_commit_is_a_tool_error(shelves: dict[str, Any], tool: str) -> None:
    pk, slot_pk = await sync_to_async(referred_shelf)(shelves)
    arguments = {"shelf_id": pk + 1000} if tool.endswith("create") else {"id": slot_pk, "shelf_id": pk + 1000}
    text = refused(await call(tool, arguments))
    assert "conflicts with existing data" in text, text
    slots = await sync_to_async(lambda: list(shelves["slot"].objects.values_list("shelf_id", flat=True)))()
    assert slots == [pk]  # nothing written
