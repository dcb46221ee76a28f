"""The durable round's hot path in plain SQL (SQLite, PostgreSQL and MariaDB alike).

A durable round touches the same two tables the same few ways every time. Built
through the ORM, each statement cost 200–500 µs of Python (query building and
compiling) for 20–30 µs of database work (``docs/performance-durable.md``), so
the statements are written here once per database connection (:class:`Statements`)
and run with values prepared the way the ORM prepares them:

* values go through the backend's own adapters (``adapt_json_value``,
  ``adapt_datetimefield_value``, native or hex UUIDs), ``None`` is SQL ``NULL``;
* rows read back go through the ORM's own converters (``from_db_value`` of each
  field and the backend's).

Round trips, which is what a database on another host charges for:

* a call and its journal are read with **one** SELECT (a ``UNION ALL`` of the call
  row and its step rows);
* on PostgreSQL, each write of a round (new call + journal; compare-and-set of a
  round + answers + new steps + outcome) is **one** statement: data-modifying CTEs
  run in autocommit as one atomic statement. SQLite has no data-modifying CTEs;
  there the same writes are one transaction of a few statements, which are calls
  into a library in this process, not round trips. Nor has MariaDB: there they are
  one transaction (Django's ``atomic()``) of a few statements, each a round trip.

The statements go straight to the driver's cursor (SQLite and PostgreSQL; on MariaDB
always Django's, whose MySQL wrapper turns some of the driver's errors into
``IntegrityError``) when nothing watches Django's cursors (:meth:`Statements.cursor`): Django's cursor wrapper cost each statement
~15–20 µs of Python, as much as many of SQLite's statements take. Debug query logging, ``execute_wrappers``, a
wrapped ``CursorWrapper.execute`` and a backend that makes its cursors its own way
(django-tenants, django-prometheus) keep every statement on Django's cursor;
``MCP_TOOLS["STORE_DRIVER_CURSOR"] = False`` does so always (an agent that rewrites
Django's code in place, like ddtrace's, cannot be seen).

Every write keeps the managers' semantics (:mod:`mcp_tools.managers`): a status
change only moves a live row at the expected round, and says whether it won.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import threading
import types
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
import datetime as dt
from datetime import datetime
from typing import TYPE_CHECKING, Any

import django
import orjson
from django.db import DEFAULT_DB_ALIAS, IntegrityError, connections, router, transaction
from django.db.backends.base.operations import BaseDatabaseOperations
from django.db.backends.sqlite3.base import FORMAT_QMARK_REGEX
from django.db.backends.sqlite3.operations import DatabaseOperations as SQLiteOperations
from django.db.backends.utils import CursorWrapper

from ..conf import mcp_settings
from ..protocol.jsonrpc import json_encoder, unstorable_string
from ..states import LIVE_STATUSES

if TYPE_CHECKING:
    from ..engine.journal import Step

#: Columns of a journal step as the engine reads them, in :class:`Step` order.
STEP_FIELDS = ("seq", "kind", "key", "digest", "request", "response", "error", "status")
#: Columns of a journal step as written.
STEP_INSERT_FIELDS = ("call", *STEP_FIELDS, "created_at", "answered_at")

Prep = Callable[[Any], Any]


def _models() -> tuple[Any, Any]:
    from ..models import CallStep, ToolCall

    return ToolCall, CallStep


def call_database() -> str:
    """The alias of the database the call tables are on: where the routers write ``ToolCall``
    (``ToolCall.objects.db``: reads too, :class:`~mcp_tools.managers.PrimaryManager`), without
    asking them each time when there are none."""
    if not router.routers:  # router is imported at the top: an import here ran the import machinery per call
        return DEFAULT_DB_ALIAS
    ToolCall, _ = _models()
    alias: str = ToolCall.objects.db
    return alias


def _plain(value: Any) -> Any:
    """A choices enum member as its plain value (drivers adapt exact types only)."""
    return str(value) if isinstance(value, str) and type(value) is not str else value


_UTC = dt.timezone.utc
#: Django's own adapters, which the fast paths of :func:`_preparer` write the same text as.
_BASE_ADAPT_JSON = BaseDatabaseOperations.adapt_json_value
_SQLITE_ADAPT_DATETIME = SQLiteOperations.adapt_datetimefield_value
#: ``json.dumps(value)`` with json's defaults, as Django's ``adapt_json_value`` writes a value without an encoder.
_django_json_text = json_encoder(ensure_ascii=True, separators=(", ", ": "), default=None)


class UnstorableValue(ValueError):
    """A value a column cannot hold on every database: a string with U+0000 (PostgreSQL's ``text``
    refuses it) or, in a JSON column, U+0000 or a lone surrogate (PostgreSQL's ``json`` keeps their
    escapes, ``jsonb`` refuses them: reversing migration 0007 would fail, as would any tool reading
    the column as ``jsonb``). Refused on SQLite too, so that what runs in development runs on
    PostgreSQL; nothing is written."""


def _check_storable(field: Any, value: Any) -> Any:
    """``value`` for ``field`` (as :func:`_plain` gives it), or :class:`UnstorableValue`."""
    if unstorable_string(value) is not None:
        raise UnstorableValue(
            f"{field.model.__name__}.{field.name} cannot store a string holding U+0000 or a lone surrogate "
            "(PostgreSQL's text and jsonb refuse them; so does mcp_tools, on every database)"
        )
    return _plain(value)


class _Memo:
    """The last value a connection's preparers adapted, per kind: a round writes one ``now`` and one
    call id into several columns and statements, adapted once (a tuple, read and replaced whole)."""

    __slots__ = ("datetime", "uuid")

    def __init__(self) -> None:
        self.datetime: tuple[Any, Any] = (None, None)
        self.uuid: tuple[Any, Any] = (None, None)


def _preparer(field: Any, connection: Any, memo: _Memo) -> Prep:
    """``value -> database value`` for one field, as ``get_db_prep_save`` would give for plain values."""
    if field.remote_field is not None:  # a foreign key: its target's type
        field = field.target_field
    kind = field.get_internal_type()
    ops = connection.ops
    if kind == "JSONField":
        encoder = field.encoder
        if encoder is None and type(ops).adapt_json_value is _BASE_ADAPT_JSON and _django_code(_BASE_ADAPT_JSON):
            # Django's own json.dumps(value) (SQLite and the other text-JSON backends): the same text
            # from json's C encoder built once (json.dumps builds one per call: 5-6 µs a value).
            def json_text(value: Any) -> Any:
                if value is None:
                    return None
                text = _django_json_text(value)
                # ASCII text: U+0000 and every surrogate are escapes (a pair too: then it is storable).
                if "\\u0000" in text or "\\ud" in text:
                    _check_storable(field, value)
                return text

            return json_text

        adapt_json = field.get_db_prep_value  # the field's own (models.ExactJSONField: json, not jsonb)

        def json_value(value: Any) -> Any:
            if value is None:
                return None
            try:
                # UTF-8, U+0000 escaped; orjson refuses lone surrogates (and what json alone writes).
                suspect = b"\\u0000" in orjson.dumps(value)
            except TypeError:
                # What the driver's json.dumps does with it: its errors now (a cycle, an unknown
                # type), or an ASCII text whose escapes are looked at as on SQLite.
                text = json.dumps(value, cls=encoder)
                suspect = "\\u0000" in text or "\\ud" in text
            if suspect:
                _check_storable(field, value)
            return adapt_json(value, connection, True)

        return json_value
    if kind in ("CharField", "TextField"):
        return lambda value: _check_storable(field, value) if type(value) is str and "\x00" in value else _plain(value)
    if kind == "DateTimeField":
        adapt_datetime = ops.adapt_datetimefield_value
        # SQLite's adapter (make_naive in the connection's zone, then str) of an aware UTC datetime,
        # the only kind the store writes, into the default UTC zone: the same text, a seventh of the time.
        utc_text = type(ops).adapt_datetimefield_value is _SQLITE_ADAPT_DATETIME and _django_code(_SQLITE_ADAPT_DATETIME)

        def datetime_value(value: Any) -> Any:
            if value is None:
                return None
            last = memo.datetime
            if value is not last[0]:  # the same object: datetimes are immutable
                if utc_text and value.tzinfo is _UTC and connection.timezone is _UTC:
                    last = memo.datetime = value, str(value.replace(tzinfo=None))
                else:
                    last = memo.datetime = value, adapt_datetime(value)
            return last[1]

        return datetime_value
    if kind == "UUIDField":
        native = connection.features.has_native_uuid_field

        def uuid_value(value: Any) -> Any:
            if value is None:
                return None
            last = memo.uuid
            if value is last[0] or (type(value) is str and type(last[0]) is str and value == last[0]):
                return last[1]
            given = value
            if not isinstance(value, uuid.UUID):
                value = uuid.UUID(str(value))  # ValueError for what is not a UUID
            prepared = value if native else value.hex
            memo.uuid = given, prepared
            return prepared

        return uuid_value
    return _plain


#: In :attr:`_Columns.defaults`: a default prepared for each row.
_PER_ROW: Any = object()


def _prepared_once(prep: Prep, default: Any) -> Any:
    """``prep(default)`` of a constant default of a plain type (its database value is the same for
    every row); :data:`_PER_ROW` for any other (a datetime's depends on the connection's zone)."""
    if default is None or isinstance(default, (str, int, float)):  # bool and the choices enums too
        return prep(default)
    return _PER_ROW


class _Columns:
    """The concrete fields of a model as this connection reads and writes them."""

    def __init__(self, model: Any, connection: Any, memo: _Memo) -> None:
        q = connection.ops.quote_name
        self.table = q(model._meta.db_table)
        self.fields = list(model._meta.concrete_fields)
        self.by_name = {f.name: f for f in self.fields} | {f.attname: f for f in self.fields}
        self.column = {name: q(f.column) for name, f in self.by_name.items()}
        self.prep = {name: _preparer(f, connection, memo) for name, f in self.by_name.items()}
        self.attnames = [f.attname for f in self.fields]
        # What a row gets for a field it is not given: a constant, or a callable default called per row;
        # ``(attname, preparer, callable default, constant, constant as prepared)``. A constant of a plain
        # type is prepared here once (14 of a new call's 40 values), any other for each row.
        self.defaults = [(f.attname, self.prep[f.attname], f.default, None, _PER_ROW) if f.has_default() and callable(f.default)
                         else (f.attname, self.prep[f.attname], None, f.get_default(), _prepared_once(self.prep[f.attname], f.get_default()))
                         for f in self.fields]
        # A PostgreSQL literal in VALUES has no column to take its type from: cast it.
        # Not CAST(%s AS varchar(128)): that cuts a longer string to fit, silently, where the column
        # itself (and the ORM's INSERT) refuses it with an error, as it should.
        self.cast = {name: f.target_field.rel_db_type(connection) if f.remote_field is not None
                     else connection.ops.cast_char_field_without_max_length if f.get_internal_type() == "CharField"
                     else f.db_type(connection)
                     for name, f in self.by_name.items()}

    def converters(self, names: Sequence[str], connection: Any) -> list[tuple[int, list[Any], Any]]:
        """The ORM's converters of the columns ``names``: ``(position, converters, expression)``."""
        found = []
        for position, name in enumerate(names):
            field = self.by_name[name]
            column = field.get_col(field.model._meta.db_table)
            chain = connection.ops.get_db_converters(column) + column.get_db_converters(connection)
            if chain:
                found.append((position, chain, column))
        return found


def _filler(field: Any, connection: Any) -> str:
    """``NULL`` standing for ``field``'s column in the other half of :attr:`Statements.load_sql`'s ``UNION ALL``.

    MySQL and MariaDB type a union's column from both halves, and an ``INT UNSIGNED`` column (a
    ``PositiveIntegerField``: ``round``, ``seq``, ``retries``…) unioned with a bare ``NULL`` as
    ``DECIMAL``: the driver read those back as ``Decimal``, which the ORM's converters leave as it
    is and the engine then failed to write as JSON. A ``NULL`` cast to the integer type Django
    casts the field to keeps the column an integer. SQLite and PostgreSQL type it from the column.
    """
    if connection.vendor == "mysql":
        if field.remote_field is not None:
            field = field.target_field
        if "integer" in connection.ops.cast_data_types.get(field.get_internal_type(), ""):
            return f"CAST(NULL AS {field.cast_db_type(connection)})"
    return "NULL"


def _convert(row: Sequence[Any], converters: list[tuple[int, list[Any], Any]], connection: Any) -> list[Any]:
    values = list(row)
    for position, chain, expression in converters:
        value = values[position]
        for converter in chain:
            value = converter(value, expression, connection)
        values[position] = value
    return values


#: What makes and runs a cursor in Django: a backend or a tool that replaces any of
#: them (a tenant's ``search_path``, metrics, tracing) must see the store's statements.
_CURSOR_MAKERS = ("cursor", "_cursor", "_prepare_cursor", "make_cursor", "make_debug_cursor", "create_cursor")


_DJANGO_DIR = os.path.dirname(django.__file__) + os.sep


def _django_code(function: Any) -> bool:
    """Whether ``function`` is Django's own code: a tool's wrapper (``functools.wraps``, wrapt) is not.

    A wrapper keeps Django's name and module but not its code object, whose file is the tool's.
    """
    return isinstance(function, types.FunctionType) and function.__code__.co_filename.startswith(_DJANGO_DIR)


def _stock_backend(connection: Any) -> bool:
    """Whether ``connection`` makes its cursors as Django's own backend for its database does."""
    stock: type[Any]
    if connection.vendor == "sqlite":
        from django.db.backends.sqlite3.base import DatabaseWrapper as stock
    elif connection.vendor == "postgresql":
        from django.db.backends.postgresql.base import DatabaseWrapper as stock
    else:
        return False
    return all(getattr(type(connection), name) is getattr(stock, name) and _django_code(getattr(stock, name))
               for name in _CURSOR_MAKERS)


#: ``CursorWrapper.execute`` as Django wrote it (None if something had wrapped it already).
_DJANGO_EXECUTE = CursorWrapper.execute if _django_code(CursorWrapper.execute) else None


def _django_cursor_watched(connection: Any) -> bool:
    """Whether anything may see statements through Django's cursors on ``connection`` (per statement).

    Query logging (``DEBUG``, ``assertNumQueries``), ``execute_wrappers``, a connection
    whose ``cursor`` was replaced, a wrapped ``CursorWrapper.execute``, or the setting.
    What the backend's class does is judged once per connection (:class:`Statements`).
    """
    return bool(connection.execute_wrappers) or connection.queries_logged or "cursor" in vars(connection) \
        or CursorWrapper.execute is not _DJANGO_EXECUTE or not mcp_settings.STORE_DRIVER_CURSOR


@functools.lru_cache(maxsize=512)
def _qmark(sql: str) -> str:
    """``sql`` with Django's ``%s`` placeholders as SQLite's ``?``, as Django's SQLite cursor converts them."""
    return FORMAT_QMARK_REGEX.sub("?", sql).replace("%%", "%")


class _QmarkCursor:
    """A SQLite driver cursor that takes our ``%s`` SQL (positional parameters only)."""

    __slots__ = ("raw",)

    def __init__(self, raw: Any) -> None:
        self.raw = raw

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self.raw.execute(_qmark(sql), params)

    @property
    def rowcount(self) -> int:
        return int(self.raw.rowcount)

    def fetchone(self) -> Any:
        return self.raw.fetchone()

    def fetchall(self) -> list[Any]:
        return self.raw.fetchall()


class Statements:
    """The hot statements of one connection, written once (connections are per thread)."""

    def __init__(self, using: str) -> None:
        ToolCall, CallStep = _models()
        connection = connections[using]
        self.using = using
        self.connection = connection
        self.postgres = connection.vendor == "postgresql"
        self.sqlite = connection.vendor == "sqlite"
        #: Whether the backend makes cursors as Django's own does (else every statement takes Django's cursor).
        self.stock_backend = _stock_backend(connection)
        self.driver_error: type[Exception] = getattr(connection, "Database").Error
        q = connection.ops.quote_name
        self.q = q
        memo = _Memo()  # one per connection's statements: one thread uses them at a time
        self.call = call = _Columns(ToolCall, connection, memo)
        self.step = step = _Columns(CallStep, connection, memo)
        self.pk = call.prep["id"]
        self.live = [str(s) for s in LIVE_STATUSES]

        # One SELECT for a call and its journal: the call row (kind 0), then its steps (kind 1) by seq.
        call_columns = ", ".join(call.column[a] for a in call.attnames)
        step_columns = ", ".join(step.column[f] for f in STEP_FIELDS)
        no_call = ", ".join(_filler(call.by_name[a], connection) for a in call.attnames)
        no_step = ", ".join(_filler(step.by_name[f], connection) for f in STEP_FIELDS)
        self.load_sql = (
            f"SELECT 0, {call_columns}, {no_step} FROM {call.table} WHERE {call.column['id']} = %s "
            f"UNION ALL SELECT 1, {no_call}, {step_columns} FROM {step.table} WHERE {step.column['call']} = %s "
            f"ORDER BY 1, {2 + len(call.attnames)}"
        )
        self.call_width = len(call.attnames)
        self.call_converters = call.converters(call.attnames, connection)
        self.step_converters = step.converters(STEP_FIELDS, connection)

        self.status_sql = (
            f"SELECT {call.column['status']}, {call.column['round']}, {call.column['last_outcome']}, "
            f"{call.column['last_answers_digest']} FROM {call.table} WHERE {call.column['id']} = %s"
        )
        self.status_converters = call.converters(("status", "round", "last_outcome", "last_answers_digest"), connection)
        # Is the call live, and did some run journal step ``seq`` already? (one statement, before an effect)
        self.once_check_sql = (
            f"SELECT c.{call.column['status']}, s.{step.column['seq']}, s.{step.column['response']}, "
            f"s.{step.column['kind']}, s.{step.column['key']}, s.{step.column['status']}, s.{step.column['error']} "
            f"FROM {call.table} c LEFT JOIN {step.table} s ON s.{step.column['call']} = c.{call.column['id']} "
            f"AND s.{step.column['seq']} = %s WHERE c.{call.column['id']} = %s"
        )
        self.once_converters = [(2 + i, chain, expr)
                                for i, chain, expr in step.converters(("response", "kind", "key", "status", "error"), connection)]
        self.step_insert_columns = ", ".join(step.column[f] for f in STEP_INSERT_FIELDS)
        self.step_insert_sql = f"INSERT INTO {step.table} ({self.step_insert_columns}) VALUES "  # + the rows
        self.step_placeholders = self._placeholders(step, STEP_INSERT_FIELDS)
        self.call_insert_head = f"INSERT INTO {call.table} ({', '.join(call.column[a] for a in call.attnames)}) VALUES "
        self.call_placeholders = self._placeholders(call, call.attnames)
        #: SQLite's INSERTs by shape: ``(head, parameters, positions of the NULLs)`` (:meth:`_insert`).
        self._inserts: dict[tuple[str, int, tuple[int, ...]], str] = {}
        #: A call row's UPDATEs (and PostgreSQL's round statements) by shape (:meth:`_statement`).
        self._updates: dict[tuple[Any, ...], str] = {}
        c = step.column
        self.answer_sql = (f"UPDATE {step.table} SET {c['status']} = %s, {c['response']} = %s, {c['error']} = %s, "
                           f"{c['answered_at']} = %s WHERE {c['call']} = %s AND {c['seq']} = %s AND {c['status']} = %s")

    def _placeholders(self, columns: _Columns, names: Sequence[str]) -> str:
        if not self.postgres:
            return f"({', '.join(['%s'] * len(names))})"
        return f"({', '.join(f'CAST(%s AS {columns.cast[n]})' for n in names)})"

    # -- reads -----------------------------------------------------------------

    def load_call(self, call_id: Any) -> tuple[Any, list[list[Any]]] | None:
        ToolCall, _ = _models()
        key = self.pk(call_id)
        with self.cursor() as cursor:
            cursor.execute(self.load_sql, [key, key])
            rows = cursor.fetchall()
        if not rows or rows[0][0] != 0:
            return None
        width = self.call_width
        values = _convert(rows[0][1:1 + width], self.call_converters, self.connection)
        call = ToolCall.from_db(self.using, self.call.attnames, values)
        steps = [_convert(row[1 + width:], self.step_converters, self.connection) for row in rows[1:]]
        return call, steps

    def call_status(self, call_id: Any) -> tuple[str, int, Any, str] | None:
        with self.cursor() as cursor:
            cursor.execute(self.status_sql, [self.pk(call_id)])
            row = cursor.fetchone()
        if row is None:
            return None
        status, round_number, last_outcome, digest = _convert(row, self.status_converters, self.connection)
        return status, round_number, last_outcome, digest

    def once_check(self, call_id: Any, seq: int) -> tuple[str | None, tuple[str, str, str, Any, Any] | None]:
        """``(call status or None, the step at seq as (kind, key, status, response, error), or None)``."""
        with self.cursor() as cursor:
            cursor.execute(self.once_check_sql, [seq, self.pk(call_id)])
            row = cursor.fetchone()
        if row is None:
            return None, None
        status, step_seq, response, kind, key, step_status, error = _convert(row, self.once_converters, self.connection)
        return status, None if step_seq is None else (kind, key, step_status, response, error)

    @contextlib.contextmanager
    def cursor(self) -> Iterator[Any]:
        """A cursor for our statements (``%s`` placeholders).

        When nothing watches Django's cursors, the driver's own cursor as the backend
        creates it (the same connection, adapters and time zone), with Django's checks
        (health check, thread, a broken ``atomic`` block) and error translation
        (``wrap_database_errors``), without Django's per-statement wrapper. Otherwise
        Django's cursor.
        """
        connection = self.connection
        if not self.stock_backend or _django_cursor_watched(connection):
            with connection.cursor() as cursor:
                yield cursor
            return
        connection.close_if_health_check_failed()
        connection.ensure_connection()
        connection.validate_thread_sharing()
        if connection.in_atomic_block:
            connection.validate_no_broken_transaction()
        with connection.wrap_database_errors:
            raw = connection.connection.cursor() if self.sqlite else connection.create_cursor()
            try:
                yield _QmarkCursor(raw) if self.sqlite else raw
            finally:
                with contextlib.suppress(self.driver_error):  # as Django's cursor: a close never hides the error
                    raw.close()

    # -- writes ----------------------------------------------------------------

    @contextlib.contextmanager
    def write_transaction(self) -> Iterator[Any]:
        """A write transaction for statements of ours only (no user code runs inside).

        On SQLite in autocommit, ``BEGIN IMMEDIATE`` / ``COMMIT`` directly: Django's
        ``atomic()`` toggles the connection's autocommit mode around them, which cost
        more than the statements. Inside a caller's transaction, or on any other
        database, Django's ``atomic()`` (a savepoint when nested).
        """
        connection = self.connection
        connection.ensure_connection()
        if not self.sqlite or connection.in_atomic_block:
            with transaction.atomic(using=self.using), self.cursor() as cursor:
                yield cursor
            return
        with self.cursor() as cursor:
            cursor.execute("BEGIN IMMEDIATE")
            try:
                yield cursor
            except BaseException:
                cursor.execute("ROLLBACK")
                raise
            cursor.execute("COMMIT")

    def _execute(self, cursor: Any, sql: str, params: Sequence[Any]) -> int:
        """Run one statement on ``cursor`` (a new cursor when None: Django's costs ~14 µs each); its rowcount."""
        if cursor is None:
            with self.cursor() as cursor:
                cursor.execute(sql, params)
                return int(cursor.rowcount)
        cursor.execute(sql, params)
        return int(cursor.rowcount)

    def _step_rows(self, key: Any, steps: Sequence[Step], created: Any) -> tuple[str, list[Any]]:
        prep = self.step.prep
        request, response, error = prep["request"], prep["response"], prep["error"]
        params: list[Any] = []
        for s in steps:
            params += [key, s.seq, s.kind, s.key, s.digest, request(s.request), response(s.response), error(s.error),
                       _plain(s.status), created, None if s.status == "pending" else created]
        return ", ".join([self.step_placeholders] * len(steps)), params

    def _insert(self, head: str, rows: str, params: list[Any], width: int) -> tuple[str, list[Any]]:
        """``head`` + ``rows`` (``VALUES`` rows of ``width`` columns) with ``params``; on SQLite, with each
        None written as the literal ``NULL`` and each bool bound as its int (the same stored values).

        SQLite's driver binds an exact ``str``, ``int``, ``float`` or ``bytearray`` as it is and sends
        anything else through its adapter registry, whose miss (two attribute lookups, one of them
        formatting an ``AttributeError``) cost more than binding the rest: 14 of a new call row's 40
        values are None.
        """
        if not self.sqlite:
            return head + rows, params
        nulls = tuple(i for i, p in enumerate(params) if p is None)
        shape = (head, len(params), nulls)
        statement = self._inserts.get(shape)
        if statement is None:
            if len(self._inserts) >= 256:  # shapes are few (which columns a call leaves empty): bounded all the same
                self._inserts.clear()
            null = set(nulls)
            values = ["NULL" if i in null else "%s" for i in range(len(params))]
            statement = self._inserts[shape] = head + ", ".join(
                f"({', '.join(values[start:start + width])})" for start in range(0, len(params), width))
        return statement, [int(p) if type(p) is bool else p for p in params if p is not None]

    def insert_steps(self, call_id: Any, steps: Sequence[Step], now: datetime, cursor: Any = None) -> None:
        if not steps:
            return
        rows, params = self._step_rows(self.pk(call_id), steps, self.step.prep["created_at"](now))
        self._execute(cursor, *self._insert(self.step_insert_sql, rows, params, len(STEP_INSERT_FIELDS)))

    def insert_call(self, fields: dict[str, Any], steps: Sequence[Step], now: datetime) -> str:
        """A call row (the model's defaults for what ``fields`` leaves out) and its first steps; its id."""
        values: dict[str, Any] = {}
        for name, value in fields.items():
            field = self.call.by_name[name]
            if field.remote_field is not None and name == field.name:  # user=<User or None>
                value = None if value is None else value.pk
            values[field.attname] = value
        params = []
        prep = self.call.prep
        stamp = prep["created_at"](now)  # created_at, updated_at and the steps' created_at: adapted once
        for attname, prepare, make_default, default, prepared in self.call.defaults:
            if attname in values:
                params.append(prepare(values[attname]))
            elif attname in ("created_at", "updated_at"):
                params.append(stamp)
            elif prepared is not _PER_ROW:
                params.append(prepared)
            else:
                value = values[attname] = make_default() if make_default is not None else default
                params.append(prepare(value))
        insert, params = self._insert(self.call_insert_head, self.call_placeholders, params, len(params))
        if not steps:
            self._execute(None, insert, params)
            return str(values["id"])
        rows, step_params = self._step_rows(self.pk(values["id"]), steps, stamp)
        if self.postgres:
            sql = self._statement(("create", len(steps)), lambda: f"WITH c AS ({insert}) {self.step_insert_sql}{rows}")
            self._execute(None, sql, params + step_params)
        else:
            with self.write_transaction() as cursor:
                cursor.execute(insert, params)
                cursor.execute(*self._insert(self.step_insert_sql, rows, step_params, len(STEP_INSERT_FIELDS)))
        return str(values["id"])

    def _set(self, values: dict[str, Any], params: list[Any]) -> tuple[str, ...]:
        """Append the prepared ``values`` to ``params``; the shape of their ``SET`` (:meth:`_set_sql`)."""
        prep = self.call.prep
        for name, value in values.items():
            params.append(prep[name](value))
        return tuple(values)

    def _set_sql(self, names: tuple[str, ...]) -> str:
        return ", ".join(f"{self.call.column[name]} = %s" for name in names)

    def _where(self, call_id: Any, where: dict[str, Any], params: list[Any]) -> tuple[Any, ...]:
        """Append the values of ``where`` (on the call ``call_id``) to ``params``; the shape of its
        conditions (:meth:`_where_sql`): each lookup, with how many values it lists for ``__in``."""
        prep = self.call.prep
        params.append(self.pk(call_id))
        shape: list[Any] = []
        for lookup, value in where.items():
            if lookup == "unexpired_at":
                params.append(prep["expires_at"](value))
            elif lookup == "progress_below":
                params.append(value)
            elif lookup.partition("__")[2] == "in":
                params.extend(_plain(v) for v in value)
                shape.append((lookup, len(value)))
                continue
            else:
                params.append(_plain(value))
            shape.append(lookup)
        return tuple(shape)

    def _where_sql(self, shape: tuple[Any, ...]) -> str:
        column = self.call.column
        conditions = [f"{column['id']} = %s"]
        for lookup in shape:
            if lookup == "unexpired_at":  # not past its expiry at the value (a row without one never expires)
                expires = column["expires_at"]
                conditions.append(f"({expires} IS NULL OR {expires} > %s)")
            elif lookup == "progress_below":  # no progress yet, or less than the value
                progress = column["progress"]
                conditions.append(f"({progress} IS NULL OR {progress} < %s)")
            elif type(lookup) is tuple:  # (name__in, how many values)
                lookup, count = lookup
                conditions.append(f"{column[lookup.partition('__')[0]]} IN ({', '.join(['%s'] * count)})")
            else:
                conditions.append(f"{column[lookup.partition('__')[0]]} = %s")
        return " AND ".join(conditions)

    def _statement(self, shape: tuple[Any, ...], build: Callable[[], str]) -> str:
        """The statement of ``shape``, built once: a round's text was rebuilt from its pieces every
        round, and a new string object is hashed again by :func:`_qmark`'s cache (and psycopg's)."""
        statement = self._updates.get(shape)
        if statement is None:
            if len(self._updates) >= 256:  # shapes are few (the store's own writes): bounded all the same
                self._updates.clear()
            statement = self._updates[shape] = build()
        return statement

    def update_call(self, call_id: Any, where: dict[str, Any], values: dict[str, Any], cursor: Any = None) -> bool:
        """``UPDATE`` one call row if it matches ``where`` (``name`` = value, ``name__in`` = values, or
        ``unexpired_at`` = a time the row must not have expired by)."""
        params: list[Any] = []
        names = self._set(values, params)
        conditions = self._where(call_id, where, params)
        sql = self._statement(("update", names, conditions),
                              lambda: f"UPDATE {self.call.table} SET {self._set_sql(names)} WHERE {self._where_sql(conditions)}")
        return self._execute(cursor, sql, params) == 1

    def write_round(
        self, call_id: Any, where: dict[str, Any], values: dict[str, Any],
        answers: dict[int, tuple[str, Any, Any]], new_steps: Sequence[Step], now: datetime,
    ) -> bool:
        """Compare-and-set of one call row (``where`` -> ``values``), then its answered and new steps.

        All or nothing: when the row does not match, or a step to answer is not
        pending any more (answered by another writer), nothing is written. One
        statement on PostgreSQL; one transaction on SQLite.
        """
        try:
            if self.postgres:
                return self._write_round_postgres(call_id, where, values, answers, new_steps, now)
            with self.write_transaction() as cursor:
                if not self.update_call(call_id, where, values, cursor):
                    return False
                if self.answer_steps(call_id, answers, now, cursor) != len(answers):
                    raise _StepsMoved()  # rolls the transaction back
                self.insert_steps(call_id, new_steps, now, cursor)
        except _StepsMoved:
            return False
        except IntegrityError:
            # A new step's place (call, seq) or key is taken: another run of this round wrote its
            # steps first (a request that took the round over from this run, stalled past three
            # CANCEL_POLL_SECONDS, or the run it took over from, alive after all). Nothing of this
            # write stayed (one statement, or one transaction): lost, as a compare-and-set that did
            # not match. Only a statement inside a caller's PostgreSQL transaction could not say so.
            if not new_steps or (self.postgres and self.connection.in_atomic_block):
                raise
            return False
        return True

    def answer_steps(self, call_id: Any, answers: dict[int, tuple[str, Any, Any]], now: datetime, cursor: Any = None) -> int:
        """Answer pending steps; how many were pending."""
        if not answers:
            return 0
        prep, sql = self.step.prep, self.answer_sql
        key, answered = self.pk(call_id), prep["answered_at"](now)
        answered_now = 0
        for seq, (status, response, error) in answers.items():
            answered_now += self._execute(cursor, sql, [_plain(status), prep["response"](response), prep["error"](error), answered, key, seq, "pending"])
        return answered_now

    def _write_round_postgres(
        self, call_id: Any, where: dict[str, Any], values: dict[str, Any],
        answers: dict[int, tuple[str, Any, Any]], new_steps: Sequence[Step], now: datetime,
    ) -> bool:
        prep = self.step.prep
        params: list[Any] = []
        names = self._set(values, params)
        conditions = self._where(call_id, where, params)
        if answers:
            params += [self.pk(call_id), *answers]
            params.append(prep["answered_at"](now))
            for seq, (status, response, error) in answers.items():
                params += [seq, _plain(status), prep["response"](response), prep["error"](error)]
        rows = ""
        if new_steps:
            rows, step_params = self._step_rows(self.pk(call_id), new_steps, prep["created_at"](now))
            params += step_params
        sql = self._statement(("round", names, conditions, len(answers), len(new_steps)),
                              lambda: self._round_sql_postgres(names, conditions, len(answers), rows))
        with self.cursor() as cursor:
            cursor.execute(sql, params)
            return bool(cursor.fetchone()[0])

    def _round_sql_postgres(self, names: tuple[str, ...], conditions: tuple[Any, ...], answers: int, step_rows: str) -> str:
        """:meth:`_write_round_postgres`'s statement: ``answers`` steps answered, and the new steps' ``step_rows``."""
        c, cast = self.step.column, self.step.cast
        where = self._where_sql(conditions)
        if answers:
            # Every step to answer must still be pending: else the row moves not at all.
            where += (f" AND NOT EXISTS (SELECT 1 FROM {self.step.table} WHERE {c['call']} = %s AND {c['seq']} IN "
                      f"({', '.join(['%s'] * answers)}) AND {c['status']} <> 'pending')")
        parts = [f"moved AS (UPDATE {self.call.table} SET {self._set_sql(names)} WHERE {where} RETURNING {self.call.column['id']} AS id)"]
        if answers:
            rows = ", ".join([f"(%s, %s, CAST(%s AS {cast['response']}), CAST(%s AS {cast['error']}))"] * answers)
            parts.append(
                f"answered AS (UPDATE {self.step.table} AS s SET {c['status']} = a.status, {c['response']} = a.response, "
                f"{c['error']} = a.error, {c['answered_at']} = CAST(%s AS {cast['answered_at']}) "
                f"FROM moved, (VALUES {rows}) AS a(seq, status, response, error) "
                f"WHERE s.{c['call']} = moved.id AND s.{c['seq']} = a.seq AND s.{c['status']} = 'pending')"
            )
        if step_rows:
            parts.append(f"inserted AS (INSERT INTO {self.step.table} ({self.step_insert_columns}) "
                         f"SELECT * FROM (VALUES {step_rows}) AS v WHERE EXISTS (SELECT 1 FROM moved))")
        return f"WITH {', '.join(parts)} SELECT count(*) FROM moved"


class _StepsMoved(Exception):
    """A step a round answers was answered meanwhile: the round's transaction rolls back."""


class _LaneOnThread(threading.local):
    lane: Any = None


#: The lane (:mod:`.lane`) whose function runs on this thread now: :func:`statements` gives its own.
lane_running = _LaneOnThread()


def statements(using: str) -> Statements:
    """The :class:`Statements` of this thread's connection to ``using`` (a lane's, while one runs)."""
    lane = lane_running.lane
    if lane is not None and lane.alias == using:
        in_lane: Statements = lane.statements_of_thread()
        return in_lane
    connection = connections[using]
    found: Statements | None = connection.__dict__.get("mcp_tools_statements")
    if found is None:
        found = connection.__dict__["mcp_tools_statements"] = Statements(using)
    return found


# -- the functions the store calls (``using`` is the database alias) -----------------------


def load_call(call_id: Any, using: str) -> tuple[Any, list[list[Any]]] | None:
    """The call row (a model instance) and its journal rows (:data:`STEP_FIELDS`, by ``seq``)."""
    return statements(using).load_call(call_id)


def update_call(call_id: Any, using: str, where: dict[str, Any], values: dict[str, Any]) -> bool:
    return statements(using).update_call(call_id, where, values)


def write_round(call_id: Any, using: str, where: dict[str, Any], values: dict[str, Any],
                answers: dict[int, tuple[str, Any, Any]], new_steps: Iterable[Step], now: datetime) -> bool:
    return statements(using).write_round(call_id, where, values, answers, list(new_steps), now)


def insert_steps(call_id: Any, using: str, steps: Iterable[Step], now: datetime) -> None:
    """Insert journal steps (one statement); an answered step gets ``answered_at``."""
    statements(using).insert_steps(call_id, list(steps), now)


def insert_call(using: str, fields: dict[str, Any], steps: Sequence[Step], now: datetime) -> str:
    return statements(using).insert_call(fields, steps, now)


def call_status(call_id: Any, using: str) -> tuple[str, int, Any, str] | None:
    """``(status, round, last_outcome, last_answers_digest)`` of a call, or None."""
    return statements(using).call_status(call_id)


def once_check(call_id: Any, seq: int, using: str) -> tuple[str | None, tuple[str, str, str, Any, Any] | None]:
    return statements(using).once_check(call_id, seq)


def in_transaction(using: str) -> bool:
    """Whether statements on ``using`` run in a caller's transaction (an ``atomic`` block, or autocommit off)."""
    connection = connections[using]
    return bool(connection.in_atomic_block or not connection.get_autocommit())


def locks_writers_on_begin(using: str, connection: Any = None) -> bool:
    """Whether the database lets one transaction write at a time (SQLite).

    With ``"transaction_mode": "IMMEDIATE"`` (the demo's; system check
    ``mcp_tools.W005`` asks for it) the BEGIN takes the lock at once; a deferred
    BEGIN takes it at the first write, or fails the transaction if another came first.
    """
    return (connection if connection is not None else connections[using]).vendor == "sqlite"


def transaction_has_work(using: str, connection: Any = None) -> bool:
    """Whether the current transaction has anything to commit: a statement sent, or an ``on_commit`` hook.

    Inside ``atomic()`` psycopg begins the transaction lazily, at the first
    statement: until then there is nothing on the server to commit. On SQLite,
    Django's ``atomic()`` sends its BEGIN at once. True where the driver cannot tell.

    ``connection``: ``connections[using]``, when the caller has it already (a lookup of this
    thread's connection costs ~10,000 instructions, more than the rest of this function).
    """
    connection = connection if connection is not None else connections[using]
    raw = connection.connection
    if raw is None:
        return False
    if connection.run_on_commit or connection.needs_rollback:
        # fn's hook must run after its step is journaled, and not if it loses; a
        # transaction fn marked for rollback fails at its end, with nothing journaled.
        return True
    if connection.vendor == "postgresql":  # psycopg 3 and psycopg2 alike: 0 is IDLE
        return raw.info.transaction_status != 0
    if connection.vendor == "sqlite":
        return bool(raw.in_transaction)
    return True
