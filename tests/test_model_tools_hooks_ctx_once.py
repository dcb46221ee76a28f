"""A toolset's ``perform_create`` / ``perform_update`` / ``perform_destroy`` that calls ``self.ctx.once`` fails
its call at once; it no longer holds the store's thread.

The hooks run inside the write's transaction (docs/model-tools.md: "Override perform_create,
perform_update, perform_destroy as in DRF"; the toolset has ``self.ctx``). A ``self.ctx.once("mail", ...)``
there ran its effect in the store's thread, on another connection, which waited for the write's locks
while the write waited for it: on SQLite for the write lock until the connection's timeout ("database is
locked", an internal error after 20 s, every durable call of the process held meanwhile). Found by the
model review (a scratch project's notes toolset, SQLite).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connection, models
from django.test.utils import isolate_apps

import mcp_tools
from tests.asgi_client import call_modern

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def memos() -> Iterator[Any]:
    with isolate_apps("demo_site.shop"):
        meta = type("Meta", (), {"app_label": "shop"})
        model: Any = type("HookedMemo", (models.Model,), {"__module__": __name__, "Meta": meta, "text": models.CharField(max_length=20)})
        with connection.schema_editor() as editor:
            editor.create_model(model)

        class Memos(mcp_tools.ModelToolset):
            queryset = model.objects.all()
            basename = "hooks.memos"
            actions = ["create", "update", "delete"]
            permissions = {"create": [], "update": [], "delete": []}
            confirm_delete = False

            def perform_create(self, serializer: Any) -> None:
                serializer.save()
                self.ctx.once("mail", lambda: "mailed")

            def perform_update(self, serializer: Any) -> None:
                serializer.save()
                self.ctx.once("mail", lambda: "mailed")

            def perform_destroy(self, instance: Any) -> None:
                instance.delete()
                self.ctx.once("mail", lambda: "mailed")

        mcp_tools.register_toolset(Memos)
        try:
            yield model
        finally:
            mcp_tools.unregister_toolset(Memos)
            with connection.schema_editor() as editor:
                editor.delete_model(model)


async def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    from demo_site.asgi import application

    response = await asyncio.wait_for(call_modern(application, "tools/call", {"name": name, "arguments": arguments}), 15)
    result: dict[str, Any] = response.json()["result"]
    return result


@pytest.mark.parametrize("tool", ["hooks.memos.create", "hooks.memos.update", "hooks.memos.delete"])
async def test_ctx_once_in_a_write_hook_fails_the_call_at_once(memos: Any, tool: str) -> None:
    memo = await sync_to_async(memos.objects.create)(text="kept")
    arguments = {"text": "new"} if tool.endswith("create") else {"id": memo.pk, "text": "new"} if tool.endswith("update") else {"id": memo.pk}
    done = await call(tool, arguments)
    assert done.get("isError") is True, done
    assert await sync_to_async(lambda: list(memos.objects.values_list("text", flat=True)))() == ["kept"]  # rolled back
