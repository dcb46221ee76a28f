"""MCP over stdio: newline-delimited JSON-RPC on stdin/stdout (the ``mcp_stdio`` command).

Serves the same registry and call service as HTTP, in the handshake era.
Requests run concurrently; server-to-client requests (elicitation, sampling)
go out on stdout and the client's answers come back on stdin.

The streams are bytes, always UTF-8 as the spec says, whatever the locale (a
Windows child's pipes use the ANSI code page): a line that is not UTF-8 is
answered ``-32700`` like any line that is not JSON. A thread of its own reads
the input, so sync tools never starve it (``thread_sensitive=False`` ones share
the loop's default executor), and each request's thread-sensitive sync code runs
in a thread of its own (:class:`~mcp_tools.server.threads.RequestThread`).

When stdin closes, the server stops reading but finishes the requests it has
already accepted and writes their replies, for at most
``MCP_TOOLS["STDIO_SHUTDOWN_GRACE_SECONDS"]`` (a client commonly closes stdin
right after its last request and reads stdout to the end). A request still
running after the grace period is cancelled and answered with an error, so
every accepted request gets exactly one reply. A request waiting for the
client's answer (elicitation, sampling) cannot get one after stdin closed: it
waits out the grace period too. :meth:`StdioServer.stop` (the command's SIGTERM)
ends the grace period at once.

The server runs as one user (``mcp_stdio --user``) for as long as the client keeps it, but serves
each request as that user is now, as HTTP authenticates each request: the user is read again (one
query) and a new :class:`~mcp_tools.server.auth.Principal` asks Django for its permissions, so a
permission or group taken away (or granted) counts from the next request on, and a user made
inactive or deleted is refused (``-32600 Unauthorized``, what HTTP answers with its 401).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import logging
import os
import select
import sys
import threading
import time
from typing import Any, BinaryIO

from ..conf import mcp_settings
from ..interprocess import cancellation
from ..protocol import jsonrpc, versions
from ..protocol.errors import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, McpError
from ..server import RequestContext, dispatch, initialize_result
from ..server.auth import Principal
from ..server.flavors import session as session_flavor
from ..server.threads import RequestThread, run_sync

logger = logging.getLogger("mcp_tools.stdio")

#: How much of a line past ``MAX_BODY_BYTES`` is read at a time while it is skipped.
_SKIP_CHUNK_BYTES = 64 * 1024
#: Once stopped (SIGTERM / SIGINT), a line the client has taken nothing of for this long means it reads no
#: more: nothing else is written, and the server ends without waiting for it.
STALLED_OUTPUT_SECONDS = 1.0
#: A line is written this much at a time: a client taking a long line slowly, piece by piece, is not stalled.
_WRITE_CHUNK_BYTES = 64 * 1024
#: A write this long to a pipe ``select`` says is writable does not block (POSIX's atomic pipe write).
_PIPE_BUF = getattr(select, "PIPE_BUF", 512)


def current_user(user: Any) -> Any | None:
    """Sync: ``user`` as the database has it now (one query), or None when it was deleted or made
    inactive. A new object: nothing Django cached on the old one (``ModelBackend``'s permissions)
    comes with it. A custom user model without ``is_active`` counts as active, as Django counts it.
    """
    try:
        fresh = type(user)._default_manager.get(pk=user.pk)
    except type(user).DoesNotExist:
        return None
    return fresh if getattr(fresh, "is_active", True) else None


def claim_stdio() -> tuple[BinaryIO, BinaryIO]:
    """This process's stdin and stdout for the protocol alone: ``(reader, writer)``, binary.

    The protocol keeps private copies of file descriptors 0 and 1. Descriptor 1 and
    ``sys.stdout`` then write to stderr, descriptor 0 and ``sys.stdin`` read nothing:
    ``print()`` in a tool, a C extension or a subprocess can no longer put a line that is not
    an MCP message on the protocol stream (the spec: the server MUST NOT write anything else
    to stdout), nor a subprocess read the client's messages.
    """
    sys.stdout.flush()
    reader = os.fdopen(os.dup(0), "rb")
    writer = os.fdopen(os.dup(1), "wb")
    nothing = os.open(os.devnull, os.O_RDONLY)
    os.dup2(nothing, 0)
    os.close(nothing)
    os.dup2(2, 1)
    sys.stdin = open(os.devnull)  # noqa: SIM115 - the process's stdin from now on
    sys.stdout = sys.stderr
    return reader, writer


class StdioServer:
    """One client on a pair of binary streams (:func:`claim_stdio` for the process's own).

    ``grace``: seconds to finish accepted requests after the input closes
    (``None``: the ``STDIO_SHUTDOWN_GRACE_SECONDS`` setting).
    """

    def __init__(self, principal: Principal, reader: BinaryIO, writer: BinaryIO, grace: float | None = None) -> None:
        #: Who the server runs as, as the process found it when it started: each request is served
        #: as this caller is then (:meth:`current_principal`), never with this object's answers.
        self.principal = principal
        self.reader = reader
        self.writer = writer
        self.grace = grace
        #: Set when the input closed: requests still running are finishing, then cancelled.
        self.closing = False
        #: Ids of running requests the client cancelled (notifications/cancelled): they get no reply,
        #: also when the input closes before they have stopped.
        self.cancelled_by_client: set[Any] = set()
        self._output_closed = False
        self._stopped = False
        #: What the requests cancelled at shutdown did not finish within (said in their error replies).
        self._deadline = "within the grace period after stdin closed"
        #: Lines of input as read; None for one past ``MAX_BODY_BYTES`` (read to its end, not kept).
        self._lines: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.version = versions.LATEST_HANDSHAKE
        self.capabilities: dict[str, Any] = {}
        #: Whether an ``initialize`` was answered: the lifecycle has one, first (a second one would
        #: change the version and capabilities under the requests in flight).
        self.initialized = False
        self.log_level = "info"
        self.running: dict[Any, asyncio.Task[None]] = {}
        #: Writes the lines, off the loop: a client that stops reading stdout fills the pipe and blocks
        #: the write, which on the loop's thread held the loop, SIGTERM's handler included, for good.
        self._writer = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="mcp-tools-stdio-writer")
        #: When the writer thread began the piece of a line it is writing (``time.monotonic()``); None between lines.
        self._writing_since: float | None = None
        #: Done when the output is given up (stopped, and the client took no line for STALLED_OUTPUT_SECONDS).
        self._output_gone: asyncio.Future[None] | None = None
        #: Set once :meth:`serve` has finished the requests accepted.
        self._served = False
        #: The line handed to the writer thread last: those before it are written first.
        self._last_line: asyncio.Future[None] | None = None
        #: The calls whose requests to the client (elicitation, sampling, roots) this process wrote: the
        #: client's responses may answer only those (:attr:`RequestContext.own_calls`). Another
        #: ``mcp_stdio`` process of the same user answered them too: a stdio process has no session id.
        self.own_calls: set[str] = set()

    async def write(self, message: dict[str, Any]) -> None:
        """Write one message as a line of UTF-8 JSON (nothing once the client closed its end)."""
        await self._written(self._hand_over(message))

    def _hand_over(self, message: dict[str, Any]) -> asyncio.Future[None]:
        """Give the writer thread one message to write, after those given before: written even if
        whoever waits for it (:meth:`_written`) is cancelled meanwhile."""
        loop = asyncio.get_running_loop()
        if self._output_gone is None:
            self._output_gone = loop.create_future()
        data = jsonrpc.dumps(message) + b"\n"
        if "method" in message and "id" in message:  # a request of ours (a reply has no method)
            asked = session_flavor.parse_step_request_id(message["id"])
            if asked is not None:
                self.own_calls.add(asked[0])
        if self._fits_now(data):
            # Most lines: nothing before them waits for the thread, and the pipe has room for the whole line
            # (PIPE_BUF bytes at least), so the write cannot block: written here, without a thread hop (each
            # line going through the thread doubled the cost of a ping).
            self._write_line(data)
            done: asyncio.Future[None] = loop.create_future()
            done.set_result(None)
            return done
        line = self._last_line = loop.run_in_executor(self._writer, self._write_line, data)
        return line

    def _fits_now(self, data: bytes) -> bool:
        """Whether ``data`` can be written on the loop: no earlier line is still the writer thread's, and
        stdout is a pipe (or file) with room for it now (``select``; not where it cannot say, on Windows)."""
        if len(data) > _PIPE_BUF or (self._last_line is not None and not self._last_line.done()) or self._output_closed:
            return False
        try:
            return bool(select.select([], [self.writer.fileno()], [], 0)[1])
        except (OSError, ValueError, AttributeError):  # no file descriptor (a BytesIO, no fileno), or one select cannot take
            return False

    async def _written(self, line: asyncio.Future[None]) -> None:
        """Until the line handed over is written, or the output given up (:meth:`_watch_output`)."""
        assert self._output_gone is not None
        if not line.done():  # written on the loop already (_fits_now): asyncio.wait would still take a turn of it
            await asyncio.wait((line, self._output_gone), return_when=asyncio.FIRST_COMPLETED)

    def _write_line(self, data: bytes) -> None:
        """The writer thread: one line, flushed."""
        if self._output_closed:
            return
        try:
            # Timed per piece: timed from the line's start, a long reply a slow client was reading all along
            # was given up (cut short) by a stop that came a second into it.
            for start in range(0, len(data), _WRITE_CHUNK_BYTES):
                self._writing_since = time.monotonic()
                self.writer.write(data[start:start + _WRITE_CHUNK_BYTES])
            self._writing_since = time.monotonic()
            self.writer.flush()
        except OSError:  # BrokenPipeError among them: the client closed stdout
            self._output_closed = True
        except ValueError:
            if not self.writer.closed:
                logger.exception("Writing a message failed")
            self._output_closed = True  # "I/O operation on closed file"
        finally:
            self._writing_since = None

    def _watch_output(self) -> None:
        """Stopped: give the output up once a line has waited STALLED_OUTPUT_SECONDS for the client to
        take it (it reads no more), so the requests in flight end and the process exits; else look again."""
        if self._served:
            return
        since = self._writing_since
        if since is not None and time.monotonic() - since >= STALLED_OUTPUT_SECONDS:
            logger.warning("The client has not read stdout for %.0f s as the server ends: nothing more is written",
                           STALLED_OUTPUT_SECONDS)
            self._output_closed = True
            if self._output_gone is not None and not self._output_gone.done():
                self._output_gone.set_result(None)
            return
        asyncio.get_running_loop().call_later(0.1, self._watch_output)

    async def serve(self) -> None:
        """Serve until the input ends (or :meth:`stop`), then finish the requests accepted."""
        loop = asyncio.get_running_loop()
        threading.Thread(target=self._read_lines, args=(loop,), name="mcp-tools-stdio-reader", daemon=True).start()
        while True:
            line = await self._lines.get()
            if line is None:  # as HTTP answers a body past the limit (413), with no id: none was read
                limit = int(mcp_settings.MAX_BODY_BYTES)
                await self.write(jsonrpc.error_message(None, McpError(INVALID_REQUEST, f"Message larger than {limit} bytes")))
                continue
            if not line or self._stopped:
                break
            try:
                await self.receive(line)
            except Exception:  # no line may end the server
                logger.exception("Unhandled error serving a line of input")
        await self.finish_accepted()
        if self._last_line is not None:
            # A request cancelled at shutdown while its reply was being written sends no other: that line goes
            # out whole before the process exits (it exited under the writer thread, the reply cut short), unless
            # the output is given up (stopped, the client taking nothing for STALLED_OUTPUT_SECONDS).
            await self._written(self._last_line)
        self._served = True

    def _read_lines(self, loop: asyncio.AbstractEventLoop) -> None:
        """The reader thread: each line of input into the queue, then ``b""`` at its end.

        Not the loop's default executor: sync tools with ``thread_sensitive=False`` share it,
        and with all of its threads busy no line (a ping, ``notifications/cancelled``) was read.
        """
        limit = int(mcp_settings.MAX_BODY_BYTES)
        # The limit's bytes, and a line end (CRLF: two) past them; no more than a read can be asked
        # for (a limit of sys.maxsize, "no limit", raised OverflowError at the first line).
        size = min(limit + 2, sys.maxsize)
        while True:
            line: bytes | None
            try:
                line = self.reader.readline(size)
                if len(line.rstrip(b"\r\n")) > limit:
                    # A line past MAX_BODY_BYTES, as HTTP refuses a body: read to its end in bounded
                    # pieces and dropped (unbounded, a 20 MB line was held whole, then parsed).
                    while line and not line.endswith(b"\n"):
                        line = self.reader.readline(_SKIP_CHUNK_BYTES)
                    line = None
            except (OSError, ValueError):  # the input broke, or was closed
                line = b""
            except Exception:  # never a reader thread that dies and leaves the server waiting for ever
                logger.exception("Reading the input failed; serving ends as at its end")
                line = b""
            try:
                loop.call_soon_threadsafe(self._lines.put_nowait, line)
            except RuntimeError:  # the loop is closed: nobody reads any more
                return
            if line == b"":
                return

    def stop(self, signal_name: str = "SIGTERM") -> None:
        """Stop now (the command's SIGTERM or SIGINT): read no more, and end the requests still running
        as the end of the grace period ends them (cancelled, each answered with an error)."""
        self._stopped = True
        self.grace = 0.0
        self._deadline = f"before the server was stopped ({signal_name})"
        self._lines.put_nowait(b"")
        with contextlib.suppress(RuntimeError):  # no running loop: nothing was written yet
            self._watch_output()
        if self.closing:
            # stdin closed first (as the official client does before its SIGTERM): the grace
            # period being waited out ends now.
            for task in self.running.values():
                if not task.cancelling():
                    task.cancel()

    async def receive(self, line: bytes) -> None:
        """Serve one line of input."""
        if not line.strip():
            return
        try:
            message = jsonrpc.parse_body(line)
        except jsonrpc.InvalidMessage as exc:
            await self.write(jsonrpc.error_message(exc.request_id, exc))
            return
        await self.handle(message)

    async def finish_accepted(self) -> None:
        """The input closed: let accepted requests finish and reply, for at most the grace period."""
        self.closing = True
        pending = list(self.running.values())
        if not pending:
            return
        grace = float(mcp_settings.STDIO_SHUTDOWN_GRACE_SECONDS if self.grace is None else self.grace)
        _, late = await asyncio.wait(pending, timeout=max(grace, 0.0))
        if late and not self._stopped:
            # The grace period is over: a client taking nothing of a line for STALLED_OUTPUT_SECONDS no longer
            # holds the exit (serve waits for the line being written), as after a signal (stop arms it).
            self._watch_output()
        # Each cancelled request writes its error reply on the way out (see run()). A cancel is
        # sent again while a request goes on: one can be lost on the way (Python 3.11's
        # asyncio.wait_for returns the result of what it waited for when that completes as the
        # cancel arrives), and the request then waited on until the process exited, unanswered.
        for _ in range(50):
            late = {task for task in late if not task.done()}
            if not late:
                break
            for task in late:
                task.cancel()
            await asyncio.wait(late, timeout=0.1)

    async def handle(self, message: jsonrpc.Message) -> None:
        if message.kind == "response":
            await self.accept_response(message)
            return
        if message.kind == "notification":
            if message.method == "notifications/cancelled":
                request_id = message.params.get("requestId")
                # Only a request id can name a running request (a list or an object would not even hash;
                # true and 1.0 hash as 1 and would name request 1: the type itself is checked).
                task = self.running.get(request_id) if type(request_id) in (str, int) else None
                if task is not None:
                    self.cancelled_by_client.add(request_id)
                    task.cancel()
            return
        if message.method == "initialize":
            if self.initialized:  # as HTTP refuses an initialize inside a session
                await self.write(jsonrpc.error_message(message.id, McpError(INVALID_REQUEST, "The connection is already initialized")))
                return
            requested = message.params.get("protocolVersion")
            if not isinstance(requested, str):  # as HTTP answers it
                await self.write(jsonrpc.error_message(message.id, McpError(INVALID_PARAMS, 'initialize needs "protocolVersion"')))
                return
            try:
                capabilities = jsonrpc.handshake_object(message.params, "capabilities")
            except McpError as exc:
                await self.write(jsonrpc.error_message(message.id, exc))
                return
            self.version = versions.negotiate_handshake(requested)
            self.capabilities = capabilities
            self.initialized = True
            await self.write(jsonrpc.result_message(message.id, initialize_result(self.version, notifications=False)))
            return
        if message.id in self.running:
            # JSON-RPC ids name one request in flight: a second one would take the first's place
            # (its cancel would reach the wrong request, and the first's end would forget the second).
            await self.write(jsonrpc.error_message(message.id, McpError(
                INVALID_REQUEST, "A request with this id is still in progress: ids must be unique")))
            return
        task = asyncio.ensure_future(self.run(message))
        self.running[message.id] = task
        # run() forgets the request when it ends, but a task cancelled before it started (its
        # notifications/cancelled read in the same turn of the read loop) never runs run() at all:
        # its id stayed "in progress" for the rest of the process, and a later request reusing it
        # was refused. The task's end forgets it in every case.
        task.add_done_callback(functools.partial(self._forget, message.id))

    def _forget(self, request_id: Any, task: asyncio.Task[None]) -> None:
        """``task`` (the request ``request_id``) ended: its id is free again, unless already taken by another."""
        if self.running.get(request_id) is task:
            del self.running[request_id]
            self.cancelled_by_client.discard(request_id)
        if not task.cancelled() and (exc := task.exception()) is not None:
            # What run() lets out (a real Ctrl-C, the server's own control flow): logged here, not
            # left for the collector to report as a task exception never retrieved.
            logger.error("Request %r ended on %s", request_id, type(exc).__name__, exc_info=exc)

    async def accept_response(self, message: jsonrpc.Message) -> None:
        """A client's response (an answer to an input request), in the read loop: in a request thread
        of its own, as a request's sync code runs. On the loop's default executor (outside one) its
        user and permission reads waited behind ``thread_sensitive=False`` sync tools filling it, and
        no later line (a ping, a cancel) was read meanwhile."""
        # A response is not answered (JSON-RPC): an answer that does not fit its request fails
        # its step (the handler hears of it), anything else refused is only logged (by the flavor).
        async with RequestThread():
            try:
                # The answer moves a call on: only for a caller who may still run it (as the answer's
                # POST is authenticated over HTTP). Refused, it is only logged (nothing answers a response).
                principal = await self.current_principal()
            except McpError as exc:
                logger.warning("Refused a response: %s", exc.message)
                return
            await session_flavor.accept_client_response(message.raw, self.context(principal, None, None))

    async def current_principal(self) -> Principal:
        """The caller as it is now: the user read again (one query) in a new principal, whose
        permission answers are Django's now; an anonymous server's principal as it is (it holds
        nothing and keeps nothing). ``McpError`` ``-32600 Unauthorized`` when the user was deleted
        or made inactive since: what HTTP answers a request of theirs with (a 401).

        Each request pays the query, as each HTTP request pays its authentication: a desktop
        client's requests come one by one, and a sync tool runs in the request's thread anyway.
        """
        principal = self.principal
        if principal.is_anonymous:
            return principal
        user = await run_sync(current_user, principal.user)
        if user is None:
            name = principal.user.get_username()  # as the process started with it: no query
            raise McpError(INVALID_REQUEST, f"Unauthorized: the user this server runs as ({name!r}) is inactive or was deleted")
        return Principal(user=user, id=principal.id, auth=principal.auth, scopes=principal.scopes, stored=True)

    async def current_log_level(self) -> str:
        """The client's log level now: a ``logging/setLevel`` reaches the requests already running too."""
        return self.log_level

    def context(self, principal: Principal, request_id: Any, params: dict[str, Any] | None) -> RequestContext:
        meta = (params or {}).get("_meta")
        return RequestContext(
            principal=principal, protocol_version=self.version, modern=False,
            client_capabilities=self.capabilities, request_id=request_id, log_level=self.log_level,
            current_log_level=self.current_log_level,
            progress_token=jsonrpc.progress_token(meta),
            emit=self.write, flavor="stdio", own_calls=self.own_calls,
        )

    async def run(self, message: jsonrpc.Message) -> None:
        # The reply goes out before the request's thread (if it made one) closes its connections.
        replied = False
        async with RequestThread():
            try:
                context = self.context(await self.current_principal(), message.id, message.params)
                result = await dispatch(message.method, message.params, context)
                if message.method == "logging/setLevel":
                    # Only after dispatch accepted the level: a refused request changes nothing.
                    self.log_level = message.params["level"]
                line = self._hand_over(jsonrpc.result_message(message.id, result))
                replied = True  # a cancel while it is written (shutdown) sends no second reply
                await self._written(line)
            except McpError as exc:
                await self.write(jsonrpc.error_message(message.id, exc))
            except asyncio.CancelledError as exc:
                # Cancelled by the client (notifications/cancelled): no reply, as the spec says, even
                # if the input closed meanwhile. Cancelled at shutdown: the client is still reading
                # stdout and waits for one. Nobody cancelled it (code outside a tool call, a completer
                # say, raised a library's CancelledError): a failure, answered as any other.
                if message.id in self.cancelled_by_client or replied:
                    pass
                elif self.closing:
                    await self.write(jsonrpc.error_message(message.id, McpError(
                        INTERNAL_ERROR, f"Server shutting down: the request did not finish {self._deadline}")))
                elif not cancellation.stop_requested(exc, asyncio.current_task()):
                    logger.error("Unhandled CancelledError in %s", message.method, exc_info=True)
                    await self.write(jsonrpc.error_message(message.id, McpError(INTERNAL_ERROR, "Internal error")))
            except Exception:
                logger.exception("Unhandled error in %s", message.method)
                await self.write(jsonrpc.error_message(message.id, McpError(INTERNAL_ERROR, "Internal error")))
            finally:
                self.cancelled_by_client.discard(message.id)
                with contextlib.suppress(KeyError):
                    del self.running[message.id]
