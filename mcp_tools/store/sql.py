"""The durable round's hot path in plain SQL (SQLite and PostgreSQL alike).

A durable round touches the same two tables the same few ways every time. Built
through the ORM, each statement cost 200–500 µs of Python (query building and
compiling) for 20–30 µs of database work (``docs/performance-durable.md``), so
these statements are written once here, quoted and typed by Django:

* values go through each field's ``get_db_prep_save`` (UUIDs, JSON, aware
  datetimes are what the ORM would send), ``None`` is SQL ``NULL`` as in
  ``QuerySet.update()``;
* reads are SELECTs compiled by the ORM once per connection and run again with
  new parameters, their rows converted by the ORM's own converters.

Every write keeps the managers' semantics (:mod:`mcp_tools.managers`): a status
change only moves a live row at the expected round, and says whether it won.
Callers hold the transaction (``transaction.atomic``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import connections
from django.db.models import QuerySet

if TYPE_CHECKING:
    from ..engine.journal import Step

#: A placeholder id the SELECTs are compiled with (not None, which would compile to IS NULL).
SENTINEL = uuid.UUID(int=0)
#: Columns of a journal step as the engine reads them, in :class:`Step` order.
STEP_FIELDS = ("seq", "kind", "key", "digest", "request", "response", "error", "status")


def _models() -> tuple[Any, Any]:
    from ..models import CallStep, ToolCall

    return ToolCall, CallStep


def _compiled(using: str, name: str, build: Callable[[], QuerySet[Any]]) -> tuple[Any, str, dict[int, Any]]:
    """The SQL and row converters of a SELECT, compiled once per connection (connections are per thread)."""
    connection = connections[using]
    cache: dict[str, tuple[Any, str, dict[int, Any]]] = connection.__dict__.setdefault("mcp_tools_compiled", {})
    entry = cache.get(name)
    if entry is None:
        compiler = build().query.get_compiler(using=using)
        sql, _ = compiler.as_sql()
        converters = compiler.get_converters([column for column, _, _ in compiler.select])
        entry = cache[name] = (compiler, sql, converters)
    return entry


def _select(using: str, name: str, build: Callable[[], QuerySet[Any]], params: Sequence[Any]) -> list[Any]:
    compiler, sql, converters = _compiled(using, name, build)
    with connections[using].cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    return list(compiler.apply_converters(rows, converters)) if converters else rows


def _pk(call_id: Any, using: str) -> Any:
    """The call id as the database stores it (raises ValidationError for what is not one)."""
    ToolCall, _ = _models()
    return ToolCall._meta.pk.get_db_prep_value(call_id, connections[using])


def _column(model: Any, name: str, using: str) -> str:
    return _q(model._meta.get_field(name).column, using)


def _prep(model: Any, name: str, value: Any, using: str) -> Any:
    if value is None:
        return None
    return _plain(model._meta.get_field(name).get_db_prep_save(value, connections[using]))


def _plain(value: Any) -> Any:
    """A choices enum member as its plain value (drivers adapt exact types)."""
    return str(value) if isinstance(value, str) else value


def _q(name: str, using: str) -> str:
    return connections[using].ops.quote_name(name)


def load_call(call_id: Any, using: str) -> tuple[Any, list[Any]] | None:
    """The call row (a model instance) and its journal rows (:data:`STEP_FIELDS`, by ``seq``)."""
    ToolCall, CallStep = _models()
    attnames = [f.attname for f in ToolCall._meta.concrete_fields]
    key = _pk(call_id, using)
    rows = _select(using, "call", lambda: ToolCall.objects.filter(pk=SENTINEL).values_list(*attnames).order_by(), [key])
    if not rows:
        return None
    call = ToolCall.from_db(using, attnames, rows[0])
    steps = _select(using, "steps", lambda: CallStep.objects.filter(call_id=SENTINEL).order_by("seq").values_list(*STEP_FIELDS), [key])
    return call, steps


def update_call(call_id: Any, using: str, where: dict[str, Any], values: dict[str, Any]) -> bool:
    """``UPDATE`` one call row if it matches ``where`` (``name`` = value, or ``name__in`` = values)."""
    ToolCall, _ = _models()
    sets, params = [], []
    for name, value in values.items():
        sets.append(f"{_column(ToolCall, name, using)} = %s")
        params.append(_prep(ToolCall, name, value, using))
    conditions = [f"{_column(ToolCall, 'id', using)} = %s"]
    params.append(_pk(call_id, using))
    for lookup, value in where.items():
        name, _, op = lookup.partition("__")
        column = _column(ToolCall, name, using)
        if op == "in":
            conditions.append(f"{column} IN ({', '.join(['%s'] * len(value))})")
            params.extend(_plain(v) for v in value)
        else:
            conditions.append(f"{column} = %s")
            params.append(_plain(value))
    sql = f"UPDATE {_q(ToolCall._meta.db_table, using)} SET {', '.join(sets)} WHERE {' AND '.join(conditions)}"
    with connections[using].cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount == 1


def answer_steps(call_id: Any, using: str, answers: dict[int, tuple[str, Any, Any]], now: datetime) -> None:
    """Record answers of pending steps (``seq`` -> ``(status, response, error)``)."""
    _, CallStep = _models()
    q = _q
    sql = (f"UPDATE {q(CallStep._meta.db_table, using)} SET {q('status', using)} = %s, {q('response', using)} = %s, "
           f"{q('error', using)} = %s, {q('answered_at', using)} = %s "
           f"WHERE {q('call_id', using)} = %s AND {q('seq', using)} = %s AND {q('status', using)} = %s")
    key = _pk(call_id, using)
    answered = _prep(CallStep, "answered_at", now, using)
    with connections[using].cursor() as cursor:
        for seq, (status, response, error) in answers.items():
            cursor.execute(sql, [status, _prep(CallStep, "response", response, using), _prep(CallStep, "error", error, using),
                                 answered, key, seq, "pending"])


def insert_steps(call_id: Any, using: str, steps: Iterable[Step], now: datetime) -> None:
    """Insert journal steps (one statement); an answered step gets ``answered_at``."""
    _, CallStep = _models()
    steps = list(steps)
    if not steps:
        return
    columns = ("call_id", *STEP_FIELDS, "created_at", "answered_at")
    key = _pk(call_id, using)
    created = _prep(CallStep, "created_at", now, using)
    params: list[Any] = []
    for s in steps:
        params += [key, s.seq, s.kind, s.key, s.digest, _prep(CallStep, "request", s.request, using),
                   _prep(CallStep, "response", s.response, using), _prep(CallStep, "error", s.error, using), s.status,
                   created, None if s.status == "pending" else created]
    row = f"({', '.join(['%s'] * len(columns))})"
    sql = (f"INSERT INTO {_q(CallStep._meta.db_table, using)} ({', '.join(_q(c, using) for c in columns)}) "
           f"VALUES {', '.join([row] * len(steps))}")
    with connections[using].cursor() as cursor:
        cursor.execute(sql, params)


def insert_call(using: str, fields: dict[str, Any], now: datetime) -> str:
    """Insert a call row with the model's defaults for what ``fields`` leaves out; returns its id."""
    ToolCall, _ = _models()
    call = ToolCall(**fields)
    call.created_at = call.updated_at = now
    concrete = ToolCall._meta.concrete_fields
    connection = connections[using]
    params = [None if (value := getattr(call, f.attname)) is None else f.get_db_prep_save(value, connection) for f in concrete]
    sql = (f"INSERT INTO {_q(ToolCall._meta.db_table, using)} ({', '.join(_q(f.column, using) for f in concrete)}) "
           f"VALUES ({', '.join(['%s'] * len(concrete))})")
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
    return str(call.pk)


def call_status(call_id: Any, using: str) -> str | None:
    """The status of a call (None when there is no such row)."""
    ToolCall, _ = _models()
    rows = _select(using, "status", lambda: ToolCall.objects.filter(pk=SENTINEL).values_list("status").order_by(), [_pk(call_id, using)])
    return rows[0][0] if rows else None


def step_response(call_id: Any, seq: int, using: str) -> tuple[Any] | None:
    """``(response,)`` of journal step ``seq`` of a call, or None when it is not journaled."""
    _, CallStep = _models()
    rows = _select(using, "step_response",
                   lambda: CallStep.objects.filter(call_id=SENTINEL, seq=0).values_list("response").order_by(),
                   [_pk(call_id, using), seq])
    return (rows[0][0],) if rows else None
