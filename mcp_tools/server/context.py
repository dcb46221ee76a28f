"""What one request looks like to the server layer, whatever transport carried it."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Container
from dataclasses import dataclass
from typing import Any

from ..interprocess import cancellation
from ..protocol.errors import INTERNAL_ERROR, McpError
from .auth import Principal


@dataclass(slots=True)
class RequestContext:
    """One request as the transports describe it to the method table and the flavors."""

    principal: Principal
    protocol_version: str
    modern: bool
    client_capabilities: dict[str, Any]
    request_id: Any = None
    session_id: str | None = None
    log_level: str | None = None
    #: The client's log level as it is when a message goes out, where ``logging/setLevel`` can change
    #: it while the request runs (a 2025-11-25 session's, the stdio client's); None: ``log_level`` holds
    #: for the whole request (2026-07-28: the request's own ``_meta``).
    current_log_level: Callable[[], Awaitable[str | None]] | None = None
    progress_token: Any = None
    #: The last progress value sent on this request's stream (each one sent is above it; see
    #: ``core.send_progress``).
    progress_sent: float | None = None
    #: Sends a message on this request's stream (switching the response to SSE).
    emit: Callable[[dict[str, Any]], Awaitable[None]] | None = None
    #: The SSE stream id, once the response is a stream (2025-11-25 sessions).
    stream_id: Callable[[], str | None] | None = None
    #: How the call is served: "direct", "session", "stdio", "mrtr", "saga", "task" (recorded on its row).
    flavor: str = "direct"
    #: Set by the transport when a 2025-11-25 response stream closed under a running call:
    #: that is not a cancellation (the call stays resumable with Last-Event-ID).
    stream_closed: bool = False
    #: Set with ``stream_closed`` when the handler goes on after its stream closed (the client holds
    #: an event id of it): what it answers, an operator's cancel included, is kept in the stream's
    #: event log for the client's resume.
    stream_detached: bool = False
    #: A tool's handler runs in this request now (``core.execute``), not a wait on a call that runs
    #: elsewhere (a task's ``tasks/result``, a deferred call's stream): only such a request's handler
    #: goes on after its 2025-11-25 stream closes (``stream_detached``).
    handler_here: bool = False
    #: The handler waits for the client's answers on this stream (a 2025-11-25 session call that asked):
    #: when the stream closes then, the journal takes over (the handler is stopped, not detached).
    awaiting_input: bool = False
    #: A 2025-11-25 request over HTTP: a call it runs that is stopped by nobody's request (the server
    #: process going away: Daphne cancels its applications at shutdown, uvicorn past its graceful
    #: timeout) stays ``working``, for the client's resume on another process (:func:`ends_when_stopped`).
    survives_server_stop: bool = False
    #: Whether the client holds an event id of this request's SSE stream (its priming event went out),
    #: so that it can resume the stream with ``Last-Event-ID`` (:func:`kept_for_resume`).
    stream_resumable: Callable[[], bool] | None = None
    #: The request's own side stopped its handler (the client's ``notifications/cancelled``, a closed
    #: stream): set by the transport before it cancels.
    cancel_requested: bool = False
    #: The calls whose requests to the client this connection wrote (a stdio process's, which has no
    #: session id to scope them by): a response naming another call's request is refused, but for a
    #: task's, which belongs to its caller. None: not scoped so (HTTP scopes by ``session_id``).
    own_calls: Container[str] | None = None


def ends_when_stopped(rc: RequestContext, exc: BaseException, task: asyncio.Task[Any] | None) -> bool:
    """Whether a call whose handler was stopped (a ``CancelledError``) ends ``cancelled``: unless its
    2025-11-25 stream closed after giving the client an event id (the client resumes it), and unless nobody asked for the stop of a call
    that a resume can go on with (:attr:`RequestContext.survives_server_stop`): "disconnection SHOULD
    NOT be interpreted as the client cancelling its request", nor is the server's own shutdown.
    ``exc``: the ``CancelledError``; the server's own on purpose (an operator, a deadline, the row
    ended: :func:`~mcp_tools.interprocess.cancellation.is_server_cancel`) ends the call. ``task``: the handler's; a ``CancelledError`` while nothing cancels it (``cancelling()`` 0)
    ends the call (``core.execute`` answers a handler's own as a failure before it asks)."""
    if rc.stream_closed:
        # Resumable only if the client holds an event id of the stream: one that closed before it
        # sent any (a plain JSON answer not yet started) leaves nothing to resume with, and its
        # call, kept live, waited "working" in the console until its CALL_TTL.
        return rc.stream_resumable is not None and not rc.stream_detached and not rc.stream_resumable()
    if rc.cancel_requested or not rc.survives_server_stop or task is None or not task.cancelling():
        return True
    return cancellation.is_server_cancel(exc, task)


def kept_for_resume(rc: RequestContext, exc: BaseException, task: asyncio.Task[Any] | None) -> bool:
    """Whether a call whose handler was stopped by nobody's request (the server process going away,
    :func:`ends_when_stopped`) is one its client can go on with: it holds an event id of the call's
    stream (a stream that closed under the running handler, or one still open that has streamed).
    A call without a row gets one then (``core.execute``), or the client's resume found nothing."""
    if rc.cancel_requested or ends_when_stopped(rc, exc, task):
        return False
    return rc.stream_detached or (rc.stream_resumable is not None and rc.stream_resumable())


class StreamPaused(McpError):
    """A request's answer is not ready, and the client can resume its SSE stream: end the connection
    without a response. The request goes on on the stream resumed with ``Last-Event-ID``, and is
    answered there, under its own id.

    2025-11-25 transports: after an SSE event with an id, the server "MAY close the connection
    (without terminating the SSE stream) at any time", first sending a ``retry`` field
    (``retry_ms``), and the client polls the stream by resuming it. A handler raises this only where
    the client holds an event id of the stream and a resume finds the request to go on with; a
    transport that cannot end a stream so answers the JSON-RPC error it also is.
    """

    def __init__(self, message: str, retry_ms: int, data: Any = None) -> None:
        super().__init__(INTERNAL_ERROR, message, data)
        self.retry_ms = retry_ms
