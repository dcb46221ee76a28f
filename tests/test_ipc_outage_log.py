"""A review of the interprocess fixes found it: How much a process logs while Redis is down, with a few dozen open GET streams (each a broadcast.follow).

Every standalone GET stream's relay is a broadcast.follow (699e377), and each one logs its own
failures: a WARNING with a traceback when its first re-add fails, then an INFO with a traceback
at every receive retry and an INFO at every re-add retry. The outage is one event of the
process; the log grows with the number of open streams (demo_site logs mcp_tools at INFO).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import uuid

from django.test import override_settings

STREAMS = 40


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # nothing listens there once the socket closes: refused


async def test_an_outage_is_logged_per_process_not_per_stream() -> None:
    from mcp_tools.interprocess import broadcast

    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    logger = logging.getLogger("mcp_tools.broadcast")
    handler, level = Keep(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)  # demo_site's level for mcp_tools
    layers = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer",
                          "CONFIG": {"hosts": [f"redis://127.0.0.1:{_closed_port()}/0"]}}}
    try:
        with override_settings(CHANNEL_LAYERS=layers):
            # The process's listeners and one relay per open GET stream, all with Redis down.
            followers = [asyncio.ensure_future(broadcast.follow(f"mcp_tools.session.{uuid.uuid4().hex}", lambda m: None))
                         for _ in range(STREAMS)]
            await asyncio.sleep(10)
            for follower in followers:
                follower.cancel()
            await asyncio.gather(*followers, return_exceptions=True)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    warnings = [r for r in records if r.levelno >= logging.WARNING]
    tracebacks = [r for r in records if r.exc_info]
    assert len(warnings) <= 3 and len(tracebacks) <= 10, (
        f"10 s of Redis down with {STREAMS} GET streams open logged {len(records)} records: "
        f"{len(warnings)} warnings, {len(tracebacks)} with a traceback")
