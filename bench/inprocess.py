#!/usr/bin/env python
"""uvicorn's own HTTP protocol driven in process: µs per echo request without sockets (a benchmark, not a test).

    python bench/inprocess.py [--http h11|httptools] [--loop asyncio|uvloop] [-n 3000] [--repeat 7]
                              [--app mcp_tools|raw|both] [--era 2026|2025|both] [--profile FILE]

The request bytes are those ``bench/echo.lua`` sends (same headers, same body, a new id per
request), fed over one keep-alive connection to uvicorn's ``H11Protocol`` or
``HttpToolsProtocol`` with a fake transport that keeps what is written. Each request's task is
awaited before the next one is fed. What it measures: uvicorn's parser and ``send``/``receive``
plus the application, with no system calls and no wrk; the figure is the best of ``--repeat``
blocks of ``-n`` requests (CPU time of this process per request). ``--app raw`` serves
``bench/raw_app.py`` (the ceiling of ``bench/run.py``). The bodies are checked like echo.lua
checks them (``--check`` off only for profiling runs that want no overhead).

``--profile FILE`` writes a cProfile of one block of the mcp_tools app, or of the raw app with
``--app raw`` (``pstats`` format).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ECHO_TEXT = "bench-echo-7f3a"
HEAD = b'{"jsonrpc":"2.0","id":'
TAIL_2026 = (b',"method":"tools/call","params":{"name":"echo","arguments":{"text":"' + ECHO_TEXT.encode() + b'"},'
             b'"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
             b'"io.modelcontextprotocol/clientCapabilities":{},'
             b'"io.modelcontextprotocol/clientInfo":{"name":"wrk","version":"1"}}}}')
TAIL_2025 = b',"method":"tools/call","params":{"name":"echo","arguments":{"text":"' + ECHO_TEXT.encode() + b'"}}}'


def request_bytes(era: str, request_id: int, session: str | None) -> bytes:
    body = HEAD + str(request_id).encode() + (TAIL_2026 if era == "2026" else TAIL_2025)
    headers = [b"POST /mcp HTTP/1.1", b"Host: 127.0.0.1:8000", b"Content-Type: application/json",
               b"Accept: application/json, text/event-stream"]
    if era == "2026":
        headers += [b"MCP-Protocol-Version: 2026-07-28", b"Mcp-Method: tools/call", b"Mcp-Name: echo"]
    else:
        headers.append(b"MCP-Protocol-Version: 2025-11-25")
        if session:
            headers.append(b"Mcp-Session-Id: " + session.encode())
    headers.append(b"Content-Length: %d" % len(body))
    return b"\r\n".join(headers) + b"\r\n\r\n" + body


class FakeTransport(asyncio.Transport):
    """Keeps what the server writes; reports a local and a peer address like a TCP socket."""

    def __init__(self) -> None:
        super().__init__()
        self.written: list[bytes] = []
        self.closing = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"sockname": ("127.0.0.1", 8000), "peername": ("127.0.0.1", 50000)}.get(name, default)

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...


def setup_django() -> Any:
    tmp = Path(tempfile.mkdtemp(prefix="mcp-tools-inprocess-"))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.bench_settings")
    os.environ["BENCH_DB"] = str(tmp / "bench.sqlite3")
    os.environ.setdefault("BENCH_ECHO_TEXT", ECHO_TEXT)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def make_protocol(app: Any, http: str) -> tuple[Any, FakeTransport]:
    from uvicorn.config import Config
    from uvicorn.server import ServerState

    config = Config(app=app, http=http, lifespan="off", access_log=False, log_level="warning")
    config.load()
    if http == "h11":
        from uvicorn.protocols.http.h11_impl import H11Protocol as Protocol
    else:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as Protocol  # type: ignore[assignment]
    state = ServerState()
    protocol = Protocol(config=config, server_state=state, app_state={})
    transport = FakeTransport()
    protocol.connection_made(transport)
    return protocol, transport


async def serve(protocol: Any, transport: FakeTransport, data: bytes) -> bytes:
    if isinstance(protocol, Bare):
        return await protocol.answer(data)
    transport.written.clear()
    protocol.data_received(data)
    tasks = protocol.tasks
    while tasks:
        await next(iter(tasks))
    return b"".join(transport.written)


async def open_session(protocol: Any, transport: FakeTransport) -> str:
    body = (b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
            b'"capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}')
    raw = (b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:8000\r\nContent-Type: application/json\r\n"
           b"Accept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n" % len(body)) + body
    answer = await serve(protocol, transport, raw)
    head = answer.split(b"\r\n\r\n", 1)[0].decode("latin-1")
    session = next(line.split(":", 1)[1].strip() for line in head.split("\r\n") if line.lower().startswith("mcp-session-id:"))
    body = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
    raw = (b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:8000\r\nContent-Type: application/json\r\n"
           b"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-11-25\r\nMcp-Session-Id: "
           + session.encode() + b"\r\nContent-Length: %d\r\n\r\n" % len(body)) + body
    await serve(protocol, transport, raw)
    return session


def good(answer: bytes) -> bool:
    return answer.startswith(b"HTTP/1.1 200") and ECHO_TEXT.encode() in answer and b'"result"' in answer and b'"error"' not in answer


async def block(protocol: Any, transport: FakeTransport, requests: list[bytes], check: bool) -> float:
    started = time.process_time()
    for data in requests:
        answer = await serve(protocol, transport, data)
        if check and not good(answer):
            raise SystemExit(f"wrong answer: {answer[:400]!r}")
    return (time.process_time() - started) / len(requests) * 1e6


class Bare:
    """The ASGI application called directly (no uvicorn): a scope like uvicorn's, the body in one message."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.tasks: set[Any] = set()  # nothing is left running: each request is awaited in full

    async def answer(self, data: bytes) -> bytes:
        head, body = data.split(b"\r\n\r\n", 1)
        lines = head.split(b"\r\n")
        headers = [(name.strip().lower(), value.strip()) for name, value in (line.split(b":", 1) for line in lines[1:])]
        scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}, "http_version": "1.1",
                 "server": ("127.0.0.1", 8000), "client": ("127.0.0.1", 50000), "scheme": "http", "method": "POST",
                 "root_path": "", "path": "/mcp", "raw_path": b"/mcp", "query_string": b"", "headers": headers, "state": {}}
        sent: list[bytes] = []
        message = {"type": "http.request", "body": body, "more_body": False}

        async def receive() -> dict[str, Any]:
            return message

        async def send(event: dict[str, Any]) -> None:
            if event["type"] == "http.response.start":
                sent.append(b"\r\n".join([b"HTTP/1.1 %d" % event["status"]] + [n + b": " + v for n, v in event["headers"]])
                            + b"\r\n\r\n")
            else:
                sent.append(event.get("body", b""))

        await self.app(scope, receive, send)
        return b"".join(sent)


async def measure(args: argparse.Namespace) -> list[tuple[str, str, float, list[float]]]:
    import bench.raw_app
    from demo_site.asgi import application

    apps = {"mcp_tools": application, "raw": bench.raw_app.app}
    chosen = list(apps) if args.app == "both" else [args.app]
    eras = ["2026", "2025"] if args.era == "both" else [args.era]
    rows = []
    setups = {}
    for name in chosen:
        for era in eras if name == "mcp_tools" else ["2026"]:
            protocol, transport = (Bare(apps[name]), FakeTransport()) if args.bare else make_protocol(apps[name], args.http)
            session = await open_session(protocol, transport) if era == "2025" else None
            counter = iter(range(1, 10**9))
            setups[(name, era)] = (protocol, transport, session, counter)
            warm = [request_bytes(era, next(counter), session) for _ in range(300)]
            await block(protocol, transport, warm, True)
    results: dict[tuple[str, str], list[float]] = {key: [] for key in setups}
    for _ in range(args.repeat):  # the variants alternate, block by block
        for key, (protocol, transport, session, counter) in setups.items():
            requests = [request_bytes(key[1], next(counter), session) for _ in range(args.n)]
            results[key].append(await block(protocol, transport, requests, args.check))
    for (name, era), values in results.items():
        rows.append((name, era, min(values), values))
    if args.profile:
        import cProfile

        # The mcp_tools app when it ran, else the raw one (``--app raw``: the ceiling's own profile).
        profiled = ("mcp_tools", eras[0]) if ("mcp_tools", eras[0]) in setups else next(iter(setups))
        protocol, transport, session, counter = setups[profiled]
        requests = [request_bytes(profiled[1], next(counter), session) for _ in range(args.n)]
        profiler = cProfile.Profile()
        profiler.enable()
        await block(protocol, transport, requests, False)
        profiler.disable()
        profiler.dump_stats(args.profile)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--http", choices=["h11", "httptools"], default="h11")
    parser.add_argument("--loop", choices=["asyncio", "uvloop"], default="asyncio")
    parser.add_argument("--app", choices=["mcp_tools", "raw", "both"], default="both")
    parser.add_argument("--era", choices=["2026", "2025", "both"], default="both")
    parser.add_argument("-n", type=int, default=3000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--bare", action="store_true", help="call the ASGI app directly, without uvicorn")
    parser.add_argument("--no-check", dest="check", action="store_false")
    parser.add_argument("--profile", metavar="FILE")
    args = parser.parse_args()
    setup_django()
    gc.collect()
    if args.loop == "uvloop":
        import uvloop

        rows = uvloop.run(measure(args))
    else:
        rows = asyncio.run(measure(args))
    print(f"{'no server' if args.bare else 'uvicorn ' + args.http} + {args.loop}, in process, best of {args.repeat} × {args.n} (CPU µs per request)")
    for name, era, best, values in rows:
        print(f"  {name:10} {era}  {best:7.1f}   all: {' '.join(f'{v:.1f}' for v in values)}")


if __name__ == "__main__":
    main()
