#!/usr/bin/env python
"""What the call table's indexes cost a durable round's commit on SQLite (a benchmark, not a test).

    python bench/index_cost.py [--blocks 30] [-n 200]

A round that suspends writes one ``ToolCall`` row and its first step in one transaction; every
index on ``mcp_tools_toolcall`` adds at least one B-tree page to that commit's WAL frames. This
measures that price: it migrates a throw-away SQLite file (the demo's WAL settings), makes one real
eliciting call through the endpoint so the tables hold a real row and step, copies the file twice,
drops the admin console's indexes from one copy, and then times ``BEGIN IMMEDIATE; INSERT call;
INSERT step; COMMIT`` (what ``store.sql.Statements.insert_call`` sends) on both copies through the
raw driver, block by block, alternating. The figure per copy is the median of the blocks' CPU time
per transaction; their difference is what those indexes cost each suspending round.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

#: The indexes the admin console's pages and the retention purge read (ToolCall.Meta and the
#: created_at column's db_index); the rest (primary key, partial background/user/session indexes)
#: stay in both copies.
CONSOLE_INDEXES = ("mcp_tools_toolcall_created_at_61e6986a", "mcp_call_status_updated", "mcp_call_expires",
                   "mcp_call_status_created", "mcp_call_tool_created", "mcp_call_updated")


def populate(db: Path) -> None:
    """Migrate ``db`` and make one eliciting call (round 1: a call row and a pending step)."""
    import bench.engine as engine
    from mcp_tools.registry import registry

    app = engine.setup_django(db)
    for tool in engine.bench_tools():
        registry.register_tool(tool)
    client = engine.Client(app)

    async def one() -> None:
        result, _ = await client.call("bench_echo_confirm", {"text": engine.ECHO_TEXT})
        engine.expect_input_required(result, "confirm")

    asyncio.run(one())
    from django.db import connections

    connections.close_all()


class Copy:
    def __init__(self, source: Path, path: Path, drop: tuple[str, ...]) -> None:
        with sqlite3.connect(source) as src, sqlite3.connect(path) as dst:
            src.backup(dst)  # a consistent copy, with what is still in the source's WAL file
        self.db = sqlite3.connect(path, isolation_level=None)
        for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "wal_autocheckpoint=10000"):
            self.db.execute(f"PRAGMA {pragma}")
        for index in drop:
            self.db.execute(f'DROP INDEX "{index}"')
        self.indexes = [r[0] for r in self.db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'mcp_tools_toolcall'")]
        call_columns = [r[1] for r in self.db.execute("PRAGMA table_info(mcp_tools_toolcall)")]
        step_columns = [r[1] for r in self.db.execute("PRAGMA table_info(mcp_tools_callstep)") if r[1] != "id"]
        self.call_row = list(self.db.execute(f"SELECT {', '.join(call_columns)} FROM mcp_tools_toolcall LIMIT 1").fetchone())
        self.step_row = list(self.db.execute(f"SELECT {', '.join(step_columns)} FROM mcp_tools_callstep LIMIT 1").fetchone())
        self.call_id = call_columns.index("id")
        self.step_call = step_columns.index("call_id")
        self.insert_call = f"INSERT INTO mcp_tools_toolcall ({', '.join(call_columns)}) VALUES ({', '.join('?' * len(call_columns))})"
        self.insert_step = f"INSERT INTO mcp_tools_callstep ({', '.join(step_columns)}) VALUES ({', '.join('?' * len(step_columns))})"

    def block(self, n: int) -> float:
        """CPU µs per round-1 transaction over ``n`` of them."""
        started = time.process_time()
        for _ in range(n):
            call, step = list(self.call_row), list(self.step_row)
            call[self.call_id] = step[self.step_call] = uuid.uuid4().hex
            self.db.execute("BEGIN IMMEDIATE")
            self.db.execute(self.insert_call, call)
            self.db.execute(self.insert_step, step)
            self.db.execute("COMMIT")
        return (time.process_time() - started) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--blocks", type=int, default=30)
    parser.add_argument("-n", type=int, default=200, help="transactions per block")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="mcp-tools-index-cost-"))
    populate(tmp / "source.sqlite3")
    copies = {"all indexes": Copy(tmp / "source.sqlite3", tmp / "all.sqlite3", ()),
              "without the console's": Copy(tmp / "source.sqlite3", tmp / "fewer.sqlite3", CONSOLE_INDEXES)}
    times: dict[str, list[float]] = {name: [] for name in copies}
    for _ in range(args.blocks):
        for name, copy in copies.items():
            times[name].append(copy.block(args.n))
    medians = {name: statistics.median(values) for name, values in times.items()}
    print(f"SQLite {sqlite3.sqlite_version}, WAL, synchronous=NORMAL; median of {args.blocks} blocks x {args.n} "
          "round-1 transactions (CPU µs per transaction)")
    for name, copy in copies.items():
        print(f"  {name:24} {medians[name]:7.1f}   ({len(copy.indexes)} indexes on the call table)")
    saved = medians["all indexes"] - medians["without the console's"]
    print(f"  the {len(CONSOLE_INDEXES)} console indexes cost {saved:.1f} µs per suspending round's commit "
          f"({saved / len(CONSOLE_INDEXES):.1f} µs each)")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
