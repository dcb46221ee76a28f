#!/usr/bin/env python
"""Side-by-side HTTP benchmark of the MCP endpoint (a benchmark, not a test).

    python bench/run.py [--quick] [--only NAME ...] [--uvicorn-standard] [--baseline DIR] [--rounds N]
                        [--py-spy] [--what-if FIXES]

Each server is pinned to CPU 0 (``taskset -c 0``); ``wrk`` runs on
CPU 1 with ``bench/echo.lua``, which POSTs ``tools/call`` ``echo`` and checks
every response body. Per server and protocol era:

* throughput: 32 connections, 3 rounds of 4 s (``--quick``: 1 round of 3 s),
  after a short warm-up; the best round counts, and the server's CPU time per
  request (from ``/proc``) is recorded as a load-independent cost;
* latency: 1 connection, p50/p99, 2 rounds of 3 s (``--quick``: 1 of 2 s), best round.

All servers are started first (idle servers cost nothing) and the rounds go
round-robin over them, so a burst of foreign load on the machine hits
different servers in different rounds instead of one server's whole run.

Servers: mcp_tools (demo project) under uvicorn and daphne, the official SDK
(``mcp`` 2.3.0) and fastmcp under uvicorn, and four references without MCP work:
a raw ASGI app answering the same bytes as mcp_tools's echo under uvicorn (the
ceiling; ``raw-asgi-chunked`` is the same answer framed in chunks, as mcp_tools answered
before issue 9's third pass), a bare Channels ``AsyncHttpConsumer`` under daphne and a plain Django
async view under uvicorn. Every uvicorn row runs ``--http h11 --loop asyncio`` (spelled out, so
that installing ``uvicorn[standard]`` does not change them); ``--uvicorn-standard`` adds a twin of
each, ``<name>-std``, under ``--http httptools --loop uvloop`` (what uvicorn documents for
production), all other settings the same, in the same round-robin run. Results: a markdown table on stdout and
``bench/results/<stamp>/`` (``results.{json,md}``, every wrk run, server logs). A run with a wrong body, a socket error
or a non-2xx answer is INVALID (exit status 1).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
RESULTS_DIR = BENCH_DIR / "results"
LUA = BENCH_DIR / "echo.lua"
BIN = Path(sys.executable).parent
ECHO_TEXT = "bench-echo-7f3a"
SERVER_CPU = "0"
LOAD_CPU = "1"
HOST = "127.0.0.1"

ERA_2025 = "2025-11-25"
ERA_2026 = "2026-07-28"
REF = "ref"  # reference apps: no MCP, the 2026 request is sent and a fixed body comes back


@dataclass
class Server:
    name: str
    cmd: list[str]
    eras: list[str]
    note: str = ""
    root: Path | None = None  # another checkout to serve this row from (``--baseline``); None: this one


#: uvicorn's HTTP parser and event loop, spelled out: with ``uvicorn[standard]`` installed its default
#: ("auto") would pick httptools and uvloop, and the h11 rows would silently change meaning.
UVICORN_H11 = ["--http", "h11", "--loop", "asyncio"]
#: What uvicorn documents for production (``pip install uvicorn[standard]``): ``--uvicorn-standard`` rows.
UVICORN_STANDARD = ["--http", "httptools", "--loop", "uvloop"]
STANDARD_SUFFIX = "-std"  # "sdk/uvicorn" -> "sdk/uvicorn-std"


def uvicorn(app: str) -> list[str]:
    return [str(BIN / "uvicorn"), app, "--host", HOST, "--port", "{port}", "--no-access-log", "--log-level", "warning",
            *UVICORN_H11]


def standard_twin(server: Server) -> Server:
    """The same server under httptools + uvloop (every other setting the same), named ``<name>-std``."""
    at = server.cmd.index("--http")
    cmd = server.cmd[:at] + UVICORN_STANDARD + server.cmd[at + len(UVICORN_H11):]
    note = (server.note + "; " if server.note else "") + "uvicorn --http httptools --loop uvloop"
    return Server(server.name + STANDARD_SUFFIX, cmd, server.eras, note=note, root=server.root)


def daphne(app: str) -> list[str]:
    return [str(BIN / "daphne"), "-b", HOST, "-p", "{port}", "-v", "0", app]


SERVERS = [
    Server("mcp_tools/uvicorn", uvicorn("demo_site.asgi:application"), [ERA_2025, ERA_2026]),
    Server("mcp_tools/daphne", daphne("demo_site.asgi:application"), [ERA_2025, ERA_2026]),
    Server("sdk/uvicorn", uvicorn("bench.sdk_app:app"), [ERA_2025, ERA_2026],
           note="mcp 2.3.0 MCPServer.streamable_http_app(json_response=True), stateful"),
    Server("fastmcp/uvicorn", uvicorn("bench.fastmcp_app:app"), [ERA_2025, ERA_2026],
           note="fastmcp http_app(json_response=True), stateful"),
    Server("raw-asgi/uvicorn", uvicorn("bench.raw_app:app"), [REF],
           note="raw ASGI app, the same bytes as mcp_tools's 2026 echo answer (the ceiling)"),
    Server("raw-asgi-chunked/uvicorn", uvicorn("bench.raw_app:chunked_app"), [REF],
           note="the same without content-length, sent chunked (mcp_tools's framing before issue 9's third pass)"),
    Server("channels-consumer/daphne", daphne("bench.ref_apps:consumer_app"), [REF],
           note="bare AsyncHttpConsumer, fixed JSON body"),
    Server("django-view/uvicorn", uvicorn("bench.ref_apps:django_app"), [REF],
           note="plain Django async view (demo middleware), fixed JSON body"),
]


@dataclass
class Result:
    server: str
    era: str
    rounds: list[dict] = field(default_factory=list)  # throughput rounds (c=32)
    latency_rounds: list[dict] = field(default_factory=list)  # c=1 rounds
    problems: list[str] = field(default_factory=list)

    @staticmethod
    def _rps(run: dict) -> float:
        return run["requests"] / (run["duration_us"] / 1e6)

    @property
    def best(self) -> dict:
        return max(self.rounds, key=self._rps) if self.rounds else {}

    @property
    def rps(self) -> float:
        return self._rps(self.best) if self.rounds else 0.0

    @property
    def rps_all(self) -> list[float]:
        return [self._rps(run) for run in self.rounds]

    @property
    def rps_median(self) -> float:
        """Median req/s over the throughput rounds (what the target ratios use)."""
        values = sorted(self.rps_all)
        if not values:
            return 0.0
        mid = len(values) // 2
        return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2

    @property
    def cpu_us(self) -> float:
        """Median server CPU time per request over the throughput rounds (µs)."""
        values = sorted(run["server_cpu_s"] / run["requests"] * 1e6 for run in self.rounds if run["requests"])
        return values[len(values) // 2] if values else 0.0

    @property
    def server_cpu(self) -> float:
        """Share of one core the server used in the best round."""
        return self.best.get("server_cpu_share", 0.0)

    @property
    def foreign(self) -> float:
        """Most CPU 0 time used by other processes during a throughput round (share of the core)."""
        return max((run.get("foreign_cpu0", 0.0) for run in self.rounds), default=0.0)

    @property
    def _lat(self) -> dict:
        return min(self.latency_rounds, key=lambda run: run["latency_us"]["p50"])["latency_us"] if self.latency_rounds else {}

    @property
    def p50_ms(self) -> float:
        return self._lat.get("p50", 0) / 1000

    @property
    def p99_ms(self) -> float:
        return self._lat.get("p99", 0) / 1000


# -- processes -------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (all its threads), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu0_times() -> tuple[float, float]:
    """(busy, total) jiffies of the server's CPU, from /proc/stat."""
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith(f"cpu{SERVER_CPU} "):
            values = [int(v) for v in line.split()[1:]]
            idle = values[3] + values[4]  # idle + iowait
            return sum(values) - idle, sum(values)
    return 0.0, 0.0


def post(url: str, body: dict, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    data = json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method="POST", headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, {k.lower(): v for k, v in resp.headers.items()}, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, {k.lower(): v for k, v in exc.headers.items()}, exc.read()


class Running:
    def __init__(self, server: Server, env: dict[str, str], log_dir: Path) -> None:
        self.server = server
        self.port = free_port()
        self.url = f"http://{HOST}:{self.port}/mcp"
        cmd = ["taskset", "-c", SERVER_CPU] + [part.replace("{port}", str(self.port)) for part in server.cmd]
        self.log_path = log_dir / (server.name.replace("/", "-") + ".log")
        self.log = open(self.log_path, "wb")
        cwd = server.root or ROOT
        if server.root is not None:  # the other checkout's package first on the path, its own database
            env = {**env, "PYTHONPATH": str(server.root), "BENCH_DB": env["BENCH_DB"] + ".baseline"}
        # taskset execs the server: self.proc.pid is the server process itself.
        self.proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=self.log, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.server.name} exited: {self.log_path.read_text()[-2000:]}")
            try:
                with socket.create_connection((HOST, self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"{self.server.name} did not listen within {timeout}s")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def open_session(url: str) -> str | None:
    """2025-11-25 handshake: initialize + notifications/initialized; returns the Mcp-Session-Id."""
    status, headers, body = post(url, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": ERA_2025, "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}, {})
    if status != 200:
        raise RuntimeError(f"initialize failed: {status} {body[:300]!r}")
    session = headers.get("mcp-session-id")
    extra = {"MCP-Protocol-Version": ERA_2025, **({"Mcp-Session-Id": session} if session else {})}
    status, _, body = post(url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, extra)
    if status not in (200, 202):
        raise RuntimeError(f"notifications/initialized failed: {status} {body[:300]!r}")
    return session


def wrk(url: str, era: str, session: str | None, connections: int, seconds: float, out: Path) -> dict:
    env = {**os.environ, "BENCH_ERA": "2025" if era == ERA_2025 else "2026", "BENCH_SESSION": session or "",
           "BENCH_TEXT": ECHO_TEXT, "BENCH_OUT": str(out)}
    cmd = ["taskset", "-c", LOAD_CPU, "wrk", "-t1", f"-c{connections}", f"-d{max(1, round(seconds))}s",
           "--timeout", "10s", "--latency", "-s", str(LUA), url]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=seconds + 60)
    if proc.returncode != 0 or not out.exists():
        raise RuntimeError(f"wrk failed ({proc.returncode}): {proc.stderr or proc.stdout}")
    data = json.loads(out.read_text())
    data["wrk_stdout"] = proc.stdout
    return data


def check(data: dict, what: str) -> list[str]:
    problems = []
    if data["bad"]:
        problems.append(f"{what}: {data['bad']} wrong responses (e.g. {data['bad_sample'][:200]})")
    errs = {k: v for k, v in data["errors"].items() if v}
    if errs:
        problems.append(f"{what}: socket/status errors {errs}")
    if data["requests"] == 0:
        problems.append(f"{what}: no requests completed")
    return problems


def django_counts(env: dict[str, str]) -> dict[str, int]:
    code = (
        "import django; django.setup()\n"
        "from mcp_tools.models import ToolCall, CallStep, McpSession, StreamEvent\n"
        "import json; print(json.dumps({'ToolCall': ToolCall.objects.count(), 'CallStep': CallStep.objects.count(),"
        " 'McpSession': McpSession.objects.count(), 'StreamEvent': StreamEvent.objects.count()}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


# -- the run ---------------------------------------------------------------------------

@dataclass
class Target:
    running: Running
    era: str
    result: Result
    session: str | None = None

    @property
    def slug(self) -> str:
        return f"{self.running.server.name.replace('/', '-')}-{self.era}"


def measure_throughput(target: Target, args: argparse.Namespace, raw_dir: Path, round_number: int) -> None:
    pid = target.running.proc.pid
    profiler = None
    if args.py_spy and round_number == 0 and target.running.server.name.startswith("mcp_tools"):
        profiler = subprocess.Popen(
            ["taskset", "-c", LOAD_CPU, str(BIN / "py-spy"), "record", "--pid", str(pid), "--threads",
             "--duration", str(round(args.seconds)), "--rate", "100", "--format", "raw",
             "-o", str(raw_dir / f"{target.slug}.py-spy.txt")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cpu_before, busy_before, wall_before = cpu_seconds(pid), cpu0_times(), time.monotonic()
    run = wrk(target.running.url, target.era, target.session, 32, args.seconds,
              raw_dir / f"{target.slug}-c32-r{round_number}.json")
    wall = time.monotonic() - wall_before
    busy_after = cpu0_times()
    run["server_cpu_s"] = cpu_seconds(pid) - cpu_before
    run["server_cpu_share"] = run["server_cpu_s"] / wall
    if busy_after[1] > busy_before[1]:
        busy_share = (busy_after[0] - busy_before[0]) / (busy_after[1] - busy_before[1])
        run["foreign_cpu0"] = max(0.0, busy_share - run["server_cpu_share"])
    if profiler is not None:
        profiler.wait(60)
    target.result.problems += check(run, f"c=32 round {round_number + 1}")
    target.result.rounds.append(run)


def run_all(servers: list[Server], env: dict[str, str], args: argparse.Namespace, raw_dir: Path) -> list[Result]:
    running: list[Running] = []
    targets: list[Target] = []
    try:
        for server in servers:
            running.append(Running(server, env, raw_dir))
        for proc in running:
            proc.wait_ready()
            for era in proc.server.eras:
                targets.append(Target(proc, era, Result(proc.server.name, era)))

        def guarded(target: Target, what: str, fn: Any) -> None:
            if any(p.startswith("failed") for p in target.result.problems):
                return
            try:
                fn()
            except Exception as exc:  # noqa: BLE001 - report and go on with the other servers
                target.result.problems.append(f"failed ({what}): {exc}")

        for target in targets:
            def warm(target: Target = target) -> None:
                if target.era == ERA_2025:
                    target.session = open_session(target.running.url)
                warm_run = wrk(target.running.url, target.era, target.session, 32, args.warmup, raw_dir / f"{target.slug}-warmup.json")
                target.result.problems += check(warm_run, "warm-up")
            guarded(target, "warm-up", warm)
        for round_number in range(args.rounds):
            for target in targets:
                guarded(target, "c=32", lambda target=target: measure_throughput(target, args, raw_dir, round_number))
                r = target.result
                last = r.rounds[-1] if r.rounds else {"requests": 0, "duration_us": 1, "server_cpu_s": 0.0}
                print(f"  round {round_number + 1}/{args.rounds}  {r.server:26} {r.era:10} "
                      f"{Result._rps(last):7.0f} req/s  server cpu {last.get('server_cpu_share', 0):4.0%}  "
                      f"{last['server_cpu_s'] / max(1, last['requests']) * 1e6:6.0f} µs/req  "
                      f"other load on cpu{SERVER_CPU} {last.get('foreign_cpu0', 0):4.0%}", file=sys.stderr, flush=True)
        for round_number in range(args.latency_rounds):
            for target in targets:
                def lat(target: Target = target) -> None:
                    run = wrk(target.running.url, target.era, target.session, 1, args.latency_seconds,
                              raw_dir / f"{target.slug}-c1-r{round_number}.json")
                    target.result.problems += check(run, f"c=1 round {round_number + 1}")
                    target.result.latency_rounds.append(run)
                guarded(target, "c=1", lat)
        for target in targets:
            r = target.result
            status = "OK" if not r.problems else "INVALID: " + "; ".join(r.problems)
            print(f"  {r.server:26} {r.era:10} best {r.rps:7.0f} req/s  {r.cpu_us:6.0f} µs/req  p50 {r.p50_ms:6.2f} ms  "
                  f"p99 {r.p99_ms:6.2f} ms  {status}", file=sys.stderr, flush=True)
    finally:
        for proc in running:
            proc.stop()
    return [t.result for t in targets]


def package_versions() -> str:
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for name in ("uvicorn", "h11", "httptools", "uvloop", "mcp", "fastmcp"):
        try:
            found.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            found.append(f"{name} not installed")
    return ", ".join(found)


def config_of(server: str) -> str:
    """The server part of a row's name: ``uvicorn``, ``uvicorn-std`` or ``daphne``."""
    return server.rsplit("/", 1)[-1]


def fmt_ratio(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}×"


def report(results: list[Result], meta: dict) -> str:
    by = {(r.server, r.era): r for r in results}

    def ratio(a: Result | None, b: Result | None, attr: str) -> float | None:
        if a is None or b is None or a.problems or b.problems or not getattr(b, attr):
            return None
        return getattr(a, attr) / getattr(b, attr)

    lines = [
        f"Run {meta['stamp']} ({'quick' if meta['quick'] else 'full'}, database: {meta.get('database', 'SQLite')}): servers pinned to CPU {SERVER_CPU}, wrk on CPU {LOAD_CPU}. "
        f"req/s: best of {meta['rounds']} × {meta['seconds']:.0f} s at 32 connections; CPU µs/req: the server's CPU time "
        f"per request (median of the rounds; lower is better); p50/p99: best of {meta['latency_rounds']} × "
        f"{meta['latency_seconds']:.0f} s at 1 connection. \"vs SDK\": ratio to the official SDK under the same uvicorn "
        f"configuration, same era ({meta.get('versions', '')}).",
        "",
        "| server | era | req/s | req/s median | req/s vs SDK | CPU µs/req | CPU vs SDK | p50 ms | p50 vs SDK | p99 ms | valid |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        sdk = by.get((f"sdk/{config_of(r.server)}", r.era))
        era = "—" if r.era == REF else r.era
        lines.append(
            f"| {r.server} | {era} | {r.rps:,.0f} | {r.rps_median:,.0f} | {fmt_ratio(ratio(r, sdk, 'rps'))} | {r.cpu_us:,.0f} | "
            f"{fmt_ratio(ratio(r, sdk, 'cpu_us'))} | {r.p50_ms:.2f} | {fmt_ratio(ratio(r, sdk, 'p50_ms'))} | "
            f"{r.p99_ms:.2f} | {'yes' if not r.problems else 'NO'} |"
        )
    consumer = by.get(("channels-consumer/daphne", REF))
    lines += ["", f"Targets: req/s ratios of the medians over the {meta['rounds']} rounds (measured side by side, "
                  "round-robin); CPU/req ratios of the median CPU µs per request. `uvicorn`: h11 + asyncio; "
                  "`uvicorn-std`: httptools + uvloop (uvicorn[standard]), every other setting the same.", "",
              "| target | req/s ratio (medians) | CPU/req ratio | met |", "|---|---:|---:|---|"]
    for config in ("uvicorn", "uvicorn" + STANDARD_SUFFIX):
        raw = by.get((f"raw-asgi/{config}", REF))
        # A --baseline checkout from before issue 9's third pass answers chunked, like this ceiling.
        raw_chunked = by.get((f"raw-asgi-chunked/{config}", REF)) or raw
        for era in (ERA_2025, ERA_2026):
            mine, sdk = by.get((f"mcp_tools/{config}", era)), by.get((f"sdk/{config}", era))
            value = ratio(mine, sdk, "rps_median")
            if mine is not None and sdk is not None:
                lines.append(f"| mcp_tools/{config} ≥ 2.5 × sdk/{config}, {era} | {fmt_ratio(value)} | "
                             f"{fmt_ratio(ratio(mine, sdk, 'cpu_us'))} | {'—' if value is None else 'yes' if value >= 2.5 else 'NO'} |")
            fast = by.get((f"fastmcp/{config}", era))
            if mine is not None and fast is not None:
                lines.append(f"| mcp_tools/{config} vs fastmcp/{config}, {era} (no target) | "
                             f"{fmt_ratio(ratio(mine, fast, 'rps_median'))} | {fmt_ratio(ratio(mine, fast, 'cpu_us'))} | — |")
            for name, ceiling in (("mcp_tools", raw), ("mcp_tools@baseline", raw_chunked)):
                served = by.get((f"{name}/{config}", era))
                if served is not None and ceiling is not None:
                    lines.append(f"| {name}/{config} CPU/req as a multiple of the raw ASGI ceiling ({ceiling.server}), {era} | "
                                 f"{fmt_ratio(ratio(served, ceiling, 'rps_median'))} | {fmt_ratio(ratio(served, ceiling, 'cpu_us'))} "
                                 f"({served.cpu_us - ceiling.cpu_us:,.0f} µs above) | — |")
    for name in ("mcp_tools", "mcp_tools+what-if"):
        for era in (ERA_2025, ERA_2026):
            mine, sdk = by.get((f"{name}/uvicorn", era)), by.get(("sdk/uvicorn", era))
            value = ratio(mine, sdk, "rps")
            if mine is not None:
                lines.append(f"| {name}/uvicorn ≥ SDK/uvicorn, {era} | {fmt_ratio(value)} | "
                             f"{fmt_ratio(ratio(mine, sdk, 'cpu_us'))} | {'—' if value is None else 'yes' if value >= 1 else 'NO'} |")
        for era in (ERA_2025, ERA_2026):
            mine = by.get((f"{name}/daphne", era))
            value = ratio(mine, consumer, "rps")
            if mine is not None:
                lines.append(f"| {name}/daphne ≥ 0.80 × bare consumer/daphne, {era} | {fmt_ratio(value)} | "
                             f"{fmt_ratio(ratio(mine, consumer, 'cpu_us'))} | "
                             f"{'—' if value is None else 'yes' if value >= 0.8 else 'NO'} |")
    pairs = [(r, by.get((r.server.replace("mcp_tools/", "mcp_tools@baseline/"), r.era)))
             for r in results if r.server.startswith("mcp_tools/")]
    if any(base is not None for _, base in pairs):
        lines += ["", "| this checkout vs --baseline | era | req/s ratio | CPU/req ratio | within ±5% |",
                  "|---|---|---:|---:|---|"]
        for mine, base in pairs:
            value = ratio(mine, base, "rps")
            lines.append(f"| {mine.server} | {mine.era} | {fmt_ratio(value)} | {fmt_ratio(ratio(mine, base, 'cpu_us'))} | "
                         f"{'—' if value is None else 'yes' if abs(value - 1) <= 0.05 else 'NO'} |")
    noisy = [r for r in results if r.foreign > 0.1]
    if noisy:
        lines += ["", f"Note: other processes used more than 10% of CPU {SERVER_CPU} during some rounds of: "
                      + ", ".join(f"{r.server} {r.era} ({r.foreign:.0%})" for r in noisy)
                      + ". req/s of those rows is less reliable; CPU µs/req is not affected much."]
    if meta.get("db"):
        before, after = meta["db"]["before"], meta["db"]["after"]
        lines += ["", f"Database after the mcp_tools runs: {after} (before: {before}; the sessions are the "
                      f"{ERA_2025} initialize requests). ToolCall rows written by {meta['db']['echo_calls']:,} echo calls: "
                      f"**{after['ToolCall'] - before['ToolCall']}**."]
    invalid = [r for r in results if r.problems]
    if invalid:
        lines += ["", "**INVALID measurements** (errors or wrong bodies; do not use these numbers):"]
        lines += [f"- {r.server} {r.era}: {'; '.join(r.problems)}" for r in invalid]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="one 3 s throughput round and one 2 s latency round")
    parser.add_argument("--only", nargs="*", help="server names (or prefixes) to run, e.g. mcp_tools sdk")
    parser.add_argument("--what-if", metavar="FIXES",
                        help="also run bench/what_if.py (mcp_tools with candidate fixes monkeypatched in) under uvicorn "
                             "and daphne, e.g. --what-if server_info,anon,session_cache")
    parser.add_argument("--py-spy", action="store_true",
                        help="record a py-spy profile (collapsed stacks, bench/results/<stamp>/*.py-spy.txt) of the "
                             "mcp_tools servers during the first throughput round; the profiler pauses the server "
                             "to sample, so that round's numbers are lower")
    parser.add_argument("--baseline", metavar="DIR", type=Path,
                        help="also serve the mcp_tools rows from another checkout (e.g. a `git worktree` of the "
                             "commit before a refactor), named mcp_tools@baseline/..., measured round-robin with "
                             "the others in the same run")
    parser.add_argument("--uvicorn-standard", action="store_true",
                        help="also serve every uvicorn row under httptools + uvloop (uvicorn[standard], what uvicorn "
                             "documents for production), named <name>-std, in the same round-robin run; the plain "
                             "rows stay h11 + asyncio")
    parser.add_argument("--rounds", type=int, dest="rounds_override", help="throughput rounds (default 3, --quick 1)")
    parser.add_argument("--database-url", metavar="URL",
                        help="serve the Django rows from this database (e.g. postgres://postgres@127.0.0.1:5432/mcp_bench; "
                             "migrated, not emptied) instead of a fresh SQLite file; DATABASE_URL of the "
                             "environment is ignored either way")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.seconds, args.latency_rounds, args.latency_seconds, args.warmup = 1, 3, 1, 2, 1
    else:
        args.rounds, args.seconds, args.latency_rounds, args.latency_seconds, args.warmup = 3, 4, 2, 3, 2
    if args.rounds_override:
        args.rounds = args.rounds_override

    for tool in ("wrk", "taskset"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} is missing (apt-get install -y {'wrk' if tool == 'wrk' else 'util-linux'})")
    if len(os.sched_getaffinity(0)) < 2:
        print("warning: fewer than 2 CPUs available; server and load generator will share a core", file=sys.stderr)

    servers = list(SERVERS)
    if args.what_if:
        servers[2:2] = [
            Server("mcp_tools+what-if/uvicorn", uvicorn("bench.what_if:application"), [ERA_2025, ERA_2026],
                   note=f"bench/what_if.py with {args.what_if}"),
            Server("mcp_tools+what-if/daphne", daphne("bench.what_if:application"), [ERA_2025, ERA_2026],
                   note=f"bench/what_if.py with {args.what_if}"),
        ]
    if args.baseline:
        base = args.baseline.resolve()
        servers[2:2] = [Server(s.name.replace("mcp_tools/", "mcp_tools@baseline/"), s.cmd, s.eras,
                               note=f"served from {base}", root=base)
                        for s in SERVERS if s.name.startswith("mcp_tools/")]
    if args.uvicorn_standard:
        twins = {s.name: standard_twin(s) for s in servers if "--http" in s.cmd}
        servers = [twin for s in servers for twin in ([s, twins[s.name]] if s.name in twins else [s])]
    if args.only:
        servers = [s for s in servers if any(s.name.startswith(prefix) for prefix in args.only)]

    stamp = time.strftime("%Y%m%d-%H%M%S")
    raw_dir = RESULTS_DIR / stamp
    raw_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="mcp-tools-bench-"))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DJANGO_SETTINGS_MODULE": "bench.bench_settings",
           "BENCH_DB": str(tmp / "bench.sqlite3"), "MCP_ALLOW_ANONYMOUS": "1", "BENCH_ECHO_TEXT": ECHO_TEXT,
           "PYTHONDONTWRITEBYTECODE": "1", "BENCH_WHAT_IF": args.what_if or ""}
    for name in ("DATABASE_URL", "REDIS_URL", "DJANGO_DEBUG"):
        env.pop(name, None)
    if args.database_url:
        env["DATABASE_URL"] = args.database_url
    meta: dict = {"stamp": stamp, "quick": args.quick, "rounds": args.rounds, "seconds": args.seconds,
                  "latency_rounds": args.latency_rounds, "latency_seconds": args.latency_seconds,
                  "python": sys.version.split()[0], "machine": platform.platform(), "cpus": os.cpu_count(),
                  "database": args.database_url or "SQLite (temp file)",
                  "servers": {s.name: {"cmd": s.cmd, "note": s.note} for s in servers}, "versions": package_versions()}
    started = time.monotonic()
    try:
        subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
        if args.baseline:
            subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=args.baseline, check=True,
                           env={**env, "PYTHONPATH": str(args.baseline.resolve()), "BENCH_DB": env["BENCH_DB"] + ".baseline"})
        before = django_counts(env)
        print(f"bench: {len(servers)} servers, raw results in {raw_dir}", file=sys.stderr)
        results = run_all(servers, env, args, raw_dir)
        if any(s.name.startswith("mcp_tools") for s in servers):
            echo_calls = sum(sum(run["requests"] for run in r.rounds + r.latency_rounds)
                             for r in results if r.server.startswith("mcp_tools"))
            meta["db"] = {"before": before, "after": django_counts(env), "echo_calls": echo_calls}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    meta["elapsed_s"] = round(time.monotonic() - started, 1)
    markdown = report(results, meta)
    payload = {"meta": meta, "results": [{**r.__dict__, "summary": {
        "rps_best": r.rps, "rps_median": r.rps_median, "rps_rounds": r.rps_all, "cpu_us_per_request": r.cpu_us, "p50_ms": r.p50_ms,
        "p99_ms": r.p99_ms, "foreign_cpu0_max": r.foreign}} for r in results]}
    (raw_dir / "results.json").write_text(json.dumps(payload, indent=2))
    (raw_dir / "results.md").write_text(markdown + "\n")
    print(markdown)
    print(f"\n(elapsed {meta['elapsed_s']} s; raw results in {raw_dir})", file=sys.stderr)
    db = meta.get("db")
    if db and db["after"]["ToolCall"] != db["before"]["ToolCall"]:
        print("warning: fast echo calls wrote ToolCall rows", file=sys.stderr)
    return 1 if any(r.problems for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
