"""The process's channel (broadcast.subscribed) stays in a group while someone in the process listens,
whatever order joins and leaves of the group take (channels-redis, a local Redis)."""
from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from mcp_tools.interprocess import broadcast, wakeups

pytestmark = pytest.mark.django_db(transaction=True)

from tests.test_layer_leaks import needs_redis, redis_layer  # noqa: F401  (a layer on a local Redis, db 12)


async def members(layer: Any, group: str) -> int:
    return await layer.connection(layer.consistent_hash(group)).zcard(layer._group_key(group))


async def turns(n: int = 30) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


@needs_redis
async def test_a_listener_that_joins_as_the_last_one_leaves_is_in_the_group(redis_layer: Any) -> None:
    """Sanity: the last listener leaves, a new one comes while the discard is on its way: the new one hears the group."""
    group = wakeups.group_name("sanity-" + uuid.uuid4().hex)
    first_in = asyncio.Event()
    release = asyncio.Event()

    async def first() -> None:
        async with broadcast.subscribed(group, lambda m: None):
            first_in.set()
            await release.wait()

    a = asyncio.ensure_future(first())
    await asyncio.wait_for(first_in.wait(), 5)
    release.set()
    await asyncio.sleep(0)
    got: list[dict[str, Any]] = []
    heard = asyncio.Event()
    async with broadcast.subscribed(group, lambda m: (got.append(m), heard.set())):
        await asyncio.wait_for(a, 5)
        assert await members(redis_layer, group) == 1
        assert await broadcast.publish(group, {"type": "mcp.wakeup"})
        await asyncio.wait_for(heard.wait(), 5)


@needs_redis
async def test_a_join_waits_for_every_leave_in_flight_not_only_the_latest(redis_layer: Any) -> None:
    """subscribed(): a new join of a group waits for the leave in progress, so that a discard still on its
    way (on another connection of channels-redis's pool) does not undo the join (_ProcessChannel.leaving,
    _ProcessChannel.keep). But a listener that is dropped while its join waits for an earlier leave (L1) starts
    a leave (L2) that waits only for its own keep task, which the cancel ends at once: L2 is over before L1,
    and the next join waits for L2 only. L1's group_discard then lands after that join's group_add: the
    process is out of the group while its listener runs, and hears nothing of it (a wakeup: only the 0.5 s
    poll; a session's END after a takeover elsewhere: the stream stays open, two streams of one session)."""
    group = wakeups.group_name("chain-" + uuid.uuid4().hex)
    real_discard = redis_layer.group_discard
    gate = asyncio.Event()
    discards: list[str] = []

    async def slow_first_discard(g: str, channel: str) -> None:
        if g == group:
            discards.append(channel)
            if len(discards) == 1:
                await gate.wait()  # the first leave's discard is slow to go out (a fresh pool connection, a busy Redis)
        await real_discard(g, channel)

    redis_layer.group_discard = slow_first_discard
    try:
        a_in = asyncio.Event()
        release_a = asyncio.Event()

        async def listener_a() -> None:
            async with broadcast.subscribed(group, lambda m: None):
                a_in.set()
                await release_a.wait()

        a = asyncio.ensure_future(listener_a())
        await asyncio.wait_for(a_in.wait(), 5)
        assert await members(redis_layer, group) == 1
        release_a.set()  # A, the last listener, leaves: its discard (L1) is on its way
        await turns()
        assert len(discards) == 1 and not a.done()

        b = asyncio.ensure_future(_hold(group))  # B joins: its add waits for L1
        await turns()
        b.cancel()  # the client of B goes away while it joins; its leave (L2) starts
        await turns()

        got: list[dict[str, Any]] = []
        heard = asyncio.Event()
        c_in = asyncio.Event()
        release_c = asyncio.Event()

        async def listener_c() -> None:
            async with broadcast.subscribed(group, lambda m: (got.append(m), heard.set())):
                c_in.set()
                await release_c.wait()

        c = asyncio.ensure_future(listener_c())
        # C's block starts once the process's channel is in the group (its contract) or once L1 is done.
        await asyncio.wait({asyncio.ensure_future(c_in.wait())}, timeout=2)
        gate.set()  # L1's discard goes out now
        await asyncio.wait_for(a, 5)
        await asyncio.wait_for(asyncio.wait({b}), 5)
        await asyncio.wait_for(c_in.wait(), 5)
        # C's block may have started on MEMBERSHIP_WAIT_SECONDS, before its add went out (the add waits for
        # L1, then goes over the network): its add lands soon after on a loaded machine, not within a few
        # loop turns. The defect is the discard landing after it, which leaves the channel out for good.
        for _ in range(100):
            if await members(redis_layer, group) == 1:
                break
            await asyncio.sleep(0.05)
        assert await members(redis_layer, group) == 1, "C listens, but the process's channel is not in the group"
        assert await broadcast.publish(group, {"type": "mcp.wakeup"})
        try:
            await asyncio.wait_for(heard.wait(), 3)
        except TimeoutError:
            pytest.fail("a message published to the group while C listened never reached C")
        finally:
            release_c.set()
            await asyncio.wait_for(c, 5)
    finally:
        redis_layer.group_discard = real_discard


async def _hold(group: str) -> None:
    async with broadcast.subscribed(group, lambda m: None):
        await asyncio.sleep(30)
