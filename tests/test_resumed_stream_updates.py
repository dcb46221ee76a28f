"""A resource update published while a 2025-11-25 client reconnects its standalone stream reaches it.

Found by a review of prompts and resources: an update made while the client's GET stream was down (its
1 s reconnect delay, a proxy's idle timeout, a deploy) found no stream to carry it, so it was never
logged, and the ``Last-Event-ID`` resume replayed nothing: the client kept showing stale data. The
subscription now keeps when its resource last changed, and a resumed stream tells of each change
made after the last event its client had (once per URI), beside what its replay carries.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from mcp_tools import notify_resource_updated
from tests.asgi_client import HANDSHAKE, handshake_message, post_headers, post_json
from tests.test_http_spec_edges import APP, Stream, _in_memory_layer, open_session  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)
APP_URI = "inventory://products"
OTHER_URI = "inventory://products/SKU-1"


def updates(stream: Stream) -> list[str]:
    return [data["params"]["uri"] for _, data in stream.events() if data.get("method") == "notifications/resources/updated"]


async def _subscribed() -> dict[str, str]:
    session = await open_session()
    headers = post_headers(version=HANDSHAKE, session=session)
    for uri in (APP_URI, OTHER_URI):
        r = await post_json(APP, handshake_message("resources/subscribe", {"uri": uri}), headers)
        assert r.status == 200 and "result" in r.json(), r.body
    return headers


async def test_an_update_made_while_the_stream_was_down_is_told_on_its_resume() -> None:
    headers = await _subscribed()
    get = {**headers, "accept": "text/event-stream"}
    first = Stream("GET", get)
    await asyncio.sleep(0.3)
    assert await notify_resource_updated(OTHER_URI) == 1
    await first.wait_for(lambda m: m.get("method") == "notifications/resources/updated")
    last_id = [event_id for event_id, _ in first.events()][-1] or ""
    first.gone.set()  # the client's connection drops
    await asyncio.wait_for(first.task, 5)

    assert await notify_resource_updated(APP_URI) == 1  # no stream is open to carry it
    resumed = Stream("GET", {**get, "last-event-id": last_id})
    await resumed.wait_for(lambda m: m.get("method") == "notifications/resources/updated")
    await asyncio.sleep(0.2)
    resumed.gone.set()
    await asyncio.wait_for(resumed.task, 5)
    assert updates(resumed) == [APP_URI], resumed.text()  # told once; the update the client had is not told again


async def test_a_resume_with_nothing_missed_tells_nothing() -> None:
    headers = await _subscribed()
    get = {**headers, "accept": "text/event-stream"}
    first = Stream("GET", get)
    await asyncio.sleep(0.3)
    assert await notify_resource_updated(APP_URI) == 1
    await first.wait_for(lambda m: m.get("method") == "notifications/resources/updated")
    last_id: Any = [event_id for event_id, _ in first.events()][-1]
    first.gone.set()
    await asyncio.wait_for(first.task, 5)
    resumed = Stream("GET", {**get, "last-event-id": last_id})
    await asyncio.sleep(0.5)
    resumed.gone.set()
    await asyncio.wait_for(resumed.task, 5)
    assert updates(resumed) == [], resumed.text()


def test_notifying_from_inside_a_transaction_does_not_wait_for_its_lock() -> None:
    """Found by a diff review: the change was noted on the subscriptions from the store's own connection,
    which on SQLite waited for the write lock of the caller's transaction (a post_save signal handler
    notifying, under the demo's IMMEDIATE transactions): 20 s, then "database is locked", with every
    durable call of the process behind it. The sync variant notes it on the caller's own connection."""
    import time

    from asgiref.sync import async_to_sync
    from django.db import transaction

    from mcp_tools import notify_resource_updated_sync
    from mcp_tools.models import ResourceSubscription
    from mcp_tools.store import sync_sessions

    session = async_to_sync(open_session)()
    sync_sessions.subscribe(session, APP_URI, 10)
    started = time.monotonic()
    with transaction.atomic():
        ResourceSubscription.objects.filter(session_id=session).update(uri=APP_URI)  # a write: on SQLite, the lock is held
        assert notify_resource_updated_sync(APP_URI) == 1
    assert time.monotonic() - started < 5
    assert ResourceSubscription.objects.get(session_id=session).updated_at is not None  # noted, with the caller's change


def test_notifying_inside_a_transaction_unsubscribes_a_lost_reader_without_waiting_for_its_lock() -> None:
    """A second diff review: a subscriber that may no longer read a guarded resource was unsubscribed from
    the store's connection, which waited 20 s for the caller's SQLite write lock ("database is locked")."""
    import time

    from asgiref.sync import async_to_sync
    from django.db import transaction

    from mcp_tools import notify_resource_updated_sync, resource
    from mcp_tools.models import ResourceSubscription
    from mcp_tools.registry import registry
    from mcp_tools.store import sync_sessions

    resource("test://guarded", permissions=["shop.view_order"])(lambda: "secret")
    try:
        session = async_to_sync(open_session)()  # anonymous: may not read it
        sync_sessions.subscribe(session, "test://guarded", 10)
        started = time.monotonic()
        with transaction.atomic():
            ResourceSubscription.objects.filter(session_id=session).update(uri="test://guarded")  # the write lock, on SQLite
            assert notify_resource_updated_sync("test://guarded") == 0
        assert time.monotonic() - started < 5
        assert not ResourceSubscription.objects.filter(session_id=session).exists()  # unsubscribed, with the caller's change
    finally:
        registry.unregister_resource("test://guarded")


@pytest.mark.parametrize("outcome", ["commit", "rollback"])
def test_a_notification_from_inside_a_transaction_goes_out_once_it_commits(monkeypatch: pytest.MonkeyPatch, outcome: str) -> None:
    """Found by a review of resources: told inside the caller's transaction, a client re-read the resource
    before the change was visible (the old value) and was never told again; a rolled-back change was told of
    too. The sessions are told once the change commits, and not if it rolls back."""
    from asgiref.sync import async_to_sync
    from django.db import transaction

    from mcp_tools import notify_resource_updated_sync
    from mcp_tools.interprocess import notifications
    from mcp_tools.store import sync_sessions

    published: list[tuple[str, list[str]]] = []

    async def publish(uri: str, session_ids: list[str]) -> None:
        published.append((uri, list(session_ids)))

    monkeypatch.setattr(notifications, "publish_resource_updated", publish)
    session = async_to_sync(open_session)()
    sync_sessions.subscribe(session, APP_URI, 10)

    class RolledBack(Exception):
        pass

    try:
        with transaction.atomic():
            assert notify_resource_updated_sync(APP_URI) == 1
            assert published == [], "told before the change committed"
            if outcome == "rollback":
                raise RolledBack
    except RolledBack:
        pass
    assert published == ([(APP_URI, [session])] if outcome == "commit" else []), published
    notify_resource_updated_sync(APP_URI)  # outside a transaction: at once
    assert len(published) == (2 if outcome == "commit" else 1)



def test_a_notification_waits_for_the_callers_transaction_on_another_database(monkeypatch: pytest.MonkeyPatch) -> None:
    """With a router keeping the project's data apart from the call tables, the caller's transaction is on another
    alias: the notification went out at once, and after a rollback too (a review of the fix). Simulated: the call
    tables' alias ("calls") has no transaction open, "default" has."""
    import types

    import django.db
    from django.db import transaction

    from mcp_tools.store import sync_calls

    class Connections(dict):  # type: ignore[type-arg]
        pass

    fake = Connections(calls=types.SimpleNamespace(in_atomic_block=False), default=types.SimpleNamespace(in_atomic_block=True))
    pending: list[tuple[Any, Any]] = []
    ran: list[str] = []
    monkeypatch.setattr(sync_calls, "_db", lambda: "calls")
    monkeypatch.setattr(django.db, "connections", fake)
    monkeypatch.setattr(transaction, "on_commit", lambda fn, using=None: pending.append((fn, using)))
    sync_calls.after_caller_commits(lambda: ran.append("told"))
    assert ran == [] and [using for _, using in pending] == ["default"], (ran, pending)
    pending[0][0]()
    assert ran == ["told"]
    fake["default"].in_atomic_block = False
    sync_calls.after_caller_commits(lambda: ran.append("at once"))
    assert ran == ["told", "at once"]
