"""The event loop's SQLite lane (``mcp_tools/store/lane.py``).

A durable round's own statements run on the event loop's thread, on a connection of the
lane's, where the database is a SQLite file in WAL mode and nothing watches Django's
cursors; otherwise, and whenever the database is locked, in the store's thread. These
tests check which one ran each store function (every job the store's thread runs goes
through ``hop._job``), that a locked database neither blocks the loop nor loses the
write, and that the lane leaves checkpoints to a thread of their own, where they hold up no round.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings as django_settings
from django.db import connection, connections
from django.db.backends.signals import connection_created
from django.db.models.signals import post_save, pre_init
from django.test import override_settings

from mcp_tools import ToolContext, store
from mcp_tools.models import ToolCall
from mcp_tools.registry import make_tool, registry
from mcp_tools.store import hop, lane as lane_module
from mcp_tools.testing import McpTestClient

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif("connection.vendor != 'sqlite'", reason="the lane is SQLite's"),
]


@pytest.fixture
def store_thread_jobs(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The names of the functions the store's thread runs, in order."""
    ran: list[str] = []
    real_job = hop._job

    def recording_job(fn: Any, args: Any, kwargs: Any) -> Any:
        ran.append(getattr(fn, "__name__", repr(fn)))
        return real_job(fn, args, kwargs)

    monkeypatch.setattr(hop, "_job", recording_job)
    yield ran


@pytest.fixture(autouse=True)
def _fresh_lanes() -> Iterator[None]:
    lane_module.close_lanes()
    yield
    lane_module.close_lanes()


async def confirm_then_echo(ctx: ToolContext, text: str) -> str:
    """Echo the text once the user says so."""
    answer = await ctx.elicit("Send it back?", schema={"type": "object", "properties": {"ok": {"type": "boolean"}}}, key="ok")
    return text if answer.get("ok") else "no"


def accept(key: str, request: dict[str, Any]) -> dict[str, Any]:
    return {"action": "accept", "content": {"ok": True}}


LANE_FUNCTIONS = {"load_call", "create_call", "save_round", "commit_round", "advance", "call_status", "record_progress"}


def new_call_fields() -> dict[str, Any]:
    return {"method": "tools/call", "tool_name": "deploy", "arguments": {}, "principal": "anon",
            "protocol_version": "2026-07-28", "flavor": "mrtr", "status": "working"}


async def test_both_rounds_of_an_eliciting_call_run_in_the_lane(store_thread_jobs: list[str]) -> None:
    with registry.registered_temporarily(make_tool(confirm_then_echo)):
        result = await McpTestClient(answer=accept).call_tool("confirm_then_echo", {"text": "hi"})
    assert result["content"] == [{"type": "text", "text": "hi"}]
    assert not LANE_FUNCTIONS & set(store_thread_jobs), store_thread_jobs
    assert "_open" in store_thread_jobs  # the lane's connection was made in the store's thread, once
    row = await sync_to_async(ToolCall.objects.get)(tool_name="confirm_then_echo")
    assert (row.status, row.round, row.result["content"][0]["text"]) == ("completed", 1, "hi")


async def test_the_lanes_connection_waits_for_nothing_and_never_checkpoints() -> None:
    call_id = await store.create_call([], **new_call_fields())
    assert await store.call_status(call_id) is not None
    (lane,) = [found for found in lane_module._lanes.values() if found is not None]
    assert lane.raw.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
    assert lane.raw.execute("PRAGMA busy_timeout").fetchone()[0] == 0
    assert lane.raw.execute("PRAGMA foreign_keys").fetchone()[0] == 1  # made as Django makes its own
    assert lane.checkpoint_bytes > 0  # the database's own checkpoint size, which the lane keeps for it


@pytest.mark.parametrize("limit", ["the project's", "none"])
async def test_the_lanes_restarted_log_is_trimmed_to_a_bound(limit: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The lane's checkpoints restart the log in place, which never shrinks the file: without a
    ``journal_size_limit`` (SQLite's default, -1) the WAL kept the largest size it ever reached.
    The lane's connection, which makes most commits (and so most restarts), bounds it then."""
    options = dict(connection.settings_dict.get("OPTIONS", {}))
    if limit == "none":
        options["init_command"] = options["init_command"].replace("PRAGMA journal_size_limit=67108864;", "")
        monkeypatch.setitem(connections.settings[connection.alias], "OPTIONS", options)
    try:
        await store.create_call([], **new_call_fields())
        (lane,) = [found for found in lane_module._lanes.values() if found is not None]
        bound = lane.raw.execute("PRAGMA journal_size_limit").fetchone()[0]
    finally:
        await store.close_connections()  # the store thread's connection had the changed settings
    assert bound == (67108864 if limit != "none" else 2 * lane.checkpoint_bytes) and lane.checkpoint_bytes > 0


async def test_a_locked_database_sends_the_write_to_the_store_thread_without_blocking_the_loop(
    store_thread_jobs: list[str],
) -> None:
    call_id = await store.create_call([], **new_call_fields())
    assert "create_call" not in store_thread_jobs  # the lane is open and took it
    other = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")  # another writer holds the lock
    released = threading.Event()

    def release() -> None:
        other.execute("COMMIT")
        released.set()

    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while not released.is_set():
            ticks += 1
            await asyncio.sleep(0.01)

    ticker = asyncio.ensure_future(tick())
    threading.Timer(0.3, release).start()
    try:
        moved = await store.record_progress(call_id, 1, 2, "half way")
    finally:
        released.wait(5)
        other.close()
        await ticker
    assert moved is True
    assert "record_progress" in store_thread_jobs  # it waited for the lock in the store's thread
    assert ticks >= 10  # ... while the loop went on (a blocked loop would not have ticked)
    row = await sync_to_async(ToolCall.objects.get)(id=call_id)
    assert (row.progress, row.progress_total, row.status_message) == (1, 2, "half way")


async def test_a_commit_round_that_loses_its_compare_and_set_in_the_lane_writes_nothing(store_thread_jobs: list[str]) -> None:
    call_id = await store.create_call([], **new_call_fields())
    assert await store.commit_round(call_id, 0, {}, "digest", [], status="completed") is False  # not input_required
    row = await sync_to_async(ToolCall.objects.get)(id=call_id)
    assert (row.status, row.round, row.last_answers_digest) == ("working", 0, "")
    assert "commit_round" not in store_thread_jobs


def checkpoints_of(lane: Any) -> list[str]:
    """The threads this lane's checkpoints ran in, from now on."""
    ran: list[str] = []
    real = lane.checkpoint

    def counted() -> None:
        ran.append(threading.current_thread().name)
        real()

    lane.checkpoint = counted
    return ran


def log_frames(lane: Any) -> int:
    """The frames of the WAL's current log: from the file's start, those whose header repeats the
    two salts of the file's header (a checkpoint restarts the log in place; the file keeps its size)."""
    with open(lane.wal_path, "rb") as wal:
        data = wal.read()
    if len(data) < lane_module.WAL_HEADER:
        return 0
    frame = lane_module.FRAME_HEADER + int.from_bytes(data[8:12], "big")
    count = 0
    while lane_module.WAL_HEADER + (count + 1) * frame <= len(data):
        at = lane_module.WAL_HEADER + count * frame
        if data[at + 8:at + 16] != data[16:24]:
            break
        count += 1
    return count


async def settle_checkpoint() -> None:
    """Let an asked-for checkpoint run to its end: the checkpoint thread runs its jobs in order."""
    await asyncio.wrap_future(lane_module._checkpoint_thread().submit(lambda: None))


async def test_past_the_databases_checkpoint_size_the_checkpoint_thread_checkpoints_and_restarts_the_log(
    store_thread_jobs: list[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(lane_module, "CHECKPOINT_EVERY", 2)
    call_id = await store.create_call([], **new_call_fields())
    (lane,) = [found for found in lane_module._lanes.values() if found is not None]
    checkpoints = checkpoints_of(lane)
    lane.checkpoint_bytes = 1  # any WAL is past it
    assert await store.record_progress(call_id, 1, 4, "")  # the second commit: the log's length is looked at
    await settle_checkpoint()
    assert [name.partition("_")[0] for name in checkpoints] == ["mcp-tools-checkpoint"]
    logged, size = log_frames(lane), os.stat(lane.wal_path).st_size
    assert await store.record_progress(call_id, 2, 4, "")
    # Restarted: the next commit wrote the log from the file's start again, over the old frames,
    # and the file kept its size (growing it anew costs every frame more than writing over it).
    assert 0 < log_frames(lane) < logged
    assert os.stat(lane.wal_path).st_size == size
    assert "record_progress" not in store_thread_jobs  # in the lane before and after


async def test_rounds_go_on_in_the_lane_while_a_checkpoint_runs(
    store_thread_jobs: list[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Before, the checkpoint ran in the store's thread on the lane's own connection: every lane
    # function meanwhile went to the store's thread and waited there (65 ms stalls of every
    # durable round, once per checkpoint, in bench/engine.py).
    monkeypatch.setattr(lane_module, "CHECKPOINT_EVERY", 1)
    call_id = await store.create_call([], **new_call_fields())
    (lane,) = [found for found in lane_module._lanes.values() if found is not None]
    started, go_on = threading.Event(), threading.Event()
    connect = sqlite3.connect

    def held_inside_the_checkpoint(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        opened = connect(*args, **kwargs)
        if threading.current_thread().name.startswith("mcp-tools-checkpoint"):
            def hold() -> int:  # SQLite calls it while the checkpoint's statement runs
                started.set()
                go_on.wait(10)
                return 0
            opened.set_progress_handler(hold, 1)
        return opened

    monkeypatch.setattr(sqlite3, "connect", held_inside_the_checkpoint)
    lane.checkpoint_bytes = 1
    assert await store.record_progress(call_id, 1, None, "")  # asks for the checkpoint
    assert await asyncio.to_thread(started.wait, 10)
    try:
        for n in range(2, 6):  # while it runs: in the lane, without waiting for it
            assert await asyncio.wait_for(store.record_progress(call_id, n, None, ""), 5)
        assert "record_progress" not in store_thread_jobs
    finally:
        go_on.set()
    await settle_checkpoint()
    logged = log_frames(lane)
    assert await store.record_progress(call_id, 6, None, "")
    assert log_frames(lane) < logged  # the log was copied back: the next commit restarted it
    row = await sync_to_async(ToolCall.objects.get)(id=call_id)
    assert row.progress == 6


async def test_a_checkpointed_log_is_not_checkpointed_again_until_it_has_grown_past_the_size(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # SQLite restarts a checkpointed log in place and keeps the file's size: judged by the file,
    # a lane whose checkpoint left it so would ask for one every CHECKPOINT_EVERY commits.
    monkeypatch.setattr(lane_module, "CHECKPOINT_EVERY", 2)
    call_id = await store.create_call([], **new_call_fields())
    (lane,) = [found for found in lane_module._lanes.values() if found is not None]
    checkpoints = checkpoints_of(lane)
    lane.checkpoint_bytes = 1 << 40
    big = "x" * 3000
    for n in range(200):
        await store.record_progress(call_id, n, None, big + str(n))
    lane.checkpoint_bytes = 256 * 1024
    for n in range(2):
        await store.record_progress(call_id, n, None, "")
    await settle_checkpoint()
    assert len(checkpoints) == 1
    for n in range(6):  # a few pages: far from 256 KB of log
        await store.record_progress(call_id, n, None, "")
        await settle_checkpoint()
    assert len(checkpoints) == 1
    for n in range(200):  # the restarted log grows past the size again (more than once), over the old frames
        await store.record_progress(call_id, 1000 + n, None, big + str(n))
    await settle_checkpoint()
    assert len(checkpoints) >= 2


async def test_an_awaited_lane_call_lets_other_tasks_run_and_a_cancel_reach_its_caller() -> None:
    call_id = await store.create_call([], **new_call_fields())
    reported = 0
    ticks = 0

    async def handler() -> None:  # progress reports between pieces of work, as tools write them
        nonlocal reported
        for n in range(300):
            await store.record_progress(call_id, n, 300, "")
            reported += 1

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    other = asyncio.ensure_future(ticker())
    task = asyncio.ensure_future(handler())
    asyncio.get_running_loop().call_soon(task.cancel)  # a notifications/cancelled handled meanwhile
    with pytest.raises(asyncio.CancelledError):
        await task
    other.cancel()
    assert reported < 300 and ticks > 0


async def test_a_pre_init_receiver_runs_in_the_store_thread_not_on_the_loop(store_thread_jobs: list[str]) -> None:
    call_id = await store.create_call([], **new_call_fields())
    seen: list[tuple[str, Any]] = []

    def receiver(sender: Any, **kwargs: Any) -> None:
        try:
            ToolCall.objects.count()  # the ORM, as any receiver may
            seen.append((threading.current_thread().name, None))
        except Exception as exc:  # noqa: BLE001 - whatever it is, the test shows it
            seen.append((threading.current_thread().name, exc))

    pre_init.connect(receiver, sender=ToolCall)
    try:
        loaded = await store.load_call(call_id)
    finally:
        pre_init.disconnect(receiver, sender=ToolCall)
    assert loaded is not None
    assert seen == [("mcp-tools-store", None)]
    assert "load_call" in store_thread_jobs


async def test_an_error_opening_the_lane_sends_the_work_to_the_store_thread_and_is_tried_again_later(
    store_thread_jobs: list[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_open = lane_module._open_in_store_thread

    async def failing_open(alias: str) -> Any:
        raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(lane_module, "_open_in_store_thread", failing_open)
    call_id = await store.create_call([], **new_call_fields())
    assert "create_call" in store_thread_jobs and not any(lane_module._lanes.values())
    monkeypatch.setattr(lane_module, "_open_in_store_thread", real_open)
    monkeypatch.setattr(lane_module, "_retry_at", {})  # the retry delay has passed
    assert await store.record_progress(call_id, 1, None, "")
    assert "record_progress" not in store_thread_jobs


@pytest.mark.parametrize("why", ["deferred transactions", "connection_created receiver"])
async def test_no_lane_where_djangos_connections_could_differ_from_it(
    why: str, monkeypatch: pytest.MonkeyPatch, store_thread_jobs: list[str],
) -> None:
    def receiver(sender: Any, connection: Any, **kwargs: Any) -> None:
        pass

    if why == "deferred transactions":
        options = {**connection.settings_dict.get("OPTIONS", {}), "transaction_mode": "DEFERRED"}
        monkeypatch.setitem(connections.settings[connection.alias], "OPTIONS", options)
    else:
        connection_created.connect(receiver)
    try:
        await store.create_call([], **new_call_fields())
    finally:
        connection_created.disconnect(receiver)
        await store.close_connections()  # the store thread's connection had the changed settings
    assert "create_call" in store_thread_jobs
    assert not any(lane_module._lanes.values())


@pytest.mark.parametrize("how", ["setting", "conn_max_age_0", "query_logging", "save_listener"])
async def test_without_a_lane_the_store_thread_runs_everything(
    how: str, settings: Any, store_thread_jobs: list[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    heard: list[Any] = []

    def listener(sender: Any, instance: Any, **kwargs: Any) -> None:
        heard.append(instance.pk)

    if how == "setting":
        settings.MCP_TOOLS = {**settings.MCP_TOOLS, "STORE_SQLITE_LANE": False}
    elif how == "conn_max_age_0":
        monkeypatch.setitem(connections.settings[connection.alias], "CONN_MAX_AGE", 0)  # what every wrapper reads
    elif how == "query_logging":
        settings.DEBUG = True
    else:
        post_save.connect(listener, sender=ToolCall)
    try:
        call_id = await store.create_call([], **new_call_fields())
        assert await store.record_progress(call_id, 1, None, "")
        loaded = await store.load_call(call_id)
    finally:
        post_save.disconnect(listener, sender=ToolCall)
        await store.close_connections()  # the store thread's connection had the changed settings
    assert loaded is not None and loaded[0].progress == 1
    assert {"create_call", "record_progress", "load_call"} <= set(store_thread_jobs)
    if how == "save_listener":
        assert [str(pk) for pk in heard] == [call_id]  # the save went through Model.save, in the store's thread


async def test_event_loops_in_two_threads_share_the_processs_lane(store_thread_jobs: list[str]) -> None:
    call_id = await store.create_call([], **new_call_fields())
    in_other_thread: list[Any] = []

    def other_loop() -> None:
        in_other_thread.append(asyncio.run(store.record_progress(call_id, 3, None, "from another loop")))

    thread = threading.Thread(target=other_loop)
    thread.start()
    await asyncio.to_thread(thread.join, 10)
    assert in_other_thread == [True]
    assert [found for found in lane_module._lanes.values() if found is not None].__len__() == 1
    assert store_thread_jobs.count("_open") == 1 and "record_progress" not in store_thread_jobs
    loaded = await store.load_call(call_id)
    assert loaded is not None and (loaded[0].progress, loaded[0].status_message) == (3, "from another loop")


async def test_a_lane_past_conn_max_age_is_replaced_by_a_new_connection() -> None:
    call_id = await store.create_call([], **new_call_fields())
    (old,) = [found for found in lane_module._lanes.values() if found is not None]
    old.close_at = 0.0  # its CONN_MAX_AGE has passed
    assert await store.record_progress(call_id, 1, None, "")
    (new,) = [found for found in lane_module._lanes.values() if found is not None]
    assert new is not old and old.closed and not new.closed
    with pytest.raises(sqlite3.ProgrammingError):  # the old connection is closed, not leaked
        old.raw.execute("SELECT 1")


async def add_later(ctx: ToolContext, a: int, b: int) -> int:
    """Add, as an async effect journaled once."""

    async def add(x: int, y: int) -> int:
        return x + y

    return await ctx.once("sum", add, a, b)


async def test_an_async_once_is_checked_and_journaled_in_the_lane(store_thread_jobs: list[str]) -> None:
    with registry.registered_temporarily(make_tool(add_later)), override_settings(
        MCP_TOOLS={**django_settings.MCP_TOOLS, "SLOW_CALL_SECONDS": 0}  # the call gets its row at its first wait
    ):
        result = await McpTestClient().call_tool("add_later", {"a": 2, "b": 3})
    assert result["structuredContent"] == {"result": 5}
    assert not {"check_once", "record_once", "create_call"} & set(store_thread_jobs), store_thread_jobs
    row = await sync_to_async(ToolCall.objects.get)(tool_name="add_later")
    steps = await sync_to_async(list)(row.steps.values_list("kind", "key", "response"))
    assert ("once", "sum", 5) in steps


async def test_a_losing_async_once_entry_in_the_lane_returns_the_winners_value(store_thread_jobs: list[str]) -> None:
    from mcp_tools.engine.journal import Step

    call_id = await store.create_call([], **new_call_fields())
    step = Step(seq=0, kind="once", key="mail", digest="d")
    assert await sync_to_async(store.sync_calls.record_once, thread_sensitive=False)(call_id, step, "first") == (True, "first")
    assert await store.record_once(call_id, step, "second") == (False, "first")
    assert not {"record_once", "check_once"} & set(store_thread_jobs)
    assert await store.check_once(call_id, step) == (True, "first")


class Order:
    """As a model instance whose ``__str__`` follows a foreign key: the ORM."""

    def __str__(self) -> str:
        return f"order of {ToolCall.objects.count()} calls"


class ShippingFailed(Exception):
    def __str__(self) -> str:
        return f"shipping failed ({ToolCall.objects.count()} calls)"


async def test_journaling_a_value_or_failure_whose_str_uses_the_orm_runs_in_the_store_thread(
    store_thread_jobs: list[str],
) -> None:
    from mcp_tools.engine.journal import Step

    call_id = await store.create_call([], **new_call_fields())
    assert await store.record_once(call_id, Step(seq=0, kind="once", key="order", digest="d"), Order()) == (
        True, "order of 1 calls")
    failed = Step(seq=1, kind="once", key="ship", digest="d")
    await store.record_failed_once(call_id, failed, ShippingFailed())
    assert failed.persisted and failed.error["message"] == "shipping failed (1 calls)"
    assert store_thread_jobs.count("record_once") == 1  # the lane sent it on: str() is the caller's code


async def test_a_failed_once_is_journaled_under_its_key_when_the_database_is_locked() -> None:
    from mcp_tools.engine.journal import Step, failed_once_key

    call_id = await store.create_call([], **new_call_fields())
    other = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")  # another writer: a sync once in the store's thread, another process
    release = threading.Timer(0.2, lambda: other.execute("COMMIT"))
    release.start()
    try:
        await store.record_failed_once(call_id, Step(seq=0, kind="once", key="mail", digest="d"), RuntimeError("smtp down"))
    finally:
        release.join()
        other.close()
    row = await sync_to_async(ToolCall.objects.get)(id=call_id)
    assert await sync_to_async(list)(row.steps.values_list("key", flat=True)) == [failed_once_key("mail", 0)]


async def test_a_checkpoint_asked_for_by_a_loop_that_closes_still_runs_and_leaves_nothing_behind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(lane_module, "CHECKPOINT_EVERY", 1)
    call_id = await store.create_call([], **new_call_fields())
    (lane,) = [found for found in lane_module._lanes.values() if found is not None]
    lane.checkpoint_bytes = 1

    def in_a_loop_that_closes() -> None:
        loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(store.record_progress(call_id, 1, None, ""))  # asks for a checkpoint
        finally:
            loop.close()

    await asyncio.to_thread(in_a_loop_that_closes)
    await settle_checkpoint()
    assert lane.checkpointing is False
    logged = log_frames(lane)
    await store.record_progress(call_id, 2, None, "")
    assert log_frames(lane) < logged  # the log was copied back: the next commit restarted it


async def test_a_checkpoint_that_readers_keep_from_finishing_is_not_asked_for_again_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(lane_module, "CHECKPOINT_EVERY", 1)
    call_id = await store.create_call([], **new_call_fields())
    (lane,) = [found for found in lane_module._lanes.values() if found is not None]
    checkpoints = checkpoints_of(lane)
    lane.checkpoint_bytes = 1
    reader = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None, check_same_thread=False)
    try:
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM mcp_tools_toolcall").fetchone()  # a read snapshot held open
        await store.record_progress(call_id, 1, None, "")
        await settle_checkpoint()
        logged = log_frames(lane)
        assert len(checkpoints) == 1 and logged > 0
        for n in range(lane_module.CHECKPOINT_BACKOFF - 1):
            await store.record_progress(call_id, n, None, "")
            await settle_checkpoint()
        assert len(checkpoints) == 1  # backed off
        assert log_frames(lane) > logged  # could not restart the log: it went on growing
    finally:
        reader.close()
    await store.record_progress(call_id, 9, None, "")  # the backoff is over: looked at again
    await settle_checkpoint()
    assert len(checkpoints) == 2
    logged = log_frames(lane)
    await store.record_progress(call_id, 10, None, "")
    assert log_frames(lane) < logged  # copied back this time: the next commit restarted the log


async def test_a_write_stopped_while_the_lane_opens_hands_the_opening_to_nobody(monkeypatch: pytest.MonkeyPatch) -> None:
    """core.written hands a write's value to its caller when the write's run is stopped while the write runs
    in the store's thread; the lane's own opening (first use, or past CONN_MAX_AGE) is no write of the
    caller's: a stop then hands over the write's value or nothing (it handed over the lane, taken for the call's id or a won round)."""
    from mcp_tools.server import core

    opening = asyncio.Event()
    loop = asyncio.get_running_loop()
    real_open = lane_module._open

    def slow_open(alias: str) -> Any:
        loop.call_soon_threadsafe(opening.set)
        time.sleep(0.3)
        return real_open(alias)

    monkeypatch.setattr(lane_module, "_open_in_store_thread", hop.db(slow_open))
    handed: list[Any] = []
    write = asyncio.ensure_future(core.written(store.create_call([], **new_call_fields()), handed.append))
    await asyncio.wait_for(opening.wait(), 5)
    write.cancel()
    with pytest.raises(asyncio.CancelledError):
        await write
    rows = [str(pk) for pk in await sync_to_async(lambda: list(ToolCall.objects.values_list("pk", flat=True)))()]
    assert handed == rows, (handed, rows)  # the call's id if its row was written, else nothing
