"""The tasks flavor: MCP Tasks, the 2026-07-28 extension ``io.modelcontextprotocol/tasks`` (SEP-2663).

A task is a background call (:mod:`mcp_tools.server.background`); its id is the
call id, and the caller can reach only its own tasks: another principal's task
id answers exactly like an unknown one.

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
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from ... import store
from ...conf import mcp_settings
from ...interprocess import wakeups
from ...protocol.answers import InvalidAnswer, check_answer
from ...protocol.errors import MISSING_CLIENT_CAPABILITY, McpError, invalid_params
from ..context import RequestContext
from .. import background, core

logger = logging.getLogger("mcp_tools.tasks")

EXTENSION = "io.modelcontextprotocol/tasks"


def negotiated(rc: RequestContext) -> bool:
    """Whether this request's client declared the tasks extension."""
    extensions = rc.client_capabilities.get("extensions")
    return isinstance(extensions, dict) and EXTENSION in extensions


def missing_extension(message: str) -> McpError:
    return McpError(MISSING_CLIENT_CAPABILITY, message, {"requiredCapabilities": {"extensions": {EXTENSION: {}}}})


def require_negotiated(rc: RequestContext, method: str) -> None:
    if not negotiated(rc):
        raise missing_extension(f"{method} needs the {EXTENSION} extension, which the client did not declare")


def check_tool_call(tool: Any, rc: RequestContext) -> None:
    """A tool that requires tasks cannot serve a client without the extension (before anything runs)."""
    if tool is not None and tool.task_support == "required" and not negotiated(rc):
        raise missing_extension(f"Tool {tool.name!r} runs only as a task; declare the {EXTENSION} extension")


def wants_task(target: core.Target, rc: RequestContext) -> bool:
    """Whether a call of ``target`` is served as a task: the tool supports tasks and the client negotiated them."""
    return target.tool is not None and target.tool.task_support != "forbidden" and negotiated(rc)


def _iso(value: datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value is not None else None


def task_status(row: Any) -> str:
    """The task status of a call row. A tool error is a *completed* task (``result.isError``);
    ``failed`` is kept for protocol errors, which the row holds in ``error``."""
    if row.status == "failed" and row.error is None:
        return "completed"
    return str(row.status)


def task_fields(row: Any) -> dict[str, Any]:
    """The ``Task`` fields of a call row."""
    ttl_ms = None
    if row.expires_at is not None:
        ttl_ms = max(1, int((row.expires_at - row.created_at).total_seconds() * 1000))
    fields: dict[str, Any] = {
        "taskId": str(row.id),
        "status": task_status(row),
        "createdAt": _iso(row.created_at),
        "lastUpdatedAt": _iso(row.updated_at),
        "ttlMs": ttl_ms,
        "pollIntervalMs": int(row.poll_interval_ms or mcp_settings.TASK_POLL_INTERVAL_MS),
    }
    if row.status_message:
        fields["statusMessage"] = row.status_message
    return fields


async def created(call_id: str) -> dict[str, Any]:
    """The ``CreateTaskResult`` of a call that was just handed to a worker (its row is committed)."""
    loaded = await store.load_call(call_id)
    if loaded is None:  # cancelled and cleaned up in the meantime
        raise invalid_params("Unknown task", {"taskId": call_id})
    return {"resultType": "task", **task_fields(loaded[0])}


async def _own_task(params: dict[str, Any], rc: RequestContext) -> tuple[Any, Any]:
    task_id = params.get("taskId")
    if not isinstance(task_id, str) or not task_id:
        raise invalid_params('"taskId" must be a non-empty string')
    loaded = await store.load_call(task_id)
    if loaded is None or loaded[0].principal != rc.principal.id or not loaded[0].background:
        # Someone else's task is indistinguishable from one that does not exist.
        raise invalid_params("Unknown task", {"taskId": task_id})
    return loaded


async def get(params: dict[str, Any], rc: RequestContext) -> dict[str, Any]:
    """``tasks/get``: the ``DetailedTask``."""
    require_negotiated(rc, "tasks/get")
    row, journal = await _own_task(params, rc)
    detailed = task_fields(row)
    status = detailed["status"]
    if status == "completed":
        result = dict(row.result or {"content": []})
        result.pop("resultType", None)
        detailed["result"] = result
    elif status == "failed":
        detailed["error"] = row.error or {"code": -32603, "message": "The task failed"}
    elif status == "input_required":
        detailed["inputRequests"] = {step.key: step.request for step in journal.pending}
    return detailed


async def update(params: dict[str, Any], rc: RequestContext) -> dict[str, Any]:
    """``tasks/update``: answers to some or all of a task's pending ``inputRequests``."""
    require_negotiated(rc, "tasks/update")
    responses = params.get("inputResponses")
    if not isinstance(responses, dict):
        raise invalid_params('"inputResponses" must be an object')
    row, journal = await _own_task(params, rc)
    if row.status != "input_required":
        raise invalid_params("The task is not waiting for input", {"taskId": str(row.id), "status": task_status(row)})
    pending = {step.key: step for step in journal.pending}
    unknown = sorted(set(responses) - set(pending))
    if unknown:
        # As for MRTR: answers to requests not (or no longer) pending are ignored.
        logger.info("tasks/update for %s ignored keys it is not waiting for: %s", row.id, unknown)
    responses = {key: answer for key, answer in responses.items() if key in pending}
    for key, answer in responses.items():  # check every answer before recording any
        step = pending[key]
        try:
            check_answer(step.request["method"], step.request.get("params", {}), answer)
        except InvalidAnswer as exc:
            raise invalid_params(f"Invalid input response for {key!r}: {exc}", {"key": key}) from None
    call_id = str(row.id)
    for key, answer in responses.items():
        await store.answer_step(call_id, pending[key].seq, "done", answer, None)
    loaded = await store.load_call(call_id)
    if loaded is not None and not loaded[1].pending and await store.claim_round(call_id, loaded[0].round):
        await background.requeue(call_id)
    await wakeups.notify(call_id)
    return {}


async def cancel(params: dict[str, Any], rc: RequestContext) -> dict[str, Any]:
    """``tasks/cancel``: an empty ack, also for a task that has ended already (idempotent)."""
    require_negotiated(rc, "tasks/cancel")
    row, _ = await _own_task(params, rc)
    await core.end_call(str(row.id), "cancelled", "cancelled by the client (tasks/cancel)")
    return {}
