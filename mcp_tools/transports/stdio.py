"""MCP over stdio: newline-delimited JSON-RPC on stdin/stdout (the ``mcp_stdio`` command).

Serves the same registry and call service as HTTP, in the handshake era.
Requests run concurrently; server-to-client requests (elicitation, sampling)
go out on stdout and the client's answers come back on stdin.

When stdin closes, the server stops reading but finishes the requests it has
already accepted and writes their replies, for at most
``MCP_TOOLS["STDIO_SHUTDOWN_GRACE_SECONDS"]`` (a client commonly closes stdin
right after its last request and reads stdout to the end). A request still
running after the grace period is cancelled and answered with an error, so
every accepted request gets exactly one reply. A request waiting for the
client's answer (elicitation, sampling) cannot get one after stdin closed: it
waits out the grace period too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from typing import Any, TextIO

from ..conf import mcp_settings
from ..protocol import jsonrpc, versions
from ..protocol.errors import INTERNAL_ERROR, INVALID_REQUEST, McpError
from ..server import RequestContext, dispatch, initialize_result
from ..server.auth import Principal
from ..server.flavors import session as session_flavor

logger = logging.getLogger("mcp_tools.stdio")


class StdioServer:
    """One client on a pair of text streams (stdin/stdout by default).

    ``grace``: seconds to finish accepted requests after the input closes
    (``None``: the ``STDIO_SHUTDOWN_GRACE_SECONDS`` setting).
    """

    def __init__(self, principal: Principal, reader: TextIO = sys.stdin, writer: TextIO = sys.stdout,
                 grace: float | None = None) -> None:
        self.principal = principal
        self.reader = reader
        self.writer = writer
        self.grace = grace
        #: Set when the input closed: requests still running are finishing, then cancelled.
        self.closing = False
        self._output_closed = False
        self.version = versions.LATEST_HANDSHAKE
        self.capabilities: dict[str, Any] = {}
        self.log_level = "info"
        self.running: dict[Any, asyncio.Task[None]] = {}
        self._write_lock = asyncio.Lock()

    async def write(self, message: dict[str, Any]) -> None:
        async with self._write_lock:
            if self._output_closed:
                return
            line = jsonrpc.dumps(message).decode() + "\n"
            try:
                self.writer.write(line)
                self.writer.flush()
            except (BrokenPipeError, ValueError):  # the client closed stdout (ValueError: a closed file)
                self._output_closed = True

    async def serve(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            line = await loop.run_in_executor(None, self.reader.readline)
            if not line:
                break
            if not line.strip():
                continue
            try:
                message = jsonrpc.parse_body(line.encode("utf-8", "surrogatepass"))
            except McpError as exc:
                await self.write(jsonrpc.error_message(None, exc))
                continue
            await self.handle(message)
        await self.finish_accepted()

    async def finish_accepted(self) -> None:
        """The input closed: let accepted requests finish and reply, for at most the grace period."""
        self.closing = True
        pending = list(self.running.values())
        if not pending:
            return
        grace = float(mcp_settings.STDIO_SHUTDOWN_GRACE_SECONDS if self.grace is None else self.grace)
        _, late = await asyncio.wait(pending, timeout=max(grace, 0.0))
        for task in late:
            task.cancel()
        if late:
            # Each cancelled request writes its error reply on the way out (see run()).
            await asyncio.wait(late, timeout=5)

    async def handle(self, message: jsonrpc.Message) -> None:
        if message.kind == "response":
            # A response is not answered (JSON-RPC): one refused is only logged (by the flavor).
            await session_flavor.accept_client_response(message.raw, self.context(None, None))
            return
        if message.kind == "notification":
            if message.method == "notifications/cancelled":
                request_id = message.params.get("requestId")
                # Only a request id can name a running request (a list or an object would not even hash).
                task = self.running.get(request_id) if isinstance(request_id, (str, int)) else None
                if task is not None:
                    task.cancel()
            return
        if message.method == "initialize":
            self.version = versions.negotiate_handshake(message.params.get("protocolVersion"))
            caps = message.params.get("capabilities")
            self.capabilities = caps if isinstance(caps, dict) else {}
            await self.write(jsonrpc.result_message(message.id, initialize_result(self.version, notifications=False)))
            return
        if message.id in self.running:
            # JSON-RPC ids name one request in flight: a second one would take the first's place
            # (its cancel would reach the wrong request, and the first's end would forget the second).
            await self.write(jsonrpc.error_message(message.id, McpError(
                INVALID_REQUEST, "A request with this id is still in progress: ids must be unique")))
            return
        self.running[message.id] = asyncio.ensure_future(self.run(message))

    def context(self, request_id: Any, params: dict[str, Any] | None) -> RequestContext:
        meta = (params or {}).get("_meta")
        return RequestContext(
            principal=self.principal, protocol_version=self.version, modern=False,
            client_capabilities=self.capabilities, request_id=request_id, log_level=self.log_level,
            progress_token=jsonrpc.progress_token(meta),
            emit=self.write, flavor="stdio",
        )

    async def run(self, message: jsonrpc.Message) -> None:
        try:
            result = await dispatch(message.method, message.params, self.context(message.id, message.params))
            if message.method == "logging/setLevel":
                # Only after dispatch accepted the level: a refused request changes nothing.
                self.log_level = message.params["level"]
            await self.write(jsonrpc.result_message(message.id, result))
        except McpError as exc:
            await self.write(jsonrpc.error_message(message.id, exc))
        except asyncio.CancelledError:
            # Cancelled by the client (notifications/cancelled): no reply, as the spec says.
            # Cancelled at shutdown: the client is still reading stdout and waits for one.
            if self.closing:
                await self.write(jsonrpc.error_message(message.id, McpError(
                    INTERNAL_ERROR, "Server shutting down: the request did not finish within the grace period after stdin closed")))
        except Exception:
            logger.exception("Unhandled error in %s", message.method)
            await self.write(jsonrpc.error_message(message.id, McpError(INTERNAL_ERROR, "Internal error")))
        finally:
            with contextlib.suppress(KeyError):
                del self.running[message.id]
