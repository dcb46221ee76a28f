"""A publish on the channel layer waits for it at most a moment, and not at all just after it failed.

Found by a durability review (Redis under CLIENT PAUSE for 20 s): each best-effort publish held its
request for redis-py's 5 s socket timeout, so a session's DELETE (three publishes) took 15 s and a
call's result came 5 s late, though every message on the layer is a hint the receivers also find by
polling the database.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from mcp_tools.interprocess import broadcast


class StalledLayer:
    """A layer whose sends never complete (a Redis that accepts and does not answer)."""

    def __init__(self) -> None:
        self.sends = 0

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        self.sends += 1
        await asyncio.sleep(3600)


async def test_a_stalled_layer_holds_a_publish_for_a_moment_then_none_for_a_while(monkeypatch: pytest.MonkeyPatch) -> None:
    layer = StalledLayer()
    monkeypatch.setattr(broadcast, "shared_layer", lambda: layer)
    monkeypatch.setattr(broadcast, "PUBLISH_TIMEOUT_SECONDS", 0.2, raising=False)
    monkeypatch.setattr(broadcast, "_failing_until", 0.0, raising=False)
    started = time.monotonic()
    assert await asyncio.wait_for(broadcast.publish("g", {"type": "mcp.wakeup"}), 5) is False
    assert await asyncio.wait_for(broadcast.publish("g", {"type": "mcp.wakeup"}), 5) is False
    assert time.monotonic() - started < 2 and layer.sends == 1  # the second did not wait for the layer at all
