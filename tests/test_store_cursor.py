"""The store's statements go to the driver's cursor, unless something watches Django's.

``Statements.cursor`` skips Django's cursor wrapper (``mcp_tools/store/sql.py``).
These tests pin what that must not change: the statements and their results, Django's
exception classes, and that query logging, ``execute_wrappers`` and a patched
``CursorWrapper`` (what APM and tracing tools do) still see every statement.
"""

from __future__ import annotations

import functools
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.db import IntegrityError, connection, connections
from django.db.backends.utils import CursorWrapper
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from mcp_tools.engine.journal import Step
from mcp_tools.models import CallStep, ToolCall
from mcp_tools.store import sql, sync_calls

pytestmark = pytest.mark.django_db(transaction=True)  # no transaction of the test's around the store's statements
CALLS, STEPS = connection.ops.quote_name(ToolCall._meta.db_table), connection.ops.quote_name(CallStep._meta.db_table)


def new_call(steps: list[Step] | None = None) -> str:
    return sync_calls.create_call(steps or [], method="tools/call", tool_name="deploy", arguments={"n": 1},
                                  principal="anon", protocol_version="2026-07-28", flavor="mrtr", status="input_required")


def pending_step(seq: int = 0) -> Step:
    return Step(seq=seq, kind="elicitation", key=f"q{seq}", digest="d", request={"message": "Sure?"}, status="pending")


def test_unwatched_statements_use_the_drivers_cursor_and_write_what_the_orm_reads() -> None:
    with sql.statements("default").cursor() as cursor:
        if connection.vendor == "mysql":
            # Django's cursor there: its MySQL CursorWrapper turns some OperationalErrors into IntegrityError.
            assert isinstance(cursor, CursorWrapper)
        else:
            assert not isinstance(cursor, CursorWrapper)
            assert type(cursor).__name__ == ("_QmarkCursor" if connection.vendor == "sqlite" else connection.connection.cursor_factory.__name__)
    call_id = new_call([pending_step()])
    call = ToolCall.objects.get(id=call_id)
    assert (call.tool_name, call.arguments, call.status, call.round) == ("deploy", {"n": 1}, "input_required", 0)
    assert list(CallStep.objects.filter(call_id=call_id).values_list("key", "request", "status")) == [
        ("q0", {"message": "Sure?"}, "pending")]
    loaded = sync_calls.load_call(call_id)
    assert loaded is not None and loaded[1].steps[0].request == {"message": "Sure?"}


def test_a_constraint_violation_is_djangos_integrity_error_and_leaves_the_connection_usable() -> None:
    call_id = new_call([pending_step()])
    with pytest.raises(IntegrityError):
        sql.insert_steps(call_id, "default", [pending_step()], timezone.now())
    assert not connection.in_atomic_block and connection.get_autocommit()
    sql.insert_steps(call_id, "default", [pending_step(1)], timezone.now())
    assert CallStep.objects.filter(call_id=call_id).count() == 2


def test_query_logging_sees_every_statement() -> None:
    with CaptureQueriesContext(connection) as queries:
        call_id = new_call([pending_step()])
        assert sync_calls.call_status(call_id) is not None
    statements = [q["sql"] for q in queries.captured_queries]
    assert any(f"INSERT INTO {CALLS}" in s for s in statements), statements
    assert any(f"INSERT INTO {STEPS}" in s for s in statements), statements
    assert any(f"FROM {CALLS}" in s and s.startswith("SELECT") for s in statements), statements


def test_execute_wrappers_see_every_statement() -> None:
    seen: list[str] = []

    def wrapper(execute: Any, sql_text: str, params: Any, many: bool, context: Any) -> Any:
        seen.append(sql_text)
        return execute(sql_text, params, many, context)

    with connection.execute_wrapper(wrapper):
        new_call([pending_step()])
    if connection.vendor == "sqlite":
        assert [s.split(" (")[0] for s in seen] == [
            "BEGIN IMMEDIATE", 'INSERT INTO "mcp_tools_toolcall"', 'INSERT INTO "mcp_tools_callstep"', "COMMIT"]
    elif connection.vendor == "mysql":  # in Django's atomic(), which toggles autocommit (no statement)
        # (after the SET SESSION of the connection's set-up, when the wrapper saw it connect)
        assert [s.split(" (")[0] for s in seen if not s.startswith("SET ")] == [f"INSERT INTO {CALLS}", f"INSERT INTO {STEPS}"], seen
    else:  # one statement: the call row and its steps in data-modifying CTEs
        assert len(seen) == 1 and seen[0].startswith('WITH c AS (INSERT INTO "mcp_tools_toolcall"'), seen


def test_a_wrapped_cursor_wrapper_sees_every_statement(monkeypatch: pytest.MonkeyPatch) -> None:
    """What Sentry's Django integration does: ``functools.wraps`` keeps Django's name and module."""
    seen: list[str] = []
    original = CursorWrapper.execute

    @functools.wraps(original)
    def traced_execute(self: CursorWrapper, sql_text: str, params: Any = None) -> Any:
        seen.append(sql_text)
        return original(self, sql_text, params)

    monkeypatch.setattr(CursorWrapper, "execute", traced_execute)
    new_call([pending_step()])
    assert any(f"INSERT INTO {CALLS}" in s for s in seen), seen


def test_a_backend_that_makes_its_cursors_its_own_way_gets_every_statement(monkeypatch: pytest.MonkeyPatch) -> None:
    """What django-tenants (``_cursor``: the tenant's search_path) and django-prometheus (``create_cursor``) do."""
    made: list[str] = []
    real = connections["default"]  # ``connection`` is a proxy to it
    backend = type(real)
    original = backend._cursor

    class TenantBackend(backend):  # type: ignore[misc, valid-type]
        def _cursor(self, name: Any = None) -> Any:
            made.append("cursor")
            return original(self, name)

    real.__dict__.pop("mcp_tools_statements", None)  # judged per connection: judge this one again
    monkeypatch.setattr(real, "__class__", TenantBackend)
    try:
        new_call([pending_step()])
    finally:
        monkeypatch.undo()
        real.__dict__.pop("mcp_tools_statements", None)
    assert made, "the backend's own _cursor made the store's cursors"


def test_the_setting_keeps_every_statement_on_djangos_cursor(settings: Any) -> None:
    settings.MCP_TOOLS = {**settings.MCP_TOOLS, "STORE_DRIVER_CURSOR": False}
    with sql.statements("default").cursor() as cursor:
        assert isinstance(cursor, CursorWrapper)


def test_a_statement_in_a_broken_atomic_block_is_refused_as_djangos_would_be() -> None:
    from django.db import transaction
    from django.db.transaction import TransactionManagementError

    call_id = new_call([pending_step()])
    with transaction.atomic():
        with pytest.raises(IntegrityError), transaction.atomic(savepoint=False):  # no savepoint: breaks the outer block
            sql.insert_steps(call_id, "default", [pending_step()], timezone.now())
        assert connection.needs_rollback
        with pytest.raises(TransactionManagementError):
            sql.insert_steps(call_id, "default", [pending_step(1)], timezone.now())
    assert CallStep.objects.filter(call_id=call_id).count() == 1


def test_a_connections_preparers_share_the_last_adapted_value_and_never_give_a_stale_one() -> None:
    """A round's ``now`` and call id are adapted once for all its columns; another value is adapted anew."""
    statements = sql.Statements("default")
    call_prep, step_prep = statements.call.prep, statements.step.prep
    ops = connection.ops
    first, second = timezone.now(), timezone.now() + timedelta(seconds=1)
    assert call_prep["updated_at"](first) == ops.adapt_datetimefield_value(first)
    assert step_prep["answered_at"](first) is call_prep["finished_at"](first)  # one adaptation, shared
    assert step_prep["answered_at"](second) == ops.adapt_datetimefield_value(second)
    assert call_prep["updated_at"](first) == ops.adapt_datetimefield_value(first)
    one, other = "0f8b6a3e-0000-4000-8000-000000000001", "0f8b6a3e-0000-4000-8000-000000000002"
    native = connection.features.has_native_uuid_field
    expected = (lambda text: uuid.UUID(text) if native else uuid.UUID(text).hex)
    assert call_prep["id"](one) == expected(one)
    assert step_prep["call"]("".join(one)) == expected(one)  # an equal string, another object
    assert step_prep["call"](other) == expected(other)
    with pytest.raises(ValueError):
        call_prep["id"]("not a uuid")
    assert call_prep["id"](uuid.UUID(one)) == expected(one)


def test_the_preparers_write_the_same_text_as_djangos_adapters() -> None:
    """The fast paths of JSON and datetime values (``sql._preparer``) write what Django's own adapters write."""
    import datetime as dt
    import json
    import math
    import zoneinfo

    prep = sql.Statements("default").call.prep
    ops = connection.ops
    moments = [
        timezone.now(),
        dt.datetime(2026, 11, 25, 20, 30, 1, 0, tzinfo=dt.timezone.utc),  # no microseconds: str() drops them
        dt.datetime(2026, 3, 29, 1, 30, tzinfo=zoneinfo.ZoneInfo("Europe/Paris")),
        dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.timezone(timedelta(hours=-5))),
    ]
    for moment in moments:
        assert prep["expires_at"](moment) == ops.adapt_datetimefield_value(moment), moment
    values: list[Any] = [
        {"text": "héllo \u2603", "n": [1, 2.5, -0.0, 10**30], "ok": True, "none": None, "nested": {"a": [{}]}},
        ["\U0001f600 (a surrogate pair in JSON)", "\\u0000 and \\ud800 as text", ("a", "tuple")],
        "a string", 7, 1e300, math.inf, float("nan"), {},
    ]
    if connection.vendor == "postgresql":  # psycopg's Jsonb wrapper: the driver writes the text, as for the ORM
        for value in values:
            assert repr(prep["arguments"](value).obj) == repr(ops.adapt_json_value(value, None).obj)
        return
    for value in values:
        assert prep["arguments"](value) == ops.adapt_json_value(value, None), value
    assert json.loads(prep["arguments"](values[0]))["n"][3] == 10**30
    with pytest.raises(TypeError, match="not JSON serializable"):
        prep["arguments"]({"when": timezone.now()})  # as json.dumps: the store writes JSON values only
    cycle: list[Any] = []
    cycle.append(cycle)
    with pytest.raises(ValueError, match="Circular reference"):
        prep["arguments"](cycle)


def test_a_new_call_and_its_steps_bind_no_none_nor_bool_on_sqlite_and_store_what_the_orm_stores(monkeypatch: pytest.MonkeyPatch) -> None:
    """SQLite's driver sends a bound None or bool through its adapter registry (a miss costs more than
    the rest of binding): the store writes them as the literal NULL and an int, and the row and its steps
    hold the same values as the ORM writes for them."""
    bound: list[Any] = []
    execute = sql._QmarkCursor.execute

    def watched(self: Any, statement: str, params: Any = ()) -> Any:
        bound.extend(params)
        return execute(self, statement, params)

    monkeypatch.setattr(sql._QmarkCursor, "execute", watched)
    answered = Step(seq=1, kind="elicitation", key="q1", digest="d", request={"message": "Sure?"},
                    response={"action": "accept"}, status="done")
    fields: dict[str, Any] = dict(method="tools/call", tool_name="deploy", arguments={"n": 1}, principal="anon",
                                  protocol_version="2026-07-28", flavor="mrtr", status="input_required",
                                  background=True, is_task=False, session_id="", result=None)
    call_id = sync_calls.create_call([pending_step(), answered], **fields)
    if connection.vendor == "sqlite":
        assert bound and not [value for value in bound if value is None or type(value) is bool]
    expected = ToolCall.objects.create(**fields, expires_at=ToolCall.objects.get(id=call_id).expires_at)
    for step in (pending_step(), answered):
        CallStep.objects.create(call=expected, seq=step.seq, kind=step.kind, key=step.key, digest=step.digest,
                                request=step.request, response=step.response, status=step.status, error=step.error,
                                answered_at=None if step.status == "pending" else timezone.now())

    def stored(key: Any) -> tuple[Any, Any]:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT * FROM {CALLS} WHERE id = %s", [sql.statements("default").pk(key)])
            names = [c[0] for c in cursor.description]
            row = dict(zip(names, cursor.fetchone()))
            cursor.execute(f"SELECT * FROM {STEPS} WHERE call_id = %s ORDER BY seq", [row["id"]])
            step_names = [c[0] for c in cursor.description]
            steps = [dict(zip(step_names, r)) for r in cursor.fetchall()]
        differ = {"id", "created_at", "updated_at"}
        return ({k: v for k, v in row.items() if k not in differ},
                [{k: v for k, v in s.items() if k not in {"id", "call_id", "created_at", "answered_at"}} | {"answered": s["answered_at"] is not None} for s in steps])

    assert stored(uuid.UUID(call_id)) == stored(expected.id)
