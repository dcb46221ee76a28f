"""Calls of tools, prompts and resources, served to every wire flavor from one handler.

A call runs in the engine against its journal. When it completes at once
nothing is written. When it needs input, it gets a ``ToolCall`` row and the
flavor decides how the client is asked:

* 2025-11-25 session: requests go out on the request's SSE stream and the
  answers (a POST, maybe to another process) wake the stream holder;
* 2026-07-28 MRTR: an ``InputRequiredResult`` with a sealed ``requestState``;
* saga (seed 000): ``{state: "suspended", sagaToken, steps}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from django.utils import timezone

from . import engine, store, tokens, wakeups
from .auth import Principal
from .conf import mcp_settings
from .engine.context import LOG_LEVELS
from .engine.errors import ElicitationCancelled, ElicitationDeclined, NonDeterministicHandler, StepFailed
from .engine.journal import Journal, Step, digest
from .protocol import jsonrpc
from .protocol.answers import InvalidAnswer, check_answer, step_type
from .protocol.errors import INTERNAL_ERROR, INVALID_PARAMS, McpError, invalid_params
from .registry import Prompt, Resource, Tool, registry
from .results import ToolError

logger = logging.getLogger("mcp_tools.calls")

#: Keys of request params that are not part of what a call is bound to.
UNBOUND_PARAMS = frozenset({"_meta", "inputResponses", "requestState", "task"})
STEP_ID_PREFIX = "mcp_tools"
MAX_INLINE_ROUNDS = 32


@dataclass
class RequestContext:
    """One request as the transports describe it to the call service."""

    principal: Principal
    protocol_version: str
    modern: bool
    client_capabilities: dict[str, Any]
    request_id: Any = None
    session_id: str | None = None
    log_level: str | None = None
    progress_token: Any = None
    #: Sends a message on this request's stream (switching the response to SSE).
    emit: Callable[[dict[str, Any]], Awaitable[None]] | None = None
    #: The SSE stream id, once the response is a stream (2025-11-25 sessions).
    stream_id: Callable[[], str | None] | None = None
    flavor: str = "direct"


@dataclass
class Target:
    """What a call runs: a tool, prompt or resource function with validated arguments."""

    method: str
    name: str
    fn: Callable[..., Any]
    is_async: bool
    context_param: str | None
    kwargs: dict[str, Any]
    shape: Callable[[Any], dict[str, Any]]
    bound_params: dict[str, Any]
    thread_sensitive: bool = True
    tool: Tool | None = None

    @property
    def params_digest(self) -> str:
        return digest([self.method, self.bound_params])


def bound_params(params: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in params.items() if k not in UNBOUND_PARAMS}


async def permitted(principal: Principal, perms: tuple[str, ...]) -> bool:
    if not perms:
        return True
    if principal.is_anonymous:
        return False
    return await sync_to_async(principal.has_perms, thread_sensitive=False)(perms)


async def resolve_target(method: str, params: dict[str, Any], principal: Principal) -> Target:
    """Find what ``method`` + ``params`` names and validate its arguments (-32602 otherwise)."""
    if method in ("tools/call", "tools/callSaga"):
        name = params.get("name")
        if not isinstance(name, str):
            raise invalid_params('"name" must be a string')
        tool = registry.get_tool(name)
        if tool is None or not await permitted(principal, tool.permissions):
            # A tool the caller may not use is indistinguishable from one that does not exist.
            raise invalid_params(f"Unknown tool: {name}")
        kwargs = tool.validate_arguments(params.get("arguments"))
        return Target("tools/call", name, tool.fn, tool.is_async, tool.context_param, kwargs, tool.shape_result,
                      bound_params(params), tool.thread_sensitive, tool)
    if method == "prompts/get":
        name = params.get("name")
        if not isinstance(name, str):
            raise invalid_params('"name" must be a string')
        prompt = registry.get_prompt(name)
        if prompt is None or not await permitted(principal, prompt.permissions):
            raise invalid_params(f"Unknown prompt: {name}")
        arguments = params.get("arguments") or {}
        if not isinstance(arguments, dict) or not all(isinstance(v, str) for v in arguments.values()):
            raise invalid_params('"arguments" must be an object of strings')
        missing = [a["name"] for a in prompt.arguments if a["required"] and a["name"] not in arguments]
        if missing:
            raise invalid_params(f"Missing required arguments for prompt {name!r}: {', '.join(missing)}", {"missing": missing})
        known = {a["name"] for a in prompt.arguments}
        kwargs = {k: v for k, v in arguments.items() if k in known}
        return Target("prompts/get", name, prompt.fn, prompt.is_async, prompt.context_param, kwargs,
                      lambda value: shape_prompt(prompt, value), bound_params(params))
    if method == "resources/read":
        uri = params.get("uri")
        if not isinstance(uri, str):
            raise invalid_params('"uri" must be a string')
        found = registry.find_resource(uri)
        if found is None or not await permitted(principal, found[0].permissions):
            raise McpError(INVALID_PARAMS, "Resource not found", {"uri": uri})
        resource, template_params = found
        return Target("resources/read", uri, resource.fn, resource.is_async, None, template_params,
                      lambda value: shape_resource(resource, uri, value), bound_params(params))
    raise McpError(INVALID_PARAMS, f"{method} cannot be called")


def shape_prompt(prompt: Prompt, value: Any) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    items = [value] if isinstance(value, str) else list(value or [])
    for item in items:
        if isinstance(item, str):
            messages.append({"role": "user", "content": {"type": "text", "text": item}})
        elif isinstance(item, tuple) and len(item) == 2:
            role, content = item
            messages.append({"role": role, "content": {"type": "text", "text": content} if isinstance(content, str) else content})
        elif isinstance(item, dict):
            messages.append(item)
        else:
            raise TypeError(f"Prompt {prompt.name!r} returned an unsupported message: {item!r}")
    result: dict[str, Any] = {"messages": messages}
    if prompt.description:
        result["description"] = prompt.description
    return result


def shape_resource(resource: Resource, uri: str, value: Any) -> dict[str, Any]:
    import base64
    import json

    mime = resource.mime_type
    if isinstance(value, list) and all(isinstance(item, dict) and "uri" in item for item in value):
        return {"contents": value}
    if isinstance(value, bytes):
        content: dict[str, Any] = {"uri": uri, "blob": base64.b64encode(value).decode()}
    elif isinstance(value, str):
        content = {"uri": uri, "text": value}
    else:
        content = {"uri": uri, "text": json.dumps(value, default=str)}
        mime = mime or "application/json"
    if mime:
        content["mimeType"] = mime
    return {"contents": [content]}


def step_request_id(call_id: str, seq: int) -> str:
    return f"{STEP_ID_PREFIX}:{call_id}:{seq}"


def parse_step_request_id(value: Any) -> tuple[str, int] | None:
    if not isinstance(value, str) or not value.startswith(STEP_ID_PREFIX + ":"):
        return None
    try:
        _, call_id, seq = value.split(":")
        return call_id, int(seq)
    except ValueError:
        return None


class Runtime:
    """The engine's view of persistence and of the client (see :class:`engine.runner.Runtime`)."""

    async def run_once(self, inv: engine.Invocation, step: Step, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if inv.call_id is None:
            await ensure_row(inv, status="working")
        if asyncio.iscoroutinefunction(fn):
            # An async side effect cannot share the journal's transaction; it runs, then is journaled.
            value = await fn(*args, **kwargs)
            _, recorded = await store.db(store.record_once)(inv.call_id, step, value)
        else:
            _, recorded = await store.db(store.run_once)(inv.call_id, step, fn, args, kwargs)
        step.response = recorded
        step.status = "done"
        step.persisted = True
        return recorded

    async def progress(self, inv: engine.Invocation, progress: float, total: float | None, message: str | None) -> None:
        rc: RequestContext = inv.state["rc"]
        if inv.progress_token is not None and rc.emit is not None:
            params: dict[str, Any] = {"progressToken": inv.progress_token, "progress": progress}
            if total is not None:
                params["total"] = total
            if message is not None:
                params["message"] = message
            await rc.emit(jsonrpc.notification_message("notifications/progress", params))
        if inv.call_id is not None:
            await store.db(store.update_call)(inv.call_id, progress=progress, progress_total=total, status_message=message or "")

    async def log(self, inv: engine.Invocation, level: str, data: Any, logger_name: str | None) -> None:
        rc: RequestContext = inv.state["rc"]
        if rc.emit is None or rc.log_level is None:
            return
        if LOG_LEVELS.index(level) < LOG_LEVELS.index(rc.log_level):
            return
        params: dict[str, Any] = {"level": level, "data": data}
        if logger_name:
            params["logger"] = logger_name
        await rc.emit(jsonrpc.notification_message("notifications/message", params))


RUNTIME = Runtime()


async def ensure_row(inv: engine.Invocation, *, status: str) -> str:
    """Give the call its ``ToolCall`` row (with the journal so far) if it has none."""
    lock: asyncio.Lock = inv.state.setdefault("row_lock", asyncio.Lock())
    async with lock:
        if inv.call_id is None:
            await _create_row(inv, status)
    assert inv.call_id is not None
    return inv.call_id


async def _create_row(inv: engine.Invocation, status: str) -> None:
    if inv.call_id is None:
        rc: RequestContext = inv.state["rc"]
        target: Target = inv.state["target"]
        user = None if rc.principal.is_anonymous else rc.principal.user
        inv.call_id = await store.db(store.create_call)(
            [s for s in inv.journal.steps if not s.persisted],
            method=target.method, tool_name=target.name, arguments=target.bound_params, user=user,
            principal=rc.principal.id, protocol_version=rc.protocol_version, flavor=rc.flavor,
            params_digest=target.params_digest, client_capabilities=rc.client_capabilities,
            session_id=rc.session_id or "", request_id=str(rc.request_id or ""), status=status,
            stream_id=(rc.stream_id() if rc.stream_id else None) or "",
        )


def new_invocation(target: Target, rc: RequestContext, journal: Journal | None = None, call_id: str | None = None) -> engine.Invocation:
    inv = engine.Invocation(
        fn=target.fn, is_async=target.is_async, kwargs=target.kwargs, context_param=target.context_param,
        principal=rc.principal, protocol_version=rc.protocol_version, client_capabilities=rc.client_capabilities,
        runtime=RUNTIME, journal=journal or Journal(), call_id=call_id, progress_token=rc.progress_token,
        thread_sensitive=target.thread_sensitive,
    )
    inv.state["rc"] = rc
    inv.state["target"] = target
    return inv


def _error_result(message: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": message}], "isError": True}


async def execute(target: Target, inv: engine.Invocation) -> engine.Outcome | dict[str, Any]:
    """Run once; turn failures into what the client should see.

    Returns the outcome, or a finished wire result for failures. Protocol
    errors (:class:`McpError`) propagate as JSON-RPC errors.
    """
    started = time.monotonic()
    is_tool = target.method == "tools/call"
    recorder: asyncio.Future[str] | None = None

    def record() -> None:
        nonlocal recorder
        inv.state["recording"] = True  # from here on, let the insert finish rather than cancel it
        recorder = asyncio.ensure_future(ensure_row(inv, status="working"))

    # A timer handle, not a task: a fast call pays next to nothing for it.
    timer = asyncio.get_running_loop().call_later(float(mcp_settings.SLOW_CALL_SECONDS), record) if inv.call_id is None else None
    try:
        return await engine.run(inv)
    except McpError:
        raise
    except ToolError as exc:
        if is_tool:
            return _error_result(str(exc))
        raise McpError(INTERNAL_ERROR, str(exc)) from None
    except ElicitationDeclined:
        message = "The user declined to provide the requested input."
    except ElicitationCancelled:
        message = "The user cancelled the request for input."
    except StepFailed as exc:
        message = str(exc)
    except NonDeterministicHandler as exc:
        logger.error("Non-deterministic handler %s: %s", target.name, exc)
        message = f"NonDeterministicHandler: {exc}"
    except asyncio.CancelledError:
        raise
    except Exception:
        logger.exception("%s %r failed after %.3fs", target.method, target.name, time.monotonic() - started)
        message = f"Internal error while running {target.name!r}; the server log has the details."
    finally:
        if timer is not None:
            timer.cancel()
        if recorder is not None and not recorder.done():
            with contextlib.suppress(Exception):
                await recorder
    if is_tool:
        return _error_result(message)
    raise McpError(INTERNAL_ERROR, message)


async def check_next_tool(result: dict[str, Any], rc: RequestContext) -> None:
    """Tool chaining (seed 001): keep ``_meta.nextTool`` only if the caller could make that call.

    The named tool must exist and be visible to the caller, and the arguments
    must validate against its schema; otherwise the hint is dropped (and logged),
    never sent half-right.
    """
    meta = result.get("_meta")
    hint = meta.get("nextTool") if isinstance(meta, dict) else None
    if hint is None:
        return
    reason = None
    name = hint.get("tool") if isinstance(hint, dict) else None
    tool = registry.get_tool(name) if isinstance(name, str) else None
    if tool is None or not await permitted(rc.principal, tool.permissions):
        reason = f"unknown tool {name!r}"
    else:
        try:
            tool.validate_arguments(hint.get("arguments", {}))
        except McpError as exc:
            reason = f"invalid arguments: {exc.data}"
    if reason is not None:
        logger.warning("Dropped _meta.nextTool from a result: %s", reason)
        assert isinstance(meta, dict)
        del meta["nextTool"]
        if not meta:
            del result["_meta"]


def apply_answer(step: Step, answer: Any, key: str) -> None:
    """Check one answer against its step's request and record it (in memory)."""
    assert step.request is not None
    try:
        check_answer(step.request["method"], step.request.get("params", {}), answer)
    except InvalidAnswer as exc:
        raise invalid_params(f"Invalid input response for {key!r}: {exc}", {"key": key}) from None
    step.response = answer
    step.status = "done"


def input_requests(pending: list[Step]) -> dict[str, Any]:
    return {step.key: step.request for step in pending}


class CallService:
    """Entry points used by the method table for calls that may need input."""

    # -- shared -----------------------------------------------------------
    async def _finish(self, inv: engine.Invocation, target: Target, outcome: Any, rc: RequestContext, round_number: int) -> dict[str, Any]:
        """Wire result of a finished run; closes the row if there is one."""
        result = outcome if isinstance(outcome, dict) else target.shape(outcome.value)
        if target.method == "tools/call":
            await check_next_tool(result, rc)
        if inv.call_id is None and mcp_settings.RECORD_ALL_CALLS:
            await ensure_row(inv, status="working")
        if inv.call_id is not None:
            await store.db(store.save_round)(
                inv.call_id, round_number, [s for s in inv.journal.steps if not s.persisted],
                status="failed" if result.get("isError") else "completed", result=result, finished_at=timezone.now(),
                last_outcome={"round": round_number, "answer": result},
            )
            await wakeups.notify(inv.call_id)
        return result

    async def _suspend(self, inv: engine.Invocation, rc: RequestContext, round_number: int, **fields: Any) -> str:
        """Persist a call that waits for input (with ``fields`` of the call row); returns its id."""
        if inv.call_id is None:
            return await ensure_row(inv, status="input_required")
        await store.db(store.save_round)(
            inv.call_id, round_number, [s for s in inv.journal.steps if not s.persisted], status="input_required", **fields,
        )
        await wakeups.notify(inv.call_id)
        return inv.call_id

    def _seal(self, purpose: str, call_id: str, round_number: int, rc: RequestContext, target: Target) -> str:
        return tokens.seal(purpose, {"c": call_id, "r": round_number, "p": rc.principal.id, "m": target.method, "d": target.params_digest})

    # -- 2026-07-28 multi-round-trip requests -------------------------------
    async def call_mrtr(self, method: str, params: dict[str, Any], rc: RequestContext) -> dict[str, Any]:
        responses = params.get("inputResponses")
        if responses is not None and not isinstance(responses, dict):
            raise invalid_params('"inputResponses" must be an object')
        if "requestState" in params and params["requestState"] is not None:
            return await self._resume_mrtr(method, params, responses or {}, rc)
        target = await resolve_target(method, params, rc.principal)
        inv = new_invocation(target, rc)
        rc.flavor = "mrtr"
        return await self._run_mrtr(inv, target, rc, responses or {}, 0)

    async def _run_mrtr(self, inv: engine.Invocation, target: Target, rc: RequestContext, responses: dict[str, Any], round_number: int) -> dict[str, Any]:
        for _ in range(MAX_INLINE_ROUNDS):
            outcome = await execute(target, inv)
            if not isinstance(outcome, engine.NeedsInput):
                return await self._finish(inv, target, outcome, rc, round_number)
            # Answers the client already sent for steps asked only now (a stateless
            # client may answer in advance): apply and run again.
            applied = False
            for step in outcome.pending:
                if step.key in responses:
                    apply_answer(step, responses[step.key], step.key)
                    applied = True
            if not applied:
                call_id = await self._suspend(inv, rc, round_number)
                return {
                    "resultType": "input_required",
                    "inputRequests": input_requests(outcome.pending),
                    "requestState": self._seal("request", call_id, round_number, rc, target),
                }
        raise McpError(INTERNAL_ERROR, "Too many input rounds in one request")

    async def _load_bound_call(self, purpose: str, token: Any, rc: RequestContext, target_digest: str | None, method: str) -> tuple[dict[str, Any], Any, Journal]:
        error = invalid_params(f"Invalid or expired {'requestState' if purpose == 'request' else 'sagaToken'}")
        try:
            payload = tokens.unseal(purpose, token)
        except tokens.InvalidToken:
            raise error from None
        if payload.get("p") != rc.principal.id or payload.get("m") != method or (target_digest is not None and payload.get("d") != target_digest):
            logger.info("Refused %s token: bound to another principal, method or parameters", purpose)
            raise error
        loaded = await store.db(store.load_call)(payload.get("c"))
        if loaded is None:
            logger.info("Refused %s token: call %s is gone", purpose, payload.get("c"))
            raise error
        call, journal = loaded
        if call.status == "expired" or (call.expires_at and call.expires_at < timezone.now() and not call.is_terminal):
            logger.info("Refused %s token: call %s expired", purpose, call.id)
            if call.status != "expired":
                await store.db(store.update_call)(call.id, status="expired", finished_at=timezone.now())
            raise error
        return payload, call, journal

    async def _resume_mrtr(self, method: str, params: dict[str, Any], responses: dict[str, Any], rc: RequestContext) -> dict[str, Any]:
        target = await resolve_target(method, params, rc.principal)
        payload, call, journal = await self._load_bound_call("request", params["requestState"], rc, target.params_digest, target.method)
        rc.flavor = "mrtr"
        return await self._advance_and_run(call, journal, payload["r"], responses, target, rc, purpose="request", strict_keys=True)

    async def _advance_and_run(
        self, call: Any, journal: Journal, round_number: int, responses: dict[str, Any], target: Target,
        rc: RequestContext, *, purpose: str, strict_keys: bool,
    ) -> dict[str, Any]:
        answers_digest = digest(responses)
        if call.round != round_number:
            return await self._repeat_outcome(call.id, round_number, answers_digest, purpose)
        if call.status != "input_required":
            raise invalid_params(f"Invalid or expired {'requestState' if purpose == 'request' else 'sagaToken'}")
        pending = {step.key: step for step in journal.pending}
        unknown = sorted(set(responses) - set(pending))
        if strict_keys and unknown:
            answered_before = [k for k in unknown if journal.by_key(k) is not None]
            if len(answered_before) != len(unknown):
                raise invalid_params("inputResponses has keys this call never asked for", {"keys": [k for k in unknown if k not in answered_before]})
        answers: dict[int, tuple[str, Any, Any]] = {}
        for key, step in pending.items():
            if key in responses:
                apply_answer(step, responses[key], key)
                answers[step.seq] = ("done", step.response, None)
        if not answers:
            # Nothing new: ask again with the same round's token.
            return self._wire_input_required(purpose, str(call.id), round_number, journal.pending, rc, target)
        if not await store.db(store.advance)(call.id, round_number, answers, answers_digest):
            return await self._repeat_outcome(call.id, round_number, answers_digest, purpose)
        next_round = round_number + 1
        inv = new_invocation(target, rc, journal, str(call.id))
        for step in journal.steps:
            step.persisted = True
        outcome = await execute(target, inv)
        if isinstance(outcome, engine.NeedsInput):
            answer = self._wire_input_required(purpose, str(call.id), next_round, outcome.pending, rc, target)
            # The answer is stored with the round, so an identical retry gets the very same one.
            await self._suspend(inv, rc, next_round, last_outcome={"round": next_round, "answer": answer})
            return answer
        return await self._finish(inv, target, outcome, rc, next_round)

    def _wire_input_required(self, purpose: str, call_id: str, round_number: int, pending: list[Step], rc: RequestContext, target: Target) -> dict[str, Any]:
        token = self._seal(purpose, call_id, round_number, rc, target)
        if purpose == "saga":
            return {
                "state": "suspended",
                "sagaToken": token,
                "steps": [{"type": step_type(s.request["method"]), "stepId": s.key, "params": s.request["params"]} for s in pending if s.request],
            }
        return {"resultType": "input_required", "inputRequests": input_requests(pending), "requestState": token}

    async def _repeat_outcome(self, call_id: Any, round_number: int, answers_digest: str, purpose: str) -> dict[str, Any]:
        """A retry of a round that already advanced: identical answers get the identical outcome."""
        deadline = time.monotonic() + 30
        while True:
            row = await store.db(store.call_status)(call_id)
            if row is None:
                break
            status, current_round, last_outcome, digest_now = row
            if current_round != round_number + 1 or digest_now != answers_digest:
                break
            if last_outcome and last_outcome.get("round") == round_number + 1:
                return last_outcome["answer"]
            if time.monotonic() > deadline:
                raise McpError(INTERNAL_ERROR, "The round is still being processed; retry later")
            await asyncio.sleep(0.02)
        logger.info("Refused replayed %s token for call %s round %s", purpose, call_id, round_number)
        raise invalid_params(f"Invalid or expired {'requestState' if purpose == 'request' else 'sagaToken'}")

    # -- sagas (seed 000) -----------------------------------------------------
    async def call_saga(self, params: dict[str, Any], rc: RequestContext) -> dict[str, Any]:
        target = await resolve_target("tools/callSaga", params, rc.principal)
        rc.flavor = "saga"
        inv = new_invocation(target, rc)
        outcome = await execute(target, inv)
        if isinstance(outcome, engine.NeedsInput):
            call_id = await self._suspend(inv, rc, 0)
            return self._wire_input_required("saga", call_id, 0, outcome.pending, rc, target)
        return await self._finish(inv, target, outcome, rc, 0)

    async def resume_saga(self, params: dict[str, Any], rc: RequestContext) -> dict[str, Any]:
        completed = params.get("completedSteps")
        if not isinstance(completed, list) or not all(isinstance(s, dict) and isinstance(s.get("stepId"), str) for s in completed):
            raise invalid_params('"completedSteps" must be an array of {stepId, result | error}')
        payload, call, journal = await self._load_bound_call("saga", params.get("sagaToken"), rc, None, "tools/call")
        rc.flavor = "saga"
        target = await resolve_target("tools/call", call.arguments, rc.principal)
        if target.params_digest != call.params_digest:
            raise invalid_params("Invalid or expired sagaToken")
        responses: dict[str, Any] = {}
        for entry in completed:
            if entry.get("error") is not None:
                step = journal.by_key(entry["stepId"])
                if step is not None and step.status == "pending":
                    error = entry["error"] if isinstance(entry["error"], dict) else {"message": str(entry["error"])}
                    responses[entry["stepId"]] = {"__error__": error}
                continue
            responses[entry["stepId"]] = entry.get("result")
        return await self._advance_saga(call, journal, payload["r"], responses, target, rc)

    async def _advance_saga(self, call: Any, journal: Journal, round_number: int, responses: dict[str, Any], target: Target, rc: RequestContext) -> dict[str, Any]:
        # Step errors are journaled as failed steps; ctx raises StepFailed for them.
        errors = {k: v["__error__"] for k, v in responses.items() if isinstance(v, dict) and "__error__" in v}
        plain = {k: v for k, v in responses.items() if k not in errors}
        for key, error in errors.items():
            step = journal.by_key(key)
            if step is not None and step.status == "pending":
                step.status = "failed"
                step.error = error
        if errors:
            answers = {journal.by_key(k).seq: ("failed", None, e) for k, e in errors.items()}  # type: ignore[union-attr]
            for key in plain:
                step = journal.by_key(key)
                if step is not None and step.status == "pending":
                    apply_answer(step, plain[key], key)
                    answers[step.seq] = ("done", step.response, None)
            if call.round != round_number or not await store.db(store.advance)(call.id, round_number, answers, digest(responses)):
                return await self._repeat_outcome(call.id, round_number, digest(responses), "saga")
            inv = new_invocation(target, rc, journal, str(call.id))
            for step in journal.steps:
                step.persisted = True
            outcome = await execute(target, inv)
            if isinstance(outcome, engine.NeedsInput):
                await self._suspend(inv, rc, round_number + 1)
                return self._wire_input_required("saga", str(call.id), round_number + 1, outcome.pending, rc, target)
            return await self._finish(inv, target, outcome, rc, round_number + 1)
        # Full history: steps answered in earlier rounds are ignored; unknown ids are refused.
        return await self._advance_and_run(call, journal, round_number, plain, target, rc, purpose="saga", strict_keys=True)

    # -- 2025-11-25 sessions: requests on the SSE stream -----------------------
    async def call_session(self, method: str, params: dict[str, Any], rc: RequestContext) -> dict[str, Any]:
        target = await resolve_target(method, params, rc.principal)
        rc.flavor = "session"
        inv = new_invocation(target, rc)
        round_number = 0
        while True:
            outcome = await execute(target, inv)
            if not isinstance(outcome, engine.NeedsInput):
                return await self._finish(inv, target, outcome, rc, round_number)
            if rc.emit is None:
                raise McpError(INVALID_PARAMS, "This call needs input from the client, which this transport cannot ask for")
            call_id = await self._suspend(inv, rc, round_number)
            await self._ask_on_stream(call_id, outcome.pending, rc)
            journal = await self._wait_for_answers(call_id, round_number)
            round_number += 1
            inv = new_invocation(target, rc, journal, call_id)

    async def _ask_on_stream(self, call_id: str, pending: list[Step], rc: RequestContext) -> None:
        assert rc.emit is not None
        if rc.stream_id is not None:
            stream = rc.stream_id()
            if stream:
                await store.db(store.update_call)(call_id, stream_id=stream)
        for step in pending:
            assert step.request is not None
            await rc.emit(jsonrpc.request_message(step_request_id(call_id, step.seq), step.request["method"], step.request["params"]))

    async def _wait_for_answers(self, call_id: str, round_number: int) -> Journal:
        async with wakeups.listening(call_id) as event:
            while True:
                loaded = await store.db(store.load_call)(call_id)
                if loaded is None:
                    raise McpError(INTERNAL_ERROR, "The call disappeared while waiting for input")
                call, journal = loaded
                if call.status in ("cancelled", "expired"):
                    raise McpError(INVALID_PARAMS, f"The call was {call.status}")
                if not journal.pending and call.round == round_number:
                    if await store.db(store.claim_round)(call_id, round_number):
                        return journal
                    raise McpError(INTERNAL_ERROR, "Another stream continued this call")
                await wakeups.wait(event)

    async def continue_session_call(self, call_id: str, rc: RequestContext, already_sent: set[str]) -> dict[str, Any] | None:
        """Continue a session call on a resumed stream (``GET`` with ``Last-Event-ID``).

        Another process may still hold the call (its old stream not yet known to be
        gone): wait while it runs, answer with the stored result once it is done, and
        re-send on this stream any pending request the client has not seen here.
        """
        rc.flavor = "session"
        async with wakeups.listening(call_id) as event:
            while True:
                loaded = await store.db(store.load_call)(call_id)
                if loaded is None or loaded[0].principal != rc.principal.id:
                    return None
                call, journal = loaded
                if call.status in ("completed", "failed"):
                    return call.result
                if call.status in ("cancelled", "expired"):
                    raise McpError(INVALID_PARAMS, f"The call was {call.status}")
                if call.status == "input_required":
                    unsent = [s for s in journal.pending if step_request_id(call_id, s.seq) not in already_sent]
                    if unsent:
                        await self._ask_on_stream(call_id, unsent, rc)
                        already_sent.update(step_request_id(call_id, s.seq) for s in unsent)
                    if not journal.pending and await store.db(store.claim_round)(call_id, call.round):
                        return await self._run_session_rounds(call, journal, rc, already_sent)
                await wakeups.wait(event)

    async def _run_session_rounds(self, call: Any, journal: Journal, rc: RequestContext, already_sent: set[str]) -> dict[str, Any]:
        call_id = str(call.id)
        target = await resolve_target(call.method, call.arguments, rc.principal)
        round_number = call.round + 1
        inv = new_invocation(target, rc, journal, call_id)
        while True:
            outcome = await execute(target, inv)
            if not isinstance(outcome, engine.NeedsInput):
                return await self._finish(inv, target, outcome, rc, round_number)
            await self._suspend(inv, rc, round_number)
            await self._ask_on_stream(call_id, outcome.pending, rc)
            already_sent.update(step_request_id(call_id, s.seq) for s in outcome.pending)
            journal = await self._wait_for_answers(call_id, round_number)
            round_number += 1
            inv = new_invocation(target, rc, journal, call_id)

    async def accept_client_response(self, message: dict[str, Any], rc: RequestContext) -> None:
        """A client's JSON-RPC response to one of our requests (any process may receive it)."""
        parsed = parse_step_request_id(message.get("id"))
        if parsed is None:
            logger.info("Ignored a response to an unknown request id %r", message.get("id"))
            return
        call_id, seq = parsed
        loaded = await store.db(store.load_call)(call_id)
        if loaded is None:
            logger.info("Ignored a response for unknown call %s", call_id)
            return
        call, journal = loaded
        if call.principal != rc.principal.id or (call.session_id and call.session_id != (rc.session_id or "")):
            logger.warning("Refused a response for call %s from another principal or session", call_id)
            return
        step = journal.at(seq)
        if step is None or step.status != "pending" or step.request is None:
            logger.info("Ignored a response for step %s of call %s: not pending", seq, call_id)
            return
        if "error" in message:
            error = message["error"] if isinstance(message["error"], dict) else {"message": str(message["error"])}
            await store.db(store.answer_step)(call_id, seq, "failed", None, error)
        else:
            try:
                check_answer(step.request["method"], step.request.get("params", {}), message.get("result"))
            except InvalidAnswer as exc:
                await store.db(store.answer_step)(call_id, seq, "failed", None, {"code": INVALID_PARAMS, "message": f"Invalid answer: {exc}"})
            else:
                await store.db(store.answer_step)(call_id, seq, "done", message.get("result"), None)
        await wakeups.notify(call_id)

    async def cancel(self, call_id: str) -> None:
        await store.db(store.update_call)(call_id, status="cancelled", finished_at=timezone.now())
        await wakeups.notify(call_id)


service = CallService()
