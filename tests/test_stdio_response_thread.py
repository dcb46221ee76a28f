"""A client's response on stdio (an elicitation answer) is handled in a request thread of its own, as a
request's sync code is: not on the loop's default executor, which ``thread_sensitive=False`` sync tools
may fill. There the read loop waited, while it checked the answer's user and permissions, until one of
those tools ended: no later line (a ping, a cancel, the next request) was read meanwhile.

The slow tools block until the test lets them go, always at the end; the test waits until all of them
run, so the executor is full when the answer comes.
"""
from __future__ import annotations

import os
import threading

import pytest
from asgiref.sync import sync_to_async

from mcp_tools.registry import make_tool, registry
from tests.stdio_harness import call
from tests.test_stdio_current_user import ASK_GATED, make_user, serving
from tests.test_stdio_refused_answer import wait_for

pytestmark = pytest.mark.django_db(transaction=True)
RELEASE = threading.Event()
ALL_RUNNING = threading.Event()
BUSY = min(32, (os.cpu_count() or 1) + 4)  # the default executor's size (ThreadPoolExecutor's default)
_running: list[int] = []
_lock = threading.Lock()


def slow_export_stdio() -> str:
    """A sync tool that runs outside the request thread (thread_sensitive=False) until the test lets it end."""
    with _lock:
        _running.append(1)
        if len(_running) == BUSY:
            ALL_RUNNING.set()
    RELEASE.wait()
    return "exported"


SLOW = make_tool(slow_export_stdio, thread_sensitive=False)


async def test_an_elicitation_answer_does_not_stall_the_read_loop() -> None:
    RELEASE.clear()
    ALL_RUNNING.clear()
    _running.clear()
    await sync_to_async(make_user)("user")
    try:
        with registry.registered_temporarily(ASK_GATED), registry.registered_temporarily(SLOW):
            async with serving("ada", capabilities={"elicitation": {"form": {}}}) as client:
                client.send(call(1, "ask_gated_stdio"))
                ask = await wait_for(client.out, lambda m: m.get("method") == "elicitation/create", 15)
                assert ask is not None
                for n in range(BUSY):
                    client.send(call(100 + n, "slow_export_stdio"))
                assert await sync_to_async(ALL_RUNNING.wait, thread_sensitive=True)(15), "the slow tools did not all start"
                client.send({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"ok": True}}})
                client.send({"jsonrpc": "2.0", "id": "ping", "method": "ping"})
                # A bound for a stalled loop only: unstalled, the ping is answered at once.
                pong = await wait_for(client.out, lambda m: m.get("id") == "ping", 15)
                assert pong is not None, "the ping was not answered while the slow tools ran: the read loop waited on the default executor"
                answered = await wait_for(client.out, lambda m: m.get("id") == 1, 15)
                assert answered is not None and "result" in answered, answered
    finally:
        RELEASE.set()
