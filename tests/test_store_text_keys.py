"""The store's text keys match exactly: case, accents and trailing spaces count, on every database.

MySQL/MariaDB compare text by the column's collation, and the default one
(``utf8mb4_general_ci``) ignores case, accents and trailing spaces. A step key ``"audit"``
clashed with ``"Audit"`` in the journal's unique index (IntegrityError, an "Internal error"
for the call), a subscription to ``…/Report`` counted as one to ``…/report``, a caller's
``tasks/list`` (``tasks_of``) listed another principal's tasks whose name differed in case,
and a session or stream id found another's. Migration 0009 gives these columns a binary
collation that counts trailing spaces on MySQL/MariaDB; SQLite and PostgreSQL compare them exactly already.
Run with ``DATABASE_URL=mysql://…`` for the MariaDB half.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.utils import timezone

from mcp_tools.engine.journal import Step
from mcp_tools.models import CallStep, McpSession, ResourceSubscription, StreamEvent, ToolCall
from mcp_tools.store import sql, sync_calls, sync_sessions

pytestmark = pytest.mark.django_db(transaction=True)

#: Spellings a case-, accent- or trailing-space-insensitive collation takes for one another.
LOOKALIKES = ("audit", "Audit", "AUDIT", "audít", "audit ")

#: ``(table, column)`` of every text column the store looks a row up by (or keeps unique).
KEY_COLUMNS = sorted({
    (ToolCall._meta.db_table, ToolCall._meta.get_field(name).column)
    for name in ("principal", "session_id", "request_id", "stream_id", "celery_task_id", "worker")
} | {
    (CallStep._meta.db_table, CallStep._meta.get_field("key").column),
    (McpSession._meta.db_table, McpSession._meta.get_field("id").column),
    (McpSession._meta.db_table, McpSession._meta.get_field("principal").column),
    (ResourceSubscription._meta.db_table, ResourceSubscription._meta.get_field("uri").column),
    (ResourceSubscription._meta.db_table, ResourceSubscription._meta.get_field("session").column),
    (StreamEvent._meta.db_table, StreamEvent._meta.get_field("session_id").column),
    (StreamEvent._meta.db_table, StreamEvent._meta.get_field("stream_id").column),
})


def new_call(steps: list[Step] | None = None, **fields: object) -> str:
    return sync_calls.create_call(steps or [], **{
        "method": "tools/call", "tool_name": "deploy", "arguments": {}, "principal": "alice",
        "protocol_version": "2026-07-28", "flavor": "mrtr", "status": "working", **fields})


def once(seq: int, key: str) -> Step:
    return Step(seq=seq, kind="once", key=key, digest="d", response={"key": key}, status="done")


def test_step_keys_that_differ_in_case_accent_or_trailing_space_are_different_steps() -> None:
    call_id = new_call([once(0, LOOKALIKES[0])])
    sql.insert_steps(call_id, sql.call_database(), [once(seq, key) for seq, key in enumerate(LOOKALIKES) if seq], timezone.now())
    loaded = sync_calls.load_call(call_id)
    assert loaded is not None
    assert [(s.key, s.response) for s in loaded[1].steps] == [(key, {"key": key}) for key in LOOKALIKES]


def test_subscriptions_to_uris_that_differ_in_case_are_apart() -> None:
    session = sync_sessions.create_session("2025-11-25", {}, {}, "alice")
    assert sync_sessions.subscribe(session, "file:///Report", 10) == "subscribed"
    assert sync_sessions.subscribe(session, "file:///report", 10) == "subscribed"
    assert sorted(ResourceSubscription.objects.filter(session_id=session).values_list("uri", flat=True)) == [
        "file:///Report", "file:///report"]
    assert sync_sessions.subscribers("file:///REPORT") == []
    assert sync_sessions.subscriptions("file:///report ") == []
    sync_sessions.unsubscribe(session, "file:///report")
    assert sync_sessions.subscribers("file:///Report") == [session]
    assert sync_sessions.subscribers("file:///report") == []


def test_a_callers_tasks_are_its_own_principals_only() -> None:
    mine = new_call(principal="alice", background=True, is_task=True)
    for other in ("Alice", "ALICE", "alice ", "alíce"):
        new_call(principal=other, background=True, is_task=True)
    assert [str(row.id) for row in sync_calls.tasks_of("alice", None, 10)] == [mine]


def test_session_request_and_stream_ids_match_exactly() -> None:
    session = sync_sessions.create_session("2025-11-25", {}, {}, "alice")
    for lookalike in (session.swapcase(), session + " "):
        assert sync_sessions.get_session(lookalike) is None
        assert sync_sessions.touch_session(lookalike) is False
    call_id = new_call(session_id=session, request_id="Req-1", flavor="session", stream_id="Stream-1")
    assert sync_calls.live_session_call(session, "req-1") is None
    assert sync_calls.live_session_call(session.swapcase(), "Req-1") is None
    assert sync_calls.live_session_call(session, "Req-1") == (call_id, 0)
    assert sync_calls.call_for_stream("stream-1") is None and sync_calls.call_for_stream("Stream-1") == call_id
    sync_sessions.append_event(session, "Stream-1", '{"n": 1}')
    assert sync_sessions.events_after("STREAM-1", 0) == [] and len(sync_sessions.events_after("Stream-1", 0)) == 1


@pytest.mark.skipif(connection.vendor != "mysql", reason="the collation of MySQL/MariaDB's text columns")
def test_the_key_columns_have_a_binary_collation_on_mysql() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name, column_name, collation_name FROM information_schema.columns "
            "WHERE table_schema = DATABASE() AND table_name LIKE 'mcp\\_tools\\_%%'")
        collations = {(table, column): collation for table, column, collation in cursor.fetchall()}
    # Binary, and not PAD SPACE (MariaDB's and MySQL 5.7's ``utf8mb4_bin`` ignore trailing spaces).
    exact = {key: collations[key] for key in KEY_COLUMNS if collations[key] in ("utf8mb4_nopad_bin", "utf8mb4_0900_bin")}
    assert exact == {key: collations[key] for key in KEY_COLUMNS}
