"""Settings of live servers on a private redis-server (tests/test_ipc_redis_review.py).

The servers' ``REDIS_URL`` names that Redis (the cache, the broker and the channel layer, as
demo_site configures them); the channel layer's ``group_expiry`` and ``capacity`` come from
``MCP_TESTS_GROUP_EXPIRY`` / ``MCP_TESTS_CAPACITY`` (channels-redis's defaults otherwise), so a
test can make a day of uptime last two seconds. ``MCP_TESTS_SLOW_CALL_SECONDS`` sets
``SLOW_CALL_SECONDS`` (a call that runs no longer gets no row, so nothing but the channel layer
can reach its handler).
"""

import os

from tests.server_settings import *  # noqa: F401,F403
from tests.server_settings import MCP_TOOLS

CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {
            "hosts": [os.environ["REDIS_URL"]],
            "group_expiry": int(os.environ.get("MCP_TESTS_GROUP_EXPIRY", "86400")),
            "capacity": int(os.environ.get("MCP_TESTS_CAPACITY", "100")),
        },
    }
}

if os.environ.get("MCP_TESTS_SLOW_CALL_SECONDS"):
    MCP_TOOLS["SLOW_CALL_SECONDS"] = float(os.environ["MCP_TESTS_SLOW_CALL_SECONDS"])
