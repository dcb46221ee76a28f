"""Fault injection: real server processes killed, calls cancelled at random points, retries racing cancels.

Two live servers (daphne and uvicorn) share the test database and nothing else.
Each scenario drives the demo's ``deploy`` (elicitation, sampling, then one
``ctx.once`` audit row) and ``slow_count`` calls over raw HTTP in both eras and
injects faults:

* SIGKILL of a server between rounds and during a round (2026-07-28 MRTR: round 1
  on A, kill A, round 2 on B; 2025-11-25: a session call waiting for input, kill
  its stream's holder, resume on the other with Last-Event-ID);
* cancellation from the admin (the ``cancel_calls`` action) and from the client
  (``notifications/cancelled``, a closed 2026 stream) at seeded random points;
* concurrent identical MRTR retries of the effect round racing an admin cancel.

After each scenario :func:`check` asserts the invariants of issue 11:

1. every call ends in exactly one terminal state, or stays resumable
   (``input_required``), or is ``working`` only while a live process runs it;
2. no ``once`` effect ran twice: audit rows per deploy <= 1, and == 1 iff completed;
3. no row is left ``working`` without a live owner past its deadline: such rows
   have a deadline, and the cleanup run at that deadline expires them;
4. the client's answer is consistent with the row (a completed result <=> the row
   completed; a cancellation answer <=> the row cancelled).

The seed is ``MCP_FAULTS_SEED`` (default 11); ``pytest -s`` prints the summary line.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import random
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any
from unittest import mock

import httpx2
import pytest
from asgiref.sync import sync_to_async

from mcp_tools.server import tokens
from tests.clients import (
    LegacySession,
    ModernClient,
    accept_target,
    http_client,
    iter_sse,
    iter_sse_events,
    modern_headers,
    modern_meta,
    model_says,
)
from tests.conftest import LiveServer
from tests.test_call_state import _admin_cancel

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

SEED = int(os.environ.get("MCP_FAULTS_SEED", "11"))
STREAM_TIMEOUT = 45  # above the server's own 30 s wait for a round another request is processing
#: The one known defect (issue 11 follow-up): see the report in :func:`check`.
STUCK = "stuck working after its process died mid-round"
VERBOSE = bool(os.environ.get("MCP_FAULTS_VERBOSE"))
SETTLE_SECONDS = 8  # how long a call may take to reach its final state after its client is done


@dataclasses.dataclass
class Tally:
    calls: int = 0
    faults: int = 0
    violations: list[str] = dataclasses.field(default_factory=list)
    outcomes: dict[str, int] = dataclasses.field(default_factory=dict)


TALLY = Tally()
STARTED = time.monotonic()


@pytest.fixture(scope="module", autouse=True)
def _summary() -> Iterator[None]:
    yield
    spread = ", ".join(f"{key} {count}" for key, count in sorted(TALLY.outcomes.items()))
    print(f"\n[faults] seed {SEED}: {TALLY.calls} calls, {TALLY.faults} faults, "
          f"{len(TALLY.violations)} invariant violations ({spread})")


@dataclasses.dataclass
class Seen:
    """One call as its client saw it."""

    label: str
    tool: str
    service: str | None = None  # deploy calls: unique, names the row and the audit entry
    request_id: Any = None  # other calls: the unique JSON-RPC id names the row
    call_id: str | None = None
    answer: str = "none"  # completed | cancelled | refused | error | tool_error | input_required | none
    gave_up: bool = False  # the client cancelled, closed its stream, or a fault cut it off
    detail: Any = None


def classify(message: dict[str, Any] | None) -> str:
    if message is None:
        return "none"
    if "error" in message:
        return "refused" if message["error"].get("code") == -32602 else "error"
    result = message["result"]
    if result.get("resultType") == "input_required":
        return "input_required"
    if result.get("isError"):
        text = " ".join(block.get("text", "") for block in result.get("content", []))
        return "cancelled" if "cancelled before it finished" in text else "tool_error"
    return "completed"


def call_of_state(request_state: str) -> str:
    return str(tokens.unseal("request", request_state)["c"])


# -- the database side of the invariants -------------------------------------------------------------


def _rows_of(seen: Seen) -> list[dict[str, Any]]:
    from mcp_tools.models import ToolCall

    rows = ToolCall.objects.filter(tool_name=seen.tool)
    if seen.call_id:
        rows = rows.filter(id=seen.call_id)
    elif seen.service:
        rows = rows.filter(arguments__arguments__service=seen.service)  # the row keeps the request's params
    else:
        from mcp_tools.protocol.jsonrpc import id_text

        rows = rows.filter(request_id=id_text(seen.request_id))  # the row keeps the id as JSON
    return list(rows.values("id", "status", "result", "expires_at"))


def _all_rows() -> list[Any]:
    from mcp_tools.models import ToolCall

    return list(ToolCall.objects.values_list("tool_name", "arguments", "status", "flavor"))


def _audits_of(service: str) -> int:
    from demo_site.inventory.models import AuditLog

    return sum(1 for detail in AuditLog.objects.filter(action="deploy").values_list("detail", flat=True)
               if detail.get("service") == service)


def _expire_at_deadline(row_ids: list[Any], deadline: Any) -> dict[str, str]:
    """Run the cleanup as it would run just past ``deadline``; the statuses of ``row_ids`` afterwards."""
    from mcp_tools.models import ToolCall

    with mock.patch("django.utils.timezone.now", return_value=deadline + timedelta(seconds=1)):
        ToolCall.objects.expire_overdue()
    return {str(pk): status for pk, status in ToolCall.objects.filter(id__in=row_ids).values_list("id", "status")}


async def check(scenario: str, seen: list[Seen], faults: int) -> list[str]:
    """Assert the invariants for every call of a scenario; returns (and tallies) the violations."""
    problems: list[str] = []
    # Let calls whose clients are done reach their final state (a cancelled handler stops at its next await).
    deadline = time.monotonic() + SETTLE_SECONDS
    while True:
        rows = {id(s): await sync_to_async(_rows_of)(s) for s in seen}
        if time.monotonic() > deadline or not any(r["status"] == "working" for found in rows.values() for r in found):
            break
        await asyncio.sleep(0.25)
    orphans: list[tuple[Seen, dict[str, Any]]] = []
    for s in seen:
        found = rows[id(s)]
        TALLY.outcomes[s.answer] = TALLY.outcomes.get(s.answer, 0) + 1
        where = f"{scenario}/{s.label}"
        if len(found) > 1:
            problems.append(f"{where}: {len(found)} rows for one call")
            continue
        if not found:
            if VERBOSE:
                print(f"[faults]   {s.label}: client {s.answer}, no row")
            # Only a call the fault cut off before its first write may have no row.
            if s.answer not in ("none", "refused", "error"):
                problems.append(f"{where}: the client got {s.answer} but there is no row; rows: {await sync_to_async(_all_rows)()}")
            continue
        row = found[0]
        status = row["status"]
        if VERBOSE:
            print(f"[faults]   {s.label}: client {s.answer}{' (gave up)' if s.gave_up else ''}, row {status}")
        if s.answer == "completed" and status != "completed":
            problems.append(f"{where}: client got a completed result, row is {status}")
        if s.answer == "cancelled" and status != "cancelled":
            problems.append(f"{where}: client got a cancellation, row is {status}")
        if status == "completed" and not s.gave_up and s.answer != "completed":
            problems.append(f"{where}: row completed but the client (still listening) got {s.answer}: {s.detail}")
        if status == "completed" and row["result"] is None:
            problems.append(f"{where}: completed without a result")
        if status == "cancelled" and row["result"] is not None:
            problems.append(f"{where}: cancelled with a result recorded")
        if s.service is not None:
            audits = await sync_to_async(_audits_of)(s.service)
            if audits > 1:
                problems.append(f"{where}: the once effect ran {audits} times")
            # A completed deploy ran its effect exactly once. A cancelled one may have run it too:
            # the effect checks the row in its own transaction, so it never starts after a cancel
            # committed, but a cancel that commits after the effect and before the outcome wins
            # the row (docs/durable-calls.md). Only "completed without the effect" is wrong here.
            if status == "completed" and audits != 1:
                problems.append(f"{where}: {audits} audit rows for a {status} call (client: {s.answer}, {s.detail})")
        if status == "working":
            orphans.append((s, row))
    if orphans:
        # Nothing runs these calls any more (their clients are done, SETTLE_SECONDS passed): each must
        # have a deadline, and the cleanup must end it there.
        missing = [s.label for s, row in orphans if row["expires_at"] is None]
        problems += [f"{scenario}/{label}: working without a deadline" for label in missing]
        dated = [(s, row) for s, row in orphans if row["expires_at"] is not None]
        if dated:
            latest = max(row["expires_at"] for _, row in dated)
            after = await sync_to_async(_expire_at_deadline)([row["id"] for _, row in dated], latest)
            problems += [f"{scenario}: row {pk} still {st} past its deadline" for pk, st in after.items() if st == "working"]
            for s, row in dated:
                # The process that claimed the round died before finishing it and no retry took the
                # round over: the client's identical retries were told to retry later until the deadline.
                audits = await sync_to_async(_audits_of)(s.service) if s.service else 0
                if s.answer != "error" and not audits:
                    continue  # nobody waits for it and nothing ran: ending at its deadline is all it needs
                problems.append(f"{scenario}/{s.label}: {STUCK} (client: {s.answer}; once effect ran {audits} time(s); "
                                f"the cleanup at the deadline left it {after.get(str(row['id']))})")
        TALLY.outcomes["stuck until deadline"] = TALLY.outcomes.get("stuck until deadline", 0) + len(dated)
    TALLY.calls += len(seen)
    TALLY.faults += faults
    TALLY.violations += problems
    print(f"[faults] {scenario}: {len(seen)} calls, {faults} faults, {len(problems)} violations "
          f"({time.monotonic() - STARTED:.0f} s since the suite started)")
    return problems


# -- two servers that can be killed and replaced -------------------------------------------------------


class Pair:
    """Server A (daphne) and B (uvicorn) on the test database; either can be SIGKILLed and replaced."""

    def __init__(self, start_server: type[LiveServer]) -> None:
        self.start_server = start_server
        self.servers = {"A": start_server("daphne", env=FAULT_ENV).start(), "B": start_server("uvicorn", env=FAULT_ENV).start()}

    def url(self, name: str) -> str:
        return self.servers[name].url

    def kill(self, name: str) -> None:
        self.servers[name].kill()

    def replace(self, name: str) -> None:
        """A new process in place of a killed one (on a new port)."""
        kind = "daphne" if name == "A" else "uvicorn"
        self.servers[name] = self.start_server(kind, env=FAULT_ENV).start()


FAULT_ENV = {"DJANGO_SETTINGS_MODULE": "tests.fault_settings"}


async def admin_cancel(call_id: str) -> None:
    assert await sync_to_async(_admin_cancel)(call_id) == 302


async def row_id_when_written(request_id: Any, tool: str, timeout: float = 10) -> str | None:
    seen = Seen("lookup", tool, request_id=request_id)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = await sync_to_async(_rows_of)(seen)
        if rows:
            return str(rows[0]["id"])
        await asyncio.sleep(0.05)
    return None


async def modern_round(http: httpx2.AsyncClient, url: str, service: str, extra: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """One 2026-07-28 round of ``deploy``; the final JSON-RPC message, or None when the server died under it."""
    client = ModernClient(http, url)
    try:
        _, message = await client.post("tools/call", {"name": "deploy", "arguments": {"service": service}, **(extra or {})})
    except httpx2.TransportError:
        return None
    return message


def answers(state: str, key: str, value: Any) -> dict[str, Any]:
    return {"requestState": state, "inputResponses": {key: value}}


# -- 1. SIGKILL between rounds and during a round (2026-07-28) ------------------------------------------


async def test_mrtr_calls_survive_servers_killed_between_and_during_rounds(start_server: type[LiveServer]) -> None:
    rng = random.Random(SEED)
    pair = Pair(start_server)
    seen: list[Seen] = []
    faults = 0
    async with http_client() as http:
        for batch in range(2):
            calls = [Seen(f"mrtr-kill-{batch}-{i}", "deploy", service=f"mrtr-kill-{SEED}-{batch}-{i}") for i in range(4)]
            seen += calls
            # Round 1 on A, then A dies between rounds.
            firsts = await asyncio.gather(*(modern_round(http, pair.url("A"), s.service or "") for s in calls))
            for s, first in zip(calls, firsts):
                assert first is not None and classify(first) == "input_required", first
                s.call_id = call_of_state(first["result"]["requestState"])
            pair.kill("A")
            faults += 1
            # Round 2 on B.
            seconds = await asyncio.gather(*(
                modern_round(http, pair.url("B"), s.service or "", answers(f["result"]["requestState"], "target", accept_target()))
                for s, f in zip(calls, firsts)
            ))
            for second in seconds:
                assert second is not None and classify(second) == "input_required", second
            pair.replace("A")
            # Round 3 (the once effect) on B, and B dies under it at a random moment.
            final_requests = [answers(s["result"]["requestState"], "verdict", model_says("yes")) for s in seconds]
            in_flight = [asyncio.ensure_future(modern_round(http, pair.url("B"), c.service or "", r)) for c, r in zip(calls, final_requests)]
            await asyncio.sleep(rng.uniform(0.0, 0.03))
            pair.kill("B")
            faults += 1
            results = await asyncio.gather(*in_flight)
            # The client retries every round it lost, identically, on A.

            async def settle(s: Seen, result: dict[str, Any] | None, request: dict[str, Any]) -> None:
                if result is None:
                    s.detail = "retried after the kill"
                    result = await modern_round(http, pair.url("A"), s.service or "", request)
                s.answer = classify(result)
                s.detail = (s.detail, result)

            await asyncio.gather(*(settle(s, r, q) for s, r, q in zip(calls, results, final_requests)))
            pair.replace("B")
    # A round B died in is taken over by the retry on A: a call left working is a violation, no longer an xfail.
    problems = await check("mrtr-kill", seen, faults)
    assert not problems, problems


# -- 2. a session call waiting for input, its holder killed (2025-11-25) ---------------------------------


async def session_deploy_across_a_kill(pair: Pair, http: httpx2.AsyncClient, s: Seen, kill_during_round: bool, rng: random.Random) -> int:
    """Stream ``deploy`` on A; kill A while the call waits for input (or just after the last answer); finish on B."""
    session = await LegacySession.open(http, pair.url("A"))
    service = s.service or ""
    last_event = None
    sample = None
    async with session.stream("tools/call", {"name": "deploy", "arguments": {"service": service}}, url=pair.url("A")) as (request_id, response):
        events = iter_sse_events(response)
        async with asyncio.timeout(STREAM_TIMEOUT):
            async for event_id, message in events:
                if message is None:
                    continue
                last_event = event_id
                if message.get("method") == "elicitation/create":
                    assert (await session.send({"jsonrpc": "2.0", "id": message["id"], "result": accept_target()})).status_code == 202
                elif message.get("method") == "sampling/createMessage":
                    sample = message
                    break
    assert sample is not None and last_event is not None
    if kill_during_round:
        # The answer lands on A, which dies at a random moment of the round it starts.
        await session.send({"jsonrpc": "2.0", "id": sample["id"], "result": model_says("yes")})
        await asyncio.sleep(rng.uniform(0.0, 0.05))
        pair.kill("A")
    else:
        pair.kill("A")  # the call waits for the sampling answer: nobody holds it now
        answered = await session.send({"jsonrpc": "2.0", "id": sample["id"], "result": model_says("yes")}, url=pair.url("B"))
        assert answered.status_code == 202, answered.text
    # The client resumes its stream on B from the last event it saw.
    final = None
    try:
        async with session.resume(last_event, url=pair.url("B")) as resumed, asyncio.timeout(STREAM_TIMEOUT):
            async for message in iter_sse(resumed):
                if message.get("id") == request_id and ("result" in message or "error" in message):
                    final = message
                    break
    except TimeoutError:
        s.detail = "resumed stream gave no answer"
    s.answer = classify(final)
    s.detail = (s.detail, final)
    return 1


async def test_session_calls_survive_their_stream_holder_being_killed(start_server: type[LiveServer]) -> None:
    rng = random.Random(SEED + 1)
    pair = Pair(start_server)
    seen: list[Seen] = []
    faults = 0
    async with http_client() as http:
        for i, during in enumerate([False, True, False, True]):
            s = Seen(f"session-kill-{i}-{'during' if during else 'waiting'}", "deploy", service=f"session-kill-{SEED}-{i}")
            seen.append(s)
            faults += await session_deploy_across_a_kill(pair, http, s, during, rng)
            pair.replace("A")
    problems = await check("session-kill", seen, faults)
    assert not problems, problems


async def test_a_session_round_whose_stream_holder_dies_mid_run_is_taken_over(start_server: type[LiveServer]) -> None:
    """A's stream runs the round after the client's answer and dies in it; the client resumes on B.

    B finds the round claimed but its row untouched (A's handler touched it every
    CANCEL_POLL_SECONDS while it ran), takes it over after three intervals and runs it
    from the journal: the client gets the result on its resumed stream, not a call
    stuck in ``working`` until it expires.
    """
    pair = Pair(start_server)
    async with http_client() as http:
        session = await LegacySession.open(http, pair.url("A"))
        last_event = None
        async with session.stream("tools/call", {"name": "confirm_then_count", "arguments": {"n": 40}, "_meta": {"progressToken": "p"}},
                                  url=pair.url("A")) as (request_id, response):
            async with asyncio.timeout(STREAM_TIMEOUT):
                async for event_id, message in iter_sse_events(response):
                    if message is None:
                        continue
                    last_event = event_id
                    if message.get("method") == "elicitation/create":
                        answer = {"action": "accept", "content": {"ok": True}}
                        assert (await session.send({"jsonrpc": "2.0", "id": message["id"], "result": answer})).status_code == 202
                    elif message.get("method") == "notifications/progress" and message["params"]["progress"] >= 3:
                        break  # A runs the answered round now
        call_id = await row_id_when_written(request_id, "confirm_then_count")
        assert call_id is not None
        assert await sync_to_async(_status_of)(call_id) == "working"
        pair.kill("A")
        final = None
        async with session.resume(last_event, url=pair.url("B")) as resumed, asyncio.timeout(STREAM_TIMEOUT):
            async for message in iter_sse(resumed):
                if message.get("id") == request_id and ("result" in message or "error" in message):
                    final = message
                    break
    assert final is not None and final.get("result", {}).get("content") == [{"type": "text", "text": "counted to 40"}], final
    assert await sync_to_async(_status_of)(call_id) == "completed"


def _status_of(call_id: str) -> str:
    from mcp_tools.models import ToolCall

    return ToolCall.objects.get(pk=call_id).status


# -- 3. cancels from the admin and from the client at random points --------------------------------------


async def slow_count_2026(pair: Pair, http: httpx2.AsyncClient, s: Seen, n: int, who: str, delay: float) -> None:
    """2026-07-28 ``slow_count`` on a progress stream; the admin cancels it, or the client closes the stream."""
    url = pair.url(rnd_server(s))
    params = {"name": "slow_count", "arguments": {"n": n}, "_meta": modern_meta(progressToken="p")}
    body = {"jsonrpc": "2.0", "id": s.request_id, "method": "tools/call", "params": params}
    canceller: asyncio.Future[None] | None = None
    async with http.stream("POST", url, json=body, headers=modern_headers("tools/call", params)) as response:
        if who == "admin":
            canceller = asyncio.ensure_future(cancel_after(s, delay))
        try:
            async with asyncio.timeout(delay if who == "client" else STREAM_TIMEOUT):
                async for message in iter_sse(response):
                    if message.get("id") == s.request_id:
                        s.answer, s.detail = classify(message), message
                        break
        except TimeoutError:
            s.gave_up = True  # the client closes its stream: a 2026 cancellation
    if canceller is not None:
        await canceller


async def slow_count_2025(pair: Pair, http: httpx2.AsyncClient, s: Seen, n: int, who: str, delay: float) -> None:
    """2025-11-25 ``slow_count`` in a session; the admin cancels it, or the client sends notifications/cancelled."""
    url = pair.url(rnd_server(s))
    session = await LegacySession.open(http, url)
    body = {"jsonrpc": "2.0", "id": s.request_id, "method": "tools/call", "params": {"name": "slow_count", "arguments": {"n": n}}}

    async def client_cancel() -> None:
        await asyncio.sleep(delay)
        s.gave_up = True
        await session.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": s.request_id}})

    canceller = asyncio.ensure_future(cancel_after(s, delay) if who == "admin" else client_cancel())
    try:
        async with http.stream("POST", url, json=body, headers=session.headers()) as response, asyncio.timeout(STREAM_TIMEOUT):
            async for message in iter_sse(response):
                if message.get("id") == s.request_id:
                    s.answer, s.detail = classify(message), message
                    break
    except (TimeoutError, httpx2.TransportError) as exc:
        s.detail = repr(exc)
    await canceller


async def deploy_2026(pair: Pair, http: httpx2.AsyncClient, s: Seen, who: str, point: int, delay: float) -> None:
    """2026-07-28 ``deploy``; the admin cancels after round ``point`` (3: racing the effect round), or the client walks away."""
    service = s.service or ""
    first = await modern_round(http, pair.url("A"), service)
    assert first is not None and classify(first) == "input_required", first
    s.call_id = call_of_state(first["result"]["requestState"])
    steps = [("target", accept_target()), ("verdict", model_says("yes"))]
    message = first
    for number, (key, value) in enumerate(steps, start=1):
        if point == number:
            if who == "client":  # it never answers: the call stays resumable
                s.gave_up = True
                s.answer, s.detail = classify(message), message
                return
            await admin_cancel(s.call_id)
        request = answers(message["result"]["requestState"], key, value)
        if point == 3 and key == "verdict":
            # The admin's cancel races the round that runs the once effect.
            sent = asyncio.ensure_future(modern_round(http, pair.url(rnd_server(s)), service, request))
            await asyncio.sleep(delay / 20)
            await admin_cancel(s.call_id)
            reply = await sent
        else:
            reply = await modern_round(http, pair.url(rnd_server(s)), service, request)
        assert reply is not None
        message = reply
        if classify(message) != "input_required":
            break
    s.answer, s.detail = classify(message), message


async def deploy_2025(pair: Pair, http: httpx2.AsyncClient, s: Seen, who: str, point: int, delay: float) -> None:
    """2025-11-25 ``deploy`` on a stream; cancelled while it waits for answer ``point`` (3: just after the last answer)."""
    url = pair.url(rnd_server(s))
    session = await LegacySession.open(http, url)
    body = {"jsonrpc": "2.0", "id": s.request_id, "method": "tools/call", "params": {"name": "deploy", "arguments": {"service": s.service}}}
    asked = 0

    async def cancel() -> None:
        if who == "admin":
            call_id = await row_id_when_written(s.request_id or "", "deploy")
            assert call_id is not None
            await admin_cancel(call_id)
        else:
            s.gave_up = True
            await session.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": s.request_id}})

    try:
        async with http.stream("POST", url, json=body, headers=session.headers()) as response, asyncio.timeout(STREAM_TIMEOUT):
            async for message in iter_sse(response):
                if message.get("id") == s.request_id and ("result" in message or "error" in message):
                    s.answer, s.detail = classify(message), message
                    break
                if message.get("method") not in ("elicitation/create", "sampling/createMessage"):
                    continue
                asked += 1
                if asked == point:
                    await asyncio.sleep(delay / 10)
                    await cancel()
                answer = accept_target() if message["method"] == "elicitation/create" else model_says("yes")
                await session.send({"jsonrpc": "2.0", "id": message["id"], "result": answer})
                if asked == 2 and point == 3:
                    await asyncio.sleep(delay / 50)
                    await cancel()
    except (TimeoutError, httpx2.TransportError) as exc:
        s.detail = repr(exc)


def rnd_server(s: Seen) -> str:
    """A or B, fixed per call label (so a scenario's traffic spreads over both processes)."""
    return "AB"[sum(map(ord, s.label)) % 2]


async def cancel_after(s: Seen, delay: float) -> None:
    await asyncio.sleep(delay)
    call_id = await row_id_when_written(s.request_id or "", s.tool)
    if call_id is not None:
        await admin_cancel(call_id)


async def test_cancels_from_the_admin_and_the_client_at_random_points(start_server: type[LiveServer]) -> None:
    rng = random.Random(SEED + 2)
    pair = Pair(start_server)
    seen: list[Seen] = []
    faults = 0
    async with http_client() as http:
        for group in range(4):
            jobs = []
            for i in range(6):
                label = f"cancel-{group}-{i}"
                who = rng.choice(["admin", "client"])
                era = rng.choice(["2025", "2026"])
                if rng.random() < 0.5:
                    s = Seen(f"{label}-slow_count-{era}-{who}", "slow_count", request_id=f"{label}-{uuid.uuid4().hex[:8]}")
                    n, delay = rng.randint(20, 60), rng.uniform(0.0, 2.0)
                    jobs.append((slow_count_2025 if era == "2025" else slow_count_2026)(pair, http, s, n, who, delay))
                else:
                    s = Seen(f"{label}-deploy-{era}-{who}", "deploy", service=f"{label}-{SEED}", request_id=f"{label}-{uuid.uuid4().hex[:8]}")
                    point, delay = rng.randint(1, 3), rng.uniform(0.0, 1.0)
                    jobs.append((deploy_2025 if era == "2025" else deploy_2026)(pair, http, s, who, point, delay))
                seen.append(s)
                faults += 1
            await asyncio.gather(*jobs)
    problems = await check("cancel", seen, faults)
    assert not problems, problems


# -- 4. concurrent identical retries of the effect round racing an admin cancel ---------------------------


async def test_identical_retries_race_an_admin_cancel(start_server: type[LiveServer]) -> None:
    rng = random.Random(SEED + 3)
    pair = Pair(start_server)
    seen: list[Seen] = []
    faults = 0
    async with http_client() as http:
        for i in range(8):
            service = f"race-{SEED}-{i}"
            first = await modern_round(http, pair.url("A"), service)
            assert first is not None
            second = await modern_round(http, pair.url("B"), service, answers(first["result"]["requestState"], "target", accept_target()))
            assert second is not None and classify(second) == "input_required", second
            call_id = call_of_state(first["result"]["requestState"])
            request = answers(second["result"]["requestState"], "verdict", model_says("yes"))
            retries = [Seen(f"race-{i}-retry-{r}", "deploy", service=service, call_id=call_id) for r in range(4)]

            async def retry(s: Seen, url: str) -> None:
                # The admin's POST takes a while in this process: spread the retries around it.
                await asyncio.sleep(rng.uniform(0.0, 0.25))
                reply = await modern_round(http, url, service, request)
                s.answer, s.detail = classify(reply), reply

            async def cancel() -> None:
                await asyncio.sleep(rng.uniform(0.0, 0.02))
                await admin_cancel(call_id)

            await asyncio.gather(*(retry(s, pair.url("AB"[r % 2])) for r, s in enumerate(retries)), cancel())
            faults += 1
            completed = [s.detail["result"]["structuredContent"] for s in retries if s.answer == "completed"]
            if any(answer != completed[0] for answer in completed):
                TALLY.violations.append(f"race-{i}: identical retries got different results {completed}")
            # One call, four clients: each client's answer is checked against the one row.
            for s in retries:
                s.gave_up = s.answer in ("refused", "error")  # a refused retry is not a listening client
            seen += retries
    problems = await check("race", seen, faults) + [v for v in TALLY.violations if v.startswith("race-")]
    assert not problems, problems


# -- regression: an admin cancel of a 2025 call waiting for input ------------------------------------------


async def test_admin_cancel_of_a_session_call_waiting_for_input_answers_with_the_cancellation(start_server: type[LiveServer]) -> None:
    """The stream's client gets the cancellation result (as for a running call), not ``-32602``."""
    server = start_server(env=FAULT_ENV).start()
    async with http_client() as http:
        session = await LegacySession.open(http, server.url)
        async with session.stream("tools/call", {"name": "deploy", "arguments": {"service": "cancel-waiting"}}) as (request_id, response):
            async with asyncio.timeout(STREAM_TIMEOUT):
                messages = iter_sse(response)
                asked = await anext(messages)
                assert asked["method"] == "elicitation/create"
                call_id = asked["id"].split(":")[1]
                await admin_cancel(call_id)
                withdrawn = await anext(messages)  # the client is told its dialog will not be answered
                assert withdrawn["method"] == "notifications/cancelled" and withdrawn["params"]["requestId"] == asked["id"], withdrawn
                final = await anext(messages)
    assert final["id"] == request_id
    assert classify(final) == "cancelled", final
    assert await sync_to_async(_audits_of)("cancel-waiting") == 0
