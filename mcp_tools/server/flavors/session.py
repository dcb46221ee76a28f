"""The 2025-11-25 flavor: sessions, with server-to-client requests on the SSE stream.

A call that needs input sends ``elicitation/create`` (or ``sampling/createMessage``,
``roots/list``) on its request's stream and waits; the client answers with a POST
carrying the JSON-RPC response, which any process may receive
(:func:`accept_client_response`). The answer is journaled and wakes the stream
holder, which claims the round and runs the handler again from its journal. A
client that lost its stream picks the call up with ``Last-Event-ID``
(:func:`continue_call`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from django.utils import timezone

from ... import engine, store
from ...conf import mcp_settings
from ...engine.journal import Journal, Step
from ...interprocess import cancellation, wakeups
from ...protocol import jsonrpc
from ...protocol.answers import InvalidAnswer, checked_step_answer
from ...protocol.errors import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, McpError, ResourceNotFound
from .. import background, core
from ..threads import release_request_thread
from ..context import RequestContext, StreamPaused, ends_when_stopped
from ..resumable import row_cursor

logger = logging.getLogger("mcp_tools.calls")

STEP_ID_PREFIX = "mcp_tools"
_LIVE = ("working", "input_required")
RELATED_TASK = "io.modelcontextprotocol/related-task"


class CallEnded(McpError):
    """The call was cancelled or expired while this stream waited on it.

    Still a ``-32602`` for callers that only know :class:`McpError`; a stream
    that carries a ``tools/call`` answers it with the cancellation result
    instead, as it does when a cancel stops a running handler.
    """

    def __init__(self, status: str, pending: tuple[int, ...] = ()) -> None:
        super().__init__(INVALID_PARAMS, f"The call was {status}")
        self.status = status
        #: The steps still waiting for the client's answer when the call ended (their requests are withdrawn).
        self.pending = pending


def step_request_id(call_id: str, seq: int) -> str:
    """The JSON-RPC id of the request we send for step ``seq`` of a call."""
    return f"{STEP_ID_PREFIX}:{call_id}:{seq}"


async def _answered_so(call_id: str, seq: int, answer: tuple[str, Any, Any]) -> bool:
    """Whether step ``seq`` of the call holds ``answer`` now (another delivery of it won the race)."""
    loaded = await store.load_call(call_id)
    step = loaded[1].at(seq) if loaded is not None else None
    return step is not None and step.status != "pending" and (step.status, step.response, step.error) == answer


def is_call_id(text: str) -> bool:
    """Whether ``text`` is a call's id as the server gives it out (its UUID's canonical text).

    Ids are opaque strings to a client: another spelling of the same UUID (upper case, braces,
    no hyphens, ``urn:uuid:``), which the database lookup would take, names no call.
    """
    try:
        return str(uuid.UUID(text)) == text
    except ValueError:
        return False


def parse_step_request_id(value: Any) -> tuple[str, int] | None:
    """The call and step that ``value``, the id of a request we sent (:func:`step_request_id`), names;
    None for any other id, another spelling of one of ours included ("01" for step 1)."""
    if not isinstance(value, str) or not value.startswith(STEP_ID_PREFIX + ":"):
        return None
    try:
        _, call_id, seq = value.split(":")
        parsed = call_id, int(seq)
    except ValueError:
        return None
    if not is_call_id(call_id) or step_request_id(*parsed) != value:
        return None
    return parsed


async def requests_carried(stream_id: str, through: int) -> set[str]:
    """The ids of our requests (:func:`step_request_id`) that SSE stream ``stream_id`` carried up to
    its event ``through`` (included): what a client resuming it with ``Last-Event-ID: through`` has.

    A resumed stream does not send them again (spec 2025-11-25, transports: only what "would have
    been sent after the last event ID" is replayed): the official SDK runs its elicitation callback
    for each request it gets, and the user was asked twice. One request event is kept once per
    stream, so a later resume from before it replays it once. A request whose event the log no
    longer keeps (``EVENT_RETENTION``, ``mcp_cleanup``) is not known here, and is sent again.
    """
    carried: set[str] = set()
    for payload in await store.payloads_through(stream_id, through, f'"id":"{STEP_ID_PREFIX}:'):
        try:
            message = json.loads(payload)
        except ValueError:
            continue
        if isinstance(message, dict) and "method" in message and parse_step_request_id(message.get("id")) is not None:
            carried.add(message["id"])
    return carried


def _record_served_as(rc: RequestContext) -> None:
    """The flavor a call of this module's is recorded with: ``session``, or ``stdio`` when the stdio
    transport serves it (its context says so), for the console to show and filter it as served.
    Only the label differs: the two are served alike, and nothing here branches on it."""
    if rc.flavor != "stdio":
        rc.flavor = "session"


async def call(method: str, params: dict[str, Any], rc: RequestContext) -> dict[str, Any]:
    """``tools/call``, ``prompts/get`` or ``resources/read`` in a 2025-11-25 session (or stdio)."""
    # Without a coroutine where nothing needs one (core.target_now).
    target = core.target_now(method, params) or await core.resolve_target(method, params, rc.principal)
    _record_served_as(rc)
    inv, outcome = await core.run_fresh(target, rc)
    if inv is None:  # completed in its first step, with nothing made for it
        return await core.finish(None, target, outcome, rc, 0)
    return await _rounds(target, inv, rc, 0, set(), outcome)


async def _rounds(target: core.Target, inv: engine.Invocation, rc: RequestContext, round_number: int, already_sent: set[str],
                  outcome: engine.Outcome | dict[str, Any] | None = None) -> dict[str, Any]:
    """Run the call's rounds on this stream: ask on it whenever the handler needs input, until the call ends.

    ``outcome`` is that of the run :func:`core.run_fresh` already made, if any.
    """
    while True:
        if outcome is None:
            outcome = await core.execute(target, inv)
        if isinstance(outcome, engine.Deferred):
            return await _run_on_worker(inv, target, rc, round_number)
        if not isinstance(outcome, engine.NeedsInput):
            return await core.finish(inv, target, outcome, rc, round_number)
        if rc.emit is None:
            raise McpError(INVALID_PARAMS, "This call needs input from the client, which this transport cannot ask for")
        try:
            call_id = await core.suspend(inv, rc, round_number, settle_taken=True)
        except core.RoundTaken:
            # This stream took the round over from a holder that was alive after all (stalled) and
            # asked first: the call goes on as that run left it, followed here.
            assert inv.call_id is not None
            followed = await follow(inv.call_id, rc, already_sent)
            return followed if followed is not None else core.ended_answer(target.method, "cancelled")
        await _ask_on_stream(call_id, outcome.pending, rc)
        already_sent.update(step_request_id(call_id, s.seq) for s in outcome.pending)
        try:
            journal = await _wait_for_answers(call_id, round_number, rc)
        except CallEnded as ended:
            await withdraw_requests(call_id, ended.pending, ended.status, rc, already_sent)
            return core.ended_answer(target.method, ended.status)
        round_number += 1
        cursor = inv.cursor  # the page this call runs (a paginate=True tool's), in every round
        inv = core.new_invocation(target, rc, journal, call_id)
        inv.cursor = cursor
        outcome = None


async def _ask_on_stream(call_id: str, pending: list[Step], rc: RequestContext, related_task: str | None = None) -> None:
    if rc.emit is None:
        raise McpError(INVALID_PARAMS, "This call needs input from the client, which this transport cannot ask for")
    # A task's stream is kept by its tasks/result request, with that request, on its first message,
    # whatever it is (flavors/tasks.py): a resumed stream answers it.
    if rc.stream_id is not None and related_task is None:
        stream = rc.stream_id()
        if stream:
            await store.set_stream(call_id, stream)
    for step in pending:
        assert step.request is not None
        params = step.request["params"]
        if related_task is not None:  # a task's requests say which task they belong to
            params = {**params, "_meta": {**params.get("_meta", {}), RELATED_TASK: {"taskId": related_task}}}
        await rc.emit(jsonrpc.request_message(step_request_id(call_id, step.seq), step.request["method"], params))


async def withdraw_requests(call_id: str, seqs: Iterable[int], status: str, rc: RequestContext, sent: set[str]) -> None:
    """The call ended (``status``) while steps ``seqs`` waited for the client's answer: send
    ``notifications/cancelled`` on this stream for each of their requests that it carried (``sent``),
    before the call's answer.

    Spec 2025-11-25, cancellation: either side may cancel a request it sent, and the receiver SHOULD
    stop processing it: the client closes the dialog of an ``elicitation/create`` whose answer nobody
    will take now (an operator's cancel, an expiry, ``CALL_TTL``, the session's ``DELETE``). Sent with
    ``rc.emit``, so the stream's event log keeps it and a resume replays it.
    """
    if rc.emit is None:
        return
    reason = core.ended_text(status)  # what the call's own answer says
    for seq in seqs:
        request_id = step_request_id(call_id, seq)
        if request_id in sent:
            await rc.emit(jsonrpc.notification_message("notifications/cancelled", {"requestId": request_id, "reason": reason}))


async def _wait_for_answers(call_id: str, round_number: int, rc: RequestContext) -> Journal:
    if rc.stream_detached:
        # The stream closed under the running handler, which went on and now asks: its requests are
        # in the stream's event log for the client's resume, and the journal takes the call over
        # from here (nothing waits in memory for an answer nobody may send for hours).
        raise asyncio.CancelledError
    rc.awaiting_input = True
    try:
        return await _wait(call_id, round_number)
    except asyncio.CancelledError as exc:
        # The client cancelled while the call waited for its answers (a closed stream is
        # not a cancellation, nor the server's shutdown: the call stays resumable).
        reason = core.CLIENT_CANCELLED if rc.cancel_requested else ""
        if ends_when_stopped(rc, exc, asyncio.current_task()):
            # Written to its end, whatever cancels this task again meanwhile: stdio's shutdown cancels
            # a request every 0.1 s until it ends, then exits. Cut off, the row stayed input_required.
            ending = asyncio.ensure_future(store.end_call(call_id, "cancelled", reason))
            while not ending.done():
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.shield(ending)
            if ending.result():
                await wakeups.notify(call_id)
        raise
    finally:
        rc.awaiting_input = False


#: The SSE ``retry`` of a connection whose call another connection to its stream carries on.
CONTINUED_ELSEWHERE_RETRY_MS = 1000


#: The SSE ``retry`` of a connection whose wait for an answer found the database unreachable.
DATABASE_RETRY_MS = 1000


async def _wait(call_id: str, round_number: int) -> Journal:
    """Wait until the round's answers are in (then claim it), the call ends, or another connection to the
    stream carries it on. A poll that finds the database unreachable (a restart, a failover, a dropped
    connection) pauses the stream for the client's resume: it ended the request with -32603 while the
    row stayed ``input_required``, waiting for an answer its client would never send."""
    try:
        return await _poll_for_answers(call_id, round_number)
    except store.DATABASE_UNAVAILABLE as exc:
        if not store.database_unreachable(exc):
            raise
        raise StreamPaused("The database could not be reached while the call waited for input", DATABASE_RETRY_MS) from exc


async def _poll_for_answers(call_id: str, round_number: int) -> Journal:
    async with wakeups.listening(call_id) as event:
        while True:
            loaded = await store.load_call(call_id)
            if loaded is None:
                raise McpError(INTERNAL_ERROR, "The call disappeared while waiting for input")
            row, journal = loaded
            if row.status in ("cancelled", "expired"):
                raise CallEnded(row.status, tuple(step.seq for step in journal.pending))
            # A resume of this stream (Last-Event-ID, while this connection still looked open) carries
            # the call on and answers it: this connection ends without a response. An error here was
            # the request's one response in the stream's log, replayed to every later resume in place
            # of the result (a client told to retry ran the tool again); and one that found the round
            # gone already waited for ever.
            if row.round != round_number or row.status in ("completed", "failed"):
                raise StreamPaused("Another connection to this stream continued the call", CONTINUED_ELSEWHERE_RETRY_MS)
            if not journal.pending:
                if await store.claim_round(call_id, round_number):
                    return journal
                raise StreamPaused("Another connection to this stream continued the call", CONTINUED_ELSEWHERE_RETRY_MS)
            release_request_thread()  # a human may take hours: no thread, no connection meanwhile
            await wakeups.wait(event)


async def resumed_on_worker(inv: engine.Invocation, target: core.Target) -> dict[str, Any]:
    """A call resumed with a token that runs on a worker (the next page or poll of a background tool):
    this stream is held as for a first call on a worker (:func:`_run_on_worker`)."""
    rc: RequestContext = inv.state["rc"]
    _record_served_as(rc)
    return await _run_on_worker(inv, target, rc, 0)


async def _run_on_worker(inv: engine.Invocation, target: core.Target, rc: RequestContext, round_number: int) -> dict[str, Any]:
    """Hand the call to a worker and hold this stream: progress, requests for input, then the result."""
    call_id = await background.defer(inv, target, rc, round_number)
    try:
        result = await follow(call_id, rc, set())
    except asyncio.CancelledError as exc:
        # notifications/cancelled: end the call and stop its worker (a closed stream does not, nor
        # the server's shutdown: the worker goes on, and the client's resume follows it).
        if ends_when_stopped(rc, exc, asyncio.current_task()):
            await core.end_call(call_id, "cancelled", core.CLIENT_CANCELLED if rc.cancel_requested else "")
        raise
    assert result is not None  # the caller owns the call
    return result


#: How a stream resumed with ``Last-Event-ID`` goes on for a call of another flavor (``flavor`` -> function
#: of :func:`continue_call`'s arguments): the tasks flavor, which builds on this module, registers its own.
RESUMED_BY_FLAVOR: dict[str, Callable[[str, RequestContext, set[str]], Awaitable[dict[str, Any] | None]]] = {}
#: Why such a stream may not go on for the caller who resumed it (``flavor`` -> function of the call's row
#: and that principal: the error its request is answered, or None), asked before anything is replayed.
REFUSED_ON_RESUME_BY_FLAVOR: dict[str, Callable[[Any, Any], Awaitable[McpError | None]]] = {}


async def continue_call(call_id: str, rc: RequestContext, already_sent: set[str]) -> dict[str, Any] | None:
    """Continue a session call on a resumed stream (``GET`` with ``Last-Event-ID``).

    A 2025-11-25 task's stream is its ``tasks/result`` request's (``rc.request_id``, as the
    tasks flavor kept it): it goes on as that request (:data:`RESUMED_BY_FLAVOR`).
    """
    loaded = await store.load_call(call_id)
    resumed_as = RESUMED_BY_FLAVOR.get(loaded[0].flavor) if loaded is not None else None
    if resumed_as is not None:
        return await resumed_as(call_id, rc, already_sent)
    _record_served_as(rc)
    return await follow(call_id, rc, already_sent)


async def refused_on_resume(call_id: str, principal: Any) -> McpError | None:
    """Why a stream resumed with ``Last-Event-ID`` may not carry call ``call_id`` for ``principal`` now,
    or None: the caller may no longer use what it runs (a permission taken away, a token without the
    scope), answered as :func:`core.resolve_target` answers a new request of it. A task's
    ``tasks/result`` stream is its flavor's (:data:`REFUSED_ON_RESUME_BY_FLAVOR`: "Unknown task")."""
    loaded = await store.load_call(call_id)
    if loaded is None:
        return None
    row = loaded[0]
    if row.flavor in REFUSED_ON_RESUME_BY_FLAVOR:
        return await REFUSED_ON_RESUME_BY_FLAVOR[row.flavor](row, principal)
    if row.flavor in RESUMED_BY_FLAVOR:
        return None
    name = str(row.arguments.get("uri" if row.method == "resources/read" else "name", ""))
    if await core.may_use(principal, row.method, name):
        return None
    if row.method == "resources/read":
        return ResourceNotFound(name).for_handshake_era()  # a session's: the 2025-11-25 code
    return McpError(INVALID_PARAMS, f"Unknown {'prompt' if row.method == 'prompts/get' else 'tool'}: {name}")


async def follow(
    call_id: str, rc: RequestContext, already_sent: set[str], related_task: str | None = None,
    on_status: Callable[[Any], Awaitable[None]] | None = None,
    deadline: float | None = None, at_deadline: Callable[[], Awaitable[None]] | None = None,
) -> dict[str, Any] | None:
    """Carry a call that runs elsewhere on this stream until it ends; its result, or None if not the caller's.

    Another process (or a worker) may hold the call: wait while it runs, relay its
    progress, answer with the stored result once it is done, and send on this
    stream any pending request the client has not seen here. Once its answers are
    in, a background call goes back to a worker; any other call continues here.
    For a task (``related_task``), requests and progress carry the related-task ``_meta``,
    and ``on_status`` hears of each status change.

    ``deadline`` (``time.monotonic()``) is looked at only where this loop waits, after each pass
    has sent the call's status, progress and unsent requests and finished any claim and requeue:
    a deadline around the whole loop would cut it in the middle of that (at 0, at its first
    write, before any input request went out). Once it has passed, ``at_deadline`` is awaited
    there: it raises to end the stream (``StreamPaused``), or returns, and the loop goes on
    with no deadline.
    """
    last_status: str | None = None
    async with wakeups.listening(call_id) as event:
        while True:
            loaded = await store.load_call(call_id)
            if loaded is None or loaded[0].principal != rc.principal.id:
                return None
            row, journal = loaded
            if related_task is not None and await expire_if_overdue(row):
                continue  # the task's ttl ran out while this stream waited: read again, it has ended
            # What this stream got already (equal, or less) is not sent; a task's progress says which task.
            await core.relay_progress(row, rc, related_task)
            if on_status is not None and row.status != last_status:
                last_status = row.status
                await on_status(row)
            if row.status in ("completed", "failed"):
                return core.stored_answer(row)
            if row.status in ("cancelled", "expired"):
                # Answered as a stream that saw the call end answers its request (a held background
                # call, a resumed stream); a task's tasks/result too: it MUST return exactly what the
                # underlying request would have returned, for a cancelled task as well (2025-11-25
                # tasks, "Result Retrieval"), not an error about the task.
                if related_task is None:  # a session call's requests this stream carried are withdrawn first
                    await withdraw_requests(call_id, (step.seq for step in journal.pending), row.status, rc, already_sent)
                return core.ended_answer(row.method, row.status)
            if row.status == "input_required":
                # A call of a flavor that takes its answers in its own requests (a 2026-07-28 task's
                # tasks/update) gets none from here (accept_client_response refuses them): nothing is
                # asked that would be refused, and this stream waits while its own client answers.
                # Nor is a request sent to a client that did not declare its capability (a tasks/result
                # of another session of the caller: "only use capabilities that were successfully
                # negotiated"); its answer could fail the task. The stream waits, as for a 2026 task.
                unsent = [s for s in journal.pending if step_request_id(call_id, s.seq) not in already_sent
                          and client_takes(rc.client_capabilities, s.request)] if answered_in_session(row) else []
                if unsent:
                    await _ask_on_stream(call_id, unsent, rc, related_task)
                    already_sent.update(step_request_id(call_id, s.seq) for s in unsent)
                if not journal.pending and await store.claim_round(call_id, row.round):
                    if row.background:
                        await background.requeue(call_id)
                    else:
                        return await _run_rounds(row, journal, rc, already_sent, claimed_at=row.round + 1)
            if row.status == "working" and await _owner_gone(call_id, row):
                return await _run_rounds(row, journal, rc, already_sent, claimed_at=row.round)
            # While it runs elsewhere, or waits for the client: this request holds no thread meanwhile.
            release_request_thread()
            if deadline is None:
                await wakeups.wait(event)
                continue
            left = deadline - time.monotonic()
            if left > 0:
                await wakeups.wait(event, min(left, wakeups.POLL_SECONDS))
                continue  # another pass (the deadline is looked at again after it)
            deadline = None
            if at_deadline is not None:
                await at_deadline()  # raises to pause the stream here, between passes


async def expire_if_overdue(row: Any) -> bool:
    """End the live call ``row`` expired if it is past its expiry and nothing holds that off (the
    sweep's rule, ``ToolCall.objects.overdue``: a worker's lease holds off ``CALL_TTL``, not a
    2025-11-25 task's ttl); whether it did. A task read (``tasks/get``, a waiting ``tasks/result``)
    sees its ttl end when it ends, not at the next sweep."""
    if row.status not in _LIVE or row.expires_at is None or row.expires_at >= timezone.now():
        return False
    if not await store.expire_overdue(str(row.id)):
        return False
    await wakeups.notify(str(row.id))
    return True


async def _run_rounds(row: Any, journal: Journal, rc: RequestContext, already_sent: set[str], *, claimed_at: int) -> dict[str, Any]:
    """Run a call from its journal on this stream, at round ``claimed_at`` (this stream claimed it)."""
    call_id = str(row.id)
    target = await core.resolve_target(row.method, row.arguments, rc.principal)
    inv = core.new_invocation(target, rc, journal, call_id)
    inv.cursor = row_cursor(row.arguments)  # the page the call runs (a paginate=True tool's), kept in its row
    return await _rounds(target, inv, rc, claimed_at, already_sent)


async def _owner_gone(call_id: str, row: Any) -> bool:
    """Take over a round whose stream holder died while running it (compare-and-set; one taker wins).

    The holder's handler touches the row every ``CANCEL_POLL_SECONDS`` while it runs
    (:class:`~mcp_tools.interprocess.cancellation.CallWatch`); a working row left
    untouched three times as long has nobody running it. Background calls are the
    lease sweep's to take over, and MRTR rounds the retry's (:func:`core.repeat_outcome`).
    """
    poll = float(mcp_settings.CANCEL_POLL_SECONDS)
    if poll <= 0 or row.background or row.status != "working":
        return False
    if (timezone.now() - row.updated_at).total_seconds() < 3 * poll:
        return False  # touched lately: its holder is alive (no write needed to know)
    if not await store.take_over_round(call_id, row.round, row.last_answers_digest, 3 * poll):
        return False
    logger.warning("Call %s: the stream holder running round %s is gone; this stream runs it again", call_id, row.round)
    return True


def client_takes(capabilities: dict[str, Any], request: dict[str, Any] | None) -> bool:
    """Whether a client that declared ``capabilities`` may be sent a step's ``request`` (the rules the
    handler's own ``ctx`` step checked against the client that started the call)."""
    method = (request or {}).get("method")
    params = (request or {}).get("params") or {}
    if method == "elicitation/create":
        elicitation = capabilities.get("elicitation")
        if not isinstance(elicitation, dict):
            return False
        return "url" in elicitation if params.get("mode") == "url" else ("form" in elicitation or "url" not in elicitation)
    if method == "sampling/createMessage":
        sampling = capabilities.get("sampling")
        return isinstance(sampling, dict) and ("tools" not in params or "tools" in sampling)
    if method == "roots/list":
        return "roots" in capabilities
    return True


def answered_in_session(row: Any) -> bool:
    """Whether a session's response may answer the steps of call ``row``: not a 2026-07-28 call
    (``mrtr``: a task of the extension is answered with ``tasks/update``) nor a saga's, which take
    their answers in their own requests, with the round's token (docs/durable-calls.md)."""
    return row.flavor not in ("mrtr", "saga")


def _not_waiting() -> McpError:
    """What a response gets when no request of its session waits for it: unknown, forged, another
    session's or caller's, a multi-round-trip call's, of a call that ended, or answered already."""
    return McpError(INVALID_REQUEST, "No request of this session is waiting for a response with this id")


async def cancel_request(session_id: str, request_id: Any) -> None:
    """``notifications/cancelled`` in a session: stop the request's handler, and end its call.

    The handler is cancelled where it runs: here, or in another process through a shared layer.
    When it does not run here, the call's row (if it has one) ends ``cancelled`` as well: a
    handler of another process sees that at its next row check (``CANCEL_POLL_SECONDS``), with
    no shared layer or while it is down, and a call with no handler anywhere (its stream closed
    while it waited for input, or the server that ran it stopped: it waits to be resumed with
    ``Last-Event-ID``) is not carried on by an answer or a resumed stream. Only a call still at
    the round read moves (compare-and-set): a round that started meanwhile (its answers came) is
    left to the broadcast, as a running handler is.
    """
    if await cancellation.cancel(session_id, request_id) or not isinstance(request_id, (str, int)):
        return
    live = await store.live_session_call(session_id, jsonrpc.id_text(request_id))
    if live is not None and await store.end_call(live[0], "cancelled", core.CLIENT_CANCELLED, live[1]):
        await core.after_end(live[0])


async def accept_client_response(message: dict[str, Any], rc: RequestContext) -> McpError | None:
    """A client's JSON-RPC response to one of our requests (any process may receive it).

    Returns None when it is accepted: journaled, or the very answer the step has already
    (delivered again: nothing changes). Otherwise the error that says why not: the 2025-11-25
    transport answers a response it cannot accept with an HTTP error status (stdio answers
    no response and only logs it).

    A response no request waits for (``-32600``) changes nothing. An answer that does not
    fit its request (``-32602 Invalid answer: ...``) is refused too, and it also fails its
    step with that error: the handler gets it (``StepFailed``) when its round runs, at once for
    a step asked alone, once the round's other answers are in for one of a ``ctx.gather``, and
    the call goes on or ends as its handler says. It does not wait for another answer: clients do not
    answer again (the official SDK drops an HTTP error to a response it POSTs, and stdio
    tells the client nothing), so a waiting step would hold ``tools/call`` until
    ``CALL_TTL``. The same refused answer delivered again is refused again, changing nothing.
    """
    parsed = parse_step_request_id(message.get("id"))
    if parsed is None:
        logger.info("Refused a response to an unknown request id %r", message.get("id"))
        return _not_waiting()
    call_id, seq = parsed
    loaded = await store.load_call(call_id)
    if loaded is None:
        logger.info("Refused a response for unknown call %s", call_id)
        return _not_waiting()
    row, journal = loaded
    # A task belongs to its caller, not to the session that started it: its requests reach any of
    # the caller's streams (tasks/result), and an answer from there counts. Any other call is its
    # session's (a background call held on its stream too), and a stdio call its process's: an HTTP
    # session of the same user answered both (found by a review), and so did another stdio process
    # of the same user (no session id: the process knows the calls whose requests it wrote).
    if row.principal != rc.principal.id or not row.is_task and (
            (row.flavor == "stdio") != (rc.flavor == "stdio") or (row.session_id and row.session_id != (rc.session_id or ""))
            or (rc.own_calls is not None and call_id not in rc.own_calls)):
        logger.warning("Refused a response for call %s from another principal or session", call_id)
        return _not_waiting()
    if not answered_in_session(row):
        logger.warning("Refused a session response for %s call %s", row.flavor, call_id)
        return _not_waiting()
    # Whether the caller may run what the call names now (the arguments were checked when it started).
    name = row.arguments.get("uri" if row.method == "resources/read" else "name", "")
    if not await core.may_use(rc.principal, row.method, str(name)):
        # An answer moves the call on, as a retry with a token does, and that re-checks the caller:
        # a token without the tool's scope, or a user whose permission was revoked, does not.
        logger.warning("Refused a response for call %s from a caller who may not run it now", call_id)
        return _not_waiting()
    step = journal.at(seq)
    if step is None or step.request is None:
        logger.info("Refused a response for step %s of call %s: no such request", seq, call_id)
        return _not_waiting()
    waiting = step.status == "pending" and row.status in _LIVE
    #: What the client hears of its answer once it is journaled (None: accepted).
    refused: McpError | None = None
    answer: tuple[str, Any, Any]
    if jsonrpc.unstorable_string(message.get("result")) is not None or jsonrpc.unstorable_string(message.get("error")) is not None:
        # What no database here can store (parse_body lets responses through for this): refused,
        # and the step fails with the refusal, as for an answer that does not fit.
        logger.info("Refused an answer to step %s of call %s: %s", seq, call_id, jsonrpc.UNSTORABLE_TEXT)
        refused = McpError(INVALID_PARAMS, f"Invalid answer: {jsonrpc.UNSTORABLE_TEXT}")
        answer = ("failed", None, refused.to_error())
    elif "error" in message:
        error = message["error"] if isinstance(message["error"], dict) else {"message": str(message["error"])}
        answer = ("failed", None, error)
    else:
        try:
            answer = ("done", checked_step_answer(step.request, message.get("result")), None)
        except InvalidAnswer as exc:
            logger.info("Refused an answer to step %s of call %s: %r", seq, call_id, str(exc))  # %r: the client's text
            refused = McpError(INVALID_PARAMS, f"Invalid answer: {exc}")
            # The step fails with the refusal rather than waiting for an answer no client sends.
            answer = ("failed", None, refused.to_error())
    if step.status != "pending" and (step.status, step.response, step.error) == answer:
        return refused  # the same answer delivered again (a client retrying its POST): answered as it was
    if not waiting or not await store.answer_step(call_id, seq, *answer):
        if waiting and await _answered_so(call_id, seq, answer):
            return refused  # the same answer, POSTed again while the first POST was in flight: it won
        logger.info("Refused a response for step %s of call %s: answered already, or the call ended", seq, call_id)
        return _not_waiting()
    if row.background:
        # Its last answer sends it back to a worker here: the stream that carried the request may be gone.
        await background.go_on_if_answered(call_id)
    await wakeups.notify(call_id)
    return refused
