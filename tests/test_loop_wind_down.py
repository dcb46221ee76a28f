"""A channel-layer listener left pending on an event loop that closed is collected without an error.

A Celery worker's event loop that stopped under a call (a ``SystemExit`` from code around a tool) is
closed with its tasks as they were (the call's is left to the sweep, as a lost worker's), the process's
channel-layer listener among them. The garbage collector destroys them later, and the listener's
``finally`` raised "Event loop is closed" out of the collector: an unraisable exception, which pytest
may fail a later test on. The test failed before the fix.
"""
from __future__ import annotations

import asyncio
import gc
import sys
from typing import Any

import pytest

from mcp_tools.interprocess import broadcast


class _Layer:
    """A channel layer that never delivers: enough for a listener to join its group and wait."""

    group_expiry = 86400

    async def new_channel(self) -> str:
        return "channel!1"

    async def receive(self, channel: str) -> dict[str, Any]:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def group_add(self, group: str, channel: str) -> None:
        return None

    async def group_discard(self, group: str, channel: str) -> None:
        return None


def test_a_listener_left_on_a_closed_loop_is_collected_without_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    layer = _Layer()
    monkeypatch.setattr(broadcast, "shared_layer", lambda: layer)
    raised: list[str] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda unraisable: raised.append(f"{unraisable.exc_type.__name__}: {unraisable.exc_value}"))
    loop = asyncio.new_event_loop()
    task = loop.create_task(broadcast.follow("mcp_tools.test-group", lambda message: None))
    loop.run_until_complete(asyncio.sleep(0.05))  # joined, receiving
    assert not task.done()
    loop.close()  # as a loop that stopped without cancelling its tasks
    del task
    gc.collect()
    assert raised == []
