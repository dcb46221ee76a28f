"""Resume tokens (seed 002), for clients that have no tasks.

A call that runs on, on a worker, answers at once with a ``CallToolResult`` that
says how far it got and carries ``nextResumeToken`` (in ``_meta`` too). The
client repeats the same call with ``resumeToken`` and gets the progress so far,
or the final result with no token. The same tokens page through results (a
tool returning :class:`~mcp_tools.Page`) and poll state that converges over
time (a tool returning :class:`~mcp_tools.Pending`). For a background tool, the
next page or poll is a call of its own on a worker, answered as the client's
first call was (a running token, a task, or the request held until the result).

A token is sealed and expires (``TOKEN_TTL``), and is bound to the caller, the
tool and a digest of the original arguments: a changed argument, another user
or another tool gets the same ``-32602 Invalid or expired resumeToken``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from ... import engine, store
from ...protocol.errors import McpError, invalid_params
from .. import core, resumable, tokens
from ..context import RequestContext
from . import session as session_flavor

logger = logging.getLogger("mcp_tools.calls")


#: How the caller's flavor answers for a resumed call that goes to a worker (the next page or poll of a
#: background tool): ``(inv, target) -> answer``, as for a first call of the tool (see :func:`run_again`).
ToWorker = Callable[[engine.Invocation, core.Target], Awaitable[dict[str, Any]]]


def invalid() -> McpError:
    return invalid_params("Invalid or expired resumeToken")


def running_answer(call_id: str, rc: RequestContext, target: core.Target, row: Any = None) -> dict[str, Any]:
    """What a call still running on a worker answers: its progress so far, and the token to ask again."""
    text = "The call is running in the background."
    status: dict[str, Any] = {"status": "working"}
    if row is not None and row.progress is not None:
        total = f"/{row.progress_total:g}" if row.progress_total else ""
        text = f"Working: {row.progress:g}{total}" + (f" ({row.status_message})" if row.status_message else "")
        status.update(progress=row.progress, total=row.progress_total, message=row.status_message or None)
    return resumable.with_next_token(resumable.status_result(text, status), resumable.seal_resume(rc, target, c=call_id))


def token_of(params: dict[str, Any]) -> Any:
    """The ``resumeToken`` of a request (in params, or in ``_meta``), or None."""
    if "resumeToken" in params:
        return params["resumeToken"]
    meta = params.get("_meta")
    return meta.get("resumeToken") if isinstance(meta, dict) else None


async def resume(
    params: dict[str, Any], rc: RequestContext, token: Any,
    ask_input: Callable[[Any, RequestContext, core.Target], Awaitable[dict[str, Any]]] | None = None,
    to_worker: ToWorker | None = None,
    answer_round: Callable[[], Awaitable[dict[str, Any]]] | None = None,
    as_task: ToWorker | None = None,
) -> dict[str, Any]:
    """``tools/call`` with a ``resumeToken``: the state of the running call, or its result.

    ``ask_input`` builds the answer for a call that waits for the client's input
    (the 2026-07-28 ``InputRequiredResult``); without it such a call reads as running.
    ``to_worker`` answers for a next page or poll that runs on a worker (:func:`run_again`).
    ``answer_round`` serves a request that also carries a ``requestState`` (the client's
    answers to that ``InputRequiredResult``, sent as MRTR says: "retries the original request
    including the additional requested information", its resumeToken among it), once the
    token is found the caller's, for this tool and these arguments.
    ``as_task`` starts the next page or poll as a task (a 2025-11-25 request that asks for one), on a
    worker, whatever the tool: its answer is the task's, not the page. Such a request with the token
    of a running (or ended) call is refused (-32602): that call is no task.
    """
    target = await core.resolve_target("tools/call", params, rc.principal)
    try:
        payload = tokens.unseal(resumable.RESUME_PURPOSE, token)
    except tokens.InvalidToken:
        raise invalid() from None
    if not tokens.names_principal(payload.get("p"), rc.principal.id) or payload.get("t") != target.name or payload.get("d") != target.params_digest:
        logger.info("Refused resume token: bound to another principal, tool or arguments")
        raise invalid()
    if answer_round is not None and params.get("requestState") is not None:
        # The round the requestState names (bound itself to the call, the caller and the arguments).
        # Served as a status read instead, the answers were ignored: the same question for ever.
        return await answer_round()
    if "c" not in payload:
        # A page (``k``: the cursor) or converging state: run the tool again.
        if as_task is not None:
            inv = core.new_invocation(target, rc)
            inv.cursor = payload.get("k")
            return await as_task(inv, target)
        return await run_again(target, rc, payload.get("k"), to_worker)
    loaded = await store.load_call(payload.get("c"))
    if loaded is None:
        raise invalid()
    row, _ = loaded
    if as_task is not None:
        # A 2025-11-25 request with ``task``: a receiver that accepts it MUST answer a CreateTaskResult,
        # but the token follows a call that is no task (only calls created as tasks are), and does not
        # become one. Answered its status or result, the client got a CallToolResult it had not asked for.
        raise invalid_params("This resumeToken follows a call that is not a task: send it without task")
    if await session_flavor.expire_if_overdue(row):
        # Past its expiry, nothing holding that off (a worker's lease): it reads as it is now, expired,
        # not as the sweep will leave it. Read as live, it asked its question again, whose answer the
        # expired call then refused.
        loaded = await store.load_call(str(row.id))
        if loaded is None:
            raise invalid()
        row, _ = loaded
    if row.status in ("completed", "failed"):
        return core.stored_answer(row)
    if row.status in ("cancelled", "expired"):
        return core.ended_answer(target.method, row.status)
    if row.status == "input_required" and ask_input is not None:
        return await ask_input(row, rc, target)
    return running_answer(str(row.id), rc, target, row)


async def run_again(target: core.Target, rc: RequestContext, cursor: Any, to_worker: ToWorker | None = None) -> dict[str, Any]:
    """The next page of a paginated tool (from ``cursor``), or a converging tool's state now.

    A background tool runs on a worker (its handler defers at once): the page or poll is a new
    call there, its row keeping the cursor, and ``to_worker`` answers for it as the flavor answers
    a first call (a running token whose result carries the next ``nextResumeToken``).
    """
    inv = core.new_invocation(target, rc)
    inv.cursor = cursor
    outcome = await core.execute(target, inv)
    if isinstance(outcome, engine.Deferred) and to_worker is not None:
        return await to_worker(inv, target)
    if isinstance(outcome, engine.NeedsInput | engine.Deferred):
        raise invalid_params("This call cannot be resumed with a token")
    return await core.finish(inv, target, outcome, rc, 0)
