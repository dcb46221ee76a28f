"""A datetime or time filter compares the value given to the microsecond, with django-filter too.

A reviewer found that with django-filter installed the ``FilterSet`` got each value as JSON,
which cuts datetimes and times to milliseconds: ``created_at`` exact missed its own row, ``__gt``
listed it and ``__lte`` missed it. Without django-filter (``QuerySet.filter``) it was right. Each
test runs both ways (the ``filter_backend`` fixture).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection, models
from django.test.utils import isolate_apps

import mcp_tools
from tests.asgi_client import call_modern

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("filter_backend")]

TOOL = "filterprecision.rows.list"
# Two rows a fraction of a millisecond apart: the same value to the millisecond.
AT = [datetime.datetime(2025, 3, 1, 12, 0, 0, 250100, tzinfo=datetime.UTC),
      datetime.datetime(2025, 3, 1, 12, 0, 0, 250900, tzinfo=datetime.UTC)]
CLOCK = [datetime.time(10, 30, 0, 250100), datetime.time(10, 30, 0, 250900)]


@pytest.fixture
def rows() -> Iterator[list[int]]:
    """The two rows, and a toolset filtering them by datetime and time, registered: their pks."""
    with isolate_apps("demo_site.shop"):
        meta = type("Meta", (), {"app_label": "shop"})
        model: Any = type("PreciseRow", (models.Model,), {
            "__module__": __name__, "Meta": meta, "at": models.DateTimeField(), "clock": models.TimeField()})
        with connection.schema_editor() as editor:
            editor.create_model(model)
        pks = [model.objects.create(at=at, clock=clock).pk for at, clock in zip(AT, CLOCK, strict=True)]

        class PreciseRows(mcp_tools.ModelToolset):
            queryset = model.objects.all()
            basename = "filterprecision.rows"
            permissions = {"list": []}
            filterset_fields = {"at": ["exact", "gt", "lte"], "clock": ["exact", "gt", "lte"]}

        mcp_tools.register_toolset(PreciseRows)
        try:
            yield pks
        finally:
            mcp_tools.unregister_toolset(PreciseRows)
            with connection.schema_editor() as editor:
                editor.delete_model(model)


async def found(arguments: dict[str, Any], pks: list[int]) -> list[int]:
    from demo_site.asgi import application

    body = (await call_modern(application, "tools/call", {"name": TOOL, "arguments": {**arguments, "ordering": "pk"}})).json()
    assert "error" not in body and body["result"].get("isError") is not True, body
    return [pks.index(row["id"]) for row in body["result"]["structuredContent"]["results"]]


@pytest.mark.parametrize("field", ["at", "clock"])
async def test_a_row_is_found_by_its_own_value_to_the_microsecond(rows: list[int], field: str) -> None:
    """Through the FilterSet, exact found no row, gt both and lte none (the value cut to .250)."""
    values = {"at": [at.isoformat() for at in AT], "clock": [clock.isoformat() for clock in CLOCK]}[field]
    assert await found({field: values[0]}, rows) == [0]
    assert await found({field: values[1]}, rows) == [1]
    assert await found({f"{field}__gt": values[0]}, rows) == [1]
    assert await found({f"{field}__lte": values[0]}, rows) == [0]


async def test_the_rows_own_listed_datetime_finds_it(rows: list[int]) -> None:
    """What a client does: filter by the value the list showed it (``...250100Z``)."""
    from demo_site.asgi import application

    body = (await call_modern(application, "tools/call", {"name": TOOL, "arguments": {"ordering": "pk"}})).json()
    shown = body["result"]["structuredContent"]["results"][0]["at"]
    assert await found({"at": shown}, rows) == [0]
    assert await found({"at__gt": shown}, rows) == [1]
