"""Benchmark of the durable call engine, in process, through the real ASGI app.

A benchmark, not a test (nothing here runs under pytest). No sockets: requests go
straight into ``demo_site.asgi.application`` (Channels router -> MCP endpoint -> method
table -> call service -> engine -> ORM on SQLite), so the numbers are about our code.
All requests are 2026-07-28 ``tools/call`` requests (``_meta`` with protocol version and
client capabilities, ``Mcp-Method`` / ``Mcp-Name`` headers). It answers:

1. What does one elicitation round cost over a plain ``tools/call``? The demo's
   async ``echo`` vs an echo that elicits once (round 1 -> ``input_required``, round 2
   retries with ``inputResponses`` + ``requestState`` -> complete). Interleaved call by
   call. What-if: the same with the worker thread's DB connection kept open
   (``CONN_MAX_AGE = 600``), in alternating blocks. Then the storage floor: the statements
   one round sent, captured and replayed through the raw driver (no Django, no mcp_tools,
   no thread hop), so the report shows how much of a round is the database's own work,
   and a lower bound: plain call + storage floor + one empty hop to the store's thread,
   what no round of this design can go below on the machine it runs on.
2. How does the cost of a round grow with the completed steps it replays? A tool asks
   N elicitations, one per round; its last round loads N journal steps, replays N-1
   answered ones, records the N-th answer and completes. N = 1, 10, 100, with a pydantic
   model schema (what handlers write) and with a plain dict schema; and N ``ctx.once``
   steps followed by one elicitation (round 2 replays N ``once`` steps).
3. What does a suspended call hold in server memory? In a subprocess on a fresh
   database: RSS (psutil if installed, else ``/proc/self/statm``), Python's allocated
   blocks and gc objects after warm-up, then after 10,000 suspended calls, and the rows.

Part 2 also times, alone, the two pieces of a round that grow with the journal: loading
it (``store.load_call``) and replaying it in memory (``engine.run``), plus a what-if
replay with the flattened elicitation schema cached per model class (patched in this
process only).

Every answer is checked (HTTP 200, a JSON-RPC result, the expected ``input_required``
key or the echoed text); a wrong answer aborts the run.

Run::

    cd <checkout>
    python bench/engine.py            # full: about 80 s
    python bench/engine.py --quick    # smoke check: under 30 s
    python bench/engine.py --json /tmp/engine.json   # + raw results
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/mcp_bench python bench/engine.py   # PostgreSQL

Markdown tables go to stdout, progress to stderr. Settings: ``bench.bench_settings``
(demo project, DEBUG off, quiet logging, anonymous MCP allowed) on a throw-away SQLite
file in a temp dir, migrated at start; with ``DATABASE_URL`` set, that database instead
(migrated and emptied with ``flush``: its name must contain ``bench``). Method and interpretation:
``docs/performance-durable.md``.
"""

# No ``from __future__ import annotations``: the benchmark's tools are defined inside a
# function (after django.setup()) with hints naming its locals, which string annotations
# could not resolve.

import argparse
import asyncio
import gc
import itertools
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

MODERN = "2026-07-28"
CAPABILITIES: dict[str, Any] = {"elicitation": {"form": {}}, "sampling": {}, "roots": {}}
ANSWER = {"action": "accept", "content": {"ok": True}}
ECHO_TEXT = "hello from the durable engine benchmark"
CONFIRM_SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean", "title": "Ok", "description": "Go ahead", "default": True}}}
SIZES = [1, 10, 100]


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# -- setup ----------------------------------------------------------------------------------

#: Database work seen by the server (any thread): connections opened, SQL statements run
#: through the cursor, and round trips to the database server. A round trip is a statement,
#: plus what the driver sends unseen by ``execute_wrapper``: PostgreSQL's implicit ``BEGIN``
#: (psycopg sends it before the first statement of a transaction), every ``COMMIT`` or
#: ``ROLLBACK`` of an open transaction, and the ``SELECT 1`` of a connection health check.
#: On SQLite every statement the library runs is counted (its trace callback, ``BEGIN`` and
#: ``COMMIT`` included): there is no server, so a statement is the nearest thing to a trip. Only
#: in the counted passes (:func:`counted`), not while rounds are timed.
DB_COUNTS = {"opens": 0, "queries": 0, "trips": 0}
#: While a list, every statement the store sends is appended to it as ``(sql, params)`` (for the storage floor).
CAPTURED: list[Any] | None = None


def _in_transaction(connection: Any) -> bool:
    """Whether the driver connection has a transaction open on the server."""
    raw = connection.connection
    if raw is None:
        return False
    if connection.vendor == "postgresql":
        from psycopg import pq

        return raw.info.transaction_status != pq.TransactionStatus.IDLE
    return bool(getattr(raw, "in_transaction", False))


def _count_query(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
    connection = context["connection"]
    if CAPTURED is not None:
        CAPTURED.append((sql, list(params) if params is not None else None))
    DB_COUNTS["queries"] += 1
    DB_COUNTS["trips"] += 1
    if connection.vendor == "postgresql" and not connection.get_autocommit() and not _in_transaction(connection):
        DB_COUNTS["trips"] += 1  # psycopg sends BEGIN first, in its own round trip
    return execute(sql, params, many, context)


def _counting(connection: Any, name: str, only_in_transaction: bool) -> None:
    """Wrap ``connection.<name>`` (an instance attribute) to count one round trip per call."""
    inner = getattr(connection, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not only_in_transaction or _in_transaction(connection):
            DB_COUNTS["trips"] += 1
        return inner(*args, **kwargs)

    setattr(connection, name, wrapper)


def _count_sqlite_statement(sql: str) -> None:
    DB_COUNTS["queries"] += 1
    DB_COUNTS["trips"] += 1


#: The SQLite connections the benchmark has seen, and whether their statements are counted now.
#: The trace callback costs ~12,000 instructions a statement (a call into Python with the statement's
#: text), which production never pays and a plain call (no SQL) does not pay here either: counted
#: during the timed rounds, it made a SQLite round 3-4% dearer (callgrind, session 32). So the timed
#: rounds run uncounted and the statement counts come from a counted pass of their own (:func:`counted`).
_SQLITE_CONNECTIONS: list[Any] = []
_SQLITE_COUNTING = [False]


def _is_open(raw: Any) -> bool:
    try:
        raw.in_transaction
    except Exception:  # sqlite3.ProgrammingError: closed
        return False
    return True


def _trace_sqlite(raw: Any) -> None:
    # Closed ones go (no weak references to sqlite3 connections): with CONN_MAX_AGE = 0 each round
    # opens one, and thousands kept alive made the collector's full passes, and the rounds, dearer.
    _SQLITE_CONNECTIONS[:] = [known for known in _SQLITE_CONNECTIONS if _is_open(known)]
    _SQLITE_CONNECTIONS.append(raw)
    raw.set_trace_callback(_count_sqlite_statement if _SQLITE_COUNTING[0] else None)


def count_sqlite_statements(on: bool) -> None:
    """Count (or stop counting) the statements of every SQLite connection, open or opened later."""
    _SQLITE_COUNTING[0] = on
    for raw in list(_SQLITE_CONNECTIONS):
        try:
            raw.set_trace_callback(_count_sqlite_statement if on else None)
        except Exception:  # closed (sqlite3.ProgrammingError): nothing more to count there
            _SQLITE_CONNECTIONS.remove(raw)


async def counted(pass_: Any) -> Any:
    """``await pass_()`` with SQLite's statements counted (they are not during timed rounds)."""
    count_sqlite_statements(True)
    try:
        return await pass_()
    finally:
        count_sqlite_statements(False)


COUNT_KEYS = ("queries", "trips", "trips_max")


def with_counts(timed: dict[str, float], counted_samples: list["Sample"]) -> dict[str, float]:
    """``timed`` (a :func:`summary` of uncounted rounds) with the statement and round-trip counts of a
    counted pass of the same requests (on PostgreSQL both passes count alike)."""
    return {**timed, **{k: v for k, v in summary(counted_samples).items() if k in COUNT_KEYS}}


def _on_connection_created(sender: Any, connection: Any, **kwargs: Any) -> None:
    DB_COUNTS["opens"] += 1
    if connection.vendor == "sqlite":
        # Counted by the library itself (every statement it runs, COMMIT included): an
        # execute wrapper would make the store use Django's cursor instead of the driver's
        # (mcp_tools/store/sql.py), which is not what runs in production.
        _trace_sqlite(connection.connection)
        return
    if _count_query not in connection.execute_wrappers:
        connection.execute_wrappers.append(_count_query)
    if not getattr(connection, "_bench_counting", False):  # the same wrapper object reconnects
        connection._bench_counting = True
        _counting(connection, "_commit", only_in_transaction=True)
        _counting(connection, "_rollback", only_in_transaction=True)
        _counting(connection, "is_usable", only_in_transaction=False)


def _count_connections() -> None:
    """Count each connection Django opens (and its statements): ``connect()`` wrapped, not a
    ``connection_created`` receiver, which would keep the SQLite lane closed (mcp_tools/store/lane.py:
    a receiver sets up Django's connections, not the lane's)."""
    from django.db.backends.base.base import BaseDatabaseWrapper

    connect = BaseDatabaseWrapper.connect

    def connect_counted(self: Any) -> None:
        connect(self)
        _on_connection_created(type(self), self)

    BaseDatabaseWrapper.connect = connect_counted  # type: ignore[method-assign]


def _count_lane_statements() -> None:
    """Count the statements of the event loop's SQLite lane (mcp_tools/store/lane.py) as the store
    thread's are: its connection is made by Django's backend but not through ``connect()``, so
    ``connection_created`` does not see it."""
    from mcp_tools.store import lane

    open_lane = lane._open_in_store_thread

    async def open_counted(alias: str) -> Any:
        opened = await open_lane(alias)
        if opened is not None:
            DB_COUNTS["opens"] += 1
            _trace_sqlite(opened.raw)
        return opened

    lane._open_in_store_thread = open_counted


def lane_in_use() -> bool:
    """Whether the durable rounds ran in the SQLite lane (no hop to the store's thread)."""
    from mcp_tools.store import lane

    return any(found is not None and found.usable() for found in lane._lanes.values())


def database_label() -> str:
    """The database the benchmark runs on, for the report."""
    from django.db import connection

    if connection.vendor == "sqlite":
        return f"SQLite {__import__('sqlite3').sqlite_version} (WAL, synchronous=NORMAL) in {tempfile.gettempdir()}"
    host = connection.settings_dict.get("HOST") or "local socket"
    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        version = cursor.fetchone()[0]
    return f"{connection.vendor} {version} at {host}, database {connection.settings_dict['NAME']}"


def setup_django(db_path: Path) -> Any:
    """Point the bench settings at ``db_path`` (SQLite) or ``DATABASE_URL``, set Django up, migrate;
    returns the ASGI app. A non-SQLite database is emptied first (``flush``), so it must be a
    throw-away one: its name must contain ``bench``."""
    os.environ["DJANGO_SETTINGS_MODULE"] = "bench.bench_settings"
    os.environ["BENCH_DB"] = str(db_path)
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", verbosity=0, interactive=False)
    if connection.vendor != "sqlite":
        if "bench" not in str(connection.settings_dict["NAME"]):
            raise SystemExit(f"refusing to empty database {connection.settings_dict['NAME']!r}: "
                             "point DATABASE_URL at a throw-away database whose name contains 'bench'")
        call_command("flush", verbosity=0, interactive=False)
    connection.close()  # the main thread's connection; requests use the DB worker thread's
    _count_connections()
    _count_lane_statements()
    from demo_site.asgi import application

    return application


def bench_tools() -> list[Any]:
    """The temporary tools the benchmark registers (names prefixed ``bench_``)."""
    from pydantic import BaseModel, Field

    from mcp_tools import ToolContext
    from mcp_tools.registry import make_tool

    class Confirm(BaseModel):
        ok: bool = Field(True, description="Go ahead")

    async def bench_echo_confirm(ctx: ToolContext, text: str) -> str:
        """Echo the text after asking the user once."""
        answer = await ctx.elicit("Send it back?", schema=Confirm, key="confirm")
        return text if answer.ok else ""

    async def bench_elicit_n(ctx: ToolContext, n: int) -> str:
        """Ask n questions (pydantic model schema), one per round."""
        yes = 0
        for i in range(n):
            answer = await ctx.elicit(f"Question {i}?", schema=Confirm, key=f"q{i}")
            yes += answer.ok
        return f"{yes}/{n}"

    async def bench_elicit_n_dict(ctx: ToolContext, n: int) -> str:
        """Ask n questions (plain JSON Schema dict), one per round."""
        yes = 0
        for i in range(n):
            answer = await ctx.elicit(f"Question {i}?", schema=CONFIRM_SCHEMA, key=f"q{i}")
            yes += bool(answer.get("ok"))
        return f"{yes}/{n}"

    def square(i: int) -> int:
        return i * i

    async def square_async(i: int) -> int:
        return i * i

    def once_n_tool(effect: Any, name: str, doc: str) -> Any:
        async def tool(ctx: ToolContext, n: int) -> str:
            total = 0
            for i in range(n):
                total += await ctx.once(f"s{i}", effect, i)
            answer = await ctx.elicit("Done?", schema=Confirm, key="done")
            return f"{total} {answer.ok}"

        tool.__name__ = tool.__qualname__ = name
        tool.__doc__ = doc
        return tool

    bench_once_n = once_n_tool(square, "bench_once_n", "Run n ctx.once steps, then ask once.")
    bench_once_async_n = once_n_tool(square_async, "bench_once_async_n", "Run n ctx.once steps of an async function, then ask once.")

    return [make_tool(f) for f in (bench_echo_confirm, bench_elicit_n, bench_elicit_n_dict, bench_once_n, bench_once_async_n)]


#: ``CONN_MAX_AGE`` of the settings (the demo's: 60 s), read before any switch.
CONFIGURED_MAX_AGE: list[Any] = []


async def set_connection_reuse(on: bool) -> None:
    """Switch between the configured ``CONN_MAX_AGE`` (the demo's 60 s: the worker thread's
    connection stays open) and 0 (a new connection per database hop)."""
    from django.db import connections

    if not CONFIGURED_MAX_AGE:
        CONFIGURED_MAX_AGE.append(connections.settings["default"].get("CONN_MAX_AGE", 0))
    connections.settings["default"]["CONN_MAX_AGE"] = CONFIGURED_MAX_AGE[0] if on else 0
    # The store's thread is the one every store coroutine runs in (mcp_tools/store/hop.py):
    # close its connection so the next one is opened with the new setting.
    from mcp_tools import store

    await store.close_connections()


# -- a lean in-process client (the ideas of tests/asgi_client.py) ------------------------------

_ids = itertools.count(1)
_HEADERS = [
    (b"host", b"localhost"),
    (b"content-type", b"application/json"),
    (b"accept", b"application/json, text/event-stream"),
    (b"mcp-protocol-version", MODERN.encode()),
    (b"mcp-method", b"tools/call"),
]


class Sample(NamedTuple):
    """One request as the server saw it."""

    wall: int  # ns, perf_counter around the ASGI app call
    cpu: int  # ns of process CPU time (event loop + DB worker thread)
    opens: int  # DB connections opened
    queries: int  # SQL statements (BEGIN/COMMIT included when Django issues them)
    trips: int  # round trips to the database (statements + implicit BEGIN, COMMIT, health checks)


class Client:
    """POSTs 2026-07-28 ``tools/call`` requests straight into the ASGI app and times them."""

    def __init__(self, app: Any) -> None:
        self.app = app

    @staticmethod
    def body(name: str, arguments: dict[str, Any], state: str | None, responses: dict[str, Any] | None) -> bytes:
        params: dict[str, Any] = {
            "name": name,
            "arguments": arguments,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": CAPABILITIES,
                "io.modelcontextprotocol/clientInfo": {"name": "bench-engine", "version": "1"},
            },
        }
        if responses is not None:
            params["inputResponses"] = responses
        if state is not None:
            params["requestState"] = state
        return json.dumps({"jsonrpc": "2.0", "id": next(_ids), "method": "tools/call", "params": params}).encode()

    async def post(self, name: str, body: bytes) -> tuple[int, bytes, Sample]:
        scope = {
            "type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}, "http_version": "1.1",
            "method": "POST", "scheme": "http", "path": "/mcp", "raw_path": b"/mcp", "root_path": "",
            "query_string": b"", "headers": [*_HEADERS, (b"mcp-name", name.encode())],
            "client": ("127.0.0.1", 50000), "server": ("localhost", 80),
        }
        finished = asyncio.Event()
        pending = [body]
        status = 0
        chunks: list[bytes] = []

        async def receive() -> dict[str, Any]:
            if pending:
                return {"type": "http.request", "body": pending.pop(), "more_body": False}
            await finished.wait()  # like a client that keeps its connection open
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
                if not message.get("more_body"):
                    finished.set()

        opens, queries, trips = DB_COUNTS["opens"], DB_COUNTS["queries"], DB_COUNTS["trips"]
        cpu = time.process_time_ns()
        wall = time.perf_counter_ns()
        try:
            await self.app(scope, receive, send)
        finally:
            finished.set()
        sample = Sample(time.perf_counter_ns() - wall, time.process_time_ns() - cpu,
                        DB_COUNTS["opens"] - opens, DB_COUNTS["queries"] - queries, DB_COUNTS["trips"] - trips)
        return status, b"".join(chunks), sample

    async def call(self, name: str, arguments: dict[str, Any], state: str | None = None,
                   responses: dict[str, Any] | None = None) -> tuple[dict[str, Any], Sample]:
        """One round: the JSON-RPC result (checked: HTTP 200, plain JSON, no error) and its sample."""
        status, raw, sample = await self.post(name, self.body(name, arguments, state, responses))
        if status != 200:
            raise RuntimeError(f"{name}: HTTP {status}: {raw[:300]!r}")
        if not raw.startswith(b"{"):
            raise RuntimeError(f"{name}: expected a JSON body, got {raw[:300]!r}")
        message = json.loads(raw)
        if "result" not in message:
            raise RuntimeError(f"{name}: error answer: {message}")
        return message["result"], sample


def expect_input_required(result: dict[str, Any], key: str) -> str:
    if result.get("resultType") != "input_required" or list(result.get("inputRequests", {})) != [key]:
        raise RuntimeError(f"expected input_required for {key!r}, got {json.dumps(result)[:300]}")
    return result["requestState"]


def expect_complete(result: dict[str, Any], text: str) -> None:
    if result.get("resultType", "complete") != "complete" or result.get("isError"):
        raise RuntimeError(f"expected a complete result, got {json.dumps(result)[:300]}")
    got = "".join(block.get("text", "") for block in result.get("content", []))
    if got != text:
        raise RuntimeError(f"expected {text!r}, got {got!r}")


# -- calls ------------------------------------------------------------------------------------


async def plain_call(client: Client) -> Sample:
    result, sample = await client.call("echo", {"text": ECHO_TEXT})
    expect_complete(result, ECHO_TEXT)
    return sample


async def elicit_call(client: Client) -> tuple[Sample, Sample]:
    """Both rounds of one eliciting echo."""
    args = {"text": ECHO_TEXT}
    result, first = await client.call("bench_echo_confirm", args)
    state = expect_input_required(result, "confirm")
    result, second = await client.call("bench_echo_confirm", args, state, {"confirm": ANSWER})
    expect_complete(result, ECHO_TEXT)
    return first, second


async def elicit_n_call(client: Client, tool: str, n: int) -> list[Sample]:
    """Every round of a call asking ``n`` elicitations one per round (n + 1 requests)."""
    args = {"n": n}
    result, sample = await client.call(tool, args)
    samples = [sample]
    for i in range(n):
        state = expect_input_required(result, f"q{i}")
        result, sample = await client.call(tool, args, state, {f"q{i}": ANSWER})
        samples.append(sample)
    expect_complete(result, f"{n}/{n}")
    return samples


async def once_n_call(client: Client, n: int, tool: str = "bench_once_n") -> tuple[Sample, Sample]:
    """``n`` once steps then one elicitation: (round 1, round 2)."""
    args = {"n": n}
    result, first = await client.call(tool, args)
    state = expect_input_required(result, "done")
    result, second = await client.call(tool, args, state, {"done": ANSWER})
    expect_complete(result, f"{sum(i * i for i in range(n))} True")
    return first, second


# -- statistics -------------------------------------------------------------------------------


def ms(ns: float) -> float:
    return ns / 1e6


def summary(samples: list[Sample]) -> dict[str, float]:
    walls = sorted(s.wall for s in samples)
    return {
        "n": len(samples),
        "mean_ms": ms(statistics.fmean(walls)),
        "median_ms": ms(statistics.median(walls)),
        "p90_ms": ms(walls[int(0.9 * (len(walls) - 1))]),
        "cpu_median_ms": ms(statistics.median(s.cpu for s in samples)),
        "cpu_mean_ms": ms(statistics.fmean(s.cpu for s in samples)),
        "opens": statistics.median(s.opens for s in samples),
        "queries": statistics.median(s.queries for s in samples),
        "trips": statistics.median(s.trips for s in samples),
        "trips_max": max(s.trips for s in samples),
    }


def combine(a: Sample, b: Sample) -> Sample:
    return Sample(*(x + y for x, y in zip(a, b)))


# -- 1. one elicitation round over a plain call ------------------------------------------------


async def measure_overhead(client: Client, calls: int, warmup: int, block: int) -> dict[str, Any]:
    """Plain echo and eliciting echo interleaved call by call; the configured ``CONN_MAX_AGE``
    (``demo``: the connection stays open) vs 0 (``new_conn``) in alternating blocks of ``block``
    calls, so both modes see the same machine conditions."""
    modes = ("demo", "new_conn")

    async def run(into: dict[str, list[Sample]], mode: str, size: int) -> None:
        await set_connection_reuse(mode == "demo")
        for _ in range(size):
            into["plain"].append(await plain_call(client))
            first, second = await elicit_call(client)
            into["round1"].append(first)
            into["round2"].append(second)

    # The warm-up is the counted pass: its statements and round trips are the ones reported.
    counts: dict[str, dict[str, list[Sample]]] = {m: {"plain": [], "round1": [], "round2": []} for m in modes}

    async def warm_up() -> None:
        for mode in modes:
            await run(counts[mode], mode, warmup)

    await counted(warm_up)
    data: dict[str, dict[str, list[Sample]]] = {m: {"plain": [], "round1": [], "round2": []} for m in modes}
    gc.collect()
    done = 0
    while done < calls:
        size = min(block, calls - done)
        for mode in modes:
            await run(data[mode], mode, size)
        done += size
    await set_connection_reuse(True)
    out: dict[str, Any] = {}
    for mode in modes:
        d, c = data[mode], counts[mode]
        total = [combine(a, b) for a, b in zip(d["round1"], d["round2"])]
        counted_total = [combine(a, b) for a, b in zip(c["round1"], c["round2"])]
        out[mode] = {key: with_counts(summary(d[key]), c[key]) for key in ("plain", "round1", "round2")}
        out[mode]["elicit_total"] = with_counts(summary(total), counted_total)
    return out


async def measure_floor(client: Client, calls: int) -> dict[str, Any]:
    """The database's own share of a round: the statements one round sent, run again through the
    raw driver (``sqlite3`` / ``psycopg`` connection of the store's thread, no Django, no
    mcp_tools), ``calls`` times with a fresh call id each, in the store's thread. What is left
    between this and the measured round is Python: ours, Django's and asyncio's."""
    global CAPTURED
    import uuid

    from django.db import connections

    from mcp_tools import store

    await elicit_call(client)  # the store thread's connection is open (the what-if above closed it)
    in_lane = lane_in_use()

    def capture(on: bool) -> None:  # on SQLite statements are counted by a trace callback, not captured
        wrappers = connections["default"].execute_wrappers
        if on and _count_query not in wrappers:
            wrappers.append(_count_query)
        elif not on and connections["default"].vendor == "sqlite":
            wrappers.remove(_count_query)

    await store.db(capture)(True)
    CAPTURED = []
    result, _ = await client.call("bench_echo_confirm", {"text": ECHO_TEXT})
    state = expect_input_required(result, "confirm")
    first = len(CAPTURED)
    result, _ = await client.call("bench_echo_confirm", {"text": ECHO_TEXT}, state, {"confirm": ANSWER})
    expect_complete(result, ECHO_TEXT)
    captured, CAPTURED = CAPTURED, None
    await store.db(capture)(False)
    round1, round2 = captured[:first], captured[first:]
    call_id = uuid.UUID(_call_id_of(round1))

    def replay() -> tuple[list[int], list[int]]:
        connection = connections["default"]
        raw = connection.connection
        sqlite = connection.vendor == "sqlite"
        old = {call_id.hex, str(call_id), call_id}
        times1: list[int] = []
        times2: list[int] = []
        for _ in range(calls):
            new_id = uuid.uuid4()
            new = new_id.hex if sqlite else new_id

            def run(statements: list[Any]) -> int:
                cursor = raw.cursor()
                start = time.perf_counter_ns()
                for sql, params in statements:
                    values = [new if (isinstance(p, (str, uuid.UUID)) and p in old) else p for p in params or []]
                    cursor.execute(sql.replace("%s", "?") if sqlite else sql, values)
                    if cursor.description is not None:
                        cursor.fetchall()
                return time.perf_counter_ns() - start

            times1.append(run(round1))
            times2.append(run(round2))
        return times1, times2

    times1, times2 = await store.db(replay)()
    # One hop to the store's thread and back with no work in it: what any round pays to
    # leave the event loop for its database work (Django's database API is synchronous).
    noop = store.db(lambda: None)
    hops: list[int] = []
    for _ in range(calls):
        start = time.perf_counter_ns()
        await noop()
        hops.append(time.perf_counter_ns() - start)
    return {"round1_ms": statistics.median(times1) / 1e6, "round2_ms": statistics.median(times2) / 1e6,
            "round1_statements": len(round1), "round2_statements": len(round2), "calls": calls,
            "hop_ms": statistics.median(hops) / 1e6, "lane": in_lane}


def _call_id_of(statements: list[Any]) -> str:
    """The id of the call a round-1 INSERT wrote (its first parameter)."""
    for sql, params in statements:
        if sql.lstrip().upper().startswith(("INSERT", "WITH")) and params:
            return str(params[0])
    raise RuntimeError("round 1 wrote no call row")


# -- 2. replay cost vs completed steps ---------------------------------------------------------


async def measure_replay(client: Client, per_cycle: dict[int, int], cycles: int) -> dict[str, Any]:
    """Every variant and every N interleaved: each cycle runs ``per_cycle[n]`` calls of each
    variant for each N, so a change in machine load hits all cells alike."""
    for tool in ("bench_elicit_n", "bench_elicit_n_dict"):
        await elicit_n_call(client, tool, 3)
    await once_n_call(client, 3)
    await once_n_call(client, 3, "bench_once_async_n")
    calls: dict[int, dict[str, list[Any]]] = {n: {"model": [], "dict": [], "once": [], "once_async": []} for n in SIZES}
    for cycle in range(cycles):
        gc.collect()
        for n in SIZES:
            for _ in range(per_cycle[n]):
                calls[n]["model"].append(await elicit_n_call(client, "bench_elicit_n", n))
                calls[n]["dict"].append(await elicit_n_call(client, "bench_elicit_n_dict", n))
                calls[n]["once"].append(await once_n_call(client, n))
                calls[n]["once_async"].append(await once_n_call(client, n, "bench_once_async_n"))
        log(f"  cycle {cycle + 1}/{cycles} done")
    # The statements and round trips each cell reports: one counted call of each (the timed ones ran uncounted).
    tally: dict[int, dict[str, Any]] = {n: {} for n in SIZES}

    async def count_each() -> None:
        for n in SIZES:
            tally[n]["model"] = await elicit_n_call(client, "bench_elicit_n", n)
            tally[n]["dict"] = await elicit_n_call(client, "bench_elicit_n_dict", n)
            tally[n]["once"] = await once_n_call(client, n)
            tally[n]["once_async"] = await once_n_call(client, n, "bench_once_async_n")

    await counted(count_each)
    out: dict[str, Any] = {}
    for n in SIZES:
        entry: dict[str, Any] = {"reps": len(calls[n]["model"])}
        for label in ("model", "dict"):
            runs = calls[n][label]
            entry[label] = {
                "first_round": with_counts(summary([c[0] for c in runs]), [tally[n][label][0]]),
                "last_round": with_counts(summary([c[-1] for c in runs]), [tally[n][label][-1]]),
                # Median wall / CPU ms of answer round k = 1..n (round k replays k-1 answered steps).
                "answer_rounds_ms": [round(ms(statistics.median(c[k].wall for c in runs)), 3) for k in range(1, n + 1)],
                "answer_rounds_cpu_ms": [round(ms(statistics.median(c[k].cpu for c in runs)), 3) for k in range(1, n + 1)],
                "call_total_ms": ms(statistics.median(sum(s.wall for s in c) for c in runs)),
            }
        for label in ("once", "once_async"):
            onces = calls[n][label]
            first, second = tally[n][label]
            entry[label] = {"round1": with_counts(summary([a for a, _ in onces]), [first]),
                            "round2": with_counts(summary([b for _, b in onces]), [second])}
        out[str(n)] = entry
    big = str(SIZES[-1])
    for label in ("model", "dict"):
        curve = out[big][label]["answer_rounds_cpu_ms"]
        # Slope of the answer round's CPU time over the steps it replays (k-1), within the same calls.
        slope = statistics.linear_regression(range(len(curve)), curve).slope if len(curve) > 2 else float("nan")
        out[big][label]["curve_slope_us"] = slope * 1000
    return out


async def measure_decomposition(budget_s: float) -> dict[str, Any]:
    """Split a replaying round of the calls part 2 completed into its two N-dependent parts,
    each timed alone: loading the journal (``store.load_call``, in the DB worker thread) and
    replaying it (``engine.run`` over the loaded journal: every step answered, no I/O)."""
    from asgiref.sync import sync_to_async

    from mcp_tools import engine
    from mcp_tools.server import core
    from mcp_tools.store import sync_calls as store
    from mcp_tools.server.auth import ANONYMOUS
    from mcp_tools.models import ToolCall
    from mcp_tools.registry import registry

    def find(tool: str, n: int) -> str:
        for call_id, arguments in ToolCall.objects.filter(tool_name=tool, status="completed").values_list("id", "arguments"):
            if arguments.get("arguments", {}).get("n") == n:
                return str(call_id)
        raise RuntimeError(f"no completed {tool} call with n={n}")

    def time_load(call_id: str) -> list[int]:
        samples: list[int] = []
        deadline = time.perf_counter() + budget_s
        while len(samples) < 5 or (time.perf_counter() < deadline and len(samples) < 2000):
            started = time.perf_counter_ns()
            store.load_call(call_id)
            samples.append(time.perf_counter_ns() - started)
        return samples

    from mcp_tools.engine import context

    flatten = context._flat_elicitation_schema
    memo: dict[Any, dict[str, Any]] = {}

    def flatten_cached(schema: Any) -> dict[str, Any]:
        """What-if: the flattened JSON Schema of a model class computed once per class."""
        if isinstance(schema, type):
            if schema not in memo:
                memo[schema] = flatten(schema)
            return memo[schema]
        return flatten(schema)

    out: dict[str, Any] = {}
    variants = (("bench_elicit_n", "model"), ("bench_elicit_n", "model_cached"), ("bench_elicit_n_dict", "dict"), ("bench_once_n", "once"))
    for tool, label in variants:
        target = registry.get_tool(tool)
        assert target is not None
        context._flat_elicitation_schema = flatten_cached if label == "model_cached" else flatten
        for n in SIZES:
            call_id = await sync_to_async(find)(tool, n)
            _, journal = await sync_to_async(store.load_call)(call_id)
            load = await sync_to_async(time_load)(call_id)
            replay: list[int] = []
            deadline = time.perf_counter() + budget_s
            while len(replay) < 5 or (time.perf_counter() < deadline and len(replay) < 5000):
                inv = engine.Invocation(
                    fn=target.fn, is_async=True, kwargs={"n": n}, context_param=target.context_param, principal=ANONYMOUS,
                    protocol_version=MODERN, client_capabilities=CAPABILITIES, runtime=core.RUNTIME, journal=journal,
                    call_id=call_id,
                )
                started = time.perf_counter_ns()
                outcome = await engine.run(inv)
                replay.append(time.perf_counter_ns() - started)
                if not isinstance(outcome, engine.Completed):
                    raise RuntimeError(f"replaying {tool} n={n} did not complete: {outcome}")
            out[f"{label}:{n}"] = {"steps": len(journal.steps), "load_us": statistics.median(load) / 1000,
                                   "replay_us": statistics.median(replay) / 1000}
    context._flat_elicitation_schema = flatten
    return out


# -- 3. memory (a child process on a fresh database) -------------------------------------------


def rss_bytes() -> int:
    try:
        import psutil  # type: ignore[import-not-found]

        return int(psutil.Process().memory_info().rss)
    except ImportError:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def rss_parts() -> dict[str, int]:
    """RssAnon / RssFile / RssShmem from /proc/self/status (Linux), in bytes."""
    parts: dict[str, int] = {}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("RssAnon", "RssFile", "RssShmem"):
                    parts[key] = int(value.split()[0]) * 1024
    except OSError:
        pass
    return parts


async def memory_probe() -> dict[str, int]:
    # Let the last request's finished tasks (the endpoint's disconnect watcher) go first.
    await asyncio.sleep(0.01)
    gc.collect()
    gc.collect()
    return {"rss": rss_bytes(), **rss_parts(), "blocks": sys.getallocatedblocks(), "objects": len(gc.get_objects()),
            "tasks": len(asyncio.all_tasks()), "threads": threading.active_count()}


def db_counts() -> dict[str, Any]:
    from django.db.models import Count

    from mcp_tools.models import CallStep, McpSession, StreamEvent, ToolCall

    by_status = dict(ToolCall.objects.order_by().values_list("status").annotate(c=Count("id")).values_list("status", "c"))
    return {"ToolCall": ToolCall.objects.count(), "ToolCall_by_status": by_status, "CallStep": CallStep.objects.count(),
            "McpSession": McpSession.objects.count(), "StreamEvent": StreamEvent.objects.count()}


def database_bytes(tmp: Path) -> int:
    """Size of the benchmark database: the SQLite files in ``tmp`` once its log is copied back, or
    PostgreSQL's database size.

    On SQLite the WAL is checkpointed and emptied first: the lane's checkpoints restart the log in
    place and leave the file as large as it grew (up to the checkpoint size, ~40 MB with the
    demo's settings), so the file's size says how much log was written once, not what the
    database holds."""
    import sqlite3

    from django.db import connection

    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_database_size(current_database())")
            return int(cursor.fetchone()[0])
    checkpointer = sqlite3.connect(connection.settings_dict["NAME"], timeout=20, isolation_level=None)
    try:
        checkpointer.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    finally:
        checkpointer.close()
    return sum(p.stat().st_size for p in tmp.iterdir())


def memory_child(count: int, warmup: int, checkpoints: int) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="mcp-engine-mem-"))
    app = setup_django(tmp / "memory.sqlite3")
    from asgiref.sync import sync_to_async

    from mcp_tools.registry import registry

    client = Client(app)

    async def suspend_one() -> None:
        result, _ = await client.call("bench_echo_confirm", {"text": ECHO_TEXT})
        expect_input_required(result, "confirm")

    async def run() -> dict[str, Any]:
        # Warm-up: plain, complete eliciting and suspended calls, so lazy imports, caches,
        # the worker thread and pydantic's schema machinery exist before the baseline.
        for _ in range(warmup):
            await plain_call(client)
            await elicit_call(client)
            await suspend_one()
        rows_before = await sync_to_async(db_counts)()
        before = await memory_probe()
        trace = [{"suspended": 0, **before}]
        every = max(1, count // checkpoints)
        started = time.perf_counter()
        for i in range(1, count + 1):
            await suspend_one()
            if i % every == 0 and i != count:
                trace.append({"suspended": i, **await memory_probe()})
        seconds = time.perf_counter() - started
        after = await memory_probe()
        trace.append({"suspended": count, **after})
        rows_after = await sync_to_async(db_counts)()
        db_bytes = await sync_to_async(database_bytes)(tmp)
        return {"count": count, "warmup": warmup, "before": before, "after": after, "trace": trace,
                "rows_before": rows_before, "rows_after": rows_after, "db_bytes": db_bytes,
                "seconds": seconds, "per_call_ms": seconds * 1000 / count}

    try:
        with registry.registered_temporarily(*bench_tools()):
            return asyncio.run(run())
    finally:
        for p in tmp.iterdir():
            p.unlink()
        tmp.rmdir()


def measure_memory(count: int, warmup: int, checkpoints: int) -> dict[str, Any]:
    command = [sys.executable, str(Path(__file__).resolve()), "--memory-child", str(count),
               "--memory-warmup", str(warmup), "--memory-checkpoints", str(checkpoints)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"memory child failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# -- report -----------------------------------------------------------------------------------


def mib(value: float) -> str:
    return f"{value / 2**20:.1f} MiB"


def _count(value: float) -> str:
    return f"{value:g}"


def report_overhead(o: dict[str, Any]) -> list[str]:
    d, r = o["demo"], o["new_conn"]
    plain = d["plain"]
    age = CONFIGURED_MAX_AGE[0] if CONFIGURED_MAX_AGE else "?"
    lines = [
        f"### 1. One elicitation round vs a plain `tools/call` ({plain['n']} calls each, interleaved)",
        "",
        f"Headline: the demo's setting, `CONN_MAX_AGE = {age}` (the DB worker thread's connection stays open); "
        "the `CONN_MAX_AGE = 0` rows (a new connection per hop) ran in alternating blocks of the same run. "
        "Round trips: statements + implicit BEGIN + COMMIT + health checks (median; max in brackets).",
        "",
        "| request | wall median ms | wall mean ms | wall p90 ms | CPU median ms | DB conns opened | SQL stmts | DB round trips | × plain (wall median) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    rows = (("plain", "plain `echo` call (1 request)"),
            ("round1", "eliciting echo, round 1 → `input_required`"),
            ("round2", "eliciting echo, round 2 (`inputResponses`) → complete"),
            ("elicit_total", "**eliciting echo, both rounds**"))
    for key, label in rows:
        s = d[key]
        lines.append(f"| {label} | {s['median_ms']:.3f} | {s['mean_ms']:.3f} | {s['p90_ms']:.3f} | {s['cpu_median_ms']:.3f} | "
                     f"{_count(s['opens'])} | {_count(s['queries'])} | {_count(s['trips'])} ({s['trips_max']}) | "
                     f"{s['median_ms'] / plain['median_ms']:.1f}× |")
    for key, label in rows:
        s = r[key]
        lines.append(f"| `CONN_MAX_AGE=0`: {label.strip('*')} | {s['median_ms']:.3f} | {s['mean_ms']:.3f} | "
                     f"{s['p90_ms']:.3f} | {s['cpu_median_ms']:.3f} | {_count(s['opens'])} | {_count(s['queries'])} | "
                     f"{_count(s['trips'])} ({s['trips_max']}) | {s['median_ms'] / r['plain']['median_ms']:.1f}× |")
    total = d["elicit_total"]
    lines += [
        "",
        f"**Eliciting call / plain call: {total['median_ms'] / plain['median_ms']:.1f}× wall (median), "
        f"{total['mean_ms'] / plain['mean_ms']:.1f}× wall (mean), {total['cpu_median_ms'] / plain['cpu_median_ms']:.1f}× CPU (median)**; "
        f"the elicitation adds {total['median_ms'] - plain['median_ms']:.2f} ms wall, "
        f"{total['cpu_median_ms'] - plain['cpu_median_ms']:.2f} ms CPU per call. "
        f"With `CONN_MAX_AGE = 0`: {r['elicit_total']['median_ms'] / r['plain']['median_ms']:.1f}× "
        f"({r['elicit_total']['median_ms']:.2f} ms vs {total['median_ms']:.2f} ms for both rounds).",
    ]
    return lines


def report_floor(f: dict[str, Any], o: dict[str, Any]) -> list[str]:
    plain = o["demo"]["plain"]["median_ms"]
    lines = [
        f"#### Storage floor ({f['calls']} replays)",
        "",
        "The statements one round sent (captured), run again through the raw driver in the store's "
        "thread with a fresh call id each time: the database's own work, with no Django, no mcp_tools, no thread hop.",
        "",
        "| round | statements | floor median ms | floor × plain | measured round ms | floor share of the round |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    hop = f["hop_ms"]
    lane = f.get("lane", False)
    bound_hop = 0.0 if lane else hop  # a round in the SQLite lane does not hop
    bounds = []
    for key, label in (("round1", "round 1 → `input_required`"), ("round2", "round 2 → complete")):
        measured = o["demo"][key]["median_ms"]
        floor = f[key + "_ms"]
        bound = plain + floor + bound_hop
        lines.append(f"| {label} | {f[key + '_statements']} | {floor:.3f} | {floor / plain:.1f}× | "
                     f"{measured:.3f} | {floor / measured:.0%} |")
        bounds.append(f"| {label} | {bound:.3f} | {bound / plain:.1f}× | {measured / plain:.1f}× | {measured / bound:.1f}× |")
    if lane:
        why = ("plus its storage floor. Its statements ran in the event loop's SQLite lane, with no hop to the store's "
               f"thread (an empty hop there: {hop:.3f} ms, {hop / plain:.1f}× plain, median of the same run, is not in the bound)")
        head = "plain + floor ms"
    else:
        why = ("plus its storage floor, plus at least one hop to the store's thread and back (an empty job: "
               f"{hop:.3f} ms, {hop / plain:.1f}× plain, median of the same run)")
        head = "plain + floor + hop ms"
    lines += [
        "",
        f"**Lower bound of a round on this machine**: a round does all a plain call does, {why}. "
        "Whatever the code, a round that commits its statements costs at least that much:",
        "",
        f"| round | {head} | lower bound × plain | measured × plain | measured × lower bound |",
        "|---|---:|---:|---:|---:|",
        *bounds,
    ]
    return lines


def report_replay(r: dict[str, Any]) -> list[str]:
    first = SIZES[0]

    def cell(n: int, path: tuple[str, ...]) -> tuple[float, float]:
        node = r[str(n)]
        for key in path:
            node = node[key]
        return node["median_ms"], node["cpu_median_ms"]

    lines = [
        "### 2. Replay cost vs completed steps",
        "",
        "A call asks N elicitations, one per round. Its **last round** (the N-th answer) loads N journal steps, "
        "replays N-1 answered ones, records the answer and completes. Median wall ms (CPU ms in brackets).",
        "",
        "| N | calls | `schema=Model`: last round | × N=1 | `schema=dict`: last round | × N=1 | N × `ctx.once` + 1 elicit: round 2 | × N=1 |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    variants = (("model", "last_round"), ("dict", "last_round"), ("once", "round2"))
    for n in SIZES:
        cells = []
        for path in variants:
            wall, cpu = cell(n, path)
            base, _ = cell(first, path)
            cells += [f"{wall:.2f} ({cpu:.2f})", f"{wall / base:.1f}×"]
        lines.append(f"| {n} | {r[str(n)]['reps']} | " + " | ".join(cells) + " |")
    big = SIZES[-1]
    lines += ["", f"Marginal cost per replayed step, (median at N={big} − median at N={first}) / {big - first} "
              "(elicitations replay N−1 steps, the once variant N), and, for the elicitation variants, the slope "
              f"of the answer round's CPU time over k within the N={big} calls:", "",
              "| | `schema=Model` | `schema=dict` | `ctx.once` |",
              "|---|---:|---:|---:|"]
    per_wall, per_cpu = [], []
    for path in variants:
        wall, cpu = cell(big, path)
        base_wall, base_cpu = cell(first, path)
        per_wall.append(f"{(wall - base_wall) * 1000 / (big - first):.0f}")
        per_cpu.append(f"{(cpu - base_cpu) * 1000 / (big - first):.0f}")
    slopes = [f"{r[str(big)][v]['curve_slope_us']:.0f}" for v in ("model", "dict")] + ["–"]
    stmts = [_count(r[str(big)][v][k]["queries"]) for v, k in variants]
    lines += ["| µs per replayed step (wall) | " + " | ".join(per_wall) + " |",
              "| µs per replayed step (CPU) | " + " | ".join(per_cpu) + " |",
              f"| µs per step, slope within the N={big} calls (CPU) | " + " | ".join(slopes) + " |",
              f"| SQL statements in that round at N={big} | " + " | ".join(stmts) + " |"]
    big = str(SIZES[-1])
    curve = r[big]["model"]["answer_rounds_ms"]
    picks = sorted({1, len(curve) // 4, len(curve) // 2, 3 * len(curve) // 4, len(curve)} - {0})
    lines += [
        "",
        f"Answer round k of the N={big} `schema=Model` call (replays k-1 steps), median wall ms: "
        + ", ".join(f"k={k}: {curve[k - 1]:.2f}" for k in picks)
        + f". Whole call ({int(big) + 1} requests): {r[big]['model']['call_total_ms']:.0f} ms with `schema=Model`, "
        f"{r[big]['dict']['call_total_ms']:.0f} ms with `schema=dict`.",
        "`ctx.once` round 1 (runs and journals N side effects), median wall ms: "
        + ", ".join(f"N={n}: {r[str(n)]['once']['round1']['median_ms']:.1f}" for n in SIZES) + "; "
        f"**marginal cost of a `ctx.once` step: {marginal_once_ms(r):.3f} ms** (wall, (N={big} − N={first}) / {int(big) - first}; "
        f"CPU {marginal_once_ms(r, 'cpu_median_ms'):.3f} ms); round trips of that round at N={big}: "
        f"{_count(r[big]['once']['round1']['trips'])}.",
        "With an async function (`await ctx.once(key, async_fn, i)`: its check before and its entry after, "
        "each a statement of its own; the function runs on the event loop): "
        + ", ".join(f"N={n}: {r[str(n)]['once_async']['round1']['median_ms']:.1f}" for n in SIZES) + "; "
        f"**marginal cost of an async `ctx.once` step: {marginal_once_ms(r, variant='once_async'):.3f} ms** "
        f"(CPU {marginal_once_ms(r, 'cpu_median_ms', 'once_async'):.3f} ms); round trips at N={big}: "
        f"{_count(r[big]['once_async']['round1']['trips'])}.",
    ]
    return lines


def marginal_once_ms(r: dict[str, Any], key: str = "median_ms", variant: str = "once") -> float:
    """(round 1 at the largest N − round 1 at N = 1) / (N − 1): what one more ``ctx.once`` step costs."""
    first, big = SIZES[0], SIZES[-1]
    return (r[str(big)][variant]["round1"][key] - r[str(first)][variant]["round1"][key]) / (big - first)


def report_decomposition(dec: dict[str, Any]) -> list[str]:
    labels = (("model", "`schema=Model`"), ("dict", "`schema=dict`"), ("once", "`ctx.once`"))
    lines = [
        "Where the N-dependent time goes: the two parts of a round that grow with the journal, each timed alone "
        "on the calls above (median µs): loading the journal (`store.load_call`: the call row + N step rows) and "
        "replaying it (`engine.run` over the loaded journal, every step answered, no I/O). Last column: the "
        "`schema=Model` replay with the flattened schema computed once per model class (what-if, patched in this "
        "process only).",
        "",
        "| N | " + " | ".join(f"{name}: load | {name}: replay" for _, name in labels) + " | what-if: `schema=Model` replay, schema cached |",
        "|---:|" + "---:|" * (2 * len(labels) + 1),
    ]
    for n in SIZES:
        cells = []
        for key, _ in labels:
            d = dec[f"{key}:{n}"]
            cells += [f"{d['load_us']:.0f}", f"{d['replay_us']:.0f}"]
        cells.append(f"{dec[f'model_cached:{n}']['replay_us']:.0f}")
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    first, big = SIZES[0], SIZES[-1]

    def per_step(key: str, part: str) -> str:
        a, b = dec[f"{key}:{first}"], dec[f"{key}:{big}"]
        return f"{(b[part] - a[part]) / (b['steps'] - a['steps']):.1f}"

    cells = []
    for key, _ in labels:
        cells += [per_step(key, "load_us"), per_step(key, "replay_us")]
    cells.append(per_step("model_cached", "replay_us"))
    lines.append("| **µs per step** | " + " | ".join(f"**{c}**" for c in cells) + " |")
    return lines


def _second_half(m: dict[str, Any]) -> str:
    """RSS and Python-block growth over the second half of the calls (past any warm-up plateau)."""
    trace = m["trace"]
    mid = min(trace, key=lambda t: abs(t["suspended"] - m["count"] / 2))
    last = trace[-1]
    calls = last["suspended"] - mid["suspended"]
    if calls <= 0:
        return ""
    return (f"Over the second half ({mid['suspended']:,} → {last['suspended']:,} calls): RSS "
            f"{(last['rss'] - mid['rss']) / 2**20:+.2f} MiB ({(last['rss'] - mid['rss']) / calls:.0f} B per call), "
            f"Python blocks {last['blocks'] - mid['blocks']:+,}.")


def report_memory(m: dict[str, Any]) -> list[str]:
    delta = m["after"]["rss"] - m["before"]["rss"]
    blocks = m["after"]["blocks"] - m["before"]["blocks"]
    objects = m["after"]["objects"] - m["before"]["objects"]
    lines = [
        f"### 3. Server memory with {m['count']:,} suspended calls (fresh DB, subprocess)",
        "",
        "| | RSS | Python allocated blocks | gc objects | asyncio tasks | threads |",
        "|---|---:|---:|---:|---:|---:|",
        f"| after warm-up ({m['warmup']} × plain + complete + suspended call) | {mib(m['before']['rss'])} | "
        f"{m['before']['blocks']:,} | {m['before']['objects']:,} | {m['before']['tasks']} | {m['before']['threads']} |",
        f"| after {m['count']:,} more suspended calls, `gc.collect()` | {mib(m['after']['rss'])} | {m['after']['blocks']:,} | "
        f"{m['after']['objects']:,} | {m['after']['tasks']} | {m['after']['threads']} |",
        f"| **delta** | **{delta / 2**20:+.2f} MiB** ({delta / m['count']:.0f} B per call) | {blocks:+,} ({blocks / m['count']:.2f} per call) | "
        f"{objects:+,} | {m['after']['tasks'] - m['before']['tasks']:+} | {m['after']['threads'] - m['before']['threads']:+} |",
        "",
        "RSS as the calls pile up: " + ", ".join(f"{t['suspended']:,} → {mib(t['rss'])}" for t in m["trace"]) + ". "
        + _second_half(m),
        "",
        "| table | rows after warm-up | rows after |",
        "|---|---:|---:|",
    ]
    for table in ("ToolCall", "CallStep", "McpSession", "StreamEvent"):
        lines.append(f"| {table} | {m['rows_before'][table]:,} | {m['rows_after'][table]:,} |")
    calls = max(1, m["rows_after"]["ToolCall"])
    parts = [k for k in ("RssAnon", "RssFile", "RssShmem") if k in m["before"] and k in m["after"]]
    lines += [
        "",
        "Where the RSS delta is: " + ", ".join(f"{k} {(m['after'][k] - m['before'][k]) / 2**20:+.2f} MiB" for k in parts) + "."
        if parts else "",
        "",
        f"`ToolCall` by status after: {m['rows_after']['ToolCall_by_status']}. Database size (SQLite db, its WAL checkpointed and emptied first, or PostgreSQL's): "
        f"{mib(m['db_bytes'])}, about {m['db_bytes'] / calls / 1024:.1f} KiB per call row. "
        f"A suspending request took {m['per_call_ms']:.2f} ms wall on average.",
    ]
    return lines


def environment(database: str) -> str:
    import django

    try:
        load = "load average %.2f %.2f %.2f" % os.getloadavg()
    except OSError:
        load = "load average n/a"
    return (f"Python {platform.python_version()}, Django {django.get_version()}, {platform.system()} {platform.machine()}, "
            f"{os.cpu_count()} CPUs ({load} at the end), {database}, DEBUG off.")


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions and 1,000 suspended calls (< 30 s)")
    parser.add_argument("--json", metavar="PATH", help="also write the raw results as JSON")
    parser.add_argument("--suspended", type=int, default=None, help="suspended calls for part 3 (default 10,000; --quick 1,000)")
    parser.add_argument("--no-health-checks", action="store_true",
                        help="what-if: CONN_HEALTH_CHECKS off (the demo turns them on with DATABASE_URL; on PostgreSQL "
                             "each database hop then starts with a SELECT 1 round trip)")
    parser.add_argument("--no-lane", action="store_true",
                        help="what-if: MCP_TOOLS['STORE_SQLITE_LANE'] off (every statement hops to the store's thread, "
                             "as before the lane; SQLite only)")
    parser.add_argument("--memory-child", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--memory-warmup", type=int, default=200, help=argparse.SUPPRESS)
    parser.add_argument("--memory-checkpoints", type=int, default=5, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.memory_child is not None:
        print(json.dumps(memory_child(args.memory_child, args.memory_warmup, args.memory_checkpoints)))
        return 0

    if args.quick:
        calls, warmup, block, per_cycle, cycles = 200, 20, 50, {1: 20, 10: 4, 100: 1}, 1
        suspended, mem_warmup = args.suspended or 1_000, 50
    else:
        calls, warmup, block, per_cycle, cycles = 1_000, 50, 50, {1: 30, 10: 6, 100: 1}, 5
        suspended, mem_warmup = args.suspended or 10_000, 200

    started = time.perf_counter()
    if args.no_lane:  # read by bench/bench_settings.py (here and in the memory child); override_settings
        os.environ["BENCH_NO_LANE"] = "1"  # would slow every settings lookup and skew the what-if
    tmp = Path(tempfile.mkdtemp(prefix="mcp-engine-bench-"))
    results: dict[str, Any] = {"quick": args.quick}
    try:
        app = setup_django(tmp / "engine.sqlite3")
        from mcp_tools.registry import registry

        results["database"] = database_label()
        if args.no_health_checks:
            from django.db import connections

            connections.settings["default"]["CONN_HEALTH_CHECKS"] = False  # read at the next connect
            results["database"] += ", what-if CONN_HEALTH_CHECKS off"
        if args.no_lane:
            results["database"] += ", what-if STORE_SQLITE_LANE off"

        client = Client(app)

        async def parts_1_2() -> None:
            log(f"1. plain vs eliciting call: {calls} calls each, demo CONN_MAX_AGE and 0, on {results['database']}")
            results["overhead"] = await measure_overhead(client, calls, warmup, block)
            log("1b. storage floor: the statements of one round, replayed through the raw driver")
            results["floor"] = await measure_floor(client, calls)
            log(f"2. replay cost, N = {SIZES}, {cycles} cycles of {per_cycle} calls (demo CONN_MAX_AGE)")
            results["replay"] = await measure_replay(client, per_cycle, cycles)
            log("2b. decomposition: journal load and in-memory replay, timed alone")
            results["decomposition"] = await measure_decomposition(0.1 if args.quick else 0.3)

        with registry.registered_temporarily(*bench_tools()):
            asyncio.run(parts_1_2())
        log(f"3. memory with {suspended:,} suspended calls (subprocess, fresh DB)")
        results["memory"] = measure_memory(suspended, mem_warmup, 10)
    finally:
        for p in tmp.iterdir():
            p.unlink()
        tmp.rmdir()
    results["seconds"] = time.perf_counter() - started
    results["environment"] = environment(results["database"])

    out = [f"## Durable engine benchmark{' (--quick)' if args.quick else ''}", "",
           f"{results['environment']} Total run: {results['seconds']:.0f} s.", ""]
    out += report_overhead(results["overhead"]) + [""] + report_floor(results["floor"], results["overhead"]) + [""] + report_replay(results["replay"]) + [""] + report_decomposition(results["decomposition"]) + [""] + report_memory(results["memory"])
    print("\n".join(out))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
