"""Seeded fuzzing of the MCP endpoint with malformed requests, in process through the ASGI app.

``tests/test_fuzz.py`` runs 2,000 cases per protocol era; this script runs as many
as asked (``python bench/fuzz.py --count 10000``) on a throw-away SQLite database
and prints the figures ``docs/robustness.md`` quotes.

Every case starts from a well-formed request of one era (2025-11-25 in a session,
or 2026-07-28 stateless) and breaks it one way: broken JSON, a value of the wrong
type anywhere in the message, odd ids (huge, unicode, null, objects), forged
``requestState`` / ``sagaToken`` / task ids, bad or missing headers, unknown
tools and methods, oversized bodies, other HTTP verbs. What must hold, per case:

* no HTTP 5xx;
* no traceback text (``Traceback``, ``File "``) in the response;
* a refused request (HTTP 4xx, or a JSON-RPC error) writes no ``ToolCall`` or ``CallStep`` row;

and after the run the server still answers an ``echo``.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import dataclasses
import json
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
ERAS = (LEGACY, MODERN)
CAPS = {"elicitation": {"form": {}}, "sampling": {}, "roots": {}}
TRACEBACK_MARKERS = (b"Traceback", b'File "')

# Values that tend to break code that trusts its input.
NASTY: list[Any] = [
    None, True, False, 0, -1, 2**53 + 1, 2**70, -(2**63), 1e308, -0.0, 0.5, "", " ", "\x00", "null", "\u202e\u0000\ud7ff",
    "🤖" * 50, "a" * 10_000, "../../etc/passwd", "%s%s%n", "<script>alert(1)</script>", "'; DROP TABLE mcp_tools_toolcall; --",
    [], [None], [[[[[]]]]], {}, {"": None}, {"__proto__": {"x": 1}}, {"$ref": "#"}, "2026-07-28", "tools/call",
    "eyJhbGciOiJub25lIn0.e30.", "mcp_tools:00000000-0000-0000-0000-000000000000:1",
]
# Nested 500 deep (half the JSON decoder's limit): whatever walks the value next must cope too.
_deep: Any = "bottom"
for _ in range(500):
    _deep = {"a": [_deep]} if _ % 2 else [_deep]
NASTY.append(_deep)


def _clone(value: Any) -> Any:
    """A deep copy that copes with the deep values (copy.deepcopy recurses twice per level)."""
    return json.loads(json.dumps(value))


@dataclasses.dataclass
class Case:
    """One request: verb, headers and body bytes, and what kind of damage it carries."""

    kind: str
    method: str
    headers: dict[str, str]
    body: bytes


@dataclasses.dataclass
class Report:
    era: str
    cases: int = 0
    statuses: collections.Counter[int] = dataclasses.field(default_factory=collections.Counter)
    kinds: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    refused: int = 0
    accepted: int = 0
    held_open: int = 0  # GET streams of the run's own session, open by design
    violations: list[str] = dataclasses.field(default_factory=list)
    seconds: float = 0.0

    def line(self) -> str:
        top = ", ".join(f"{status}: {count}" for status, count in sorted(self.statuses.items()))
        return (f"{self.era}: {self.cases} cases in {self.seconds:.1f} s ({self.cases / max(self.seconds, 1e-9):.0f}/s); "
                f"refused {self.refused}, accepted {self.accepted}, streams held open {self.held_open}; HTTP {top}; {len(self.violations)} violations")


class Fuzzer:
    """Seeded malformed requests of one era (``session``: the 2025-11-25 session id they belong to)."""

    def __init__(self, seed: int, era: str, session: str | None = None) -> None:
        self.rng = random.Random(f"{seed}-{era}")
        self.era = era
        self.session = session
        self.next_id = 0

    # -- well-formed starting points ------------------------------------------------------

    def base_message(self) -> dict[str, Any]:
        self.next_id += 1
        r = self.rng
        method, params = r.choice([
            ("tools/call", {"name": "echo", "arguments": {"text": "hi"}}),
            ("tools/call", {"name": "calculator", "arguments": {"expression": "1+2"}}),
            ("tools/call", {"name": "search_products", "arguments": {"query": "wid", "limit": 3}}),
            ("tools/call", {"name": "deploy", "arguments": {"service": "fuzz"}, "requestState": "x" * 40,
                            "inputResponses": {"target": {"action": "accept", "content": {"env": "staging"}}}}),
            ("tools/list", {}),
            ("resources/list", {}),
            ("resources/read", {"uri": "inventory://products/WID-001"}),
            ("prompts/get", {"name": "restock_advice", "arguments": {"sku": "WID-001"}}),
            ("completion/complete", {"ref": {"type": "ref/prompt", "name": "restock_advice"}, "argument": {"name": "sku", "value": "W"}}),
            ("ping", {}),
            ("logging/setLevel", {"level": "debug"}),
            ("tools/callSaga", {"name": "echo", "arguments": {"text": "x"}}),
            ("tools/resumeSaga", {"sagaToken": "forged", "completedSteps": [{"stepId": "target", "result": {}}]}),
            ("tasks/get", {"taskId": "00000000-0000-0000-0000-000000000000"}),
            ("tasks/cancel", {"taskId": "not-a-task"}),
            ("resources/subscribe", {"uri": "inventory://products"}),
        ])
        if self.era == MODERN:
            params = {**params, "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN,
                                          "io.modelcontextprotocol/clientCapabilities": CAPS,
                                          "io.modelcontextprotocol/clientInfo": {"name": "fuzz", "version": "1"}}}
        return {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}

    def base_headers(self, message: dict[str, Any]) -> dict[str, str]:
        headers = {"host": "testserver", "content-type": "application/json", "accept": "application/json, text/event-stream",
                   "mcp-protocol-version": self.era}
        if self.era == LEGACY and self.session:
            headers["mcp-session-id"] = self.session
        if self.era == MODERN and isinstance(message, dict) and isinstance(message.get("method"), str):
            headers["mcp-method"] = message["method"]
            params = message.get("params")
            name = params.get("name") if isinstance(params, dict) else None
            if isinstance(name, str) and name.isascii():
                headers["mcp-name"] = name
        return headers

    # -- damage ---------------------------------------------------------------------------

    def cases(self, count: int) -> Iterator[Case]:
        mutators: list[tuple[str, Callable[[dict[str, Any], dict[str, str]], tuple[str, dict[str, str], bytes]]]] = [
            ("broken-json", self.broken_json),
            ("wrong-type", self.wrong_type),
            ("odd-id", self.odd_id),
            ("forged-token", self.forged_token),
            ("bad-header", self.bad_header),
            ("unknown-name", self.unknown_name),
            ("envelope", self.envelope),
            ("batch", self.batch),
            ("verb", self.verb),
            ("oversized", self.oversized),
        ]
        weights = [14, 26, 10, 10, 14, 8, 8, 4, 4, 2]
        for _ in range(count):
            kind, mutate = self.rng.choices(mutators, weights)[0]
            message = self.base_message()
            headers = self.base_headers(message)
            verb, headers, body = mutate(message, headers)
            yield Case(kind, verb, headers, body)

    def dumps(self, value: Any) -> bytes:
        return json.dumps(value, ensure_ascii=self.rng.random() < 0.5, allow_nan=True).encode("utf-8", "surrogatepass")

    def broken_json(self, message: dict[str, Any], headers: dict[str, str]) -> tuple[str, dict[str, str], bytes]:
        text = self.dumps(message)
        r = self.rng
        choice = r.randrange(8)
        if choice == 0:
            body = text[: r.randrange(len(text))]
        elif choice == 1:
            body = bytes(r.randrange(256) for _ in range(r.randrange(1, 200)))
        elif choice == 2:
            body = b"[" * 100_000
        elif choice == 3:
            body = text.replace(b'"2.0"', b"NaN").replace(b"1", b"Infinity", 1)
        elif choice == 4:
            body = b"\xff\xfe" + text
        elif choice == 5:
            body = text + b"garbage"
        elif choice == 6:
            body = b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"a":' + b"1" * 5000 + b"}}"
        else:
            body = b""
        return "POST", headers, body

    def _paths(self, value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        found = [prefix]
        if len(prefix) > 12:
            return found
        if isinstance(value, dict):
            for key, item in value.items():
                found += self._paths(item, (*prefix, key))
        elif isinstance(value, list):
            for index, item in enumerate(value):
                found += self._paths(item, (*prefix, index))
        return found

    def wrong_type(self, message: dict[str, Any], headers: dict[str, str]) -> tuple[str, dict[str, str], bytes]:
        message = _clone(message)
        for _ in range(self.rng.randint(1, 3)):
            paths = [p for p in self._paths(message) if p]
            if not paths:
                break
            path = self.rng.choice(paths)
            holder: Any = message
            for part in path[:-1]:
                holder = holder[part]
            if self.rng.random() < 0.15 and isinstance(holder, dict):
                del holder[path[-1]]
            else:
                holder[path[-1]] = _clone(self.rng.choice(NASTY))
        return "POST", headers, self.dumps(message)

    def odd_id(self, message: dict[str, Any], headers: dict[str, str]) -> tuple[str, dict[str, str], bytes]:
        message["id"] = _clone(self.rng.choice([*NASTY, "x" * 100_000, 1.5, {"id": 1}, [1, 2], "mcp_tools:x:1"]))
        if self.rng.random() < 0.2:
            del message["id"]  # a notification that was meant as a request
        return "POST", headers, self.dumps(message)

    def forged_token(self, message: dict[str, Any], headers: dict[str, str]) -> tuple[str, dict[str, str], bytes]:
        r = self.rng
        forged = r.choice(["", "x", "a" * 5000, "e30", "eyJjIjoiMSJ9:1abc:sig", "..", "🤖", "1" * 64,
                           "".join(r.choice("ABCDEFabcdef0123456789-_:.") for _ in range(r.randrange(1, 300)))])
        params = message["params"]
        key = r.choice(["requestState", "sagaToken", "taskId", "resumeToken"])
        params[key] = forged
        params.setdefault("name", "deploy")
        params["inputResponses"] = r.choice([{"target": {"action": "accept", "content": {"env": "production"}}}, {}, {"x": None}, []])
        message["method"] = r.choice(["tools/call", "tools/resumeSaga", "tasks/get", "tasks/result", "tasks/cancel"])
        headers = self.base_headers(message)
        return "POST", headers, self.dumps(message)

    def bad_header(self, message: dict[str, Any], headers: dict[str, str]) -> tuple[str, dict[str, str], bytes]:
        r = self.rng
        name = r.choice(["content-type", "accept", "mcp-protocol-version", "mcp-session-id", "mcp-method", "mcp-name",
                         "origin", "host", "authorization", "last-event-id", "x-mcp-client-secret"])
        value = r.choice([None, "", "text/plain", "application/json; charset=latin-1", "*/*", "2024-01-01", "garbage",
                          "a" * 8000, "Bearer x", "Token " + "0" * 40, "Basic Og==", "http://evil.example", "evil.example:80",
                          "0" * 32, "tools/list", "\t", "é", "2026-07-28, 2025-11-25"])
        if value is None:
            headers.pop(name, None)
        else:
            headers[name] = value
        return "POST", headers, self.dumps(message)

    def unknown_name(self, message: dict[str, Any], headers: dict[str, str]) -> tuple[str, dict[str, str], bytes]:
        r = self.rng
        if r.random() < 0.5:
            message["method"] = r.choice(["tools/explode", "", "rpc.discover", "initialize", "notifications/initialized",
                                          "tools/call/", "TOOLS/CALL", "sampling/createMessage", "x" * 300])
        else:
            message["method"] = "tools/call"
            message["params"]["name"] = r.choice(["no_such_tool", "", "echo ", "shop.orders.delete", "../echo", "é" * 100])
        return "POST", self.base_headers(message), self.dumps(message)

    def envelope(self, message: dict[str, Any], headers: dict[str, str]) -> tuple[str, dict[str, str], bytes]:
        r = self.rng
        choice = r.randrange(6)
        if choice == 0:
            message["jsonrpc"] = r.choice(["1.0", 2, None, ""])
        elif choice == 1:
            message.pop("method")
        elif choice == 2:
            message["result"] = {}  # a response and a request at once
        elif choice == 3:
            message["error"] = {"code": "x"}
        elif choice == 4:
            message = {"id": message["id"], "result": {"action": "accept"}, "jsonrpc": "2.0"}  # an answer nobody asked for
            message["id"] = r.choice([f"mcp_tools:{'0' * 8}-0000-0000-0000-{'0' * 12}:0", "mcp_tools:x:y", 7])
        else:
            message["params"] = r.choice([[], "params", 3, None])
        return "POST", headers, self.dumps(message)

    def batch(self, message: dict[str, Any], headers: dict[str, str]) -> tuple[str, dict[str, str], bytes]:
        return "POST", headers, self.dumps(self.rng.choice([[message, message], [], [1, 2], [[message]]]))

    def verb(self, message: dict[str, Any], headers: dict[str, str]) -> tuple[str, dict[str, str], bytes]:
        verb = self.rng.choice(["GET", "DELETE", "PUT", "PATCH", "OPTIONS", "HEAD"])
        if verb == "GET" and self.rng.random() < 0.5:
            headers["accept"] = "text/event-stream"
            headers["last-event-id"] = self.rng.choice(["x", "999999", "-1", "1:2:3", "a" * 500])
            headers["mcp-session-id"] = self.rng.choice([self.session or "", "0" * 32, "nope"])
        if verb == "DELETE":  # ending the run's own session would turn every later case into a 404
            headers["mcp-session-id"] = self.rng.choice(["0" * 32, "nope", ""])
        return verb, headers, self.dumps(message) if verb not in ("GET", "HEAD") else b""

    def oversized(self, message: dict[str, Any], headers: dict[str, str]) -> tuple[str, dict[str, str], bytes]:
        message["params"]["padding"] = "x" * (4 * 1024 * 1024 + 10)
        if self.rng.random() < 0.5:
            headers["content-length"] = str(10**12)
        return "POST", headers, self.dumps(message)


# -- running ------------------------------------------------------------------------------


def _refused(status: int, body: bytes, content_type: str) -> bool:
    """HTTP 4xx, or a JSON-RPC error as the answer."""
    if status >= 400:
        return True
    try:
        if content_type.startswith("text/event-stream"):
            datas = [line[5:].strip() for line in body.decode("utf-8", "replace").splitlines() if line.startswith("data:")]
            messages = [json.loads(data) for data in datas if data]
            return bool(messages) and "error" in messages[-1]
        if body:
            parsed = json.loads(body)
            return isinstance(parsed, dict) and "error" in parsed
    except ValueError:
        return False
    return False


async def open_session(app: Any) -> str:
    """A 2025-11-25 session (no client capabilities: nothing can wait on the client's answer)."""
    from tests.asgi_client import post_json

    body = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "1"}}}
    response = await post_json(app, body, {"host": "testserver", "content-type": "application/json",
                                           "accept": "application/json, text/event-stream"})
    session = response.header("mcp-session-id")
    assert response.status == 200 and session, response.body
    headers = {"host": "testserver", "content-type": "application/json", "accept": "application/json, text/event-stream",
               "mcp-session-id": session, "mcp-protocol-version": LEGACY}
    await post_json(app, {"jsonrpc": "2.0", "method": "notifications/initialized"}, headers)
    return session


def _row_counts() -> tuple[int, int]:
    from mcp_tools.models import CallStep, ToolCall

    return ToolCall.objects.count(), CallStep.objects.count()


async def fuzz(app: Any, era: str, count: int, seed: int) -> Report:
    """Send ``count`` malformed requests of ``era`` through ``app``; what held and what did not."""
    from asgiref.sync import sync_to_async

    from tests.asgi_client import request

    counts = sync_to_async(_row_counts)
    session = await open_session(app) if era == LEGACY else None
    report = Report(era)
    started = time.monotonic()
    rows = await counts()
    for number, case in enumerate(Fuzzer(seed, era, session).cases(count)):
        try:
            response = await request(app, case.method, headers=case.headers, body=case.body, timeout=0.5 if case.method == "GET" else 30)
        except TimeoutError:
            if case.method != "GET":
                raise
            # A GET on the run's own session opens its standalone stream, which stays open by design.
            report.cases += 1
            report.held_open += 1
            report.kinds[case.kind] += 1
            continue
        report.cases += 1
        report.statuses[response.status] += 1
        report.kinds[case.kind] += 1
        where = f"case {number} ({case.kind}, {case.method}, {case.body[:120]!r})"
        if response.status >= 500:
            report.violations.append(f"{where}: HTTP {response.status} {response.body[:300]!r}")
        if any(marker in response.body for marker in TRACEBACK_MARKERS):
            report.violations.append(f"{where}: traceback text in the response {response.body[:300]!r}")
        now = await counts()
        if _refused(response.status, response.body, response.content_type):
            report.refused += 1
            if now != rows:
                report.violations.append(f"{where}: refused, yet rows went from {rows} to {now}")
        else:
            report.accepted += 1
        rows = now
    report.seconds = time.monotonic() - started
    return report


async def echo_still_answers(app: Any) -> bool:
    from tests.asgi_client import call_modern

    response = await call_modern(app, "tools/call", {"name": "echo", "arguments": {"text": "still here"}})
    return response.status == 200 and response.json()["result"]["content"] == [{"type": "text", "text": "still here"}]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=10_000, help="cases per era (default 10000)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    import logging

    from bench.engine import setup_django

    with tempfile.TemporaryDirectory() as tmp:
        app = setup_django(Path(tmp) / "fuzz.sqlite3")
        from django.conf import settings

        settings.ALLOWED_HOSTS.append("testserver")  # the in-process client's Host (before the first request reads it)
        from tests.clients import _create_products

        _create_products()
        logging.disable(logging.WARNING)  # refused requests log at INFO/WARNING; the figures are the point
        from mcp_tools.transports.http import McpEndpoint

        endpoint = McpEndpoint()
        del app
        failed = False
        for era in ERAS:
            report = asyncio.run(fuzz(endpoint, era, args.count, args.seed))
            print(report.line())
            print("   by kind:", ", ".join(f"{kind} {n}" for kind, n in sorted(report.kinds.items())))
            for violation in report.violations[:20]:
                print("   VIOLATION", violation)
            failed = failed or bool(report.violations)
        alive = asyncio.run(echo_still_answers(endpoint))
        print(f"echo afterwards: {'answers' if alive else 'NO ANSWER'}")
        sys.exit(1 if failed or not alive else 0)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
