"""Every schema the demo offers is valid JSON Schema 2020-12, with each keyword of its JSON type.

The regression behind this file: a DRF ``ModelSerializer`` of a model whose
``DecimalField`` has ``MinValueValidator(Decimal("0"))`` produced
``minimum: Decimal('0')``, which the wire encoder wrote as the string ``"0"``;
a client validating the tool's schema (the official SDK does) refuses it.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from rest_framework import serializers

from demo_site.inventory.models import Product
from mcp_tools.modeltools import base as modeltools_base
from mcp_tools.registry import make_tool, registry
from mcp_tools.registry.schemas import jsonable_schema, openapi_to_json_schema
from mcp_tools.transports.http import McpEndpoint
from tests.asgi_client import call_modern

APP = McpEndpoint()


def strict_wire(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema as a client receives it, encoded without any fallback for non-JSON values."""
    return json.loads(json.dumps(schema, allow_nan=False))  # raises TypeError on a Decimal, a date, a callable...


def assert_valid_schema(name: str, schema: dict[str, Any]) -> None:
    wire = strict_wire(schema)
    assert wire == schema, f"{name}: the schema changes on the wire"
    Draft202012Validator.check_schema(wire)


# -- every tool of the demo ----------------------------------------------------------------------


def test_every_registered_tool_has_valid_input_and_output_schemas() -> None:
    tools = registry.tools
    names = {tool.name for tool in tools}
    # Both demo apps (inventory: plain tools; shop: serializer-backed model toolset and model actions) are here.
    assert {"echo", "deploy", "slow_count", "search_products"} <= names
    assert {"shop.orders.create", "shop.orders.list", "check_account_issue"} <= names
    checked = 0
    for tool in tools:
        wire = tool.to_wire()
        assert_valid_schema(f"{tool.name} inputSchema", wire["inputSchema"])
        assert wire["inputSchema"].get("type") == "object", tool.name
        checked += 1
        if "outputSchema" in wire:
            assert_valid_schema(f"{tool.name} outputSchema", wire["outputSchema"])
            assert wire["outputSchema"].get("type") == "object", tool.name
            checked += 1
    assert checked > len(tools)


@pytest.mark.django_db(transaction=True)
async def test_tools_list_on_the_wire_is_valid_for_a_client() -> None:
    """What ``tools/list`` sends validates against the metaschema after the real encoder (no ``"0"`` strings)."""
    cursor: str | None = None
    seen = 0
    while True:
        response = await call_modern(APP, "tools/list", {"cursor": cursor} if cursor else {})
        assert response.status == 200, response.body
        result = response.json()["result"]
        for tool in result["tools"]:
            Draft202012Validator.check_schema(tool["inputSchema"])
            if "outputSchema" in tool:
                Draft202012Validator.check_schema(tool["outputSchema"])
            seen += 1
        cursor = result.get("nextCursor")
        if not cursor:
            break
    assert seen >= 10


# -- the DecimalField regression ---------------------------------------------------------------------


class ProductSerializer(serializers.ModelSerializer):
    """``Product.price`` is a ``DecimalField`` validated by ``MinValueValidator(Decimal("0"))``."""

    class Meta:
        model = Product
        fields = ["id", "sku", "name", "price", "stock"]


def add_product(**data: Any) -> str:
    """Add a product."""
    return data["sku"]


def test_model_serializer_decimal_bounds_are_numbers() -> None:
    schema = make_tool(add_product, serializer=ProductSerializer).to_wire()["inputSchema"]
    price = schema["properties"]["price"]
    assert price["minimum"] == 0 and type(price["minimum"]) is int
    assert "number" in price["type"]
    assert "id" not in schema["properties"], "a read-only field is not an input"
    assert_valid_schema("add_product", schema)
    assert json.dumps(schema).count('"minimum":"') == 0


def test_model_toolset_schema_of_the_same_serializer_is_valid() -> None:
    schema = modeltools_base.serializer_schema(ProductSerializer(), writable=True)
    assert schema["properties"]["price"]["minimum"] == 0
    assert_valid_schema("serializer_schema", schema)


def test_keywords_take_their_json_type() -> None:
    """Callable limits, decimals and OpenAPI 3.0's boolean exclusive bounds all become 2020-12 numbers."""
    converted = openapi_to_json_schema({
        "type": "object",
        "properties": {
            "amount": {"type": "number", "minimum": Decimal("0.5"), "exclusiveMinimum": True, "maximum": lambda: Decimal("10")},
            "price": {"type": "string", "format": "decimal", "default": Decimal("1.50"), "nullable": True},
            "code": {"type": "string", "enum": [Decimal("1.0"), "x"], "maxLength": Decimal("8")},
        },
        "required": ("amount",),
    })
    amount, price, code = (converted["properties"][key] for key in ("amount", "price", "code"))
    assert amount == {"type": "number", "exclusiveMinimum": 0.5, "maximum": 10}
    assert price["type"] == ["string", "number", "null"]
    assert price["default"] == 1.5
    assert code == {"type": "string", "enum": ["1.0", "x"], "maxLength": 8}
    assert converted["required"] == ["amount"]
    assert_valid_schema("converted", converted)
    assert jsonable_schema(converted) == converted, "idempotent"
