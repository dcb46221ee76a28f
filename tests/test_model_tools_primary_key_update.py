"""A toolset's update that would change the row's primary key is refused, not a copy of the row.

Django's ``save()`` of a row whose primary key was changed updates no row and inserts a new one: an
update of an author ``{"id": "le-g", "code": "leguin"}`` (a ``CharField(primary_key=True)``, writable
in a ``ModelSerializer``) answered the author as renamed, while the table then held both ``le-g``,
unchanged, with its books, and a new ``leguin``: the update was a second row. Found by the model
review (a scratch project's author toolset, called with the official client).
"""

from __future__ import annotations

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
def authors() -> Iterator[Any]:
    with isolate_apps("demo_site.shop"):
        meta = type("Meta", (), {"app_label": "shop"})
        model: Any = type("CodedAuthor", (models.Model,), {"__module__": __name__, "Meta": meta,
                                                          "code": models.CharField(max_length=10, primary_key=True),
                                                          "name": models.CharField(max_length=50)})
        with connection.schema_editor() as editor:
            editor.create_model(model)

        class Authors(mcp_tools.ModelToolset):
            queryset = model.objects.all()
            basename = "pkupdate.authors"
            actions = ["create", "update"]
            permissions = {"create": [], "update": []}

        mcp_tools.register_toolset(Authors)
        try:
            yield model
        finally:
            mcp_tools.unregister_toolset(Authors)
            with connection.schema_editor() as editor:
                editor.delete_model(model)


async def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    from demo_site.asgi import application

    result: dict[str, Any] = (await call_modern(application, "tools/call", {"name": name, "arguments": arguments})).json()["result"]
    return result


async def test_an_update_that_changes_the_primary_key_is_refused(authors: Any) -> None:
    made = await call("pkupdate.authors.create", {"code": "le-g", "name": "Le Guin"})
    assert made.get("isError") is not True, made
    renamed = await call("pkupdate.authors.update", {"id": "le-g", "code": "leguin", "name": "Ursula"})
    assert renamed.get("isError") is True, renamed
    assert list(renamed["structuredContent"]["errors"]) == ["code"], renamed
    rows = await sync_to_async(lambda: list(authors.objects.order_by("code").values_list("code", "name")))()
    assert rows == [("le-g", "Le Guin")]  # no copy, nothing changed


async def test_an_update_that_keeps_the_primary_key_saves(authors: Any) -> None:
    await call("pkupdate.authors.create", {"code": "le-g", "name": "Le Guin"})
    kept = await call("pkupdate.authors.update", {"id": "le-g", "code": "le-g", "name": "Ursula"})
    assert kept.get("isError") is not True, kept
    rows = await sync_to_async(lambda: list(authors.objects.values_list("code", "name")))()
    assert rows == [("le-g", "Ursula")]
