"""A running round keeps showing it is alive while a sync ``ctx.once`` effect runs.

A round's owner touches its row every ``CANCEL_POLL_SECONDS`` (``store.touch_live``), and a
Celery worker renews its lease (``store.renew_lease``); a round whose row goes untouched for
three intervals, a call whose lease ran out, is taken over elsewhere and run again
(docs/durable-calls.md). A sync ``ctx.once`` effect runs in the store's thread, inside the
transaction that journals it, for as long as it takes: these writes must not wait behind it,
or a slow effect makes its living owner look dead and another process runs the effect again.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connection  # noqa: F401 - the skip conditions' name
from django.utils import timezone

from mcp_tools import store
from mcp_tools.engine.journal import Step
from mcp_tools.models import ToolCall
from mcp_tools.store import sync_calls
from tests.clients import ModernClient, http_client
from tests.conftest import LiveServer

CAPS = {"elicitation": {"form": {}}}

needs_concurrent_writers = pytest.mark.skipif(
    "connection.vendor == 'sqlite'",
    reason="SQLite lets one connection write at a time: a touch waits for the effect's write lock there, "
           "and so does any takeover (it writes the row too)")


def _new_call(**fields: Any) -> str:
    return sync_calls.create_call([], method="tools/call", tool_name="deploy", arguments={}, principal="anon",
                                  protocol_version="2026-07-28", flavor="mrtr", status="working", **fields)


async def _while_an_effect_runs(call_id: str, write: Any) -> tuple[Any, bool]:
    """Run a sync ``ctx.once`` effect in the store's thread and, once it has started, ``await write()``;
    ``(what write answered, whether the effect was still running when it answered)``."""
    started, release = threading.Event(), threading.Event()

    def effect() -> str:
        started.set()
        release.wait(10)  # never hangs the test: without a fix the write below waits for this
        return "done"

    once = asyncio.ensure_future(store.run_once(call_id, Step(seq=0, kind="once", key="effect", digest="d"), effect, (), {}))
    try:
        assert await asyncio.get_running_loop().run_in_executor(None, started.wait, 30), "the effect never started"
        answer = await write()
        still_running = not release.is_set() and not once.done()
    finally:
        release.set()
        assert await once == (True, "done")
    return answer, still_running


@needs_concurrent_writers
@pytest.mark.django_db(transaction=True)
async def test_the_owner_touches_its_row_while_a_sync_once_effect_runs() -> None:
    call_id = await sync_to_async(_new_call)()
    long_ago = timezone.now() - timedelta(hours=1)
    await sync_to_async(ToolCall.objects.filter(id=call_id).update)(updated_at=long_ago)

    live, still_running = await _while_an_effect_runs(call_id, lambda: store.touch_live(call_id))

    assert live is True
    assert still_running, "the touch waited for the effect: its row looked abandoned meanwhile"
    row = await sync_to_async(ToolCall.objects.get)(id=call_id)
    assert row.updated_at > long_ago


@needs_concurrent_writers
@pytest.mark.django_db(transaction=True)
async def test_a_worker_renews_its_lease_while_a_sync_once_effect_runs() -> None:
    call_id = await sync_to_async(_new_call)(background=True)
    assert await store.claim_for_worker(call_id, "w1", 0.001)
    first_lease = (await sync_to_async(ToolCall.objects.get)(id=call_id)).lease_expires_at

    renewed, still_running = await _while_an_effect_runs(call_id, lambda: store.renew_lease(call_id, "w1", 3600))

    assert renewed is True
    assert still_running, "the renewal waited for the effect: the lease ran out meanwhile"
    row = await sync_to_async(ToolCall.objects.get)(id=call_id)
    assert row.lease_expires_at > first_lease


async def test_a_worker_whose_lease_renewal_fails_tries_again_at_the_next_third(monkeypatch: pytest.MonkeyPatch) -> None:
    """A renewal that raises (the database down, or SQLite locked past its timeout by an effect's
    transaction) does not end the heartbeat: the lease would run out while the worker still runs."""
    from mcp_tools.server import background

    answers: list[Any] = [RuntimeError("database is locked"), False]

    def renew_lease(call_id: str, worker: str, lease: float, ends_with_ttl: bool = False) -> bool:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return bool(answer)

    monkeypatch.setattr(store, "renew_lease_blocking", renew_lease)
    handler = asyncio.ensure_future(asyncio.Event().wait())
    inv = SimpleNamespace(state={})
    keeper = background._LeaseKeeper(inv, "call", "w1", 0.03, handler).start()  # type: ignore[arg-type]
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(handler, 10)
    keeper.stop()
    assert answers == [], "the heartbeat stopped at the failed renewal"
    assert inv.state["lease_lost"] is True  # the second renewal found the call gone: the run stops


# -- live: two server processes on one database -------------------------------------------------


async def _until(predicate: Any, limit: float) -> bool:
    """Wait (polling a file, asserting no duration) until ``predicate()``; False after ``limit`` s."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit
    while not predicate():
        if loop.time() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
async def test_a_slow_sync_effect_is_not_run_again_by_an_identical_retry_on_another_process(
    start_server: type[LiveServer], tmp_path: Path,
) -> None:
    """Only the round's owner runs effects, a round is taken over only when its owner is gone,
    identical retries get the identical answer: process A runs a ``ctx.once`` effect for longer
    than three ``CANCEL_POLL_SECONDS`` while the client retries the same round on process B. A
    keeps touching the row meanwhile, so B waits for A's outcome instead of taking the round over
    (running the effect a second time, and one client told "The call was completed before it
    finished.")."""
    from demo_site.inventory.models import AuditLog

    tag = f"slow-{uuid.uuid4().hex[:8]}"
    env = {"DJANGO_SETTINGS_MODULE": "tests.race_server_settings", "RACE_DIR": str(tmp_path)}
    a, b = (start_server("uvicorn", env=env).start() for _ in range(2))
    effects = tmp_path / f"{tag}.effects"
    async with http_client() as http:
        client = ModernClient(http, a.url, capabilities=CAPS)
        params: dict[str, Any] = {"name": "race_slow_once", "arguments": {"tag": tag}}
        first = await client.request("tools/call", params)
        assert first["resultType"] == "input_required", first
        retry = {**params, "requestState": first["requestState"], "inputResponses": {"go": {"action": "accept", "content": {"go": True}}}}
        on_a = asyncio.ensure_future(client.post("tools/call", retry, url=a.url))
        assert await _until(lambda: _lines(effects) >= 1, 20), "the effect never started on A"
        on_b = asyncio.ensure_future(client.post("tools/call", retry, url=b.url))  # the client retries (a timeout)
        # B would run the effect again by now, were it to take over (a round untouched for 3 s, three
        # CANCEL_POLL_SECONDS of tests/race_server_settings.py, is taken over).
        await _until(lambda: _lines(effects) >= 2, 10)
        (tmp_path / f"{tag}.release").touch()
        (_, answer_a), (_, answer_b) = await asyncio.gather(on_a, on_b)
    assert _lines(effects) == 1, f"the effect ran {_lines(effects)} times"
    assert answer_a["result"] == answer_b["result"], (answer_a, answer_b)
    assert answer_a["result"].get("isError") is not True, answer_a
    assert await sync_to_async(AuditLog.objects.filter(action=tag).count)() == 1

