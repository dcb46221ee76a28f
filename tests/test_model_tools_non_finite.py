"""A model toolset's row with a float that is NaN or infinity: JSON has no number for it.

A plain tool whose structured content holds one answers with a tool error (the value cannot
conform to its outputSchema's "number"; tests/test_registry_review.py). A model toolset's results
went around that check (they are hand-built ToolResults): the text content carried ``NaN`` or
``Infinity``, which no JSON reader takes, and structuredContent a null against "type": "number".
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connection, models
from rest_framework import serializers

import mcp_tools
from demo_site.inventory.models import Product
from tests.asgi_client import call_modern

pytestmark = pytest.mark.django_db(transaction=True)

#: What each test's rows read for ``ratio`` (set by the test, read by the queryset).
RATIO: dict[str, float] = {"value": 1.0}


class ReadingSerializer(serializers.ModelSerializer[Product]):
    ratio = serializers.FloatField(read_only=True)

    class Meta:
        model = Product
        fields = ["id", "sku", "ratio"]


class ReadingTools(mcp_tools.ModelToolset):
    queryset = Product.objects.all()
    serializer_class = ReadingSerializer
    basename = "review.readings"
    actions = ["list", "retrieve"]
    permissions = {"list": [], "retrieve": []}

    def get_queryset(self) -> models.QuerySet[Product]:
        # The float comes from the database, as a FloatField's would.
        return super().get_queryset().annotate(ratio=models.Value(RATIO["value"], output_field=models.FloatField()))


@pytest.fixture
def reading_tools() -> Any:
    mcp_tools.register_toolset(ReadingTools)
    try:
        yield
    finally:
        mcp_tools.unregister_toolset(ReadingTools)


async def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    from demo_site.asgi import application

    r = await call_modern(application, "tools/call", {"name": name, "arguments": arguments})
    assert r.status == 200, r.body
    return r.json()


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan")], ids=["inf", "-inf", "nan"])
@pytest.mark.parametrize("action", ["list", "retrieve"])
async def test_a_non_finite_float_in_a_row_is_a_tool_error(reading_tools: Any, action: str, value: float) -> None:
    if math.isnan(value) and connection.vendor == "sqlite":
        pytest.skip("SQLite stores NaN as NULL")
    if connection.vendor == "mysql":
        pytest.skip("MySQL/MariaDB have no infinity or NaN: no row can read one (the driver refuses the query's value)")
    product = await sync_to_async(Product.objects.create)(sku="R-1", name="Reading", price=1)
    RATIO["value"] = value
    try:
        body = await call(f"review.readings.{action}", {} if action == "list" else {"id": product.pk})
    finally:
        RATIO["value"] = 1.0
    result = body["result"]
    assert result.get("isError") is True and "does not match its output schema" in result["content"][0]["text"], result
    assert "structuredContent" not in result


async def test_a_finite_float_is_sent(reading_tools: Any) -> None:
    product = await sync_to_async(Product.objects.create)(sku="R-1", name="Reading", price=1)
    body = await call("review.readings.retrieve", {"id": product.pk})
    result = body["result"]
    assert result["structuredContent"] == {"id": product.pk, "sku": "R-1", "ratio": 1.0}, result
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
