"""Races between a 2025-11-25 session's own requests and its ending (the client's DELETE, expiry in
another process, ``mcp_cleanup``'s purge of idle sessions): a session used a moment ago is kept, and a
request of a session that ended meanwhile is refused as the session's, never an internal error.

The two-connection tests need a database that locks rows (SQLite serialises writers)."""
from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, connections, transaction  # noqa: F401 (connection: the skipif conditions)
from django.utils import timezone

from mcp_tools import resource
from mcp_tools.models import McpSession, ResourceSubscription
from mcp_tools.registry import registry
from mcp_tools.store import sessions as session_store
from tests.row_locks import wait_until_another_connection_waits
from tests.test_resources_review import _in_memory_layer, legacy, open_session  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)
locks_rows = pytest.mark.skipif("connection.vendor == 'sqlite'", reason="SQLite serialises writers: nothing can race")


def _idle_session(session_id: str) -> None:
    McpSession.objects.create(id=session_id, protocol_version="2025-11-25", client_info={}, client_capabilities={},
                              principal="anonymous")
    McpSession.objects.filter(id=session_id).update(last_seen_at=timezone.now() - timedelta(hours=2))


class Thread(threading.Thread):
    """Runs ``work`` on a connection of its own; what it returned or raised is kept."""

    def __init__(self, work: Callable[[], Any]) -> None:
        super().__init__(daemon=True)
        self.work, self.outcome, self.error = work, None, None  # type: ignore[var-annotated]

    def run(self) -> None:
        try:
            self.outcome = self.work()
        except BaseException as error:
            self.error = error
        finally:
            connections.close_all()


def _in_a_transaction_held_until(release: threading.Event, done: threading.Event, work: Callable[[], Any]) -> Any:
    with transaction.atomic():
        outcome = work()
        done.set()
        assert release.wait(20), "never released"
    return outcome


def _while_another_request_holds_the_row(first: Callable[[], Any], second: Callable[[], Any]) -> tuple[Thread, Thread]:
    """``first`` in a transaction that stays open until ``second`` (begun after ``first`` wrote) waits for it."""
    release, wrote = threading.Event(), threading.Event()
    holder = Thread(lambda: _in_a_transaction_held_until(release, wrote, first))
    holder.start()
    assert wrote.wait(20)
    waiter = Thread(second)
    waiter.start()
    try:
        wait_until_another_connection_waits("mcp_tools_")
    finally:
        release.set()
        holder.join(30)
        waiter.join(30)
    assert holder.error is None and waiter.error is None, (holder.error, waiter.error)
    return holder, waiter


@locks_rows
def test_the_idle_purge_keeps_a_session_a_request_uses_meanwhile() -> None:
    _idle_session("used")
    touch, purge = _while_another_request_holds_the_row(
        lambda: session_store.touch_session("used"), lambda: session_store.purge_idle_sessions(3600)
    )
    assert (touch.outcome, purge.outcome) == (True, 0)
    assert McpSession.objects.filter(id="used").exists()


@locks_rows
def test_an_expiry_keeps_a_session_another_process_used_meanwhile() -> None:
    """The expiry a request's session lookup finds (``SESSION_IDLE_SECONDS``) ends the session only if
    nobody used it since the row was read."""
    _idle_session("used")
    cutoff = timezone.now() - timedelta(hours=1)
    touch, expiry = _while_another_request_holds_the_row(
        lambda: session_store.touch_session("used"), lambda: session_store.delete_session("used", unused_since=cutoff)
    )
    assert (touch.outcome, expiry.outcome) == (True, False)
    assert McpSession.objects.filter(id="used").exists()
    assert session_store.delete_session("used", unused_since=timezone.now() + timedelta(seconds=1)) is True


@locks_rows
def test_a_subscribe_waiting_for_the_sessions_delete_finds_it_gone() -> None:
    _idle_session("ending")
    _, subscribe = _while_another_request_holds_the_row(
        lambda: session_store.delete_session("ending"), lambda: session_store.subscribe("ending", "demo://x", 10)
    )
    assert subscribe.outcome == "session_gone"
    assert not ResourceSubscription.objects.filter(session_id="ending").exists()


@locks_rows
def test_the_idle_purge_waits_for_a_subscribe_of_the_session_and_deletes_both(monkeypatch: pytest.MonkeyPatch) -> None:
    """A subscribe holding the session's row (its subscription inserted, not committed) and the purge of
    that idle session: the purge deletes the session and the subscription, without a foreign key error."""
    _idle_session("idle")
    inserted, release = threading.Event(), threading.Event()
    real_create = ResourceSubscription.objects.create

    def create_and_hold(**fields: Any) -> Any:
        row = real_create(**fields)
        inserted.set()
        assert release.wait(20), "never released"
        return row

    monkeypatch.setattr(ResourceSubscription.objects, "create", create_and_hold)
    subscribe = Thread(lambda: session_store.subscribe("idle", "demo://x", 10))
    subscribe.start()
    assert inserted.wait(20)
    purge = Thread(lambda: session_store.purge_idle_sessions(3600))
    purge.start()
    try:
        wait_until_another_connection_waits("mcp_tools_")
    finally:
        release.set()
        subscribe.join(30)
        purge.join(30)
    assert (subscribe.error, purge.error) == (None, None)
    assert (subscribe.outcome, purge.outcome) == ("subscribed", 1)
    assert not McpSession.objects.filter(id="idle").exists()
    assert not ResourceSubscription.objects.filter(session_id="idle").exists()


async def test_subscribe_of_a_session_another_process_deleted_is_refused_as_the_sessions(settings: Any) -> None:
    """The session is still in this process's cache (SESSION_CACHE_SECONDS) when another process deletes
    its row and the cache-drop broadcast does not arrive (the in-memory layer): resources/subscribe
    answered -32603 Internal error (a foreign key error) and logged a traceback."""
    settings.MCP_TOOLS = {**settings.MCP_TOOLS, "SESSION_CACHE_SECONDS": 30}
    resource("race-subscribe://x")(lambda: "x")
    try:
        session = await open_session()
        assert "result" in await legacy(session, "resources/list", {})  # cached in this process now
        await McpSession.objects.filter(id=session).adelete()
        answer = await legacy(session, "resources/subscribe", {"uri": "race-subscribe://x"})
        assert answer["error"] == {"code": -32600, "message": "Session not found"}, answer
        assert not await ResourceSubscription.objects.filter(session_id=session).aexists()
    finally:
        registry.unregister_resource("race-subscribe://x")
