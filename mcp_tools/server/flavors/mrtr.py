"""The 2026-07-28 flavor: multi-round-trip requests.

A call that needs input answers ``InputRequiredResult {resultType: "input_required",
inputRequests, requestState}``; the client retries the same request with
``inputResponses`` and the sealed ``requestState``. Nothing is held in memory
between rounds: the token names the call row, and any process may continue it.
A token also carries the call's journal while it holds only client steps and stays
short, so the answering round can skip reading the row (:func:`core.carried_call`;
the row stays the truth).
"""

from __future__ import annotations

import asyncio
from typing import Any

from django.utils import timezone

from ... import engine, store
from ...interprocess import wakeups
from ...engine.journal import Journal, Step
from ...protocol.errors import INTERNAL_ERROR, McpError, invalid_params
from .. import background, core, resumable
from . import resume, tasks
from ..context import RequestContext
from ..threads import release_request_thread

#: Rounds answered from ``inputResponses`` sent in advance, within one request.
MAX_INLINE_ROUNDS = 32


def input_required(call_id: str, round_number: int, pending: list[Step], rc: RequestContext, target: core.Target,
                   carry: Journal | None = None) -> dict[str, Any]:
    """The ``InputRequiredResult`` for one suspended round (its token carrying ``carry``, see :func:`core.seal`)."""
    return {
        "resultType": "input_required",
        "inputRequests": {step.key: step.wire_request for step in pending},
        "requestState": core.seal("request", call_id, round_number, rc, target, carry),
    }


async def call(method: str, params: dict[str, Any], rc: RequestContext) -> dict[str, Any]:
    """``tools/call``, ``prompts/get`` or ``resources/read`` from a 2026-07-28 client."""
    responses = params.get("inputResponses")
    if responses is not None and not isinstance(responses, dict):
        raise invalid_params('"inputResponses" must be an object')
    rc.flavor = "mrtr"
    if "requestState" in params and params["requestState"] is not None:
        return await _resume(method, params, responses or {}, rc)
    # Without a coroutine where nothing needs one (core.target_now).
    target = core.target_now(method, params) or await core.resolve_target(method, params, rc.principal)
    inv, outcome = await core.run_fresh(target, rc)
    if inv is None:  # completed in its first step, with nothing made for it
        return await core.finish(None, target, outcome, rc, 0)
    return await _first_round(inv, target, rc, responses or {}, outcome)


async def _first_round(inv: engine.Invocation, target: core.Target, rc: RequestContext, responses: dict[str, Any],
                       outcome: engine.Outcome | dict[str, Any] | None) -> dict[str, Any]:
    for _ in range(MAX_INLINE_ROUNDS):
        if outcome is None:
            outcome = await core.execute(target, inv)
        if isinstance(outcome, engine.Deferred):
            # On a worker from here.
            return await _defer(inv, 0, rc, target)
        if not isinstance(outcome, engine.NeedsInput):
            return await core.finish(inv, target, outcome, rc, 0)
        # Answers the client already sent for steps asked only now (a stateless
        # client may answer in advance): apply and run again.
        applied = False
        try:
            for step in outcome.pending:
                if step.key in responses:
                    core.apply_answer(step, responses[step.key], step.key)
                    applied = True
        except McpError as exc:
            if inv.call_id is not None:
                # The run made its row (a ctx.once effect) and the client gets no requestState to
                # go on with: the call ends here, failed as the client is told, not working forever.
                await core.save_outcome(inv, 0, status="failed", error=exc.to_error(), finished_at=timezone.now())
            raise
        if not applied:
            call_id = await core.suspend(inv, rc, 0)
            return input_required(call_id, 0, outcome.pending, rc, target, core.carriable(inv.journal))
        outcome = None  # run again with the answers
    raise McpError(INTERNAL_ERROR, "Too many input rounds in one request")


async def _resume(method: str, params: dict[str, Any], responses: dict[str, Any], rc: RequestContext) -> dict[str, Any]:
    # Without a coroutine where nothing needs one, as a first round resolves it (core.target_now).
    target = core.target_now(method, params) or await core.resolve_target(method, params, rc.principal)
    payload = core.open_token("request", params["requestState"], rc, target.params_digest, target.method)

    async def advance(row: Any, journal: Journal) -> dict[str, Any]:
        # Keys of inputResponses the round did not ask are ignored, as the 2026-07-28 spec says
        # (MRTR, error handling: the server SHOULD ignore what it does not recognize or need).
        return await core.advance_and_run(
            row, journal, payload["r"], responses, target, rc, purpose="request",
            ask=lambda call_id, round_number, pending, carry: input_required(call_id, round_number, pending, rc, target, carry),
            running=lambda call_id: _back_to_worker(call_id, rc, target),
            stopped_on_worker=lambda call_id: _stopped_back_to_worker(call_id, rc, target),
            on_defer=lambda inv, round_number: _defer(inv, round_number, rc, target),
            on_worker=lambda call_id: _while_on_worker(call_id, rc, target, told=_AT_FIRST_PASS),
        )

    carried = core.carried_call(payload)
    if carried is not None:
        # The token carries the round's journal: run without reading the row; the
        # compare-and-set that writes the round proves the row agreed.
        try:
            return await advance(*carried)
        except core.NotCurrent:
            pass  # it did not (or the answers need the row to judge): nothing was written
    return await advance(*await core.load_token_call("request", payload))


async def _defer(inv: engine.Invocation, round_number: int, rc: RequestContext, target: core.Target) -> dict[str, Any]:
    """The handler awaited ``ctx.defer()`` in a later round: the rest runs on a worker."""
    call_id = await background.defer(inv, target, rc, round_number)
    return await _while_on_worker(call_id, rc, target)


async def resumed_on_worker(inv: engine.Invocation, target: core.Target) -> dict[str, Any]:
    """A call resumed with a token that runs on a worker (the next page or poll of a background tool):
    answered as a first call on a worker is (:func:`_while_on_worker`)."""
    rc: RequestContext = inv.state["rc"]
    rc.flavor = "mrtr"
    return await _defer(inv, 0, rc, target)


async def _back_to_worker(call_id: str, rc: RequestContext, target: core.Target) -> dict[str, Any]:
    """A background call's answers are in: it goes back to a worker."""
    # What the call's row says of its progress before a worker runs it again: the request before this
    # one got it. Read at the first pass of the hold instead, a value a quick worker wrote was lost.
    loaded = await store.load_call(call_id)
    told = loaded[0].progress if loaded is not None else None
    await background.requeue(call_id)
    return await _while_on_worker(call_id, rc, target, told=told)


async def _stopped_back_to_worker(call_id: str, rc: RequestContext, target: core.Target) -> None:
    """The request that sent a background call back to a worker stopped (its client left) before it
    held the call: a held client's call ends, as closing its stream ends it in the hold; a task, or a
    call whose client resumes, goes on, queued (again: a worker runs it once)."""
    if tasks.wants_task(target, rc) or resumable.client_resumes(rc):
        await background.requeue(call_id)
    else:
        await core.end_call(call_id, "cancelled", core.CLIENT_CANCELLED if rc.cancel_requested else "")


async def _while_on_worker(call_id: str, rc: RequestContext, target: core.Target, *, told: Any = None) -> dict[str, Any]:
    """What a 2026 client without tasks gets while a worker runs its call.

    A client that resumes calls (see :func:`resumable.client_resumes`) gets a resume
    token at once. Any other holds this request: it receives the worker's progress
    on the response stream, then the result, or an ``InputRequiredResult`` when
    the handler asks something. Closing the stream cancels the call.

    ``told``: for a later request of the call (its answers, a retry), the progress value an earlier
    request got (:data:`_AT_FIRST_PASS`: whatever the row holds when this one starts holding): this one
    gets the worker's new progress only.
    """
    if tasks.wants_task(target, rc):
        return await tasks.created(call_id)
    if resumable.client_resumes(rc):
        return resume.running_answer(call_id, rc, target)
    try:
        return await _hold(call_id, rc, target, told)
    except asyncio.CancelledError:
        # Its status message says who stopped it (not the worker's last progress message).
        await core.end_call(call_id, "cancelled", core.CLIENT_CANCELLED if rc.cancel_requested else "")
        raise


#: ``_hold``'s ``told``: the progress an earlier request got is what the row holds at the hold's first pass.
_AT_FIRST_PASS = object()


async def _hold(call_id: str, rc: RequestContext, target: core.Target, told: Any = None) -> dict[str, Any]:
    # ``told``: the progress value an earlier request of the call got (None: none), not relayed again
    # until the worker reports another (docs/durable-calls.md: a retry gets the notifications of the
    # handler's new work only; it was sent again, found by a review).
    async with wakeups.listening(call_id) as event:
        while True:
            loaded = await store.load_call(call_id)
            if loaded is None:
                return core.ended_answer(target.method, "cancelled")
            row, journal = loaded
            if told is _AT_FIRST_PASS:
                told = row.progress
            if told is None or row.progress != told:
                told = None
                await core.relay_progress(row, rc)  # only a value above what this request's stream got
            if row.status in ("completed", "failed"):
                return core.stored_answer(row)
            if row.status in ("cancelled", "expired"):
                return core.ended_answer(target.method, row.status)
            if row.status == "input_required" and journal.pending:
                return input_required(call_id, row.round, journal.pending, rc, target)
            release_request_thread()  # while a worker runs it: no thread, no connection held here
            await wakeups.wait(event)


async def input_required_of(row: Any, rc: RequestContext, target: core.Target) -> dict[str, Any]:
    """The ``InputRequiredResult`` of a call (run elsewhere) that waits for input now."""
    loaded = await store.load_call(row.id)
    if loaded is None:
        raise resume.invalid()
    row, journal = loaded
    return input_required(str(row.id), row.round, journal.pending, rc, target)
