"""A toolset's update looked up by a field its serializer also writes advertises the lookup, as it takes it.

``update`` takes the lookup argument (``lookup_field = "code"``: argument ``code``) out of the arguments
before the serializer sees them, so the argument is the lookup and nothing else. Its inputSchema merged
the serializer's field of that name over the lookup's: ``code`` was advertised as the field's
``["string", "null"]`` (a ``null=True`` column) with its ``maxLength``, without the lookup's description,
and a call that sent null, as advertised, was refused ("Input should be a valid string"). Found by the
model review.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection, models
from django.test.utils import isolate_apps

import mcp_tools

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def toolset() -> Iterator[Any]:
    with isolate_apps("demo_site.shop"):
        meta = type("Meta", (), {"app_label": "shop"})
        model: Any = type("CodedShelf", (models.Model,), {"__module__": __name__, "Meta": meta,
                                                         "code": models.CharField(max_length=10, unique=True, null=True, blank=True),
                                                         "name": models.CharField(max_length=20)})
        with connection.schema_editor() as editor:
            editor.create_model(model)

        class Shelves(mcp_tools.ModelToolset):
            queryset = model.objects.all()
            basename = "lookupupdate.shelves"
            lookup_field = "code"
            actions = ["retrieve", "update"]
            permissions = {"retrieve": [], "update": []}

        mcp_tools.register_toolset(Shelves)
        try:
            yield Shelves
        finally:
            mcp_tools.unregister_toolset(Shelves)
            with connection.schema_editor() as editor:
                editor.delete_model(model)


def test_the_update_advertises_its_lookup_argument_as_retrieve_does(toolset: Any) -> None:
    lookup = toolset.input_spec("retrieve").schema["properties"]["code"]
    update = toolset.input_spec("update").schema
    assert update["properties"]["code"] == lookup, update
    assert update["required"] == ["code"] and "name" in update["properties"]



def test_another_lookup_arg_leaves_the_field_to_the_serializer(toolset: Any) -> None:
    class ByCurrentCode(toolset):  # type: ignore[misc, valid-type]
        lookup_arg = "current_code"

    update = ByCurrentCode.input_spec("update").schema
    assert update["required"] == ["current_code"] and update["properties"]["code"] == {"type": ["string", "null"], "maxLength": 10}
