"""A resources/read result's ttlMs is its resource's own (0 unless it asks for more).

The official 2026-07-28 client serves reads from its cache for ttlMs: with the lists' 60 s on
every read, a read right after a tool changed a resource showed the old content
(tests/test_real_clients.py::test_a_read_after_a_write_is_fresh shows it with that client).
"""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

import mcp_tools
from mcp_tools.registry import registry
from tests.asgi_client import call_modern

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def app():  # type: ignore[no-untyped-def]
    from demo_site.asgi import application

    return application


def _register_rates() -> None:
    @mcp_tools.resource("test://rates", cache_ttl_ms=30_000)
    def rates() -> str:
        """Changes once a day."""
        return "1.08"


async def read(app: Any, uri: str) -> dict[str, Any]:
    response = await call_modern(app, "resources/read", {"uri": uri})
    assert response.status == 200, response.body
    result: dict[str, Any] = response.json()["result"]
    return result


async def test_a_read_is_stale_at_once_unless_its_resource_says_otherwise(app: Any) -> None:
    await read(app, "inventory://products")  # the demo's (a database table)
    assert (await read(app, "inventory://products"))["ttlMs"] == 0
    _register_rates()
    try:
        result = await read(app, "test://rates")
    finally:
        registry.unregister_resource("test://rates")
    assert result["ttlMs"] == 30_000 and result["cacheScope"] == "private"
    listed = (await call_modern(app, "resources/list", {})).json()["result"]
    assert listed["ttlMs"] == 60_000, "the lists keep CACHE_TTL_MS"


@pytest.mark.parametrize("value", [-1, 1.5, "60", True])
def test_a_cache_ttl_that_is_no_millisecond_count_is_refused(value: Any) -> None:
    with pytest.raises(ImproperlyConfigured, match="cache_ttl_ms"):
        mcp_tools.resource("test://bad", cache_ttl_ms=value)(lambda: "x")
    assert registry.find_resource("test://bad") is None
