"""mcp_stdio exit after the grace period with a thread_sensitive=False sync tool still running."""

from __future__ import annotations

import asyncio

import pytest

from tests.stdio_harness import StdioProcess, call

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


async def test_exit_soon_after_grace_with_a_thread_insensitive_sync_tool_running(django_db_setup: None) -> None:
    """docs/protocol.md: after the grace period requests are answered "and the process exits (a sync
    tool's thread still running does not hold it)". asyncio.run() joins the loop's default executor
    (where thread_sensitive=False tools run) before os._exit is reached."""
    process = await StdioProcess("--grace", "1").start()
    await process.handshake()
    try:
        await process.send(call(1, "nap_free", {"seconds": 30}))
        await asyncio.sleep(0.5)
        process.close_stdin()
        assert "shutting down" in (await process.reply_to(1, 10))["error"]["message"]
        assert await process.wait_exit(15) == 0  # the tool's thread runs 30 s: it did not hold the exit
    finally:
        await process.stop()
