"""The tasks flavor: MCP Tasks in both eras.

**2026-07-28: the extension ``io.modelcontextprotocol/tasks`` (SEP-2663).**

A task is a background call (:mod:`mcp_tools.server.background`) created as a
task (its row's ``is_task``: not a call held on its stream or resumed with
tokens); its id is the call id, and the caller can reach only its own tasks:
another principal's task id answers exactly like an unknown one.

For a client that negotiated the extension (in ``_meta.clientCapabilities`` of
the request), a ``tools/call`` of a task-supporting tool answers a flat
``CreateTaskResult`` (``resultType: "task"``, ``taskId``, ``status``,
``createdAt``, ``lastUpdatedAt``, ``ttlMs``, ``pollIntervalMs``) as soon as the
row is committed. ``tasks/get`` answers the ``DetailedTask``, with the tool's
result inlined once completed, the JSON-RPC error once failed, or the pending
``inputRequests`` while the handler waits for the client, which answers them
(all at once or some at a time) with ``tasks/update``. ``tasks/cancel`` is
idempotent. Without the extension, task methods answer ``-32021``, a tool that
requires tasks answers ``-32021`` too, and any other tool runs as usual.

**2025-11-25: the ``tasks`` capability of sessions.** A ``tools/call`` with a
``task`` param (``ttl`` in milliseconds) answers ``CreateTaskResult {task}``;
``tasks/get`` the ``Task``; ``tasks/result`` waits for the end (past ``TASK_RESULT_WAIT_SECONDS``
on a stream the client resumes: :func:`_carry`), sending the task's input requests (not those of a
task a 2026-07-28 client made, which only ``tasks/update`` answers: the stream waits) and its
progress (under the ``progressToken`` of the ``tools/call``) on its stream meanwhile, and answers what the call would have answered, with the
related-task ``_meta`` (its stream resumed with ``Last-Event-ID`` goes on as it, and answers it:
:func:`continue_result`); ``tasks/list`` pages through the caller's tasks;
``tasks/cancel`` answers the cancelled task, or ``-32602`` for one that ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone
from collections.abc import Awaitable, Callable
from typing import Any

from django.utils import timezone

from ... import engine, store
from ...conf import mcp_settings
from ...interprocess import wakeups
from ...protocol.answers import InvalidAnswer, checked_step_answer
from ...protocol.errors import METHOD_NOT_FOUND, MISSING_CLIENT_CAPABILITY, McpError, invalid_params
from ...registry import registry
from ...states import OPERATOR_END_MESSAGES, CallStatus
from ...protocol import jsonrpc
from .. import background, core, resumable, tokens
from . import session
from ..context import RequestContext, StreamPaused

logger = logging.getLogger("mcp_tools.tasks")

EXTENSION = "io.modelcontextprotocol/tasks"


def negotiated(rc: RequestContext) -> bool:
    """Whether this request's client declared the tasks extension."""
    return declares_extension(rc.client_capabilities)


def declares_extension(client_capabilities: dict[str, Any]) -> bool:
    """Whether ``client_capabilities`` (a 2026-07-28 request's ``_meta``) declare the tasks extension."""
    extensions = client_capabilities.get("extensions")
    return isinstance(extensions, dict) and EXTENSION in extensions


def missing_extension(message: str) -> McpError:
    """-32021 for a request that needs the extension; over HTTP a 400, as the 2026-07-28 spec asks of every
    MissingRequiredClientCapability answer (a client tells a modern server apart by that 400 body)."""
    return McpError(MISSING_CLIENT_CAPABILITY, message, {"requiredCapabilities": {"extensions": {EXTENSION: {}}}}, http_status=400)


def require_negotiated(rc: RequestContext, method: str) -> None:
    if not negotiated(rc):
        raise missing_extension(f"{method} needs the {EXTENSION} extension, which the client did not declare")


def needs_tasks(tool: Any, rc: RequestContext) -> bool:
    """Whether ``tool`` requires tasks and the client did not negotiate the extension: then it
    cannot serve the call (:func:`refuse_tool_call`, before anything runs)."""
    return tool is not None and tool.task_support == "required" and not negotiated(rc)


async def refuse_tool_call(tool: Any, rc: RequestContext) -> None:
    """Refuse a call of a tool that runs only as a task (:func:`needs_tasks`)."""
    await _refuse_if_visible(tool, rc, missing_extension(f"Tool {tool.name!r} runs only as a task; declare the {EXTENSION} extension"))


async def _refuse_if_visible(tool: Any, rc: RequestContext, refusal: McpError) -> None:
    """Raise ``refusal``, about how ``tool`` must be called, unless the caller may not use the tool:
    then nothing, and :func:`core.resolve_target` answers "Unknown tool" as for a tool that does not
    exist (the refusal would tell the caller that it does). Only a call about to be refused pays for
    the permission check here."""
    if await core.permitted(rc.principal, tool.permissions):
        raise refusal


def wants_task(target: core.Target, rc: RequestContext) -> bool:
    """Whether a call of ``target`` is served as a task: the tool supports tasks and the client negotiated them."""
    return target.tool is not None and target.tool.task_support != "forbidden" and negotiated(rc)


def _iso(value: datetime | None) -> str | None:
    """An instant as the task fields send it: ISO 8601 with its offset, ``Z`` for UTC.

    With ``USE_TZ = False`` Django returns naive wall times of ``TIME_ZONE``; sent as they are, a
    client would read them in its own time zone (RFC 3339 has no naive times), so they are made
    aware in the default time zone and sent in UTC, as the aware values of ``USE_TZ = True`` are.
    """
    if value is None:
        return None
    if timezone.is_naive(value):
        value = timezone.make_aware(value, timezone.get_default_timezone()).astimezone(dt_timezone.utc)
    return value.isoformat().replace("+00:00", "Z")


#: What a task whose time to live ran out says (tasks have no "expired" status).
EXPIRED_MESSAGE = "The task expired before it finished."


def task_status(row: Any) -> str:
    """The task status of a call row. A tool error is a *completed* task (``result.isError``);
    ``failed`` is kept for protocol errors, which the row holds in ``error``, and for a call
    that expired unfinished (neither era's task statuses has "expired")."""
    if row.status == "failed" and row.error is None:
        return "completed"
    if row.status == "expired":
        return "failed"
    return str(row.status)


def expired_message(row: Any) -> str:
    """Why the expired task ``row`` ended: an operator's expire says so (docs/admin.md); a ttl's leaves
    the row's last progress message, which is not the reason."""
    operator = OPERATOR_END_MESSAGES[CallStatus.EXPIRED]
    return operator if row.status_message == operator else EXPIRED_MESSAGE


def task_fields(row: Any) -> dict[str, Any]:
    """The ``Task`` fields of a call row."""
    ttl_ms = None
    if row.expires_at is not None:
        # The row's expiry and creation time are one ``now`` apart by the ttl (create_legacy); a
        # row written through Model.save gets its own creation time, microseconds later: rounded.
        ttl_ms = max(1, round((row.expires_at - row.created_at).total_seconds() * 1000))
    fields: dict[str, Any] = {
        "taskId": str(row.id),
        "status": task_status(row),
        "createdAt": _iso(row.created_at),
        "lastUpdatedAt": _iso(row.updated_at),
        "ttlMs": ttl_ms,
        "pollIntervalMs": int(row.poll_interval_ms or mcp_settings.TASK_POLL_INTERVAL_MS),
    }
    if row.status == "expired":
        fields["statusMessage"] = expired_message(row)
    elif fields["status"] == "failed":
        # Why it failed, not the last progress message the row holds (what it was doing then).
        fields["statusMessage"] = failure_message(row)
    elif row.status_message:
        fields["statusMessage"] = row.status_message
    return fields


#: The longest ``statusMessage`` taken from a failed call's error or result (a status line, not the result).
MAX_FAILURE_MESSAGE_CHARS = 500


def failure_message(row: Any) -> str:
    """What a failed task says went wrong: tasks/get SHOULD carry it (2025-11-25, Task Failure). The
    protocol error's message, else the first text of the tool's ``isError`` result (the caller's own,
    which ``tasks/result`` gives in full)."""
    error = row.error
    if isinstance(error, dict) and isinstance(error.get("message"), str) and error["message"]:
        return str(error["message"])[:MAX_FAILURE_MESSAGE_CHARS]
    result = row.result if isinstance(row.result, dict) else {}
    content = result.get("content")
    for block in content if isinstance(content, list) else ():
        if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str) and block["text"]:
            return str(block["text"])[:MAX_FAILURE_MESSAGE_CHARS]
    return "The tool call failed."


async def created(call_id: str) -> dict[str, Any]:
    """The ``CreateTaskResult`` of a call that was just handed to a worker (its row is committed).

    The row is marked a task here (``is_task``), before its id goes out: a 2026-07-28 call is recorded
    as every 2026 call is, whether the extension makes it a task or it is held or resumed with tokens.
    """
    await store.db(store.sync_calls.mark_task)(call_id)
    loaded = await store.load_call(call_id)
    if loaded is None:  # cancelled and cleaned up in the meantime
        raise invalid_params("Unknown task", {"taskId": call_id})
    return {"resultType": "task", **task_fields(loaded[0])}


async def _owned_by(row: Any, principal: Any) -> bool:
    """Whether ``row`` is a task ``principal`` may reach now."""
    # Someone else's task is indistinguishable from one that does not exist; so is a task of a
    # tool the caller may not call now (a token without its scope, a permission taken away), and
    # a call that is no task (a background call held on its stream, or resumed with tokens).
    return bool(row.principal == principal.id and row.is_task and await core.may_use(principal, "tools/call", row.tool_name))


async def refused_on_resume(row: Any, principal: Any) -> McpError | None:
    """Why a task's ``tasks/result`` stream resumed with ``Last-Event-ID`` may not go on for ``principal``
    (the answer its request gets, "Unknown task", as :func:`_own_task` gives it), or None: asked
    before the replay, so that a caller refused is sent nothing the stream missed."""
    return None if await _owned_by(row, principal) else invalid_params("Unknown task", {"taskId": str(row.id)})


async def _own_task(params: dict[str, Any], rc: RequestContext) -> tuple[Any, Any]:
    task_id = params.get("taskId")
    if not isinstance(task_id, str) or not task_id:
        raise invalid_params('"taskId" must be a non-empty string')
    # The id exactly as the task was given it: another spelling of its UUID is another, unknown, id.
    loaded = await store.load_call(task_id) if session.is_call_id(task_id) else None
    if loaded is None or not await _owned_by(loaded[0], rc.principal):
        raise invalid_params("Unknown task", {"taskId": task_id})
    if await session.expire_if_overdue(loaded[0]):
        # Its ttl ran out and nothing ended it yet (it waits for input or a worker, or its worker has
        # not renewed since): it reads as it is now, failed, not as the sweep will leave it.
        reloaded = await store.load_call(task_id)
        if reloaded is not None:
            return reloaded
    return loaded


async def get(params: dict[str, Any], rc: RequestContext) -> dict[str, Any]:
    """``tasks/get``: the ``DetailedTask``."""
    require_negotiated(rc, "tasks/get")
    row, journal = await _own_task(params, rc)
    detailed = task_fields(row)
    status = detailed["status"]
    if status == "completed":
        result = dict(resumable.handed_out(row.result or {"content": []}))
        result.pop("resultType", None)
        detailed["result"] = result
    elif status == "failed":
        detailed["error"] = row.error or {"code": -32603, "message": expired_message(row) if row.status == "expired" else "The task failed"}
    elif status == "input_required":
        detailed["inputRequests"] = {step.key: step.wire_request for step in journal.pending}
    return detailed


async def update(params: dict[str, Any], rc: RequestContext) -> dict[str, Any]:
    """``tasks/update``: answers to some or all of a task's pending ``inputRequests``; an empty ack,
    also when none of them is pending (answered already, never asked, or the task waits for no input)."""
    require_negotiated(rc, "tasks/update")
    responses = params.get("inputResponses")
    if not isinstance(responses, dict):
        raise invalid_params('"inputResponses" must be an object')
    row, journal = await _own_task(params, rc)
    if row.status != "input_required":
        # The caller's own task that waits for nothing (working: queued, or its answers are in, as
        # a retried update finds it; or ended): nothing is outstanding, so every key is ignored, and
        # the update is acknowledged (SEP-2663: the server SHOULD ignore inputResponses not currently
        # outstanding and MUST acknowledge). Not an error the client would have to handle.
        logger.info("tasks/update for %s ignored: the task is %s, not waiting for input", row.id, task_status(row))
        return {}
    pending = {step.key: step for step in journal.pending}
    unknown = sorted(set(responses) - set(pending))
    if unknown:
        # As for MRTR: answers to requests not (or no longer) pending are ignored.
        logger.info("tasks/update for %s ignored keys it is not waiting for: %s", row.id, unknown)
    responses = {key: answer for key, answer in responses.items() if key in pending}
    for key, answer in list(responses.items()):  # check every answer before recording any
        step = pending[key]
        try:
            responses[key] = checked_step_answer(step.request, answer)
        except InvalidAnswer as exc:
            raise invalid_params(f"Invalid input response for {key!r}: {exc}", {"key": key}) from None
    # To their end, also when the client leaves meanwhile (its connection closed): answers recorded and
    # the task left waiting, with nothing pending and nobody to queue it, would hold it forever.
    taking = asyncio.ensure_future(_take_answers(str(row.id), {pending[key].seq: answer for key, answer in responses.items()}))
    try:
        await asyncio.shield(taking)
    except asyncio.CancelledError:
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await asyncio.shield(taking)
        raise
    return {}


async def _take_answers(call_id: str, answers: dict[int, Any]) -> None:
    """Record a task's answers (by step), and queue it again once none is pending."""
    for seq, answer in answers.items():
        await store.answer_step(call_id, seq, "done", answer, None)
    await background.go_on_if_answered(call_id)
    await wakeups.notify(call_id)


async def cancel(params: dict[str, Any], rc: RequestContext) -> dict[str, Any]:
    """``tasks/cancel``: an empty ack, also for a task that has ended already (idempotent)."""
    require_negotiated(rc, "tasks/cancel")
    row, _ = await _own_task(params, rc)
    await core.end_call(str(row.id), "cancelled", "cancelled by the client (tasks/cancel)")
    return {}


# -- MCP Tasks of 2025-11-25 (sessions): task-augmented tools/call, tasks/get|result|list|cancel --------


LEGACY_CAPABILITY: dict[str, Any] = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
RELATED_TASK = "io.modelcontextprotocol/related-task"


def legacy_task(row: Any) -> dict[str, Any]:
    """The 2025-11-25 ``Task`` of a call row (``ttl`` / ``pollInterval`` in milliseconds).

    Unlike the 2026 extension, a tool result with ``isError`` makes the task ``failed``.
    """
    fields = task_fields(row)
    fields["status"] = "failed" if row.status == "expired" else str(row.status)
    if row.status == "failed":
        fields["statusMessage"] = failure_message(row)  # a tool error too: a "completed" 2026 task says no such thing
    fields["ttl"] = fields.pop("ttlMs")
    fields["pollInterval"] = fields.pop("pollIntervalMs")
    return fields


#: The shortest lifetime, in milliseconds, the server gives a 2025-11-25 task (a shorter ``ttl`` is raised to it).
MIN_TASK_TTL_MS = 1000


def _requested_ttl_ms(params: dict[str, Any]) -> int:
    """The lifetime, in whole milliseconds, the server gives a task-augmented request's task.

    The schema types ``task.ttl`` a ``number`` (``60000.0`` is as good as ``60000``), and "Receivers
    MAY override the requested ttl duration" (they report the one they chose): any positive number
    is taken, rounded, and kept within ``MIN_TASK_TTL_MS`` .. ``TASK_MAX_TTL_MS``. What is no positive
    number (a string, a boolean, NaN or an infinity, zero or less) is refused.
    """
    task = params.get("task")
    if not isinstance(task, dict):
        raise invalid_params('"task" must be an object')
    ttl = task.get("ttl")
    limit = int(mcp_settings.TASK_MAX_TTL_MS)
    if ttl is None:
        return min(limit, int(mcp_settings.CALL_TTL) * 1000)
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or (isinstance(ttl, float) and not math.isfinite(ttl)) or ttl <= 0:
        raise invalid_params('"task.ttl" must be a positive number of milliseconds', {"ttl": ttl})
    if ttl >= limit:  # compared before rounding: an integer past a double's range cannot become a float
        return limit
    return max(MIN_TASK_TTL_MS, round(ttl))


def legacy_tool_call(params: dict[str, Any]) -> tuple[bool, Any, McpError | None]:
    """Whether a 2025-11-25 ``tools/call`` is task-augmented, and, where the tool's taskSupport forbids
    that choice, the tool and the -32601 that refuses it (:func:`_refuse_if_visible`), else None for both.
    Synchronous: a call with nothing to refuse needs no coroutine (``methods.call_tool``)."""
    name = params.get("name")
    tool = registry.get_tool(name) if isinstance(name, str) else None
    augmented = "task" in params and params["task"] is not None
    if tool is None:
        return augmented, None, None  # resolve_target answers "Unknown tool"
    if augmented and tool.task_support == "forbidden":
        return augmented, tool, McpError(METHOD_NOT_FOUND, f"Tool {name!r} cannot run as a task")
    if not augmented and tool.task_support == "required":
        return augmented, tool, McpError(METHOD_NOT_FOUND, f"Tool {name!r} runs only as a task: add \"task\" to the request")
    return augmented, None, None


async def check_legacy_tool_call(params: dict[str, Any], rc: RequestContext) -> bool:
    """Whether a 2025-11-25 ``tools/call`` is task-augmented; -32601 where the tool's taskSupport forbids the choice."""
    augmented, tool, refusal = legacy_tool_call(params)
    if refusal is not None:
        await _refuse_if_visible(tool, rc, refusal)
    return augmented


async def create_legacy(params: dict[str, Any], rc: RequestContext) -> dict[str, Any]:
    """A task-augmented ``tools/call``: the call goes to a worker; the answer is its ``CreateTaskResult``."""
    ttl_ms = _requested_ttl_ms(params)
    target = await core.resolve_target("tools/call", params, rc.principal)
    return await _start_legacy(core.new_invocation(target, rc), target, rc, ttl_ms)


async def resumed_legacy(params: dict[str, Any], inv: engine.Invocation, target: core.Target) -> dict[str, Any]:
    """The next page or poll of a tool, asked for as a 2025-11-25 task (``params`` carry ``task``): a task on
    a worker, as the first call of the tool with ``task`` was, whether the tool is a background one or not."""
    return await _start_legacy(inv, target, inv.state["rc"], _requested_ttl_ms(params))


async def _start_legacy(inv: engine.Invocation, target: core.Target, rc: RequestContext, ttl_ms: int) -> dict[str, Any]:
    """Hand ``inv`` to a worker as a 2025-11-25 task that lives ``ttl_ms``; its ``CreateTaskResult``."""
    rc.flavor = "task"
    now = timezone.now()  # the row's creation time too: the task lives exactly the ttl it reports
    inv.state["row_fields"] = {**inv.state.get("row_fields", {}), "created_at": now, "expires_at": now + timedelta(milliseconds=ttl_ms), "is_task": True}
    call_id = await background.defer(inv, target, rc, 0)
    loaded = await store.load_call(call_id)
    assert loaded is not None
    return {"task": legacy_task(loaded[0])}


async def legacy_get(params: dict[str, Any], rc: RequestContext) -> dict[str, Any]:
    """``tasks/get`` (2025-11-25): the ``Task``."""
    row, _ = await _own_task(params, rc)
    return legacy_task(row)


async def legacy_result(params: dict[str, Any], rc: RequestContext) -> dict[str, Any]:
    """``tasks/result``: waits for the task to end, sending its input requests on this stream, then its result.

    A task that a 2026-07-28 client made (extension tasks) takes its answers in ``tasks/update``
    only (:func:`session.answered_in_session`): its requests are not sent here, where every answer
    to them would be refused; the stream waits, relaying the task's status, as for a running task.

    The answer is exactly what the ``tools/call`` would have answered (a result,
    or its JSON-RPC error), with the related-task ``_meta``: for a task that was cancelled or
    expired, the tool error of a call that ended so (:func:`core.ended_answer`).
    """
    row, _ = await _own_task(params, rc)
    return await _carry(row, rc, set())


async def continue_result(call_id: str, rc: RequestContext, already_sent: set[str]) -> dict[str, Any] | None:
    """A ``tasks/result`` stream resumed with ``Last-Event-ID`` (``rc.request_id`` is that request's):
    it goes on as the request did, the input requests it carried (``already_sent``) not sent again;
    also the stream paused at ``TASK_RESULT_WAIT_SECONDS`` (:func:`_carry`), resumed from its last event.

    None when the client cancels that request (``notifications/cancelled``): it expects no answer,
    and the task goes on, as on the request's own stream (``tasks/cancel`` ends a task).
    """
    row, _ = await _own_task({"taskId": call_id}, rc)
    try:
        return await _carry(row, rc, already_sent)
    except asyncio.CancelledError:
        # Stopped: the request was cancelled, or its stream went away (then nobody reads the answer).
        # A None answer closes the stream; the transport ends the call only for a cancelled result.
        return None


session.RESUMED_BY_FLAVOR["task"] = continue_result
session.REFUSED_ON_RESUME_BY_FLAVOR["task"] = refused_on_resume


async def _carry(row: Any, rc: RequestContext, already_sent: set[str]) -> dict[str, Any]:
    """Carry a task on this ``tasks/result`` stream until it ends; the request's answer.

    The request blocks until the task ends (2025-11-25 tasks: the receiver "MUST block the response
    until the task reaches a terminal status"). Its connection does not: at ``TASK_RESULT_WAIT_SECONDS``
    a stream the client can resume is paused (:class:`StreamPaused`: the transport ends the connection
    without a response), and the resumed stream goes on with the request (:func:`continue_result`).
    A request no client can resume (stdio), or whose task another ``tasks/result`` stream carries now
    (the row keeps one stream per task), waits on.
    """
    task_id = str(row.id)
    rc.flavor = "task"
    if row.progress_token is not None and rc.emit is not None:
        # "The progressToken provided in the initial request remains valid throughout the task
        # lifetime": the worker's progress reaches this stream under it, from above what an earlier
        # tasks/result (paused, or ended, on any process) sent: each value must increase.
        rc.progress_token, rc.progress_sent = row.progress_token, row.progress_relayed
        rc.emit = _noting_progress(task_id, rc.emit)
    stream: _ResultStream | None = None
    if rc.emit is not None and rc.stream_id is not None:
        stream = _ResultStream(task_id, rc.stream_id, jsonrpc.id_text(rc.request_id), rc.emit)
        rc.emit = stream.emit

    async def announce(row: Any) -> None:
        if rc.emit is not None:
            await rc.emit(jsonrpc.notification_message("notifications/tasks/status", legacy_task(row)))

    async def pause() -> None:
        assert stream is not None
        retry_ms = await stream.resumable(announce)
        if retry_ms is not None:
            raise StreamPaused("The task is still running; call tasks/result again", retry_ms, {"taskId": task_id})
        # It ended just now (answered at once), or another tasks/result stream carries it now: a resume
        # of this one would find no task, so it waits for the end here (follow goes on, no deadline).

    # The same loop that carries any call that runs elsewhere on a stream. The limit is its deadline,
    # looked at only where it waits: a timeout around it cut it mid-pass (at 0, at its first write,
    # on every resume), so the task's input requests never went out, and a claimed round could miss
    # its requeue. Each connection now relays what the task has for the client before it pauses.
    deadline = time.monotonic() + float(mcp_settings.TASK_RESULT_WAIT_SECONDS) if stream is not None else None
    result = await session.follow(task_id, rc, already_sent, related_task=task_id, on_status=announce,
                                  deadline=deadline, at_deadline=pause)
    answer = dict(result or {"content": []})
    answer["_meta"] = {**(answer.get("_meta") or {}), RELATED_TASK: {"taskId": task_id}}
    return answer


class _ResultStream:
    """The SSE stream of a ``tasks/result`` request (2025-11-25 sessions over HTTP).

    Its :meth:`emit`, before the first message it sends, keeps on the call's row the stream that
    carries it and the ``tasks/result`` request that stream answers: a stream resumed with
    ``Last-Event-ID`` goes on as that request, whatever it carried (a status, progress, an input
    request). A request answered without streaming (the task had ended) writes nothing.
    """

    def __init__(self, call_id: str, stream_id: Callable[[], str | None], request_id: str | None,
                 emit: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
        self.call_id = call_id
        self.stream_id = stream_id
        self.request_id = request_id
        self._emit = emit
        self.recorded = False

    async def emit(self, message: dict[str, Any]) -> None:
        if not self.recorded:
            self.recorded = True
            stream = self.stream_id()
            if stream:
                await store.set_stream(self.call_id, stream, self.request_id)
        await self._emit(message)

    async def resumable(self, announce: Callable[[Any], Awaitable[None]]) -> int | None:
        """At ``TASK_RESULT_WAIT_SECONDS``: the SSE ``retry`` (the task's ``pollInterval``) to pause this
        stream with, once a resume can go on with it; None when it cannot (wait on).

        A stream that sent nothing yet (the limit came first) is made one now: the task's status, its
        first message, makes the response an SSE stream whose priming event gives the client an id
        to resume from, and keeps it on the row. Not one whose task ended (answered at once) or that
        another ``tasks/result`` took over since (a resume of this one would find no task).
        """
        loaded = await store.load_call(self.call_id)
        if loaded is not None and not loaded[0].is_terminal and not self.recorded:
            await announce(loaded[0])
            loaded = await store.load_call(self.call_id)
        if loaded is None or loaded[0].is_terminal or not loaded[0].stream_id or loaded[0].stream_id != self.stream_id():
            return None
        return int(legacy_task(loaded[0])["pollInterval"])


def _noting_progress(call_id: str, emit: Callable[[dict[str, Any]], Awaitable[None]]) -> Callable[[dict[str, Any]], Awaitable[None]]:
    """``emit`` that keeps on the call's row the progress it sent (for the next ``tasks/result``)."""

    async def emit_noting(message: dict[str, Any]) -> None:
        await emit(message)
        if message.get("method") == "notifications/progress":
            await store.record_progress_relayed(call_id, message["params"]["progress"])

    return emit_noting


async def legacy_list(params: dict[str, Any], rc: RequestContext) -> dict[str, Any]:
    """``tasks/list``: the caller's own tasks, newest first, a page at a time."""
    after: tuple[str, str] | None = None
    cursor = params.get("cursor")
    if cursor is not None:
        try:
            position = tokens.unseal("tasks-cursor", cursor)
        except tokens.InvalidToken:
            raise invalid_params("Invalid cursor") from None
        if not (isinstance(position.get("t"), str) and isinstance(position.get("i"), str)):
            raise invalid_params("Invalid cursor")
        after = (position["t"], position["i"])
    size = int(mcp_settings.PAGE_SIZE)
    rows = await store.tasks_of(rc.principal.id, after, size + 1)
    # Each tool looked at once, however many of its tasks the page holds.
    callable_tools = {name for name in {row.tool_name for row in rows[:size]} if await core.may_use(rc.principal, "tools/call", name)}
    # The page's position is kept over every row, listed or not: hidden tasks neither repeat nor shift others.
    listed = []
    for row in rows[:size]:
        if row.tool_name not in callable_tools:
            continue
        if await session.expire_if_overdue(row):
            # Its ttl ran out and nothing ended it yet: listed as tasks/get reads it now, failed (a
            # review saw the list say input_required while tasks/get said failed, until the sweep).
            reloaded = await store.load_call(str(row.id))
            if reloaded is None:  # cleaned up in the meantime
                continue
            row = reloaded[0]
        listed.append(legacy_task(row))
    result: dict[str, Any] = {"tasks": listed}
    if len(rows) > size:
        # A keyset position (the last task's creation time, exactly, and id): tasks created or
        # removed between pages neither repeat nor hide one.
        last = rows[size - 1]
        result["nextCursor"] = tokens.seal("tasks-cursor", {"t": last.created_at.isoformat(), "i": str(last.id)})
    return result


async def legacy_cancel(params: dict[str, Any], rc: RequestContext) -> dict[str, Any]:
    """``tasks/cancel`` (2025-11-25): the cancelled ``Task``; a task that has ended already is refused (-32602)."""
    row, _ = await _own_task(params, rc)
    if row.is_terminal or not await core.end_call(str(row.id), "cancelled", "The task was cancelled by request."):
        refreshed = await store.load_call(str(row.id))
        # The 2025-11-25 status, as tasks/get says it: a tool error failed the task (not the 2026
        # extension's "completed" with result.isError).
        status = legacy_task(refreshed[0])["status"] if refreshed else "cancelled"
        raise invalid_params(f"Cannot cancel the task: it is already {status}", {"taskId": str(row.id), "status": status})
    loaded = await store.load_call(str(row.id))
    assert loaded is not None
    return legacy_task(loaded[0])
