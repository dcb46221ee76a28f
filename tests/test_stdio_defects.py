"""``manage.py mcp_stdio``: what a review found, each failing before its mend.

A line that is not UTF-8 ended the server; text went through the locale's encoding, and one
reply it could not encode silenced every later one; ``print()`` in a tool wrote on the protocol
stream; a slow sync tool held every other request's sync code; sync tools starved the reading
of stdin; a sync tool still running kept the process alive past the grace period; SIGTERM left
calls waiting for input in flight. The server runs as a real child process
(:class:`tests.stdio_harness.StdioProcess`) on the tests' database, with ``tests.stdio_app``'s
tools.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import sys
from decimal import Decimal
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from mcp_tools.server.auth import ANONYMOUS
from mcp_tools.transports.stdio import StdioServer
from tests.stdio_harness import StdioProcess, call

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

PING = {"jsonrpc": "2.0", "id": "ping", "method": "ping"}


async def started(*args: str, env: dict[str, str] | None = None, capabilities: dict[str, Any] | None = None) -> StdioProcess:
    process = await StdioProcess(*args, env=env).start()
    await process.handshake(capabilities=capabilities)
    return process


# -- encoding: the wire is UTF-8 (spec: "JSON-RPC messages MUST be UTF-8 encoded") ----------------

@pytest.mark.parametrize("env", [{"PYTHONIOENCODING": "utf-8"}, {}], ids=["strict-utf8-stdio", "this-machine-locale"])
async def test_a_line_of_invalid_utf8_is_a_parse_error_and_the_server_goes_on(django_db_setup: None, env: dict[str, str]) -> None:
    """A UTF-8 locale with strict decoding made ``readline`` raise: the server died with a traceback.
    Under the C.UTF-8 locale the bytes came in as lone surrogates and were served as text."""
    process = await started(env=env)
    try:
        await process.send_bytes(b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"\xff\xfe"}}}\n')
        await process.send(PING)
        await process.reply_to("ping", 10)
        assert [m["error"]["code"] for m in process.received if m.get("id") is None and "error" in m] == [-32700], process.received
        assert not [m for m in process.received if m.get("id") == 1], "the invalid bytes were served as text"
    finally:
        await process.stop()


async def _cp1252_server_with_a_product() -> StdioProcess:
    from demo_site.inventory.models import Product

    await sync_to_async(Product.objects.create)(sku="CRB-1", name="Crème brûlée ✓", price=Decimal("4.50"), stock=3)
    # Windows gives a child's pipes the ANSI code page (cp1252) unless PYTHONUTF8 is set.
    return await started(env={"PYTHONIOENCODING": "cp1252"})


async def test_a_reply_holding_non_ascii_text_is_written_whatever_the_locale(django_db_setup: None) -> None:
    """The reply's "✓" (outside cp1252) raised UnicodeEncodeError, which write() took for "the client
    closed stdout" (a ValueError): that reply and every later one were dropped, silently."""
    process = await _cp1252_server_with_a_product()
    try:
        await process.send(call(1, "search_products", {"query": "CRB"}))
        found = await process.reply_to(1, 10)
        assert [p["name"] for p in found["result"]["structuredContent"]["result"]] == ["Crème brûlée ✓"]
        await process.send(PING)
        assert (await process.reply_to("ping", 10))["result"] == {}
    finally:
        await process.stop()


async def test_a_request_holding_non_ascii_text_is_read_as_utf8_whatever_the_locale(django_db_setup: None) -> None:
    """The client's UTF-8 "brûlée" was decoded with the locale's code page: the tool searched for "brÃ»lÃ©e"."""
    process = await _cp1252_server_with_a_product()
    try:
        # As the official client writes it: raw UTF-8 (pydantic's model_dump_json), not \u escapes.
        await process.send(json.dumps(call(1, "search_products", {"query": "brûlée"}), ensure_ascii=False))
        found = await process.reply_to(1, 10)
        assert [p["sku"] for p in found["result"]["structuredContent"]["result"]] == ["CRB-1"], found
    finally:
        await process.stop()


# -- stdout carries nothing but MCP messages --------------------------------------------------------

async def test_a_tool_that_prints_does_not_corrupt_stdout(django_db_setup: None) -> None:
    """``print()`` in a tool (or in any library it calls) went to the protocol stream; it goes to stderr."""
    process = await started()
    try:
        await process.send(call(1, "chatty", {"text": "hi"}))
        assert (await process.reply_to(1))["result"]["content"][0]["text"] == "hi"
        not_mcp = [m for m in process.received if "__not_json__" in m or m.get("jsonrpc") != "2.0"]
        assert not_mcp == [], f"non-MCP lines on stdout: {not_mcp}"
        process.close_stdin()
        await process.wait_exit(15)
        assert b"debug: chatty called with 'hi'" in process.stderr
    finally:
        await process.stop()


# -- concurrency ---------------------------------------------------------------------------------------

async def test_a_slow_sync_tool_does_not_hold_up_other_sync_requests(django_db_setup: None) -> None:
    """All thread-sensitive sync code of the process (tools, resources, completers) shared asgiref's one
    thread: a sync tool taking 4 s held every other sync tool and resource read for those 4 s."""
    process = await started()
    try:
        await process.send(call(1, "slow_sync", {"seconds": 60}))
        await asyncio.sleep(0.3)
        await process.send(call(2, "quick_sync", {"text": "q"}))
        await process.send({"jsonrpc": "2.0", "id": 3, "method": "resources/read", "params": {"uri": "inventory://products"}})
        assert (await process.reply_to(2, 30))["result"]["content"][0]["text"] == "q"
        assert "result" in await process.reply_to(3, 30)
        # Answered while the slow one still runs (held up, they came after its 60 s).
        assert not any(message.get("id") == 1 for message in process.received)
    finally:
        await process.stop()


async def test_reading_stdin_is_not_starved_by_sync_tools(django_db_setup: None) -> None:
    """stdin was read in the loop's default executor, the pool thread_sensitive=False sync code uses too
    (min(32, cpus + 4) threads): with that many such calls running, no line was read (no ping, no
    notifications/cancelled) until one of them finished."""
    busy = min(32, (os.cpu_count() or 1) + 4) + 1
    process = await started()
    try:
        for i in range(busy):
            await process.send(call(i, "nap_free", {"seconds": 60}))
        await asyncio.sleep(0.5)
        await process.send(PING)
        await process.reply_to("ping", 30)
        # Read and answered while every such call still runs (starved, it was read after their 60 s).
        assert not any(message.get("id") in range(busy) for message in process.received)
    finally:
        await process.stop()


# -- shutdown --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("tool", ["slow_sync", "nap_free"], ids=["thread-sensitive", "thread_sensitive=False"])
async def test_the_server_exits_soon_after_the_grace_period_even_with_a_sync_tool_running(django_db_setup: None, tool: str) -> None:
    """The grace period ended with the request answered, but the process stayed alive until the sync
    tool's thread returned: interpreter exit joins the request threads, and asyncio.run() the loop's
    default executor (where thread_sensitive=False tools run). 30 s here, not grace + a moment."""
    process = await started("--grace", "1")
    try:
        await process.send(call(1, tool, {"seconds": 30}))
        await asyncio.sleep(0.5)
        process.close_stdin()
        assert "shutting down" in (await process.reply_to(1, 10))["error"]["message"]
        assert await process.wait_exit(15) == 0  # the tool's thread runs 30 s: it did not hold the exit
    finally:
        await process.stop()


@pytest.mark.parametrize(("stdin_closed_first", "signal_name"), [(False, "SIGTERM"), (True, "SIGTERM"), (False, "SIGINT")],
                         ids=["sigterm", "stdin-closed-then-sigterm", "sigint"])
async def test_sigterm_ends_the_calls_in_flight_as_end_of_input_does(django_db_setup: None, stdin_closed_first: bool,
                                                                     signal_name: str) -> None:
    """Clients escalate to SIGTERM when the server does not exit (the official client 2 s after closing
    stdin, within the 10 s default grace): the process died on the spot and a call waiting for the
    user's answer was left ``input_required`` for CALL_TTL (a day), though nothing can answer it.
    Ctrl-C in a terminal sends SIGINT to the client and the server together: it ended the process with
    a KeyboardInterrupt traceback and the call unanswered."""
    from mcp_tools.models import ToolCall

    process = await started("--grace", "120", capabilities={"elicitation": {"form": {}}, "sampling": {}})
    try:
        await process.send(call(1, "deploy", {"service": "sigterm"}))
        await process.wait_for(lambda m: m.get("method") == "elicitation/create")
        if stdin_closed_first:
            process.close_stdin()
            await asyncio.sleep(0.5)
        assert process.proc is not None
        process.proc.send_signal(getattr(signal, signal_name))
        assert await process.wait_exit(30) == 0  # within the 120 s grace: the signal ended it
        assert signal_name in (await process.reply_to(1, 1))["error"]["message"]
    finally:
        await process.stop()
    statuses = await sync_to_async(lambda: list(ToolCall.objects.filter(tool_name="deploy").values_list("status", flat=True)))()
    assert statuses == ["cancelled"], statuses


# -- initialize ------------------------------------------------------------------------------------------

async def test_initialize_without_a_protocol_version_is_invalid_params_as_over_http() -> None:
    init = {"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {"capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    writer = io.BytesIO()
    await StdioServer(ANONYMOUS, io.BytesIO(json.dumps(init).encode() + b"\n"), writer, grace=2).serve()
    [reply] = [json.loads(line) for line in writer.getvalue().splitlines()]
    assert reply["id"] == "init" and reply["error"]["code"] == -32602


async def test_a_second_initialize_is_refused_and_the_first_version_stays() -> None:
    """Found by a review (hostile input): a second ``initialize`` on the same stdio connection was answered
    as a fresh handshake (and changed the version under the requests in flight); the lifecycle has one,
    first, and HTTP refuses one inside a session."""
    def init(request_id: str, version: str) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": request_id, "method": "initialize",
                "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}

    lines = [init("first", "2025-06-18"), init("again", "2025-11-25")]
    writer = io.BytesIO()
    server = StdioServer(ANONYMOUS, io.BytesIO(b"".join(json.dumps(m).encode() + b"\n" for m in lines)), writer, grace=2)
    await server.serve()
    replies = {r["id"]: r for r in (json.loads(line) for line in writer.getvalue().splitlines())}
    assert replies["first"]["result"]["protocolVersion"] == "2025-06-18", replies
    assert replies["again"]["error"]["code"] == -32600, replies
    assert server.version == "2025-06-18"


async def test_mcp_stdio_called_from_a_thread_serves_without_signal_handlers(django_db_setup: None) -> None:
    """``call_command("mcp_stdio")`` from a thread other than the main one failed at start: asyncio
    installs signal handlers in the main thread only (RuntimeError). It serves, and stdin's end stops it."""
    import subprocess
    import sys

    from tests.stdio_harness import ROOT

    script = ("import threading, django; django.setup(); from django.core.management import call_command; "
              "t = threading.Thread(target=call_command, args=('mcp_stdio',)); t.start(); t.join()")
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.stdio_settings", "PYTHONPATH": str(ROOT)}
    done = await asyncio.to_thread(subprocess.run, [sys.executable, "-c", script], cwd=ROOT, env=env, timeout=60,
                                   input=(json.dumps(PING) + "\n").encode(), capture_output=True)
    replies = [json.loads(line) for line in done.stdout.splitlines()]
    assert [reply.get("id") for reply in replies] == ["ping"], (replies, done.stderr.decode()[-2000:])


# -- request ids ------------------------------------------------------------------------------------------

async def test_an_id_cancelled_before_its_request_started_can_be_used_again() -> None:
    """A request and its ``notifications/cancelled`` read in one turn of the read loop (one write of
    the client's): the task was cancelled before ``run()`` started, whose end is what forgot the id,
    so it stayed "in progress" for good: a later request with that id was refused (-32600 "A request
    with this id is still in progress")."""
    writer = io.BytesIO()
    server = StdioServer(ANONYMOUS, io.BytesIO(), writer, grace=2)
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}
    await server.receive(json.dumps({"jsonrpc": "2.0", "id": 7, "method": "ping"}).encode())
    await server.receive(json.dumps(cancel).encode())  # no await in between yields: run() has not started
    await asyncio.sleep(0.1)
    await server.receive(json.dumps({"jsonrpc": "2.0", "id": 7, "method": "ping"}).encode())
    await asyncio.wait(list(server.running.values()), timeout=5)
    assert [json.loads(line) for line in writer.getvalue().splitlines()] == [{"jsonrpc": "2.0", "id": 7, "result": {}}]
    assert server.running == {} and server.cancelled_by_client == set()


@pytest.mark.parametrize("grace", ["-1", "nan", "inf"])
def test_a_grace_the_setting_would_refuse_is_refused_by_the_command(grace: str) -> None:
    """Found by an operations review: ``--grace -1`` (or nan) started, then answered even a ping with
    "Server shutting down"; STDIO_SHUTDOWN_GRACE_SECONDS = -1 is refused by the check (E005)."""
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match="--grace must be a finite number of seconds >= 0"):
        call_command("mcp_stdio", "--grace", grace)


async def _initialized_with_raw_pipes(*args: str) -> asyncio.subprocess.Process:
    """``manage.py mcp_stdio`` on plain pipes (a client that may stop reading its stdout), initialized."""
    from tests.stdio_harness import INITIALIZED, ROOT, init_message

    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.stdio_settings", "PYTHONPATH": str(ROOT)}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "manage.py", "mcp_stdio", *args, cwd=ROOT, env=env,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )
    assert proc.stdout
    await _send(proc, init_message())
    await asyncio.wait_for(proc.stdout.readline(), 30)
    await _send(proc, INITIALIZED)
    return proc


async def _send(proc: asyncio.subprocess.Process, *messages: dict[str, Any]) -> None:
    assert proc.stdin
    for message in messages:
        proc.stdin.write(json.dumps(message).encode() + b"\n")
    await proc.stdin.drain()


async def _exit_status(proc: asyncio.subprocess.Process) -> int | None:
    """The process's exit status within 10 s (None if it goes on): its exit, not ``proc.wait()``, which also
    waits for the unread stdout to be read to its end."""
    for _ in range(100):
        if proc.returncode is not None:
            break
        await asyncio.sleep(0.1)
    return proc.returncode


async def _ended(proc: asyncio.subprocess.Process) -> None:
    """Kill it if it goes on, and read its stdout to its end: the pipe closes, and ``wait()`` returns."""
    assert proc.stdout
    if proc.returncode is None:
        proc.kill()
    await asyncio.wait_for(proc.stdout.read(), 30)
    await asyncio.wait_for(proc.wait(), 30)


@pytest.mark.parametrize("signal_number", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_a_signal_ends_the_server_when_the_client_does_not_read_stdout(django_db_setup: None, signal_number: int) -> None:
    """Found by the stdio review: a client that stopped reading stdout (hung, or gone with its pipe
    held open) filled the pipe, and the reply being written blocked the event loop's thread, where the
    SIGTERM / SIGINT handler runs: the signal never ended the server (docs: "SIGTERM ends it at once")
    and it waited for ever. The lines are written off the loop now; once stopped, a line the client
    has not taken for a second gives the output up and the process exits."""
    proc = await _initialized_with_raw_pipes()
    assert proc.stdin and proc.stdout
    try:
        # Its stdout is not read again.
        await _send(proc, *(call(n, "chatty", {"text": "x" * 200_000}) for n in range(4)))
        await asyncio.sleep(3)  # the replies fill the pipe
        assert proc.returncode is None
        proc.send_signal(signal_number)
        assert await _exit_status(proc) == 0, "the signal did not end the server"
    finally:
        await _ended(proc)


async def test_a_reply_being_written_when_the_server_is_stopped_reaches_a_client_that_reads_it(django_db_setup: None) -> None:
    """Found by the review of this session's fixes: since lines are written by a writer thread (4582395), a
    SIGTERM while a long reply was being written to a client that had not read it yet (it reads it at once
    after, well within the second docs/protocol.md gives a line once the server is stopped) cut the reply
    short: the request was cancelled as its line went out (so no other reply came), and the process exited
    under the writer thread. Before that commit the reply was written whole, then the server stopped."""
    proc = await _initialized_with_raw_pipes()
    assert proc.stdin and proc.stdout
    try:
        await _send(proc, call(1, "chatty", {"text": "x" * 1_000_000}))
        await asyncio.sleep(0.6)  # the reply fills the pipe and waits for the client (under a second)
        proc.send_signal(signal.SIGTERM)
        out = await asyncio.wait_for(proc.stdout.read(), 30)  # the client reads now, to the end
        assert await asyncio.wait_for(proc.wait(), 30) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    lines = out.split(b"\n")
    assert lines[-1] == b"", f"a line cut short: {len(lines[-1])} bytes of it"
    replies = [json.loads(line) for line in lines[:-1]]
    assert [reply.get("id") for reply in replies] == [1], [str(reply)[:200] for reply in replies]


async def test_the_grace_period_still_ends_the_server_when_the_client_does_not_read_stdout(django_db_setup: None) -> None:
    """The other side of the test above: the server waits, after the requests accepted, for the line being
    written, but a client that closed stdin and reads no more does not keep it past the grace period
    (docs/settings.md: "the rest are then cancelled and answered with an error, and the process exits"):
    once that is over, a line the client takes nothing of for a second gives the output up, as after a
    signal."""
    proc = await _initialized_with_raw_pipes("--grace", "0.5")
    assert proc.stdin and proc.stdout
    try:
        await _send(proc, call(1, "chatty", {"text": "x" * 1_000_000}))
        await asyncio.sleep(1)  # the reply fills the pipe; stdout is not read again
        proc.stdin.close()
        assert await _exit_status(proc) == 0, "the grace period did not end the server"
    finally:
        await _ended(proc)


async def test_a_long_reply_a_slow_client_is_reading_when_the_server_is_stopped_is_written_whole(django_db_setup: None) -> None:
    """Found by the review of this session's fixes: once stopped, the server gives its output up when "a line
    the client has not taken for a second" (docs/protocol.md) waits, but it timed the line from when its
    writing began: a client reading a long reply steadily, only slowly, had it cut short by a SIGTERM that came
    a second or more into the reply, though it was taking the line all along."""
    proc = await _initialized_with_raw_pipes()
    assert proc.stdout
    out = b""
    try:
        await _send(proc, call(1, "chatty", {"text": "x" * 3_000_000}))
        loop = asyncio.get_running_loop()
        signal_at = loop.time() + 1.5
        while True:  # about 640 KB a second: the 3 MB reply takes some 5 s
            chunk = await asyncio.wait_for(proc.stdout.read(32 * 1024), 30)
            if not chunk:
                break
            out += chunk
            if signal_at is not None and loop.time() >= signal_at:
                proc.send_signal(signal.SIGTERM)
                signal_at = None
            await asyncio.sleep(0.05)
        assert await asyncio.wait_for(proc.wait(), 30) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert signal_at is None, "the reply ended before the signal"
    lines = out.split(b"\n")
    assert lines[-1] == b"", f"a line cut short: {len(lines[-1])} bytes of it"
    assert [json.loads(line).get("id") for line in lines[:-1]] == [1]


async def test_a_short_reply_to_a_client_reading_stdout_costs_no_thread_hop() -> None:
    """Found by the review of this session's fixes: since 4582395 every line went through the writer thread,
    the ones a client reading its stdout takes at once too: a ping over stdio took about 80-100 us
    instead of 35-45 us (1,500 pings, before and after, on this machine). A short line written where the pipe
    has room for it cannot block, and is written on the loop; only the others go to the thread."""
    read_end, write_end = os.pipe()
    try:
        with os.fdopen(write_end, "wb", closefd=False) as writer:
            server = StdioServer(ANONYMOUS, io.BytesIO(), writer, grace=2)
            for request_id in range(1, 4):
                await server.receive(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "ping"}).encode())
            await asyncio.wait(list(server.running.values()), timeout=5)
            assert server._writer._threads == set(), "a ping's reply went through the writer thread"
        replies = os.read(read_end, 65536).splitlines()
        assert [json.loads(line) for line in replies] == [{"jsonrpc": "2.0", "id": n, "result": {}} for n in range(1, 4)]
    finally:
        os.close(read_end)
        os.close(write_end)
