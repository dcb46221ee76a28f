"""Messages between server processes over the Channels layer, when the layer is shared.

With the in-memory layer (one process) there is nobody to tell, and these are no-ops;
every caller keeps a local path that works without them.

A process hears a group through a channel it adds to the group. Two things undo that
membership behind its back: channels-redis drops a member ``group_expiry`` seconds
(one day by default) after it was added, at the next ``group_send`` to the group, and a
Redis that restarts or fails over empty has forgotten every group. :func:`follow` keeps
its membership: it adds its channel again every third of ``group_expiry``, and when
receiving fails in a way that may have lost the groups, every channel of the process
adds itself again, retried after a pause that doubles up to :data:`RETRY_MAX_SECONDS`
while the layer is down. What is sent to a channel while it does not receive waits for
it; what is sent to a group while the channel is out of it is lost.

Groups that come and go (a call's wakeups, a session's stream ends) are heard through one
channel of the process (:func:`subscribed`), never through a channel of their own: a channel
that stops receiving while a message for it is on its way keeps that message for good in
channels-redis's per-process receive buffer (channels-redis #384), and a listener that goes
away as the message it waits for arrives locally (an answer posted to this process) would
leave one behind each time. The process's channel always receives, and drops what comes for
a group nobody here listens to any more.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
import weakref
from collections.abc import AsyncIterator, Callable
from typing import Any

from django.core.signals import setting_changed
from django.dispatch import receiver

logger = logging.getLogger("mcp_tools.broadcast")

_listeners: dict[str, asyncio.Task[None]] = {}
#: ``[layer or None]`` once asked (every finished durable round publishes a wakeup); reset when CHANNEL_LAYERS changes.
_shared: list[Any] = []
#: Pauses before joining a group again after the layer failed: the first, and the longest (doubling between).
RETRY_FIRST_SECONDS = 0.5
RETRY_MAX_SECONDS = 30.0
#: The longest a channel stays in a group without being added again: the bound on how long a
#: Redis that came back empty without a connection failing (within redis-py's retries) goes unnoticed.
REFRESH_MAX_SECONDS = 300.0
#: The longest a publish waits for the layer, and how long after one failed the process publishes
#: nothing (each publish is a hint the receivers also find by polling the database: docs/robustness.md).
PUBLISH_TIMEOUT_SECONDS = 1.0
PUBLISH_PAUSE_SECONDS = 5.0
#: The longest :func:`subscribed` waits for its group's join before its block runs, and for the leave
#: after it: a stalled Redis (a half-open connection, a paused server) held each for redis-py's 5 s
#: socket timeout, every 2025-11-25 round and held background call ~10 s longer (found by a review).
#: The join and the leave go on in the background; meanwhile the caller's fallback (its poll) does.
MEMBERSHIP_WAIT_SECONDS = 1.0
#: ``time.monotonic()`` until which publishing is skipped (0: the layer answered last time).
_failing_until = 0.0
#: channels-redis's and the in-memory layer's default ``group_expiry``.
DEFAULT_GROUP_EXPIRY = 86400


@receiver(setting_changed)
def _forget_layer(*, setting: str, **kwargs: Any) -> None:
    global _failing_until
    if setting == "CHANNEL_LAYERS":
        _shared.clear()
        _failing_until = 0.0


def shared_layer() -> Any:
    """The configured channel layer if it reaches other processes (e.g. channels-redis), else None."""
    if not _shared:
        from channels.layers import InMemoryChannelLayer, get_channel_layer

        layer = get_channel_layer()
        _shared.append(None if layer is None or isinstance(layer, InMemoryChannelLayer) else layer)
    return _shared[0]


async def publish(group: str, message: dict[str, Any]) -> bool:
    """Send ``message`` to every process listening on ``group`` (best effort, logged on failure).

    Whether it was sent: False without a shared layer, or when the layer failed. The message
    carries its group (``"group"``): a channel hears it without the group's name, and
    :func:`subscribed` hands it to the group's listeners by it.
    """
    global _failing_until
    layer = shared_layer()
    if layer is None:
        return False
    if _failing_until and time.monotonic() < _failing_until:
        return False  # it failed a moment ago: a hint not sent, rather than one more request held for it
    try:
        # Bounded: a Redis that stalls (paused, a half-open connection) held each request that
        # publishes for redis-py's socket timeout, 5 s a message (a session's DELETE sends three).
        # (asyncio.timeout, not wait_for: no task of its own for every publish, one per finished durable round)
        async with asyncio.timeout(PUBLISH_TIMEOUT_SECONDS):
            await layer.group_send(group, {**message, "group": group})
    except Exception:  # (TimeoutError included)
        _failing_until = time.monotonic() + PUBLISH_PAUSE_SECONDS
        logger.warning("Could not publish to %s; not publishing for %.0f s", group, PUBLISH_PAUSE_SECONDS, exc_info=True)
        return False
    _failing_until = 0.0
    return True


def listen(group: str, handler: Callable[[dict[str, Any]], None]) -> None:
    """Run ``handler`` for every message published on ``group``, for the life of this event loop.

    One listener per group and process (:func:`follow`); one that belongs to another
    event loop (a loop that ended: tests, ``async_to_sync``) is started again on the running one.
    """
    # The cheapest test first: every 2025-11-25 request comes here (cancellation.register), and with
    # no shared layer (known once asked) there is nobody to hear, whatever was started before.
    if _shared and _shared[0] is None:
        return
    running = _listeners.get(group)
    if running is not None and not running.done() and running.get_loop() is asyncio.get_running_loop():
        return
    if shared_layer() is None:
        return
    _listeners[group] = asyncio.ensure_future(follow(group, handler))


async def follow(group: str, handler: Callable[[dict[str, Any]], None]) -> None:
    """Run ``handler`` for every message published on ``group`` until the task is cancelled.

    On a channel of its own, added to the group while it starts receiving and kept there
    (see the module's docstring); on cancellation the channel leaves the group. A handler
    that raises is logged; the next message is handled all the same. For the groups a
    process hears for its life (:func:`listen`); a group heard for a while: :func:`subscribed`.
    """
    layer = shared_layer()
    if layer is None:
        return
    channel = await layer.new_channel()
    membership = asyncio.ensure_future(_stay_in(layer, group, channel))
    try:
        await _receive(layer, channel, group, handler)
    finally:
        # Not on a closed loop: the garbage collector ends a listener its loop left pending (nothing
        # can run there), and a cancel or an await raised out of it ("Event loop is closed").
        if not membership.get_loop().is_closed():
            membership.cancel()
            with contextlib.suppress(Exception):
                await layer.group_discard(group, channel)


async def _receive(layer: Any, channel: str, what: str, handler: Callable[[dict[str, Any]], None]) -> None:
    """Hand every message of ``channel`` to ``handler`` until cancelled; receive again after failures, with backoff."""
    loop = asyncio.get_running_loop()
    pause = RETRY_FIRST_SECONDS
    while True:
        started = loop.time()
        try:
            message = await layer.receive(channel)
        except Exception as exc:
            _raise_if_cancelled(exc)
            if _timed_out(exc) and loop.time() - started >= 1:  # an idle read that gave up (redis-py 8): Redis is there
                logger.debug("Receiving on %s timed out; receiving again", what)
                continue
            # Only one of the process's channels reads from Redis at a time (channels-redis):
            # when its read fails the connection may have gone to a Redis that lost its groups.
            _layer_lost()
            if loop.time() - started > pause:  # not a layer that fails at once: no backing off
                pause = RETRY_FIRST_SECONDS
            _layer_failed(f"receiving on {what}", exc, pause)
            await asyncio.sleep(random.uniform(pause / 2, pause))
            pause = min(pause * 2, RETRY_MAX_SECONDS)
            continue
        _layer_answers()
        try:
            handler(message)
        except Exception:
            logger.exception("A listener of %s failed on %r", what, message.get("type"))


async def _stay_in(layer: Any, group: str, channel: str, tried: asyncio.Event | None = None) -> None:
    """Keep ``channel`` in ``group``: add it now, again every third of ``group_expiry`` (at most every
    :data:`REFRESH_MAX_SECONDS`), and at once when receiving showed the layer failed.

    ``tried`` is set once the first add succeeded or failed (a failed one is retried with backoff).
    """
    every = min(float(getattr(layer, "group_expiry", DEFAULT_GROUP_EXPIRY)) / 3, REFRESH_MAX_SECONDS)
    pause = RETRY_FIRST_SECONDS
    joined = False
    while True:
        if joined:
            # Spread out a little: the channels of a process joined together (a restart) add again apart.
            if await wait_set(_lost_event(), random.uniform(0.8, 1.0) * every):
                await asyncio.sleep(random.uniform(0, RETRY_FIRST_SECONDS))
        try:
            await layer.group_add(group, channel)
        except Exception as exc:
            _raise_if_cancelled(exc)
            if tried is not None:
                tried.set()
            _layer_failed(f"joining {group}", exc, pause)
            joined = False
            await asyncio.sleep(random.uniform(pause / 2, pause))
            pause = min(pause * 2, RETRY_MAX_SECONDS)
            continue
        # A cancel that came while Redis answered may be lost inside redis-py (the add returns):
        # raised here, or the membership would outlive its listeners and add the channel again later.
        _raise_if_cancelled(None)
        if tried is not None:
            tried.set()
        _layer_answers()
        joined, pause = True, RETRY_FIRST_SECONDS


@contextlib.asynccontextmanager
async def subscribed(group: str, handler: Callable[[dict[str, Any]], None]) -> AsyncIterator[None]:
    """Run ``handler`` for every message published on ``group`` (:func:`publish`) while the block runs.

    Through this process's channel (see the module's docstring), which joins the group for
    the first listener of the process and leaves it after the last; the membership is kept
    up as :func:`follow` keeps its own. The block starts once the channel is in the group,
    so it misses nothing published from then on (``handler`` may run before it starts), or
    once adding it failed, or after :data:`MEMBERSHIP_WAIT_SECONDS` (a stalled layer): it is
    retried with backoff and the outage logged once, meanwhile the caller's own fallback (a
    poll, this process's direct path) has to do. Leaving waits as long at most. Without a
    shared layer this does nothing.
    """
    layer = shared_layer()
    if layer is None:
        yield
        return
    process = _process_channel(layer)
    membership = process.groups.get(group)
    if membership is None:
        membership = process.groups[group] = _Membership()
        membership.after = process.leaving.get(group)
        membership.task = asyncio.ensure_future(process.keep(group, membership, membership.after))
    membership.handlers.add(handler)
    try:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(MEMBERSHIP_WAIT_SECONDS):
                await membership.tried.wait()
        yield
    finally:
        membership.handlers.discard(handler)
        # (Not on a closed loop, where nothing can run: see follow.)
        if not membership.handlers and process.groups.get(group) is membership and not process.task.get_loop().is_closed():
            del process.groups[group]
            await asyncio.wait({process.leave(group, membership)}, timeout=MEMBERSHIP_WAIT_SECONDS)


class _Membership:
    """A group the process's channel is in while someone in the process listens to it."""

    def __init__(self) -> None:
        self.handlers: set[Callable[[dict[str, Any]], None]] = set()
        #: Set once the first add of the channel to the group succeeded or failed.
        self.tried = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        #: The leave of the group in progress when this membership began (its join waited for it).
        self.after: asyncio.Task[None] | None = None


class _ProcessChannel:
    """The channel through which an event loop of the process hears the groups of :func:`subscribed`."""

    def __init__(self, layer: Any) -> None:
        self.layer = layer
        self.channel: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self.groups: dict[str, _Membership] = {}
        #: Per group, the leave in progress: a new join of the group waits for it (a join that
        #: overtook it on another connection of the pool would be undone by it).
        self.leaving: dict[str, asyncio.Task[None]] = {}
        self.task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        try:
            self.channel.set_result(await self.layer.new_channel())
            await _receive(self.layer, self.channel.result(), "the process's channel", self._dispatch)
        finally:
            if not self.task.get_loop().is_closed():  # (closed: nothing can run there; see follow)
                if not self.channel.done():
                    self.channel.cancel()
                for membership in self.groups.values():
                    if membership.task is not None:
                        membership.task.cancel()

    def _dispatch(self, message: dict[str, Any]) -> None:
        membership = self.groups.get(message.get("group", ""))
        if membership is None:  # its listeners have left (it came late): dropped, not kept
            return
        for handler in list(membership.handlers):
            try:
                handler(message)
            except Exception:
                logger.exception("A listener of %s failed on %r", message.get("group"), message.get("type"))

    def _joined_channel(self) -> str | None:
        channel = self.channel
        if not channel.done() or channel.cancelled() or channel.exception() is not None:
            return None
        return channel.result()

    async def keep(self, group: str, membership: _Membership, after: asyncio.Task[None] | None) -> None:
        """Keep the channel in ``group`` (:func:`_stay_in`) until cancelled, once ``after`` (a leave) is done."""
        try:
            if after is not None:
                await asyncio.wait({after})
            await asyncio.wait({self.channel})
            channel = self._joined_channel()
            if channel is not None:
                await _stay_in(self.layer, group, channel, tried=membership.tried)
        finally:
            membership.tried.set()  # whoever waits for the join goes on, whatever happened to it

    def leave(self, group: str, membership: _Membership) -> asyncio.Task[None]:
        """Take the channel out of ``group`` (its last listener left); the task doing it."""
        assert membership.task is not None
        membership.task.cancel()
        leaving = asyncio.ensure_future(self._discard(group, membership.task, membership.after))
        self.leaving[group] = leaving
        leaving.add_done_callback(lambda done: self.leaving.pop(group) if self.leaving.get(group) is done else None)
        return leaving

    async def _discard(self, group: str, keeping: asyncio.Task[None], after: asyncio.Task[None] | None) -> None:
        # An add still in flight is over before the discard goes out, and so is the leave this
        # membership's join waited for: a join cancelled while it waited ends its keep at once,
        # and this discard must not overtake that older one (a newer join waits for this one only).
        await asyncio.wait({keeping} if after is None else {keeping, after})
        channel = self._joined_channel()
        if channel is not None:
            with contextlib.suppress(Exception):
                await self.layer.group_discard(group, channel)


#: Per event loop: its process channel (:func:`subscribed`).
_process_channels: dict[asyncio.AbstractEventLoop, _ProcessChannel] = {}


def _process_channel(layer: Any) -> _ProcessChannel:
    loop = asyncio.get_running_loop()
    process = _process_channels.get(loop)
    if process is not None and process.layer is layer and not process.task.done():
        return process
    if process is not None:
        process.task.cancel()  # the layer changed (settings in tests): the old channel stops receiving
    for other in [other for other in _process_channels if other.is_closed()]:
        del _process_channels[other]  # loops that ended (async_to_sync, tests)
    process = _process_channels[loop] = _ProcessChannel(layer)
    return process


#: Per event loop: set when the layer failed under this process (then replaced), so every channel adds itself again.
_lost: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Event] = weakref.WeakKeyDictionary()


def _lost_event() -> asyncio.Event:
    loop = asyncio.get_running_loop()
    event = _lost.get(loop)
    if event is None:
        event = _lost[loop] = asyncio.Event()
    return event


def _layer_lost() -> None:
    event = _lost.pop(asyncio.get_running_loop(), None)
    if event is not None:
        event.set()


async def wait_set(event: asyncio.Event, timeout: float) -> bool:
    """Wait until ``event`` is set or ``timeout`` seconds passed; whether it is set.

    A cancel that arrives as the event is set is raised, not lost: on Python 3.11
    ``asyncio.wait_for`` then returns what it waited for and drops the cancel, and a
    caller's loop would go on, cancelled, until its process ends (or hang whoever awaits it).
    """
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), timeout)
    _raise_if_cancelled(None)
    return event.is_set()


def _raise_if_cancelled(exc: BaseException | None) -> None:
    """Raise the cancel a timeout inside the layer turned into its own error.

    On Python 3.11 ``asyncio.timeout`` (redis-py's read timeout) raises ``TimeoutError`` for a
    cancel that arrives as it expires, and the cancel is lost: a listener caught that error and
    received again for good, and its event loop never closed (a test run hung at teardown).
    The task still counts the cancel it was asked for (``Task.cancelling()``).
    """
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError() from exc


def _timed_out(exc: BaseException) -> bool:
    """Whether an idle read timed out (redis-py 8 gives up on a blocking read after its
    ``socket_timeout``, 5 s by default): Redis was there, and nothing it held was lost.

    Not a timeout connecting: a Redis that could not be reached may come back empty.
    A partition that keeps connections open and silent, then heals to a Redis that
    restarted meanwhile, looks like idle reads: the periodic re-add covers it
    (every third of ``group_expiry``, at most :data:`REFRESH_MAX_SECONDS`).
    """
    try:
        from redis.exceptions import TimeoutError as RedisTimeout
    except ImportError:
        return isinstance(exc, TimeoutError) and "connect" not in str(exc).lower()
    return isinstance(exc, (TimeoutError, RedisTimeout)) and "connect" not in str(exc).lower()


#: Per event loop: the layer is failing under this process (logged once per outage, not per channel).
_failing: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, bool] = weakref.WeakKeyDictionary()


def _layer_failed(what: str, exc: BaseException, pause: float) -> None:
    """Log a failure of the layer: a warning at the first of an outage in this process, then
    debug lines (a process with a thousand open streams would log a thousand a second)."""
    loop = asyncio.get_running_loop()
    if _failing.get(loop):
        logger.debug("The channel layer still fails (%s: %s); again within %.1f s", what, exc, pause)
        return
    _failing[loop] = True
    logger.warning("The channel layer fails (%s: %s); every listener of this process tries again with backoff", what, exc)


def _layer_answers() -> None:
    if _failing.pop(asyncio.get_running_loop(), None):
        logger.info("The channel layer answers again")
