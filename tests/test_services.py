"""When CI says PostgreSQL and Redis are configured, the suite really runs on them.

These fail (never skip) under ``MCP_TOOLS_TEST_SERVICES=1``: a misconfigured
CI run must not quietly fall back to SQLite and the in-memory layer.
"""

from __future__ import annotations

import os

import pytest
from django.conf import settings
from django.db import connection

SERVICES = os.environ.get("MCP_TOOLS_TEST_SERVICES") == "1"
pytestmark = pytest.mark.skipif(not SERVICES, reason="embedded-defaults run (MCP_TOOLS_TEST_SERVICES is not 1)")


@pytest.mark.django_db
def test_database_is_postgresql() -> None:
    assert connection.vendor == "postgresql"
    with connection.cursor() as cursor:
        cursor.execute("select 1")
        assert cursor.fetchone() == (1,)


def test_cache_is_redis_and_answers() -> None:
    from django.core.cache import cache

    assert settings.CACHES["default"]["BACKEND"] == "django_redis.cache.RedisCache"
    cache.set("mcp_tools:ci-probe", "ok", 5)
    assert cache.get("mcp_tools:ci-probe") == "ok"


async def test_channel_layer_is_redis_and_delivers_group_messages() -> None:
    from channels.layers import get_channel_layer

    layer = get_channel_layer()
    assert type(layer).__module__.startswith("channels_redis")
    channel = await layer.new_channel()
    await layer.group_add("mcp_tools.ci-probe", channel)
    await layer.group_send("mcp_tools.ci-probe", {"type": "probe", "value": 7})
    message = await layer.receive(channel)
    assert message == {"type": "probe", "value": 7}
    await layer.group_discard("mcp_tools.ci-probe", channel)
