"""A toolset's create or update with a value its column cannot hold is refused as a write, not an internal
error. Found by a review: DRF's DurationField took ``"999999999 00:00:00"`` and the insert failed in the
driver (SQLite: ``OverflowError: Python int too large to convert to SQLite INTEGER``; PostgreSQL refuses
an interval past its range with a ``DataError``), an internal error, while the same value as a filter
was refused cleanly."""

from __future__ import annotations

import datetime
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
def durations() -> Iterator[Any]:
    with isolate_apps("demo_site.shop"):
        meta = type("Meta", (), {"app_label": "shop"})
        model: Any = type("TimedRow", (models.Model,), {"__module__": __name__, "Meta": meta, "spent": models.DurationField()})
        with connection.schema_editor() as editor:
            editor.create_model(model)

        class TimedRows(mcp_tools.ModelToolset):
            queryset = model.objects.all()
            basename = "writerange.rows"
            actions = ["create", "update"]
            permissions = {"create": [], "update": []}

        mcp_tools.register_toolset(TimedRows)
        try:
            yield model
        finally:
            mcp_tools.unregister_toolset(TimedRows)
            with connection.schema_editor() as editor:
                editor.delete_model(model)


async def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    from demo_site.asgi import application

    body: dict[str, Any] = (await call_modern(application, "tools/call", {"name": name, "arguments": arguments})).json()
    return body


async def test_a_duration_past_the_column_is_a_refused_write(durations: Any) -> None:
    made = await call("writerange.rows.create", {"spent": "1 00:00:00"})
    assert made["result"].get("isError") is not True, made
    pk = made["result"]["structuredContent"]["id"]
    holds_it = connection.vendor == "postgresql"  # an interval holds ±178 million years; a 64-bit count of microseconds does not
    for name, arguments in (("writerange.rows.create", {"spent": "999999999 00:00:00"}),
                            ("writerange.rows.update", {"id": pk, "spent": "200000000 00:00:00"})):
        result = (await call(name, arguments))["result"]
        if holds_it:
            assert result.get("isError") is not True, result
            continue
        assert result.get("isError") is True, result
        assert "outside what its column holds" in str(result["structuredContent"]), result
    rows = await sync_to_async(lambda: sorted(durations.objects.values_list("spent", flat=True)))()
    if holds_it:
        assert rows == [datetime.timedelta(days=200000000), datetime.timedelta(days=999999999)]
    else:
        assert rows == [datetime.timedelta(days=1)]  # nothing written, nothing changed
