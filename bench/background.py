#!/usr/bin/env python
"""Benchmark of background calls on Celery, against real processes (a benchmark, not a test).

    python bench/background.py [--quick] [--only embedded redis] [--postgres URL] [--redis-url URL]

Per configuration (broker x database) it starts ``daphne demo_site.asgi:application`` and
two ``celery -A demo_site worker --pool=solo`` processes with ``bench.background_settings``
(the demo plus ``bench/bgapp``: a ``background=True`` tool ``bench_bg`` and its inline twin
``bench_inline``, whose first line sends ``time.time()`` as a UDP probe), and measures:

1. **Latency** from sending ``tools/call`` to the handler's first line on a worker, one call at
   a time (the next call is sent once the previous one finished): p50 and p99, and where
   the time goes (probes: ``published`` after the row committed, Celery's ``prerun``, the
   handler's ``start``, ``postrun`` after the outcome is in the row). The client is a raw
   2026-07-28 client that declares ``io.modelcontextprotocol/tasks``, so the answer is a
   ``CreateTaskResult`` at once and the request does not wait for the worker.
2. **Overhead** of the background path over the same tool run inline: alternating blocks
   of background and inline calls, one at a time; end-to-end time per call (background:
   send -> outcome written; inline: send -> response) and CPU time per call of the server
   and both workers (``/proc``, net of what they burn idle), as ratios.
3. **Throughput**: with the workers stopped, 1,000 background calls are queued (8 at a
   time); then both workers start, and the drain time is from the first task starting to
   the last outcome written. The database is checked afterwards: every row completed.

Configurations: ``embedded`` (the ``mcpfs://`` file broker in a temp folder, SQLite) and
``redis`` (``--redis-url``, SQLite); ``redis+postgres`` with ``--postgres URL`` (a database
this script creates if needed and migrates; use one of your own). All run in one
invocation, so the ratios between them come from the same machine state.

Results: markdown on stdout (progress on stderr), raw numbers in
``bench/results/<stamp>-background/results.json`` with the process logs. Nothing is pinned:
the server, the workers and this client share the machine's cores.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
RESULTS_DIR = BENCH_DIR / "results"
HOST = "127.0.0.1"
MODERN = "2026-07-28"
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
# Not the brief's /0: other runs (tests on Redis) consume the default "celery" queue of db 0,
# and a worker of theirs would take (and drop) our calls. A database of our own avoids that.
DEFAULT_REDIS = "redis://127.0.0.1:6379/9"
GOAL_P50_MS = 20.0


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# -- probes ----------------------------------------------------------------------------------


class Probes:
    """Receives the UDP probe events of every process (see ``bench/bgapp/probes.py``)."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 * 1024 * 1024)
        self.sock.bind((HOST, 0))
        self.address = f"{HOST}:{self.sock.getsockname()[1]}"
        self.events: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)  # call id or tag -> event -> payload
        self.ready: list[dict[str, Any]] = []
        self.lock = threading.Condition()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            data, _ = self.sock.recvfrom(65536)
            event = json.loads(data)
            with self.lock:
                if event["ev"] == "ready":
                    self.ready.append(event)
                else:
                    for key in (event.get("call"), event.get("tag")):
                        if key:
                            self.events[key][event["ev"]] = event
                self.lock.notify_all()

    def wait(self, key: str, event: str, timeout: float = 30) -> dict[str, Any]:
        with self.lock:
            if not self.lock.wait_for(lambda: event in self.events.get(key, {}), timeout):
                raise RuntimeError(f"no {event!r} probe for {key} within {timeout}s")
            return self.events[key][event]

    def wait_count(self, keys: list[str], event: str, timeout: float) -> int:
        with self.lock:
            self.lock.wait_for(lambda: all(event in self.events.get(k, {}) for k in keys), timeout)
            return sum(event in self.events.get(k, {}) for k in keys)

    def wait_ready(self, count: int, timeout: float = 60) -> None:
        with self.lock:
            if not self.lock.wait_for(lambda: len(self.ready) >= count, timeout):
                raise RuntimeError(f"only {len(self.ready)} of {count} workers ready within {timeout}s")


# -- processes -------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, in seconds (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Proc:
    """A child process with its log; stopped with SIGTERM (then SIGKILL) by its own pid."""

    def __init__(self, name: str, cmd: list[str], env: dict[str, str], log_dir: Path) -> None:
        self.name = name
        self.log_path = log_dir / f"{name}.log"
        self.log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def check_alive(self) -> None:
        if self.proc.poll() is not None:
            raise RuntimeError(f"{self.name} exited: {self.log_path.read_text(errors='replace')[-2000:]}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.log.close()


def start_server(env: dict[str, str], log_dir: Path) -> tuple[Proc, str]:
    port = free_port()
    server = Proc("daphne", [sys.executable, "-m", "daphne", "-b", HOST, "-p", str(port), "-v", "0",
                             "demo_site.asgi:application"], env, log_dir)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        server.check_alive()
        try:
            with socket.create_connection((HOST, port), timeout=0.3):
                return server, f"http://{HOST}:{port}/mcp"
        except OSError:
            time.sleep(0.1)
    server.stop()
    raise RuntimeError("daphne did not listen within 30 s")


def start_workers(env: dict[str, str], log_dir: Path, probes: Probes, count: int = 2) -> list[Proc]:
    """``count`` solo-pool workers; returns once each reported ``worker_ready``."""
    before = len(probes.ready)
    workers = [
        Proc(f"worker{i}", [sys.executable, "-m", "celery", "-A", "demo_site", "worker", "--pool=solo",
                            "--loglevel=WARNING", "--without-gossip", "--without-mingle", "--without-heartbeat",
                            "-n", f"bench{i}-{os.getpid()}@%h"], env, log_dir)
        for i in range(1, count + 1)
    ]
    try:
        probes.wait_ready(before + count, timeout=90)
    except RuntimeError:
        for worker in workers:
            worker.stop()
        raise
    return workers


# -- the client ------------------------------------------------------------------------------


def request(name: str, tag: str, request_id: int) -> tuple[dict[str, Any], dict[str, str]]:
    """A 2026-07-28 ``tools/call`` from a client that declares the tasks extension."""
    params = {"name": name, "arguments": {"tag": tag}, "_meta": {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS_EXTENSION: {}}},
        "io.modelcontextprotocol/clientInfo": {"name": "bench-background", "version": "1"},
    }}
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
               "MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": name}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}, headers


def answer(response: httpx.Response, request_id: int) -> dict[str, Any]:
    """The JSON-RPC result of a JSON or SSE response; raises on anything else."""
    if response.status_code != 200:
        raise RuntimeError(f"HTTP {response.status_code}: {response.text[:300]}")
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        messages = []
        for block in response.text.replace("\r\n", "\n").split("\n\n"):
            data = "\n".join(line[5:].lstrip() for line in block.split("\n") if line.startswith("data:"))
            if data.strip():
                messages.append(json.loads(data))
    else:
        messages = [response.json()]
    for message in messages:
        if message.get("id") == request_id:
            if "result" not in message:
                raise RuntimeError(f"JSON-RPC error: {message}")
            return message["result"]
    raise RuntimeError(f"no answer to {request_id}: {response.text[:300]}")


class Client:
    """One keep-alive connection, sequential calls."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.http = httpx.Client(timeout=30)
        self.next_id = 0

    def call(self, name: str, tag: str) -> tuple[float, float, dict[str, Any]]:
        """(send time, answer time, result), wall clock."""
        self.next_id += 1
        body, headers = request(name, tag, self.next_id)
        sent = time.time()
        response = self.http.post(self.url, json=body, headers=headers)
        received = time.time()
        return sent, received, answer(response, self.next_id)

    def background(self, tag: str) -> tuple[float, float, str]:
        sent, received, result = self.call("bench_bg", tag)
        if result.get("resultType") != "task" or not result.get("taskId"):
            raise RuntimeError(f"expected a CreateTaskResult, got {result}")
        return sent, received, result["taskId"]

    def inline(self, tag: str) -> tuple[float, float]:
        sent, received, result = self.call("bench_inline", tag)
        if result.get("structuredContent", {}).get("tag") != tag:
            raise RuntimeError(f"unexpected inline result {result}")
        return sent, received

    def close(self) -> None:
        self.http.close()


async def submit_many(url: str, tags: list[str], concurrency: int) -> list[str]:
    """Queue background calls, ``concurrency`` at a time; returns their task ids in order."""
    ids: list[str] = [""] * len(tags)
    gate = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(timeout=60, limits=limits) as http:
        async def one(index: int, tag: str) -> None:
            async with gate:
                body, headers = request("bench_bg", tag, index + 1)
                result = answer(await http.post(url, json=body, headers=headers), index + 1)
                if result.get("resultType") != "task":
                    raise RuntimeError(f"expected a CreateTaskResult, got {result}")
                ids[index] = result["taskId"]
        await asyncio.gather(*(one(i, tag) for i, tag in enumerate(tags)))
    return ids


# -- database --------------------------------------------------------------------------------


def row_statuses(env: dict[str, str], tool: str) -> dict[str, int]:
    """``status -> count`` of ``tool``'s rows, read by a Django process on the config's database."""
    code = (
        "import django, json; django.setup()\n"
        "from django.db.models import Count\n"
        "from mcp_tools.models import ToolCall\n"
        f"rows = ToolCall.objects.filter(tool_name={tool!r}).values('status').annotate(n=Count('id'))\n"
        "print(json.dumps({r['status']: r['n'] for r in rows}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def ensure_postgres_db(url: str) -> None:
    """Create the benchmark's PostgreSQL database if it does not exist (connects to ``postgres``)."""
    import dj_database_url
    import psycopg

    conf = dj_database_url.parse(url)
    name = conf["NAME"]
    admin = psycopg.connect(host=conf["HOST"] or None, port=conf["PORT"] or None, user=conf["USER"] or None,
                            password=conf["PASSWORD"] or None, dbname="postgres", autocommit=True)
    with admin:
        if admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None:
            admin.execute(f'CREATE DATABASE "{name}"')


# -- measurements ----------------------------------------------------------------------------


def pct(values: list[float], q: float) -> float:
    """The q-quantile (0..1) by nearest rank; values in any order."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))]


@dataclass
class ConfigResult:
    name: str
    broker: str
    database: str
    latency_ms: list[float] = field(default_factory=list)  # send -> handler start
    phases_ms: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    queries: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    e2e_ms: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))  # "background"/"inline"
    cpu_ms_per_call: dict[str, float] = field(default_factory=dict)
    idle_cpu_share: float = 0.0  # share of one core that server + workers use with nothing to do
    submit: dict[str, float] = field(default_factory=dict)
    drain: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def p(self, q: float) -> float:
        return pct(self.latency_ms, q)


def sequential_background(client: Client, probes: Probes, tag: str) -> dict[str, Any]:
    sent, received, call_id = client.background(tag)
    done = probes.wait(call_id, "postrun")
    events = probes.events[call_id]
    return {"sent": sent, "received": received, "call": call_id, "events": events, "done": done["t"]}


def measure_sequential(result: ConfigResult, client: Client, probes: Probes, pids: list[int], calls: int,
                       block: int, prefix: str) -> None:
    """Alternating blocks of background and inline calls, one at a time, CPU per block."""
    def cpu() -> float:
        return sum(cpu_seconds(pid) for pid in pids)

    # What the processes burn doing nothing (the file broker polls its folder): subtracted below.
    time.sleep(0.5)
    idle_c0, idle_t0 = cpu(), time.monotonic()
    time.sleep(3)
    result.idle_cpu_share = (cpu() - idle_c0) / (time.monotonic() - idle_t0)
    totals = {"background": [0.0, 0.0, 0], "inline": [0.0, 0.0, 0]}  # cpu s, wall s, calls
    n = 0
    while n < calls:
        for kind in ("background", "inline"):
            c0, t0 = cpu(), time.monotonic()
            for i in range(block):
                tag = f"{prefix}-{kind}-{n + i}"
                if kind == "inline":
                    sent, received = client.inline(tag)
                    result.e2e_ms["inline"].append((received - sent) * 1000)
                    continue
                run = sequential_background(client, probes, tag)
                ev = run["events"]
                if "start" not in ev:
                    probes.wait(run["call"], "start", 5)
                start = ev["start"]["t"]
                result.latency_ms.append((start - run["sent"]) * 1000)
                result.e2e_ms["background"].append((run["done"] - run["sent"]) * 1000)
                phases = result.phases_ms
                phases["send -> row committed, task published"].append((ev["published"]["t"] - run["sent"]) * 1000)
                phases["send -> CreateTaskResult received"].append((run["received"] - run["sent"]) * 1000)
                phases["published -> Celery task starts"].append((ev["prerun"]["t"] - ev["published"]["t"]) * 1000)
                phases["task starts -> handler's first line"].append((start - ev["prerun"]["t"]) * 1000)
                phases["handler -> outcome written"].append((run["done"] - start) * 1000)
                result.queries["worker"].append(ev["postrun"]["q"] - ev["prerun"]["q"])
            time.sleep(0.3)  # let late acknowledgements and wakeups settle into this block's CPU
            c1, t1 = cpu(), time.monotonic()
            totals[kind][0] += c1 - c0
            totals[kind][1] += t1 - t0
            totals[kind][2] += block
        n += block
    for kind, (cpu_s, wall_s, count) in totals.items():
        result.cpu_ms_per_call[kind] = max(0.0, cpu_s - result.idle_cpu_share * wall_s) / count * 1000
        result.cpu_ms_per_call[kind + " (raw)"] = cpu_s / count * 1000
    # Server queries per background call: between consecutive "published" probes of the sequential run.
    published = sorted((e["published"] for e in probes.events.values()
                        if "published" in e and str(e.get("start", {}).get("tag", "")).startswith(f"{prefix}-background")),
                       key=lambda e: e["t"])
    result.queries["server"] = [b["q"] - a["q"] for a, b in zip(published, published[1:])]


def measure_throughput(result: ConfigResult, url: str, env: dict[str, str], probes: Probes, log_dir: Path,
                       count: int, prefix: str) -> None:
    tags = [f"{prefix}-{i}" for i in range(count)]
    t0 = time.monotonic()
    ids = asyncio.run(submit_many(url, tags, concurrency=8))
    submit_s = time.monotonic() - t0
    result.submit = {"calls": count, "seconds": submit_s, "calls_per_s": count / submit_s}
    log(f"    queued {count} calls in {submit_s:.1f} s ({count / submit_s:.0f}/s); starting 2 workers")
    spawned = time.time()
    workers = start_workers(env, log_dir, probes)
    try:
        got = probes.wait_count(ids, "postrun", timeout=600)
        if got < count:
            result.problems.append(f"throughput: only {got} of {count} calls finished within 600 s")
    finally:
        for worker in workers:
            worker.stop()
    events = [probes.events[i] for i in ids]
    prerun = [e["prerun"]["t"] for e in events if "prerun" in e]
    postrun = [e["postrun"]["t"] for e in events if "postrun" in e]
    by_pid: dict[int, int] = defaultdict(int)
    for e in events:
        if "postrun" in e:
            by_pid[e["postrun"]["pid"]] += 1
    outcomes: dict[str, int] = defaultdict(int)
    for e in events:
        if "postrun" in e:
            outcomes[e["postrun"].get("outcome", "?")] += 1
    drain_s = max(postrun) - min(prerun) if prerun and postrun else float("nan")
    # Per worker: time inside the task (prerun -> postrun) and between its tasks (postrun -> next prerun).
    inside, between = [], []
    for pid in by_pid:
        mine = sorted((e["prerun"]["t"], e["postrun"]["t"]) for e in events if "postrun" in e and e["postrun"]["pid"] == pid)
        inside += [(b - a) * 1000 for a, b in mine]
        between += [(nxt[0] - cur[1]) * 1000 for cur, nxt in zip(mine, mine[1:])]
    result.drain = {
        "calls": count, "finished": len(postrun), "drain_s": drain_s, "calls_per_s": len(postrun) / drain_s,
        "from_spawn_s": max(postrun) - spawned if postrun else float("nan"),
        "per_worker": sorted(by_pid.values()), "outcomes": dict(outcomes),
        "task_ms_p50": pct(inside, 0.5), "task_ms_p99": pct(inside, 0.99),
        "between_tasks_ms_p50": pct(between, 0.5), "between_tasks_ms_p99": pct(between, 0.99),
    }
    statuses = row_statuses(env, "bench_bg")
    result.drain["rows"] = statuses
    if outcomes.get("finished", 0) != count:
        result.problems.append(f"throughput: worker outcomes {dict(outcomes)}")


def run_config(name: str, broker: str, database: str, extra_env: dict[str, str], base_env: dict[str, str],
               args: argparse.Namespace, probes: Probes, log_dir: Path) -> ConfigResult:
    result = ConfigResult(name, broker, database)
    env = {**base_env, **extra_env}
    log(f"[{name}] migrating")
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
    config_logs = log_dir / name.replace("+", "-")
    config_logs.mkdir(parents=True, exist_ok=True)
    server, url = start_server(env, config_logs)
    workers: list[Proc] = []
    client = Client(url)
    try:
        workers = start_workers(env, config_logs, probes)
        log(f"[{name}] warm-up")
        for i in range(args.warmup):
            sequential_background(client, probes, f"{name}-warm-bg-{i}")
            client.inline(f"{name}-warm-in-{i}")
        log(f"[{name}] latency and overhead: {args.calls} background + {args.calls} inline calls, one at a time")
        measure_sequential(result, client, probes, [server.pid] + [w.pid for w in workers], args.calls, args.block,
                           prefix=f"{name}-seq")
        log(f"[{name}] p50 {result.p(0.5):.1f} ms  p99 {result.p(0.99):.1f} ms  "
            f"cpu/call bg {result.cpu_ms_per_call['background']:.1f} ms inline {result.cpu_ms_per_call['inline']:.1f} ms  "
            f"idle {result.idle_cpu_share:.1%}")
        for worker in workers:
            worker.stop()
        workers = []
        log(f"[{name}] throughput: {args.throughput} queued calls, 2 workers")
        measure_throughput(result, url, env, probes, config_logs, args.throughput, prefix=f"{name}-tp")
        log(f"[{name}] drained {result.drain['finished']} in {result.drain['drain_s']:.1f} s "
            f"({result.drain['calls_per_s']:.0f}/s), per worker {result.drain['per_worker']}, rows {result.drain['rows']}")
    except Exception as exc:  # noqa: BLE001 - report and go on with the other configurations
        result.problems.append(f"failed: {exc!r}")
        log(f"[{name}] FAILED: {exc!r}")
    finally:
        client.close()
        for worker in workers:
            worker.stop()
        server.stop()
    return result


# -- report ----------------------------------------------------------------------------------


def report(results: list[ConfigResult], meta: dict[str, Any]) -> str:
    ok = [r for r in results if r.latency_ms]
    lines = [
        f"Background calls, {meta['calls']} sequential calls per kind, {meta['throughput']} queued for throughput; "
        f"{meta['cpus']} CPUs, {meta['machine']}, Python {meta['python']}; {meta['stamp']}."
        + (f" What-if: embedded broker polling every {meta['broker_poll']} s." if meta.get("broker_poll") else ""),
        "",
        "| config | broker | database | tools/call -> handler p50 (ms) | p99 (ms) | goal p50 <= 20 ms |",
        "|---|---|---|---:|---:|---|",
    ]
    for r in ok:
        goal = ("yes" if r.p(0.5) <= GOAL_P50_MS else "NO") if r.broker == "redis" else "—"
        lines.append(f"| {r.name} | {r.broker} | {r.database} | {r.p(0.5):.1f} | {r.p(0.99):.1f} | {goal} |")
    phases = list(ok[0].phases_ms) if ok else []
    lines += ["", "Where the time goes (medians, ms; one call at a time):", "",
              "| phase | " + " | ".join(r.name for r in ok) + " |", "|---|" + "---:|" * len(ok)]
    for phase in phases:
        lines.append(f"| {phase} | " + " | ".join(f"{statistics.median(r.phases_ms[phase]):.1f}" for r in ok) + " |")
    lines.append("| SQL statements: server per call / worker per call | "
                 + " | ".join(f"{statistics.median(r.queries['server']) if r.queries['server'] else '?'} / "
                              f"{statistics.median(r.queries['worker']):.0f}" for r in ok) + " |")
    lines += ["", "Background path vs the same tool inline (one call at a time):", "",
              "| config | end-to-end p50 bg / inline (ms) | ratio | end-to-end p99 bg / inline (ms) | "
              "CPU per call bg / inline (ms) | ratio | idle CPU of server + workers |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    for r in ok:
        bg, inl = statistics.median(r.e2e_ms["background"]), statistics.median(r.e2e_ms["inline"])
        cbg, cin = r.cpu_ms_per_call["background"], r.cpu_ms_per_call["inline"]
        p99 = f"{pct(r.e2e_ms['background'], 0.99):.0f} / {pct(r.e2e_ms['inline'], 0.99):.1f}"
        lines.append(f"| {r.name} | {bg:.1f} / {inl:.1f} | {bg / inl:.1f}x | {p99} | {cbg:.1f} / {cin:.1f} | "
                     f"{(cbg / cin if cin else float('nan')):.1f}x | {r.idle_cpu_share:.1%} of a core |")
    lines += ["", f"Throughput: {meta['throughput']} queued calls, 2 solo workers:", "",
              "| config | queued by the server (calls/s, 8 at a time) | drain (s) | calls/s | per worker | "
              "in a task p50 / p99 (ms) | between tasks p50 / p99 (ms) | rows |",
              "|---|---:|---:|---:|---|---:|---:|---|"]
    for r in results:
        if r.drain:
            lines.append(f"| {r.name} | {r.submit['calls_per_s']:.0f} | {r.drain['drain_s']:.1f} | "
                         f"{r.drain['calls_per_s']:.0f} | {r.drain['per_worker']} | "
                         f"{r.drain['task_ms_p50']:.0f} / {r.drain['task_ms_p99']:.0f} | "
                         f"{r.drain['between_tasks_ms_p50']:.0f} / {r.drain['between_tasks_ms_p99']:.0f} | {r.drain['rows']} |")
    ratios = [r for r in results if r.drain and r.drain.get("calls_per_s")]
    if len(ratios) > 1:
        base = ratios[0]
        lines += ["", "Ratios to " + base.name + ": " + "; ".join(
            f"{r.name}: p50 {r.p(0.5) / base.p(0.5):.2f}x, drain calls/s {r.drain['calls_per_s'] / base.drain['calls_per_s']:.2f}x"
            for r in ratios[1:])]
    bad = [r for r in results if r.problems]
    if bad:
        lines += ["", "**Problems** (do not use these numbers):"]
        lines += [f"- {r.name}: {'; '.join(r.problems)}" for r in bad]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="60 sequential calls per kind, 200 queued")
    parser.add_argument("--only", nargs="*", help="configurations to run: embedded, redis, redis+postgres")
    parser.add_argument("--redis-url", default=DEFAULT_REDIS, help=f"Redis for the redis configurations ({DEFAULT_REDIS})")
    parser.add_argument("--postgres", metavar="URL", help="also run redis+postgres on this database (created if missing)")
    parser.add_argument("--broker-poll", type=float, metavar="SECONDS",
                        help="what-if: the embedded broker's polling interval (the demo's is 0.05)")
    parser.add_argument("--calls", type=int, help="sequential calls per kind (default 300, --quick 60)")
    parser.add_argument("--throughput", type=int, help="queued calls (default 1000, --quick 200)")
    args = parser.parse_args()
    args.calls = args.calls or (60 if args.quick else 300)
    args.throughput = args.throughput or (200 if args.quick else 1000)
    args.block = 20 if args.quick else 50
    args.calls = max(args.block, args.calls // args.block * args.block)
    args.warmup = 10

    stamp = time.strftime("%Y%m%d-%H%M%S")
    out_dir = RESULTS_DIR / f"{stamp}-background"
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="mcp-tools-bench-bg-"))
    probes = Probes()
    base_env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "DJANGO_DEBUG")}
    base_env.update({"PYTHONPATH": str(ROOT), "DJANGO_SETTINGS_MODULE": "bench.background_settings",
                     "MCP_ALLOW_ANONYMOUS": "1", "PYTHONDONTWRITEBYTECODE": "1", "BENCH_UDP": probes.address,
                     "MCP_TOOLS_LOG_LEVEL": "WARNING"})
    if args.broker_poll:
        base_env["BENCH_BROKER_POLL"] = str(args.broker_poll)
    configs = [
        ("embedded", "mcpfs (files)", "SQLite", {"BENCH_DB": str(tmp / "embedded.sqlite3"),
                                                  "MCP_TOOLS_BROKER_DIR": str(tmp / "broker")}),
        ("redis", "redis", "SQLite", {"BENCH_DB": str(tmp / "redis.sqlite3"), "REDIS_URL": args.redis_url}),
    ]
    if args.postgres:
        ensure_postgres_db(args.postgres)
        configs.append(("redis+postgres", "redis", "PostgreSQL",
                        {"DATABASE_URL": args.postgres, "REDIS_URL": args.redis_url}))
    if args.only:
        configs = [c for c in configs if c[0] in args.only]
    meta = {"stamp": stamp, "calls": args.calls, "throughput": args.throughput, "quick": args.quick,
            "python": sys.version.split()[0], "machine": platform.platform(), "cpus": os.cpu_count(),
            "configs": [c[:3] for c in configs], "broker_poll": args.broker_poll}
    started = time.monotonic()
    results = []
    try:
        for name, broker, database, extra in configs:
            results.append(run_config(name, broker, database, extra, base_env, args, probes, out_dir))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    meta["elapsed_s"] = round(time.monotonic() - started, 1)
    markdown = report(results, meta)
    payload = {"meta": meta, "results": [{**r.__dict__, "p50_ms": r.p(0.5), "p99_ms": r.p(0.99)} for r in results]}
    (out_dir / "results.json").write_text(json.dumps(payload, indent=2, default=str))
    (out_dir / "results.md").write_text(markdown + "\n")
    print(markdown)
    log(f"\n(elapsed {meta['elapsed_s']} s; raw results and logs in {out_dir})")
    return 1 if any(r.problems for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
