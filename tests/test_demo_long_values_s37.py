"""The demo's inventory tools bound what they pass to LIKE. Found by a review: a SKU to complete or a
search query of 50,001 characters or more made SQLite raise "LIKE or GLOB pattern too complex", and
the request answered -32603 "Internal error"."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from mcp_tools.transports.http import McpEndpoint
from tests.asgi_client import call_modern

pytestmark = pytest.mark.django_db(transaction=True)
APP = McpEndpoint()
LONG = "A" * 60_000


@pytest.fixture
def product() -> None:
    from demo_site.inventory.models import Product

    Product.objects.create(sku="S37-1", name="Widget", price=Decimal("1.00"))


@pytest.mark.parametrize("ref", [{"type": "ref/resource", "uri": "inventory://products/{sku}"},
                                 {"type": "ref/prompt", "name": "restock_advice"}], ids=["resource", "prompt"])
async def test_a_sku_longer_than_any_completes_to_nothing(product: None, ref: dict[str, Any]) -> None:
    for value, found in ((LONG, []), ("S37-1" + "x" * 28, []), ("s37", ["S37-1"])):
        params = {"ref": ref, "argument": {"name": "sku", "value": value}}
        body = (await call_modern(APP, "completion/complete", params)).json()
        assert body.get("result", {}).get("completion", {}).get("values") == found, body


async def test_a_search_query_longer_than_any_name_is_refused_naming_it(product: None) -> None:
    body = (await call_modern(APP, "tools/call", {"name": "search_products", "arguments": {"query": LONG}})).json()
    result = body.get("result", {})
    assert result.get("isError") is True, body
    assert "query" in result["content"][0]["text"], result
    found = (await call_modern(APP, "tools/call", {"name": "search_products", "arguments": {"query": "widg"}})).json()
    assert [item["sku"] for item in found["result"]["structuredContent"]["result"]] == ["S37-1"], found


async def test_the_search_querys_bound_is_in_its_schema() -> None:
    listed = (await call_modern(APP, "tools/list", {})).json()["result"]["tools"]
    schema = next(tool["inputSchema"] for tool in listed if tool["name"] == "search_products")
    from demo_site.inventory.models import Product

    assert schema["properties"]["query"]["maxLength"] == await sync_to_async(lambda: Product._meta.get_field("name").max_length)()
