"""The call core that every wire flavor shares.

A call of a tool, prompt or resource runs in the engine against its journal.
This module resolves what a request names and checks the caller may use it
(:func:`resolve_target`), runs one round and maps failures to what a client
sees (:func:`execute`), persists a call that waits (:func:`suspend`) or
finishes (:func:`finish`), and advances a call with a client's answers
(:func:`advance_and_run`). When a call completes at once nothing is written.

The flavors in :mod:`mcp_tools.server.flavors` only translate outcomes into
their own messages and tokens: the 2025-11-25 session (requests on the SSE
stream), the 2026-07-28 multi-round-trip request (``InputRequiredResult``)
and the saga of seed 000.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import functools
import inspect
import json
import logging
import signal
import threading
import time
import types
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import mcp_types
from asgiref.sync import async_to_sync
from django.utils import timezone

from .. import engine, store
from ..conf import mcp_settings
from ..engine.wrapped import runs_a_sync_wrapper
from ..engine.errors import Defer, ElicitationCancelled, ElicitationDeclined, NonDeterministicHandler, StepFailed, Suspend, once_exception
from ..engine.journal import Journal, Step, digest
from ..interprocess import cancellation, events, wakeups
from ..protocol import jsonrpc, versions
from ..protocol.answers import InvalidAnswer, checked_step_answer
from ..protocol.errors import INTERNAL_ERROR, INVALID_PARAMS, MISSING_CLIENT_CAPABILITY, InvalidArguments, McpError, ResourceNotFound, invalid_params
from ..protocol.levels import at_least
from ..protocol.schemas import InvalidSchema
from ..registry import Prompt, Resource, Tool, registry
from ..registry.results import Page, Pending, ToolError, as_json_values, content_block, content_to_wire, json_text, lazy_text
from ..states import TERMINAL_STATUSES, CallStatus
from ..store.sql import UnstorableValue
from . import threads, tokens
from .auth import Principal
from .context import RequestContext, ends_when_stopped, kept_for_resume
from .resumable import client_resumes, handed_out, row_arguments, row_cursor, shape_value

logger = logging.getLogger("mcp_tools.calls")  # the name operators configured; kept across the move
#: Where a handler's ``ctx.log`` lines go when no client stream can take them (a background worker's).
tool_logger = logging.getLogger("mcp_tools.tool_log")
#: MCP's log levels (RFC 5424) as Python's.
_PY_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "notice": logging.INFO, "warning": logging.WARNING,
              "error": logging.ERROR, "critical": logging.CRITICAL, "alert": logging.CRITICAL, "emergency": logging.CRITICAL}

#: Keys of request params that are not part of what a call is bound to.
UNBOUND_PARAMS = frozenset({"_meta", "inputResponses", "requestState", "task", "resumeToken"})
MAX_INLINE_ROUNDS = 32


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
    #: The request's params as received (not copied: nothing changes them after the request is parsed).
    params: dict[str, Any]
    thread_sensitive: bool = True
    tool: Tool | None = None

    @property
    def inline(self) -> bool:
        """Whether :func:`run_fresh` may run the handler's first step itself: an async handler
        without a context parameter (it can neither ask, journal nor defer) that is not a
        background tool, nor a sync wrapper of an ``async def`` (run in a thread by the runner:
        :func:`~mcp_tools.engine.wrapped.call_async`)."""
        return (self.is_async and self.context_param is None and (self.tool is None or not self.tool.background)
                and not runs_a_sync_wrapper(self.fn))

    @functools.cached_property
    def bound_params(self) -> dict[str, Any]:
        """The params the call is bound to (:data:`UNBOUND_PARAMS` left out); made when a row or a token needs them."""
        return bound_params(self.params)

    @functools.cached_property
    def params_digest(self) -> str:
        """SHA-256 of the method and the bound parameters (computed once: tokens and the row use it)."""
        return digest([self.method, self.bound_params])


def bound_params(params: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in params.items() if k not in UNBOUND_PARAMS}


async def permitted(principal: Principal, perms: tuple[str, ...]) -> bool:
    if not perms:
        return True
    if principal.is_anonymous:
        return False
    return await threads.run_sync(principal.has_perms, perms)


async def may_use(principal: Principal, method: str, name: str) -> bool:
    """Whether ``principal`` may use now what ``method`` names by ``name`` (a resource's URI for
    ``resources/read``, a prompt's name for ``prompts/get``, else a tool's name): it is registered
    and the caller has its permissions and its token's scopes, as a new request is checked.

    For what a call or task that started earlier names: a permission taken away since, or a
    token without the scope, stops it as it would stop a new request.
    """
    item: Tool | Prompt | Resource | None
    if method == "resources/read":
        found = registry.find_resource(name)
        item = found[0] if found is not None else None
    elif method == "prompts/get":
        item = registry.get_prompt(name)
    else:
        item = registry.get_tool(name)
    return item is not None and await permitted(principal, item.permissions)


def internal_error_text(name: str) -> str:
    """What a caller reads of a handler's unexpected exception (a direct call's, or a tool's inside
    sampling): never the exception's own text, which is the server's; the log has it."""
    return f"Internal error while running {name!r}; the server log has the details."


def storable_error(exc: McpError, target: Target) -> McpError:
    """``exc``, or, if its message or data holds a string no row can keep (U+0000, a lone surrogate:
    ``sql.UnstorableValue``), an error of the same code saying so. Raised as it was, it could not be
    written where it ends the call: the row stayed ``working`` (a worker's until its lease ran out,
    then run again), the client got -32603 and an identical retry ran the handler again. Replaced,
    the call ends failed once, and each retry reads the same error back."""
    if jsonrpc.unstorable_string(exc.message) is None and (exc.data is None or jsonrpc.unstorable_string(exc.data) is None):
        return exc
    logger.error("%s %r raised an error that cannot be stored: %r", target.method, target.name, exc)
    return McpError(exc.code, f"{target.name!r} raised an error that cannot be stored: {jsonrpc.UNSTORABLE_TEXT}.")


#: What a handler may return that runs a query when read: evaluated on a thread (:func:`evaluated_rows`).
_LAZY_ROWS = store.LAZY_ROWS


def holds_lazy_rows(value: Any) -> bool:
    """Whether ``value`` is a ``QuerySet`` / ``RawQuerySet``, or a ``Page`` of one."""
    return isinstance(value, _LAZY_ROWS) or (isinstance(value, Page) and isinstance(value.items, _LAZY_ROWS))


async def _returning(value: Any) -> Any:
    return value


async def evaluated_rows(outcome: Any) -> Any:
    """``outcome`` with a returned ``QuerySet`` / ``RawQuerySet`` (or a ``Page`` of one) listed on a thread,
    as part of the handler's run: its failure is the handler's. Shaped on the event loop, it ran its
    query there, which Django refuses (``SynchronousOnlyOperation``), and a ``RawQuerySet`` went out as
    its repr (its SQL)."""
    if not isinstance(outcome, engine.Completed):
        return outcome
    value: Any = outcome.value
    if isinstance(value, _LAZY_ROWS):
        return engine.Completed(await threads.run_sync(_listed, value))
    if isinstance(value, Page) and isinstance(value.items, _LAZY_ROWS):
        return engine.Completed(dataclasses.replace(value, items=await threads.run_sync(_listed, value.items)))
    return outcome


def _listed(rows: Any) -> list[Any]:
    """``rows`` read (a query run), on the thread it is called in."""
    return list(rows)


def tool_function(tool: Tool) -> Callable[..., Any]:
    """What runs ``tool``: its function, between Django's connection rules of a request's start and
    end when it is sync and ``thread_sensitive=False``. asgiref runs such a tool in the loop's
    default executor, a thread no request's start or end reaches: the connection it opened there
    was never closed (``CONN_MAX_AGE = 0`` ignored) nor health-checked, and once the database
    dropped it, every later call of the tool in that thread failed on it."""
    if tool.is_async or tool.thread_sensitive:
        return tool.fn
    return functools.partial(threads._with_connection_rules, tool.fn)


async def resolve_target(method: str, params: dict[str, Any], principal: Principal) -> Target:
    """Find what ``method`` + ``params`` names and validate its arguments (-32602 otherwise).

    A tool's arguments that fail its validation are no -32602: the call is a :func:`refused_target`
    that answers the errors as the tool's own.
    """
    if method in ("tools/call", "tools/callSaga"):
        name = params.get("name")
        if not isinstance(name, str):
            raise invalid_params('"name" must be a string')
        tool = registry.get_tool(name)
        if tool is None or (tool.permissions and not await permitted(principal, tool.permissions)):
            # A tool the caller may not use is indistinguishable from one that does not exist.
            raise invalid_params(f"Unknown tool: {name}")
        if tool.input.threaded:
            return await threads.run_sync(_tool_target, name, params, tool, caller_context(principal))
        return _tool_target(name, params, tool)
    if method == "prompts/get":
        name = params.get("name")
        if not isinstance(name, str):
            raise invalid_params('"name" must be a string')
        prompt = registry.get_prompt(name)
        if prompt is None or not await permitted(principal, prompt.permissions):
            raise invalid_params(f"Unknown prompt: {name}")
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict) or not all(isinstance(v, str) for v in arguments.values()):
            raise invalid_params('"arguments" must be an object of strings')
        missing = [a["name"] for a in prompt.arguments if a["required"] and a["name"] not in arguments]
        if missing:
            raise invalid_params(f"Missing required arguments for prompt {name!r}: {', '.join(missing)}", {"missing": missing})
        known = {a["name"] for a in prompt.arguments}
        kwargs = prompt.convert_arguments({k: v for k, v in arguments.items() if k in known})
        return Target("prompts/get", name, prompt.fn, prompt.is_async, prompt.context_param, kwargs,
                      lambda value: shape_prompt(prompt, value), params)
    if method == "resources/read":
        uri = params.get("uri")
        if not isinstance(uri, str):
            raise invalid_params('"uri" must be a string')
        found = registry.find_resource(uri)
        if found is None or not await permitted(principal, found[0].permissions):
            raise ResourceNotFound(uri)
        resource, template_params = found
        return Target("resources/read", uri, resource.fn, resource.is_async, resource.context_param, template_params,
                      lambda value: shape_resource(resource, uri, value), params)
    raise McpError(INVALID_PARAMS, f"{method} cannot be called")


def target_now(method: str, params: dict[str, Any]) -> Target | None:
    """What :func:`resolve_target` resolves, when that needs nothing awaited: a ``tools/call`` of a
    registered tool that asks for no permission (most do). None for anything else, which
    :func:`resolve_target` resolves or refuses. A plain call where the flavors start a call: the
    coroutine of :func:`resolve_target` was ~0.4% of an echo's instructions."""
    if method != "tools/call":
        return None
    name = params.get("name")
    if not isinstance(name, str):
        return None
    tool = registry.get_tool(name)
    if tool is None or tool.permissions or tool.input.threaded:
        return None
    return _tool_target(name, params, tool)


def caller_context(principal: Principal) -> dict[str, Any]:
    """What a DRF view gives its serializers, for a serializer tool's: ``request``, whose ``user`` is the
    caller (what ``CurrentUserDefault`` reads; an MCP call has no HTTP request of its own to give), and
    ``user``."""
    from django.http import HttpRequest

    request = HttpRequest()
    request.method = "POST"
    request.user = principal.user
    return {"request": request, "user": principal.user}


async def tool_arguments(tool: Tool, arguments: Any, principal: Principal) -> dict[str, Any]:
    """``tool.validate_arguments(arguments)`` for ``principal``: a serializer's (``threaded``) as a DRF
    view's, in a thread with the caller in its context."""
    if not tool.input.threaded:
        return tool.validate_arguments(arguments)
    return await threads.run_sync(tool.validate_arguments, arguments, caller_context(principal))


def _tool_target(name: str, params: dict[str, Any], tool: Tool, context: dict[str, Any] | None = None) -> Target:
    """The target of a ``tools/call`` of ``tool``, which the caller may use: its arguments validated
    (a :func:`refused_target` if they fail); a ``threaded`` input's in a thread, with ``context``."""
    try:
        kwargs = tool.validate_arguments(params.get("arguments"), context)
    except InvalidArguments as exc:
        return refused_target(name, params, exc)
    return Target("tools/call", name, tool_function(tool), tool.is_async, tool.context_param, kwargs, tool.shape_result,
                  params, tool.thread_sensitive, tool)


def refused_target(name: str, params: dict[str, Any], refusal: InvalidArguments) -> Target:
    """A ``tools/call`` of ``name`` whose arguments failed validation: it runs to the ``isError``
    result that lists the errors (:meth:`InvalidArguments.to_result`).

    Input validation errors are tool execution errors, for the model to correct (both revisions'
    server/tools, Error Handling; 2025-11-25's changelog, SEP-1303): only an unknown tool or a
    request the ``CallToolRequest`` schema refuses (no name, ``arguments`` not an object) is a
    protocol error. As a call, each flavor answers it as its own result: directly, a saga's
    completion, a 2025-11-25 task's result. Its params are the ones sent, so a retry (an MRTR
    round, a resume token) whose arguments are not those its token was sealed for is still refused
    as a token of other arguments. It is no tool's call (``tool`` None): the handler never runs,
    so it needs no worker (only a 2025-11-25 task, made before anything runs, goes to one) and is
    no 2026-07-28 task.
    """
    async def refuse() -> dict[str, Any]:
        return refusal.to_result()

    return Target("tools/call", name, refuse, True, None, {}, _as_is, params)


def _as_is(result: dict[str, Any]) -> dict[str, Any]:
    return result


#: The roles a prompt message may have (``Role``, both eras).
PROMPT_ROLES = frozenset({"user", "assistant"})


def shape_prompt(prompt: Prompt, value: Any) -> dict[str, Any]:
    """A ``GetPromptResult`` from what a prompt returned: a string or a message, or a list of them.

    A message is a string (a user message), a ``(role, content)`` pair, or a ``{"role", "content"}``
    dict; content is a string or a content block (a dict or an ``mcp_types`` model). Anything else,
    and a role other than "user" or "assistant", is a TypeError (the client gets -32603).
    """
    # A 2-tuple led by a string is one (role, content) message, whatever its role (refused below unless
    # user / assistant): read as a list, ("system", "...") became two user messages, the role word one of
    # them. A 2-tuple of messages is two.
    if value is None:  # a missing return: the prompt's bug, not an empty prompt (a list, even empty, says so)
        raise TypeError(f"Prompt {prompt.name!r} returned None; return a string, a message or a list of them")
    value = lazy_text(value)
    single = isinstance(value, (str, dict)) or (isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str))
    items = [value] if single else list(value)
    messages: list[dict[str, Any]] = []
    role: Any
    content: Any
    for item in items:
        item = lazy_text(item)
        if isinstance(item, str):
            role, content = "user", item
        elif isinstance(item, tuple) and len(item) == 2:
            role, content = item
        elif isinstance(item, dict):
            role, content = item.get("role"), item.get("content")
        else:
            raise TypeError(f"Prompt {prompt.name!r} returned an unsupported message: {item!r}")
        if role not in PROMPT_ROLES:
            raise TypeError(f"Prompt {prompt.name!r} returned a message with role {role!r}; use 'user' or 'assistant'")
        block = content_block(content_to_wire(lazy_text(content)))  # a block of a known type with its keys (the client refused others)
        if block is None:
            raise TypeError(f"Prompt {prompt.name!r} returned a message whose content is not a content block: {content!r}")
        messages.append({"role": role, "content": block})
    result: dict[str, Any] = {"messages": messages}
    if prompt.description:
        result["description"] = prompt.description
    return result


def _is_resource_contents(item: Any) -> bool:
    """An item of a ``ReadResourceResult``'s ``contents``: an ``mcp_types`` model, or a dict as the
    schema's ``TextResourceContents`` / ``BlobResourceContents`` (a ``uri``, and ``text`` or ``blob``)."""
    if isinstance(item, mcp_types.ResourceContents):
        return True
    return (isinstance(item, dict) and isinstance(item.get("uri"), str)
            and (isinstance(item.get("text"), str) or isinstance(item.get("blob"), str)))


def shape_resource(resource: Resource, uri: str, value: Any) -> dict[str, Any]:
    """A ``ReadResourceResult`` from what a resource returned: ready ``contents`` (a non-empty list of
    dicts with a ``uri`` and a ``text`` or ``blob``, or of ``mcp_types`` resource contents models),
    bytes (a blob), a string (text), or any other value as JSON text (pydantic models as their JSON;
    rows that merely have a ``uri`` field, and an empty list, too)."""
    import base64

    mime = resource.mime_type
    value = lazy_text(value)
    if isinstance(value, mcp_types.ResourceContents):
        value = [value]
    if isinstance(value, list) and value and all(_is_resource_contents(item) for item in value):
        return {"contents": [content_to_wire(item) for item in value]}
    if isinstance(value, (bytes, bytearray, memoryview)):  # a BinaryField reads as a memoryview on PostgreSQL
        content: dict[str, Any] = {"uri": uri, "blob": base64.b64encode(value).decode()}
    elif isinstance(value, str):
        content = {"uri": uri, "text": value}
    else:
        content = {"uri": uri, "text": json_text(value)}
        mime = mime or "application/json"
    if mime:
        content["mimeType"] = mime
    return {"contents": [content]}


def progress_params(token: Any, row: Any, related_task: str | None = None) -> dict[str, Any]:
    """``notifications/progress`` params from a call row's progress (relayed from a worker); for the
    progress of a 2025-11-25 task (``related_task``, its id), with the related-task ``_meta`` that every
    message about a task carries (2025-11-25 tasks, "Associating Task-Related Messages")."""
    params: dict[str, Any] = {"progressToken": token, "progress": row.progress}
    if row.progress_total is not None:
        params["total"] = row.progress_total
    if row.status_message:
        params["message"] = row.status_message
    if related_task is not None:
        params["_meta"] = {versions.META_RELATED_TASK: {"taskId": related_task}}
    return params


async def send_progress(rc: RequestContext, params: dict[str, Any]) -> None:
    """Send ``notifications/progress`` on the request's stream if its value is above the last one sent there.

    The spec: the value "MUST increase with each notification" of a token, and the token is
    the request's. A value not above the last one sent (a handler reporting the same value
    twice, a worker's progress the stream got from the request's own run) is dropped. Kept
    per request (in ``rc``), never across requests: a 2026-07-28 round is a request of its own.
    """
    if rc.emit is None:
        return
    value = params["progress"]
    if rc.progress_sent is not None and not value > rc.progress_sent:
        return
    rc.progress_sent = value
    await rc.emit(jsonrpc.notification_message("notifications/progress", params))


async def relay_progress(row: Any, rc: RequestContext, related_task: str | None = None) -> None:
    """Send a call row's progress (a worker's, or another process's run) on the request's stream, if new
    there; ``related_task``: the id of the 2025-11-25 task it is the progress of (:func:`progress_params`)."""
    if row.progress is not None and rc.progress_token is not None:
        await send_progress(rc, progress_params(rc.progress_token, row, related_task))


class Runtime:
    """The engine's view of persistence and of the client (see :class:`engine.runner.Runtime`)."""

    async def run_once(self, inv: engine.Invocation, step: Step, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        with NoteUnreachable(inv):
            if inv.call_id is None:
                await ensure_row(inv, status="working")
            await claim(inv)
        assert inv.call_id is not None
        try:
            recorded = await self._run_once(inv, inv.call_id, step, fn, args, kwargs)
        except store.CallNotLive:
            # The call ended (cancelled, expired) while the handler ran: stop before the effect.
            raise asyncio.CancelledError(cancellation.SERVER_CANCEL) from None
        except store.OnceFailedElsewhere as elsewhere:
            # Another run of the call journaled this step first, as failed: it fails here as it
            # did there, and as every replay of that journal will.
            step.key, step.status, step.error, step.response, step.persisted = elsewhere.key, "failed", elsewhere.error, None, True
            raise once_exception(elsewhere.error) from None
        step.response = recorded
        step.status = "done"
        step.persisted = True
        return recorded

    @staticmethod
    async def _run_once(inv: engine.Invocation, call_id: str, step: Step, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Run ``fn`` once for ``step`` and journal it; the step's value (another run's, if it came first)."""
        if asyncio.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None)):
            # An async side effect cannot share the journal's transaction; it runs, then is journaled.
            # Checked first, as a sync one is: it does not start once a cancel has committed, nor
            # when another run journaled the step.
            with NoteUnreachable(inv):
                journaled, recorded = await store.check_once(call_id, step)
            if journaled:
                return recorded
            try:
                value = await fn(*args, **kwargs)
            except Exception as exc:
                with NoteUnreachable(inv):
                    elsewhere, recorded = await store.record_failed_once(call_id, step, exc)
                if elsewhere:  # another run's value is the step's, as for a sync effect
                    return recorded
                raise
            with NoteUnreachable(inv):  # not journaled: a takeover runs the effect again (at least once)
                _, recorded = await store.record_once(call_id, step, value)
            return recorded
        # Noted only when the store's own statements failed (its check, the step's insert, the commit):
        # the effect's own error comes out journaled as the step's outcome (``mcp_tools_journaled``).
        try:
            _, recorded = await store.run_once(call_id, step, fn, args, kwargs)
        except store.DATABASE_UNAVAILABLE as exc:
            if not getattr(exc, "mcp_tools_journaled", False) and store.database_unreachable(exc):
                inv.state["database_unreachable"] = True
            raise
        return recorded

    async def progress(self, inv: engine.Invocation, progress: float, total: float | None, message: str | None, *,
                       replaying: bool) -> None:
        if replaying:
            # The run that first got here sent it (on this stream, or to the request that had
            # the round then) and recorded it: the row holds it or a later value. Sent again,
            # the client would see the progress go back on the same token.
            return
        with NoteUnreachable(inv):
            await self._progress(inv, progress, total, message)

    @staticmethod
    async def _progress(inv: engine.Invocation, progress: float, total: float | None, message: str | None) -> None:
        rc: RequestContext = inv.state["rc"]
        if inv.call_id is not None:
            await claim(inv)  # a run that does not own its round tells the client nothing
        if message is not None and jsonrpc.unstorable_string(message) is not None:
            # No row can keep it (sql.UnstorableValue): dropped, here and on the wire alike, so the
            # client reads the same progress whether it gets it from this run or relayed from the row.
            # Failing the call for a status line would be out of proportion; rewritten, it would be
            # text the tool never wrote.
            logger.warning("%s %r: a progress message holding U+0000 or a lone surrogate was dropped",
                           inv.state["target"].method, inv.state["target"].name)
            message = None
        if inv.progress_token is not None:
            params: dict[str, Any] = {"progressToken": inv.progress_token, "progress": progress}
            if total is not None:
                params["total"] = total
            if message is not None:
                params["message"] = message
            await send_progress(rc, params)
        if inv.call_id is None:
            # No row yet: the row this call gets (it suspends, defers, runs slow) starts with the
            # highest value so far, as store.record_progress keeps it (a replay will not record it).
            held = inv.state.get("progress")
            if held is None or progress > held["progress"]:
                inv.state["progress"] = {"progress": progress, "progress_total": total, "status_message": message or ""}
            return
        try:
            recorded = await store.record_progress(inv.call_id, progress, total, message or "")
        except store.DATABASE_UNAVAILABLE as exc:
            if inv.in_worker or not store.database_unreachable(exc):
                raise  # a worker leaves its call for another run (NoteUnreachable); a statement's own failure is a bug
            # A status line the client was sent already: a database that cannot be reached for a moment
            # failed the whole call with a bare -32603 and left its row working (found by a review of
            # durability). The call goes on; its row is written again where the call next needs it.
            logger.warning("%s %r: its progress was not recorded, the database could not be reached (%s)",
                           inv.state["target"].method, inv.state["target"].name, type(exc).__name__)
            return
        if not recorded:
            # The row ended (cancelled by an operator, expired): stop at this await; one the client
            # cancelled through another process stops as its cancel does here (no response).
            if await cancellation.cancel_as_client(inv.call_id):
                await asyncio.sleep(0)  # where the cancel lands
            raise asyncio.CancelledError(cancellation.SERVER_CANCEL)
        if inv.in_worker:
            # The process holding the client's stream relays it from the row.
            await wakeups.notify(inv.call_id)

    async def log(self, inv: engine.Invocation, level: str, data: Any, logger_name: str | None, *, replaying: bool) -> None:
        rc: RequestContext = inv.state["rc"]
        if replaying:  # the run that first got here wrote it; a log line is not repeated
            return
        if rc.emit is None:
            if inv.in_worker:
                # A worker holds no client stream, and a log line has no way to the client from here
                # (progress does, through the row): it goes to the server's log, not nowhere.
                target: Target = inv.state["target"]
                tool_logger.log(_PY_LEVELS.get(level, logging.INFO), "%s %r (call %s) logged [%s]%s: %r", target.method, target.name,
                                inv.call_id, level, f" {logger_name}" if logger_name else "", data)
            return
        # The level in force now: a logging/setLevel sent while this call runs counts from then on.
        minimum = rc.log_level if rc.current_log_level is None else await rc.current_log_level()
        if minimum is None or not at_least(level, minimum):
            return
        params: dict[str, Any] = {"level": level, "data": as_json_values(data)}
        if logger_name:
            params["logger"] = logger_name
        await rc.emit(jsonrpc.notification_message("notifications/message", params))

    def resolve_tools(self, tools: Sequence[Any]) -> list[Any]:
        return registry.resolve_tools(tools)

    def tool_function(self, tool: Any) -> Callable[..., Any]:
        return tool_function(tool)

    async def tool_arguments(self, tool: Any, arguments: Any, principal: Any) -> dict[str, Any]:
        return await tool_arguments(tool, arguments, principal)

    def failure_text(self, tool: Any, exc: Exception) -> str:
        if isinstance(exc, ToolError):  # the tool's own error, written for its caller: the model reads it
            return str(exc)
        # Not the exception's text: it is the server's (a connection string, a path, a query), and the
        # model's conversation goes back to the client. What a direct tools/call answers, logged here.
        logger.exception("Tool %r failed inside sampling", tool.name)
        return internal_error_text(tool.name)

    def sampling_limits(self) -> tuple[int, int]:
        return int(mcp_settings.SAMPLING_MAX_TOOLS), int(mcp_settings.SAMPLING_MAX_TOOL_CALLS)


RUNTIME = Runtime()


class NoteUnreachable:
    """Around the store's own writes for a running handler (its progress, its row, a ``ctx.once``'s
    journal): when they find the database unreachable (``store.database_unreachable``), the run
    remembers it, and a worker's run that then fails is not ended ``failed`` for it (:func:`execute`).
    A class, not a generator: it is on the path of every progress report."""

    __slots__ = ("inv",)

    def __init__(self, inv: engine.Invocation) -> None:
        self.inv = inv

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: types.TracebackType | None) -> None:
        if isinstance(exc, store.DATABASE_UNAVAILABLE) and store.database_unreachable(exc):
            self.inv.state["database_unreachable"] = True


class RoundTaken(BaseException):
    """The round this run answers was advanced by another request (or the call ended) first.

    A ``BaseException`` so that a handler's ``except Exception`` cannot swallow it:
    the run stops at its next effect and the request settles like a stale retry.
    """


@dataclass
class PendingRound:
    """A resumed round whose answers are not written yet (see :func:`run_next_round`).

    The handler replays with the answers in memory. The round is claimed (the
    compare-and-set advance) only when the run reaches its first effect (a
    ``ctx.once`` step, recorded progress), so a round without effects writes
    once, with its outcome (:func:`save_outcome`).
    """

    round: int
    answers: dict[int, tuple[str, Any, Any]]
    digest: str
    claimed: bool = False
    won: bool = False
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


T = TypeVar("T")


async def written(write: Awaitable[T], stopped: Callable[[T], None]) -> T:
    """The value of a store ``write`` (one store call); when its run is stopped (the client left) while the
    write is in flight, the write ends all the same (it runs in a store thread), so its value goes to
    ``stopped`` before the stop goes on: what the write did decides what the stop ends
    (:func:`store.handing_over <mcp_tools.store.hop.handing_over>`: no task of its own, a round's cost)."""
    with store.handing_over(stopped):
        return await write


async def claim(inv: engine.Invocation) -> None:
    """Advance a pending round before the run's first effect; :class:`RoundTaken` if it lost."""
    pending: PendingRound | None = inv.state.get("pending_round")
    if pending is None:
        return
    async with pending.lock:  # concurrent effects (ctx.gather) claim once
        if not pending.claimed:
            def stopped(won: bool) -> None:
                # A round it advanced is this run's, which the stop must end (execute: a run taking its
                # round for unclaimed ends the call only at that round, which its write moved on).
                pending.won = pending.claimed = won

            pending.won = await written(store.advance(inv.call_id, pending.round, pending.answers, pending.digest), stopped)
            pending.claimed = True
            if pending.won:
                _watch(inv)  # the round is this run's now: watch its row (see execute)
    if not pending.won:
        raise RoundTaken()


def unclaimed_round(inv: engine.Invocation) -> PendingRound | None:
    """The pending round of a run that has not claimed it (yet), if any."""
    pending: PendingRound | None = inv.state.get("pending_round")
    return pending if pending is not None and not pending.claimed else None


async def save_outcome(inv: engine.Invocation, round_number: int, **fields: Any) -> bool:
    """Write a run's new steps and the row's ``fields`` (compare-and-set); whether this run won.

    An unclaimed pending round commits its answers, steps and outcome in one
    transaction (:func:`store.commit_round`); otherwise the round was advanced
    already and only the outcome is written (:func:`store.save_round`).
    """
    new_steps = [s for s in inv.journal.steps if not s.persisted]
    pending: PendingRound | None = inv.state.pop("pending_round", None)
    if pending is not None and not pending.claimed:
        pending.claimed = True
        try:
            committed = await store.commit_round(inv.call_id, pending.round, pending.answers, pending.digest, new_steps, **fields)
        except (UnstorableValue, TypeError):
            # Refused before anything was written (TypeError: a value JSON has no type for): the round is
            # still this run's to claim, with the outcome that replaces this one (close_row).
            pending.claimed = False
            inv.state["pending_round"] = pending
            raise
        if not committed:
            raise RoundTaken()
        return True
    # A worker's run writes only while it holds the call (another worker may have taken it over).
    return await store.save_round(inv.call_id, round_number, new_steps, held_by=inv.state.get("worker"), **fields)


async def ensure_row(inv: engine.Invocation, *, status: str) -> str:
    """Give the call its ``ToolCall`` row (with the journal so far) if it has none."""
    lock: asyncio.Lock | None = inv.state.get("row_lock")
    if lock is None:
        lock = inv.state["row_lock"] = asyncio.Lock()
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

        def stopped(call_id: str | None) -> None:  # the row is written: the stop ends its call (execute)
            inv.call_id = call_id

        inv.call_id = await written(store.create_call(
            [s for s in inv.journal.steps if not s.persisted],
            method=target.method, tool_name=target.name, arguments=row_arguments(target, inv.cursor), user=user,
            principal=rc.principal.id, protocol_version=rc.protocol_version, flavor=rc.flavor,
            params_digest=target.params_digest, client_capabilities=rc.client_capabilities,
            session_id=rc.session_id or "", request_id=jsonrpc.id_text(rc.request_id), status=status,
            scopes=sorted(rc.principal.scopes) if rc.principal.scopes is not None else None,
            stream_id=(rc.stream_id() if rc.stream_id else None) or "", progress_token=inv.progress_token,
            **{**inv.state.get("progress", {}), **inv.state.get("row_fields", {})},
        ), stopped)
        _watch(inv)
        await announce(inv, events.tool_call_started, status)


async def announce(inv: engine.Invocation, signal: Any, status: str) -> None:
    """Send a lifecycle signal (:mod:`mcp_tools.signals`) for a call whose row was just written."""
    rc: RequestContext = inv.state["rc"]
    await events.emit(signal, inv.call_id, tool_name=inv.state["target"].name, status=status,
                      principal=rc.principal.id, flavor=rc.flavor)


#: ``inv.state["task"]`` of a run in progress whose task was not looked up yet (see :func:`running_task`).
CURRENT_TASK = object()


def running_task(inv: engine.Invocation) -> asyncio.Task[Any] | None:
    """The task running ``inv``'s handler (None once the handler is done).

    :func:`execute` of a call without a row leaves it to be looked up when first needed
    (``asyncio.current_task`` is a Python function in 3.11): a call that completes in one
    step never needs it.
    """
    task = inv.state.get("task")
    if task is CURRENT_TASK:
        task = inv.state["task"] = asyncio.current_task()
    return task


def _watch(inv: engine.Invocation) -> None:
    """Stop the running handler if its call's row ends elsewhere (admin, deadline, another process)."""
    task = running_task(inv)
    if inv.call_id is not None and task is not None and "watch" not in inv.state:
        inv.state["watch"] = cancellation.CallWatch(inv.call_id, task)


def _unwatch(inv: engine.Invocation) -> None:
    """Stop watching ``inv``'s row: its handler is done, or already stopped.

    A row created after this (a suspend, or a slow call's recorder still writing) gets
    no watch: it would outlive the run (a status poll per suspended call, an entry kept).
    """
    watch = inv.state.pop("watch", None)
    if watch is not None:
        watch.close()
    inv.state["task"] = None


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


def error_result(message: str) -> dict[str, Any]:
    """A ``CallToolResult`` that reports a failure the model can read."""
    return {"content": [{"type": "text", "text": message}], "isError": True}


def ended_text(status: str) -> str:
    """What a call that ended ``status`` (cancelled, expired) before it finished says: worded for the
    status ("expired" is something a call does, "cancelled" something done to it)."""
    if status == "expired":
        return "The call expired before it finished."
    return f"The call was {status} before it finished."


def call_ended_error(status: str) -> McpError:
    """The error for a call that ended (cancelled, expired) under a request that wanted more of it."""
    return McpError(INVALID_PARAMS, ended_text(status))


def ended_answer(method: str, status: str) -> dict[str, Any]:
    """What the client gets for a ``method`` call the server ended (cancelled, expired) before it finished."""
    if method == "tools/call":
        return error_result(ended_text(status))
    raise call_ended_error(status)


async def answer_of_ended(method: str, call_id: str) -> dict[str, Any]:
    """What a run gets whose call ended before the run could write its outcome: the stored answer
    when another run of the call finished it (a retry that took the round over: identical retries
    get the identical answer), else the ended answer (cancelled, expired)."""
    status = await status_of(call_id)
    if status in ("completed", "failed"):
        loaded = await store.load_call(call_id)  # the whole row only then: its result or error
        return stored_answer(loaded[0]) if loaded is not None else ended_answer(method, "cancelled")
    return ended_answer(method, status)


def stored_answer(row: Any) -> dict[str, Any]:
    """The answer a finished (completed or failed) call's row holds: its result, or the JSON-RPC
    error it ended with (:class:`McpError`, raised) when it failed at the protocol level."""
    error = row.error
    if error:
        raise stored_error(error)
    result: dict[str, Any] = row.result or {"content": []}
    return handed_out(result)


def stored_error(error: dict[str, Any]) -> McpError:
    """The :class:`McpError` a call's row (or its ``last_outcome``) holds as its JSON-RPC error."""
    code = int(error.get("code", INTERNAL_ERROR))
    # -32021 goes out as 400 on 2026-07-28 HTTP (basic/index: "the response status MUST be 400").
    return McpError(code, str(error.get("message", "The call failed")), error.get("data"),
                    http_status=400 if code == MISSING_CLIENT_CAPABILITY else 200)


class Awaiting:
    """``await coro`` in the current task, calling ``on_wait()`` the first time it waits.

    Lets a request run a handler inline and do what only matters once the handler
    actually suspends (watch for a disconnect, arm a timer) only then: a call that
    completes in one step pays for neither. Code running in that first step can ask
    for a callback of its own at the same moment: it finds this object with
    :meth:`first_step` and sets ``also`` (and takes it back if it ends without waiting).
    """

    __slots__ = ("coro", "on_wait", "stepping", "also")

    def __init__(self, coro: Any, on_wait: Callable[[], None]) -> None:
        self.coro = coro
        self.on_wait = on_wait
        #: The first step of ``coro`` is under way (nothing else can run in this loop meanwhile).
        self.stepping = False
        self.also: Callable[[], None] | None = None

    @staticmethod
    def first_step() -> Awaiting | None:
        """The :class:`Awaiting` whose first step is running now, in this task (None if none is)."""
        current = _first_step.get()
        return current if current is not None and current.stepping else None

    def __await__(self) -> Any:
        coro = self.coro
        token = _first_step.set(self)
        self.stepping = True
        try:
            waiting = coro.send(None)
        except StopIteration as stop:
            return stop.value
        finally:
            # A task started in this step copied the context: it sees this object, not stepping.
            self.stepping = False
            _first_step.reset(token)
        self.on_wait()
        also = self.also
        if also is not None:
            self.also = None
            also()
        return (yield from _go_on(coro, waiting))


def _go_on(coro: Any, waiting: Any) -> Any:
    """The rest of ``await coro`` once its first step has run and waits on ``waiting``."""
    while True:
        try:
            sent = yield waiting
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:
            try:
                waiting = coro.throw(exc)
            except StopIteration as stop:
                return stop.value
        else:
            try:
                waiting = coro.send(sent)
            except StopIteration as stop:
                return stop.value


class Started:
    """The rest of a handler whose first step :func:`run_fresh` ran: awaiting it goes on where
    the handler waited, or raises what that step raised (so :func:`execute` sees either as if
    it had run the step itself)."""

    __slots__ = ("coro", "waiting", "error")

    def __init__(self, coro: Any, waiting: Any = None, error: BaseException | None = None) -> None:
        self.coro = coro
        self.waiting = waiting
        self.error = error

    def __await__(self) -> Any:
        if self.error is not None:
            error, self.error = self.error, None
            raise error
        return (yield from _go_on(self.coro, self.waiting))


async def run_fresh(target: Target, rc: RequestContext, *,
                    record_slow: bool = True) -> tuple[engine.Invocation | None, engine.Outcome | dict[str, Any]]:
    """Run a new call's first round: ``(invocation, outcome)`` as :func:`execute` gives it.

    Most tools are async functions without a context parameter, and most of their calls
    complete in their first step. Such a handler's first step runs here, before anything
    else is made: when it completes, the call needed no invocation (None), no timer, no
    task lookup and no watch. When it waits or raises, the invocation is made then and
    :func:`execute` takes the handler over where it stands (:class:`Started`), with all
    that a call gets (the slow-call timer, counted from before the first step, cancellation,
    failures turned into results). A first step run here is not inside an :class:`Awaiting` of
    ``execute``'s: code in it that asks :meth:`Awaiting.first_step` finds the transport's, if any,
    with no hook set yet (a nested ``execute`` sets its own). ``record_slow=False``: the run gets
    no row of its own however long it takes (a re-run of a call that has one, see :func:`_converge`).
    """
    if not target.inline:
        inv = new_invocation(target, rc)
        return inv, await execute(target, inv, record_slow=record_slow)
    started_at = time.monotonic()  # the slow-call timer and the failure log count the first step
    rest: Awaitable[Any]
    try:
        coro = target.fn(**target.kwargs)
    except BaseException as exc:
        rest = Started(None, error=exc)
    else:
        if type(coro) is not types.CoroutineType:
            # Another awaitable (a function marked as a coroutine function that returns a
            # Future): awaited as it is, under execute.
            rest = coro
        else:
            try:
                waiting = coro.send(None)
            except StopIteration as stop:
                if not holds_lazy_rows(stop.value):
                    return None, engine.Completed(stop.value)
                rest = _returning(stop.value)  # rows to read on a thread: under execute, as the handler's run
            except BaseException as exc:
                rest = Started(coro, error=exc)
            else:
                rest = Started(coro, waiting)
    inv = new_invocation(target, rc)
    inv.started = rest
    return inv, await execute(target, inv, started_at, record_slow=record_slow)


_first_step: contextvars.ContextVar[Awaiting | None] = contextvars.ContextVar("mcp_tools_first_step", default=None)


async def execute(target: Target, inv: engine.Invocation, started: float | None = None, *,
                  record_slow: bool = True) -> engine.Outcome | dict[str, Any]:
    """Run once; turn failures into what the client should see.

    Returns the outcome, or a finished wire result for failures. Protocol
    errors (:class:`McpError`) propagate as JSON-RPC errors. ``started`` is when
    the run began (``time.monotonic()``), if before now: :func:`run_fresh` ran the
    handler's first step already. ``record_slow=False``: a run without a row gets none
    after ``SLOW_CALL_SECONDS`` (it still gets one if it journals or suspends).
    """
    if started is None:
        started = time.monotonic()
    is_tool = target.method == "tools/call"
    recorder: asyncio.Future[str] | None = None
    timer: asyncio.TimerHandle | None = None
    task: asyncio.Task[Any] | None = None
    #: The user's answer (``decline``, ``cancel``) to an elicitation the handler did not catch.
    elicitation_action: str | None = None

    def record() -> None:
        nonlocal recorder
        inv.state["recording"] = True  # from here on, let the insert finish rather than cancel it
        recorder = asyncio.ensure_future(ensure_row(inv, status="working"))
        recorder.add_done_callback(functools.partial(_log_failed_write, "Could not record the slow call of %s", target.name))

    if target.tool is not None and target.tool.background and not inv.in_worker:
        return engine.Deferred()  # a background tool runs on a worker from its first line
    fresh = inv.call_id is None
    if fresh:
        inv.state["task"] = CURRENT_TASK  # looked up when first needed (running_task)
    else:
        task = asyncio.current_task()
        inv.state["task"] = task
        if unclaimed_round(inv) is None:
            # A run answering a round is watched only from its claim on: until then it has
            # written nothing, and it may be a late retry of a round another request holds,
            # whose watch (the one an operator's cancel reaches) it must not displace.
            _watch(inv)

    def first_wait() -> None:
        # The handler waits for the first time: only now can anything else run in this
        # loop, the SLOW_CALL_SECONDS timer fire or anyone stop this task. A call that
        # completes in one step (most fast calls) arms no timer and looks up no task.
        nonlocal timer, task
        task = running_task(inv)
        if fresh and record_slow:
            # A timer handle, not a task; due SLOW_CALL_SECONDS after the call started.
            delay = started + float(mcp_settings.SLOW_CALL_SECONDS) - time.monotonic()
            timer = asyncio.get_running_loop().call_later(max(0.0, delay), record)

    # Inside a request's first step (the HTTP transport runs its handler inline), the
    # transport's Awaiting tells us when the handler first waits; otherwise our own does.
    waiter = Awaiting.first_step()
    if waiter is not None and waiter.also is None:
        waiter.also = first_wait
    else:
        waiter = None
    run = engine.run(inv) if waiter is not None else Awaiting(engine.run(inv), first_wait)
    # A background tool's time_limit, on the worker: the run stops there with a tool error (the
    # call failed), not as a cancel (its row would say cancelled, and nobody cancelled it).
    time_limit = target.tool.time_limit if target.tool is not None and inv.in_worker else None
    running_here: RequestContext = inv.state["rc"]
    running_here.handler_here = True  # what a stream that closes now may leave running (transports/http.py)
    try:
        if time_limit is None:
            outcome = await run
            return await evaluated_rows(outcome) if isinstance(outcome, engine.Completed) and holds_lazy_rows(outcome.value) else outcome
        deadline = asyncio.timeout(time_limit)
        try:
            async with deadline:
                return await evaluated_rows(await run)
        except TimeoutError:
            if not deadline.expired():
                raise  # the handler's own TimeoutError: a failure like any other
        logger.info("%s %r ran out of time (%g s)", target.method, target.name, time_limit)
        message = f"The call ran out of time ({time_limit:g} s)."
    except McpError as exc:
        error = storable_error(exc, target)
        await _end_failed(inv, error)
        if error is exc:
            raise
        raise error from None
    except ToolError as exc:
        if is_tool:
            return error_result(str(exc))
        message = str(exc)
    except ElicitationDeclined:
        message = "The user declined to provide the requested input."
        elicitation_action = "decline"
    except ElicitationCancelled:
        message = "The user cancelled the request for input."
        elicitation_action = "cancel"
    except StepFailed as exc:
        message = str(exc)
    except NonDeterministicHandler as exc:
        logger.error("Non-deterministic handler %s: %s", target.name, exc)
        message = f"NonDeterministicHandler: {exc}"
    except asyncio.CancelledError as exc:
        # Stopped: by the client (notifications/cancelled, a closed 2026 stream), by an
        # operator or by the deadline. The row says so at once, whoever stopped it.
        if task is None:  # raised by the handler itself before it ever waited
            task = running_task(inv)
        if not cancellation.stop_requested(exc, task):
            # Nobody stopped it: the handler raised CancelledError itself (a library's own timeout or
            # cancel scope leaking out). A failure like any other, not a cancel: taken for one, its
            # request got no answer at all (HTTP 202) and its task ended cancelled.
            logger.error("%s %r raised CancelledError, though nothing cancelled it, after %.3fs",
                         target.method, target.name, time.monotonic() - started, exc_info=True)
            if is_tool:
                return error_result(internal_error_text(target.name))
            error = McpError(INTERNAL_ERROR, internal_error_text(target.name))
            await _end_failed(inv, error)
            raise error from None
        # Stopped once is enough: no watch may stop this run again while it writes its answer.
        _unwatch(inv)
        if recorder is not None and not recorder.done():
            with contextlib.suppress(Exception):
                await recorder
        rc: RequestContext = inv.state["rc"]
        if inv.call_id is not None and ends_when_stopped(rc, exc, task) and not inv.state.get("lease_lost"):
            # (A worker that lost its lease stops without ending the call: it is not its to end.)
            # Shielded: a second cancel must not leave the row behind the handler. A run
            # that has not claimed its round ends the call only if the row is still at
            # that round: a late retry of a round another request advanced ends nothing.
            unclaimed = unclaimed_round(inv)
            with contextlib.suppress(asyncio.CancelledError):
                reason = CLIENT_CANCELLED if rc.cancel_requested else ""
                if await asyncio.shield(store.end_call(inv.call_id, "cancelled", reason, unclaimed.round if unclaimed else None)):
                    await wakeups.notify(inv.call_id)
        elif inv.call_id is None and fresh and record_slow and kept_for_resume(rc, exc, task):
            # The server going away under a call with no row whose client can resume its stream:
            # the row it would have had past SLOW_CALL_SECONDS, for the resume to take it over.
            # (Not a converging re-run, record_slow False: the call has its row elsewhere.)
            await _keep_for_resume(inv)
        if cancellation.is_server_cancel(exc, task):
            # The client did not ask for this: it gets an answer saying so, not silence (on its
            # stream, or in the event log of a stream that closed under a running handler). A
            # stream that closed as the server stopped the call takes no answer (the transport
            # drops it), and the request ends as any other, not with the server's CancelledError.
            if task is not None and task.cancelling():
                task.uncancel()
            return await answer_of_ended(target.method, inv.call_id) if inv.call_id else ended_answer(target.method, "cancelled")
        raise
    except Exception as exc:
        if inv.in_worker and target.tool is not None and isinstance(exc, target.tool.retry_on):
            raise  # the worker retries the call (the tool's retry policy)
        if inv.in_worker and inv.state.get("database_unreachable"):
            # The store failed under the handler (the database restarted, failed over, dropped the
            # connection mid-statement): not the handler's failure. The run ends here writing
            # nothing; its lease runs out and the sweep hands the call to a worker again, which
            # replays the journal (journaled ctx.once effects do not run again).
            logger.warning("%s %r stopped: the database could not be reached (%s); the call is left for another run",
                           target.method, target.name, exc)
            raise
        logger.exception("%s %r failed after %.3fs", target.method, target.name, time.monotonic() - started)
        message = internal_error_text(target.name)
    except BaseException as exc:
        # The handler's own sys.exit() (argparse, click, a wrapped library), ``raise KeyboardInterrupt``
        # or another BaseException of a library's (pytest's outcomes, gevent's GreenletExit): a failure
        # like any other. Let out, it ended the server process (inline: asyncio lets SystemExit and
        # KeyboardInterrupt out of the event loop) or the worker's event loop (the call stayed working,
        # taken over and run again); any other came out of the ASGI app (a 500) or left a stdio request
        # unanswered. See handler_failure for what is let out all the same.
        if not handler_failure(exc):
            raise
        logger.error("%s %r raised %s after %.3fs", target.method, target.name, type(exc).__name__,
                     time.monotonic() - started, exc_info=True)
        message = internal_error_text(target.name)
    finally:
        running_here.handler_here = False
        if waiter is not None and waiter.also is first_wait:
            waiter.also = None  # done without waiting: nothing to arm
        if timer is not None:
            timer.cancel()
        if recorder is not None and not recorder.done():
            with contextlib.suppress(Exception):
                await recorder
        _unwatch(inv)
        if task is not None:
            cancellation.forget(task)
    if is_tool:
        return error_result(message)
    if elicitation_action is not None:
        # A prompt has no isError to answer it with. The user said no: the request is refused, as one
        # for an unknown prompt or without its arguments is (-32602, server/prompts, Error Handling),
        # not failed as the server's own bug (-32603). ``data.action`` says which answer ended it.
        error = McpError(INVALID_PARAMS, message, {"action": elicitation_action})
        await _end_failed(inv, error, answered=True)
        raise error
    error = McpError(INTERNAL_ERROR, message)
    await _end_failed(inv, error)
    raise error


def handler_failure(exc: BaseException) -> bool:
    """Whether ``exc``, a ``BaseException`` out of a handler or a completer that is no ``Exception``,
    is its failure (answered as any other) rather than something to let out: a real Ctrl-C
    (:func:`may_be_ctrl_c`), a cancel (``core.execute`` tells a handler's own from a stop before
    this), ``GeneratorExit`` (how Python closes the coroutine: nothing may be awaited under it, and
    a handler's own is not told apart from that), and the server's own control flow
    (:class:`RoundTaken`, the engine's suspend and defer)."""
    return not isinstance(exc, _NOT_A_FAILURE) and not may_be_ctrl_c(exc)


def may_be_ctrl_c(exc: BaseException) -> bool:
    """Whether ``exc`` out of a handler may be the user's Ctrl-C, which must stop the process, rather
    than the handler's own ``raise KeyboardInterrupt``.

    Python turns SIGINT into a ``KeyboardInterrupt`` only in the main thread, under a SIGINT handler
    that raises it (its default one; ``asyncio.run``'s, from the second Ctrl-C on: the first cancels),
    wherever that thread is, a handler's code included: there the two cannot be told apart, and it
    stops the process as it always did. The servers that run tools install a SIGINT handler of their
    own (daphne's Twisted, uvicorn, ``mcp_stdio``) or run them off the main thread (a Celery worker's
    event loop): there a ``KeyboardInterrupt`` out of a handler can only be its own.
    """
    if not isinstance(exc, KeyboardInterrupt) or threading.current_thread() is not threading.main_thread():
        return False
    handler = signal.getsignal(signal.SIGINT)
    handler = getattr(getattr(handler, "func", None), "__func__", handler)  # asyncio.run's: a partial of a bound method
    return handler is signal.default_int_handler or (_ASYNCIO_RUN_SIGINT is not None and handler is _ASYNCIO_RUN_SIGINT)


#: BaseExceptions out of a handler that are never its failure (:func:`handler_failure`).
_NOT_A_FAILURE = (asyncio.CancelledError, GeneratorExit, RoundTaken, Suspend, Defer)

#: The SIGINT handler ``asyncio.run`` installs (``asyncio.Runner._on_sigint``), if this Python's has that name.
_ASYNCIO_RUN_SIGINT = getattr(asyncio.Runner, "_on_sigint", None)


#: The rows being written for calls the server's stop left to their clients' resume (:func:`_keep_for_resume`).
_keeping: set[asyncio.Future[str]] = set()


async def _keep_for_resume(inv: engine.Invocation) -> None:
    """The server is going away under a 2025-11-25 call that has no row yet (younger than
    ``SLOW_CALL_SECONDS``, never suspended) and whose client can resume its stream: write the row a
    call past ``SLOW_CALL_SECONDS`` has (``working``, with its request, stream, progress and what it
    journaled), so that the client's resume with ``Last-Event-ID`` on another process takes the call
    over and runs it from its journal, as it does a call with a row (``session.follow``). Without it
    the resume found nothing running on the stream and ended empty: no answer, ever.

    Shielded: the process stops, and a second cancel must not leave the row half written; a failure
    (the database gone too) leaves the call as lost as it was, logged. The write starts in the step
    of the loop that delivers the cancel, so that :func:`kept_calls_written`, one turn of the loop
    later, sees it (unless the handler awaits something as it unwinds, a ``finally`` that waits:
    its write may then start after daphne has stopped).
    """
    write = asyncio.ensure_future(ensure_row(inv, status="working"))
    _keeping.add(write)
    write.add_done_callback(_keeping.discard)
    # Logged by the write itself: after a second cancel nobody awaits it.
    write.add_done_callback(functools.partial(_log_failed_write, "Could not keep a stopped call of %s for its client's resume",
                                              inv.state["target"].name))
    with contextlib.suppress(asyncio.CancelledError, Exception):  # cancelled again: the write goes on, shielded
        await asyncio.shield(write)


def _log_failed_write(what: str, name: str, write: asyncio.Future[Any]) -> None:
    """A row write of a task nobody may await (a slow call's recorder, a call kept for its resume):
    its failure logged as ``what`` (``%s``: the target's name), not left for the collector to report
    as a task exception never retrieved."""
    if not write.cancelled() and (exc := write.exception()) is not None:
        logger.warning(what, name, exc_info=exc)


async def kept_calls_written() -> None:
    """Wait until the rows :func:`_keep_for_resume` writes for calls the server's stop cut off are
    written: for each request the server cancels, before it ends.

    Daphne's shutdown cancels every application and stops its event loop as soon as the first one
    has ended (it waits on ``asyncio.gather`` of them, which a cancelled one completes), so a
    standalone ``GET`` stream that ended at once took the row of the session's running call with
    it. One turn of the loop first: the requests cancelled with this one have their cancel
    delivered by then, and any row they keep is being written.
    """
    await asyncio.sleep(0)
    loop = asyncio.get_running_loop()
    while writes := {write for write in _keeping if write.get_loop() is loop}:
        await asyncio.wait(writes)


async def _end_failed(inv: engine.Invocation, error: McpError, *, answered: bool = False) -> None:
    """A run that fails with a protocol error has ended its call for the client (it gets no token to go
    on with): the row it holds ends ``failed`` with that error, not ``working`` until ``CALL_TTL``.
    The row's ``last_outcome`` keeps the error, so an identical retry of the round gets it again
    (:func:`repeat_outcome`).

    Not a run of a round it has not claimed (a retry of a round that wrote nothing: the call stays as
    it was, and the client may retry), unless ``answered``: the error follows from the round's answers
    themselves (the user declined an elicitation), which every retry with them would meet again, so
    the answers and the failure are committed together, compare-and-set as any round's outcome
    (:class:`RoundTaken` if another retry won). Nor a call without a row, nor a worker's run (the
    worker ends its call with the error itself, lease and all: ``background.run_in_worker``).
    """
    if inv.call_id is None or inv.in_worker:
        return
    unclaimed = unclaimed_round(inv)
    if error.code == MISSING_CLIENT_CAPABILITY and inv.protocol_version in versions.MODERN_VERSIONS and unclaimed is None:
        row = await store.call_status(inv.call_id)
        if row is not None and row[0] == CallStatus.WORKING and row[1] > 0:
            # An answering round (the row advanced past 0) of a 2026-07-28 request, which declares its
            # client's capabilities itself: the client adds the one named and retries the round (the
            # error's meaning). The call stays as a round whose run stopped (its effects journaled, no
            # outcome), which a retry of the round runs again from the journal once the row is left
            # untouched (repeat_outcome's take-over): with the capability it goes on, and no effect
            # runs twice. Ended failed, every retry got -32021 again, as HTTP 200 (found by a review).
            # A first round's call ends failed as before: its client holds no requestState to retry with.
            return
    if unclaimed is not None:
        if answered:
            await save_outcome(inv, unclaimed.round + 1, status=CallStatus.FAILED, error=error.to_error(), finished_at=timezone.now(),
                               last_outcome={"round": unclaimed.round + 1, "error": error.to_error()})
        return
    row = await store.call_status(inv.call_id)
    if row is not None and row[0] == CallStatus.WORKING:
        await save_outcome(inv, row[1], status=CallStatus.FAILED, error=error.to_error(), finished_at=timezone.now(),
                           last_outcome={"round": row[1], "error": error.to_error()})


async def check_next_tool(result: dict[str, Any], rc: RequestContext) -> None:
    """Tool chaining (seed 001): keep ``_meta.nextTool`` only if the caller could make that call.

    The named tool must exist and be visible to the caller, and the arguments
    (an object; ``None`` is sent as no ``arguments``) must pass both the tool's own
    validation and its advertised ``inputSchema``, which is what a client checks
    before the hop; otherwise the hint is dropped (and logged), never sent half-right.
    """
    meta = result.get("_meta")
    hint = meta.get("nextTool") if isinstance(meta, dict) else None
    if hint is None:
        return
    assert isinstance(meta, dict)
    reason = None
    name = hint.get("tool") if isinstance(hint, dict) else None
    tool = registry.get_tool(name) if isinstance(name, str) else None
    arguments = hint.get("arguments") if isinstance(hint, dict) else None
    wire: dict[str, Any] = {}
    if tool is None or not await permitted(rc.principal, tool.permissions):
        reason = f"unknown tool {name!r}"
    elif arguments is not None and not isinstance(arguments, dict):
        reason = f"arguments must be an object, not {type(arguments).__name__}"
    else:
        try:
            await tool_arguments(tool, arguments, rc.principal)
            # The wire form: what the client will hold to the schema (a date is its ISO string there).
            wire = json.loads(jsonrpc.dumps(arguments or {}))
            errors = tool.input.schema_errors(wire)
        except McpError as exc:
            reason = f"invalid arguments: {exc.data}"
        except InvalidSchema as exc:
            reason = f"the inputSchema of {name!r} is no valid JSON Schema: {exc}"
        else:
            if errors:
                reason = f"arguments break the inputSchema of {name!r}: {'; '.join(errors)}"
    if reason is not None:
        logger.warning("Dropped _meta.nextTool from a result: %s", reason)
        del meta["nextTool"]
        if not meta:
            del result["_meta"]
    elif "arguments" in hint and arguments is None:
        # The seed's shape is ``arguments?: object``: a null would be refused by the client as malformed.
        meta["nextTool"] = {key: value for key, value in hint.items() if key != "arguments"}
    elif arguments is not None:
        # Kept in that wire form: a call's row stores the result as JSON, which a date, Decimal or UUID
        # is not (a hinted call that had asked anything, or ran on a worker, failed with -32603).
        meta["nextTool"] = {**hint, "arguments": wire}


def apply_answer(step: Step, answer: Any, key: str) -> None:
    """Check one answer against its step's request and record it (in memory)."""
    assert step.request is not None
    try:
        answer = checked_step_answer(step.request, answer)
    except InvalidAnswer as exc:
        raise invalid_params(f"Invalid input response for {key!r}: {exc}", {"key": key}) from None
    step.response = answer
    step.status = "done"


#: Builds a flavor's "input required" answer: ``(call_id, round, pending steps, journal its token
#: may carry or None) -> result`` (see :func:`seal`).
AskForInput = Callable[[str, int, list[Step], "Journal | None"], dict[str, Any]]
#: Queues a background call again and builds the flavor's "still running" answer.
Running = Callable[[str], Awaitable[dict[str, Any]]]
#: Hands a call whose handler deferred (``ctx.defer()``) at round ``n`` to a worker: ``(inv, n) -> answer``.
OnDefer = Callable[[engine.Invocation, int], Awaitable[dict[str, Any]]]
#: What a round whose handler defers answers where the flavor has no way to follow a worker (``on_defer`` None).
CANNOT_FOLLOW_WORKER = "This tool continues on a background worker, which this kind of call cannot follow."


def invalid_token(purpose: str) -> McpError:
    """The one error every refused ``requestState`` / ``sagaToken`` gets (the log says why)."""
    return invalid_params(f"Invalid or expired {'requestState' if purpose == 'request' else 'sagaToken'}")


async def finish(inv: engine.Invocation | None, target: Target, outcome: Any, rc: RequestContext, round_number: int, **fields: Any) -> dict[str, Any]:
    """Wire result of a finished run; closes the row if there is one (with ``fields`` of the row).

    ``inv`` is None for a call :func:`run_fresh` completed without one (it has no row).
    """
    if isinstance(outcome, engine.Completed) and isinstance(outcome.value, Pending) and not client_resumes(rc):
        if inv is not None and inv.call_id is not None:
            await claim(inv)  # run the tool again only for the run that owns the round
        inv, outcome = await _converge(inv, target, rc, outcome)
    try:
        result = outcome if isinstance(outcome, dict) else shape_result(target, outcome.value, rc)
    except McpError as exc:  # a prompt's or resource's value that cannot be its result
        if inv is not None:
            await _end_failed(inv, exc)
        raise
    if target.method == "tools/call" and "_meta" in result:  # where a nextTool hint would be
        await check_next_tool(result, rc)
    if mcp_settings.RECORD_ALL_CALLS and (inv is None or inv.call_id is None):
        if inv is None:
            inv = new_invocation(target, rc)
        await ensure_row(inv, status="working")
    if inv is not None and inv.call_id is not None:
        closed = await close_row(inv, round_number, result, **fields)
        if closed is None:
            # Another run's outcome, a cancel or an expiry committed first: the row keeps it, and the client is told so.
            return await answer_of_ended(target.method, inv.call_id)
        return closed
    return result


def shape_result(target: Target, value: Any, rc: RequestContext) -> dict[str, Any]:
    """The wire result of a handler's return value; a value that cannot be one (its structured
    content does not match the tool's outputSchema, bytes that are not text) is the tool's error."""
    try:
        return shape_value(target, value, rc)
    except Exception:
        logger.exception("%s %r returned a value that cannot be its result", target.method, target.name)
        if target.method != "tools/call":
            raise McpError(INTERNAL_ERROR, f"{target.name!r} returned a value that cannot be its result") from None
        return error_result(f"The tool {target.name!r} returned a result that does not match its output schema; "
                            "the server log has the details.")


async def close_row(inv: engine.Invocation, round_number: int, result: dict[str, Any], **fields: Any) -> dict[str, Any] | None:
    """Finish the call's row with its wire result (compare-and-set): the result it holds now, None if
    a cancel or expiry won.

    A result the store refuses (a string holding U+0000 or a lone surrogate, which no column here
    keeps: a tool's return value, its ``ToolError`` text) is logged and replaced by a tool error, so
    that the call ends ``failed`` at once; a prompt's or resource's ends with -32603. Left to fail,
    a worker's call stayed live until its lease ran out and ran again (its effects twice).
    """
    assert inv.call_id is not None
    try:
        try:
            won = await _save_result(inv, round_number, result, **fields)
        except TypeError:
            # A hand-built result holding values JSON has no type for (a datetime, UUID or Decimal in a
            # ToolResult's _meta or structured_content): the wire writes them as their text (jsonrpc.dumps),
            # and the row keeps that wire form. They failed the call (-32603) where it had a row.
            result = json.loads(jsonrpc.dumps(result))
            won = await _save_result(inv, round_number, result, **fields)
    except UnstorableValue as exc:
        target: Target = inv.state["target"]
        logger.error("%s %r (call %s) returned a result that cannot be stored: %s", target.method, target.name, inv.call_id, exc)
        if target.method != "tools/call":
            error = McpError(INTERNAL_ERROR, f"{target.name!r} returned a value that cannot be its result")
            # Every run of the round returns it again: the round's answers and the failure commit together.
            await _end_failed(inv, error, answered=True)
            raise error from None
        result = error_result(f"The tool {target.name!r} returned a result that cannot be stored: {jsonrpc.UNSTORABLE_TEXT}.")
        won = await _save_result(inv, round_number, result, **fields)
    if not won:
        return None
    failed = bool(result.get("isError"))
    await wakeups.notify(inv.call_id)
    await announce(inv, events.tool_call_failed if failed else events.tool_call_finished, "failed" if failed else "completed")
    return result


async def _save_result(inv: engine.Invocation, round_number: int, result: dict[str, Any], **fields: Any) -> bool:
    """Write the row's end with ``result`` (:func:`save_outcome`); whether this run won."""
    failed = bool(result.get("isError"))
    return await save_outcome(
        inv, round_number, status="failed" if failed else "completed", result=result,
        finished_at=timezone.now(), last_outcome={"round": round_number, "answer": result}, **fields,
    )


async def _converge(inv: engine.Invocation | None, target: Target, rc: RequestContext,
                    outcome: engine.Completed, deadline: float | None = None,
                    states: list[Any] | None = None) -> tuple[engine.Invocation | None, Any]:
    """Run a converging tool again until it stops answering :class:`Pending` (for clients without
    resume tokens); ``(invocation whose row is the call's, outcome)``.

    The re-runs are the same call. While the call has no row, a re-run that outlasts
    ``SLOW_CALL_SECONDS`` records one as any call does, and that row becomes the call's
    (:func:`finish` closes it with the final result); once the call has a row, re-runs record
    none of their own. No re-run starts past ``deadline`` (``time.monotonic()``; by default
    ``CONVERGE_WAIT_SECONDS`` from now). A worker's run is re-run on the worker (:func:`converge_on_worker`).
    ``states`` gets each state a re-run answers, for a caller that cuts the polls short.
    """
    if deadline is None:
        deadline = time.monotonic() + float(mcp_settings.CONVERGE_WAIT_SECONDS)
    while isinstance(outcome.value, Pending) and time.monotonic() + outcome.value.poll_seconds < deadline:
        await asyncio.sleep(outcome.value.poll_seconds)
        has_row = inv is not None and inv.call_id is not None
        if inv is not None and inv.in_worker:
            rerun, again = await _rerun_on_worker(inv, target, rc)
        else:
            rerun, again = await run_fresh(target, rc, record_slow=not has_row)
        ended = None if isinstance(again, engine.Completed) else (
            again if isinstance(again, dict) else error_result("A converging tool may not ask for input."))
        if rerun is not None and rerun.call_id is not None:
            if not has_row:
                inv = rerun
            else:
                # The re-run journaled a step (ctx.once), which gave it a row of its own even so:
                # that run is over, and its row says how it ended.
                await close_row(rerun, 0, ended or shape_result(target, again.value, rc))  # type: ignore[union-attr]
        if ended is not None:
            return inv, ended
        assert isinstance(again, engine.Completed)
        outcome = again
        if states is not None:
            states.append(again)
    return inv, outcome


async def _rerun_on_worker(inv: engine.Invocation, target: Target,
                          rc: RequestContext) -> tuple[engine.Invocation | None, engine.Outcome | dict[str, Any]]:
    """A converging re-run of the call the worker's run ``inv`` runs: on this worker too (a background
    tool's handler defers at once anywhere else), for the same page (``inv.cursor``). The call has its
    row (the worker's): the re-run records none of its own past ``SLOW_CALL_SECONDS``."""
    rerun = new_invocation(target, rc)
    rerun.in_worker = True
    rerun.cursor = inv.cursor
    return rerun, await execute(target, rerun, record_slow=False)


async def converge_on_worker(inv: engine.Invocation, target: Target, rc: RequestContext, outcome: Any,
                             started: float) -> Any:
    """The outcome of a worker's run (``inv``, begun at ``started``, ``time.monotonic()``), converged
    for a client without resume tokens: run again on this worker every ``poll_seconds`` while it
    answers :class:`Pending` (:func:`_converge`), for up to ``CONVERGE_WAIT_SECONDS``, as a request
    would hold its client. Other outcomes, and any for a client that resumes, are returned as they are.

    The worker calls this while it still renews its lease: the polls outlast a lease
    (``WORKER_LEASE_SECONDS``), and a lapsed one would let the sweep hand the call to another worker,
    which would run it (and answer the client) a second time. A tool's ``time_limit`` bounds the whole
    run, polls included (Celery's hard limit is that plus a lease): the state then is the result, as
    when ``CONVERGE_WAIT_SECONDS`` runs out, shaped here so that :func:`finish` takes it as it is and
    does not converge again off the worker. A lease lost meanwhile stops the polls: the caller finds
    ``inv.state["lease_lost"]`` and writes nothing.
    """
    if not (isinstance(outcome, engine.Completed) and isinstance(outcome.value, Pending)) or client_resumes(rc):
        return outcome
    deadline = time.monotonic() + float(mcp_settings.CONVERGE_WAIT_SECONDS)
    time_limit = target.tool.time_limit if target.tool is not None else None
    stop_at = None  # when the time limit runs out, on the loop's clock
    if time_limit is not None:
        deadline = min(deadline, started + time_limit)
        stop_at = asyncio.get_running_loop().time() + (started + time_limit - time.monotonic())
    first = outcome
    states = [outcome]
    try:
        # A re-run stops at the time limit too: one begun before it may take as long again.
        async with asyncio.timeout_at(stop_at):
            _, outcome = await _converge(inv, target, rc, outcome, deadline, states)
    except TimeoutError:
        outcome = states[-1]  # the state when the time ran out: the last re-run that finished
    except asyncio.CancelledError:
        if not inv.state.get("lease_lost"):
            raise
        task = asyncio.current_task()  # stopped by the lease keeper: the run ends quietly, writing nothing
        if task is not None:
            task.uncancel()
            cancellation.forget(task)
        return first
    if isinstance(outcome, engine.Completed) and isinstance(outcome.value, Pending):
        return shape_result(target, outcome.value, rc)
    return outcome


async def status_of(call_id: str) -> str:
    """The status of a call's row (``cancelled`` when it is gone)."""
    row = await store.call_status(call_id)
    return row[0] if row else "cancelled"


async def suspend(inv: engine.Invocation, rc: RequestContext, round_number: int, *, settle_taken: bool = False,
                  **fields: Any) -> str:
    """Persist a call that waits for input (with ``fields`` of the call row); returns its id.

    ``settle_taken``: a run whose write lost to another run of the same round, the call still live
    (one took the round over from the other, and both got this far), raises :class:`RoundTaken`,
    for its request to answer with what the other run stored, as a stale retry's does.
    """
    if inv.call_id is None:
        await ensure_row(inv, status="input_required")
    elif not await save_outcome(inv, round_number, status="input_required", **fields):
        status = await status_of(inv.call_id)
        if settle_taken and status not in TERMINAL_STATUSES:
            raise RoundTaken()
        raise call_ended_error(status)
    else:
        await wakeups.notify(inv.call_id)
    await announce(inv, events.tool_call_suspended, "input_required")
    assert inv.call_id is not None
    return inv.call_id


#: A token carries the call's journal only while it stays this short (a token is refused past 4,096).
CARRIED_TOKEN_MAX_CHARS = 2048


def seal(purpose: str, call_id: str, round_number: int, rc: RequestContext, target: Target, carry: Journal | None = None) -> str:
    """A token for one round of one call, bound to the caller, the method and the parameters.

    With ``carry`` (the call's whole journal as the row holds it at this round, see
    :func:`carriable`), the token also carries its steps, so the answering round can
    run without reading the row first (:func:`carried_call`).
    """
    payload: dict[str, Any] = {"c": call_id, "r": round_number, "p": tokens.principal_tag(rc.principal.id), "m": target.method,
                               "d": target.params_digest}
    if carry is not None:
        payload["j"] = [[s.seq, s.kind, s.key, s.digest, s.request, s.status, s.response, s.error] for s in carry.steps]
        token = tokens.seal(purpose, payload)
        if len(token) <= CARRIED_TOKEN_MAX_CHARS:
            return token
        del payload["j"]  # large requests (sampling with long messages) stay in the row only
    return tokens.seal(purpose, payload)


def carriable(journal: Journal) -> Journal | None:
    """The journal a token may carry: one of client steps only (elicitation, sampling, roots).

    Pass the journal exactly as the row holds it for the round the token is for.
    Everything in it came from the client or was shown to it (the requests, the
    client's own answers); a ``ctx.once`` step holds a server-side value that the
    token, signed but not encrypted, must not reveal, so a journal with one is not
    carried, nor one with a step that keeps its model's whole schema for the server
    (``answerSchema``, see ``Step.wire_request``). Only an advance of the round changes a
    row's journal.
    """
    steps = journal.steps
    # Nor one whose request keeps a schema for the server alone (a model's answerSchema: never sent).
    if steps and all(step.kind != "once" and step.wire_request is step.request for step in steps):
        return journal
    return None


def bound_to(payload: dict[str, Any], principal_id: str, method: str) -> bool:
    """Whether an unsealed token's ``payload`` is for this caller and this method."""
    return tokens.names_principal(payload.get("p"), principal_id) and payload.get("m") == method


def open_token(purpose: str, token: Any, rc: RequestContext, target_digest: str | None, method: str) -> dict[str, Any]:
    """A token's payload, if it is genuine, unexpired and bound to this caller and request."""
    error = invalid_token(purpose)
    try:
        payload = tokens.unseal(purpose, token)
    except tokens.InvalidToken:
        raise error from None
    if not bound_to(payload, rc.principal.id, method) or (target_digest is not None and payload.get("d") != target_digest):
        logger.info("Refused %s token: bound to another principal, method or parameters", purpose)
        raise error
    return payload


async def load_token_call(purpose: str, payload: dict[str, Any]) -> tuple[Any, Journal]:
    """The call an opened token names, with its journal; refused if it is gone or expired."""
    loaded = await store.load_call(payload.get("c"))
    if loaded is None:
        logger.info("Refused %s token: call %s is gone", purpose, payload.get("c"))
        raise invalid_token(purpose)
    call, journal = loaded
    if call.status == "expired" or (call.expires_at and call.expires_at < timezone.now() and not call.is_terminal):
        logger.info("Refused %s token: call %s expired", purpose, call.id)
        if call.status != "expired":
            await store.end_call(call.id, "expired")
        raise invalid_token(purpose)
    return call, journal


async def load_bound_call(purpose: str, token: Any, rc: RequestContext, target_digest: str | None, method: str) -> tuple[dict[str, Any], Any, Journal]:
    """The call a token names, with its journal, if the token is valid for this caller and request."""
    payload = open_token(purpose, token, rc, target_digest, method)
    call, journal = await load_token_call(purpose, payload)
    return payload, call, journal


@dataclass
class CarriedCall:
    """A suspended call as its token carries it: what the answering round needs of the row.

    Only a journal of client steps is carried (:func:`carriable`), and only by the
    tokens of calls that run in the request (a background call's tokens are made
    from its row and carry nothing). Whether the row still agrees (same round,
    still waiting for input, not expired) is proved by the compare-and-set that
    writes the round (:func:`claim`, :func:`save_outcome`); when it does not,
    :class:`NotCurrent` sends the request down the path that reads the row.
    """

    id: str
    round: int
    status: str = "input_required"
    background: bool = False


class NotCurrent(Exception):
    """The journal a token carried is not the row's any more (or the answers need the row to judge)."""


def carried_call(payload: dict[str, Any]) -> tuple[CarriedCall, Journal] | None:
    """The call and journal a genuine token carries, or None (it carries none)."""
    packed, call_id, round_number = payload.get("j"), payload.get("c"), payload.get("r")
    if not isinstance(packed, list) or not isinstance(call_id, str) or type(round_number) is not int:
        return None
    try:
        steps = [Step(seq=seq, kind=kind, key=key, digest=step_digest, request=request, status=status, response=response,
                      error=error, persisted=True)
                 for seq, kind, key, step_digest, request, status, response, error in packed]
    except (TypeError, ValueError):
        return None
    return CarriedCall(call_id, round_number), Journal(steps)


async def advance_and_run(
    call: Any, journal: Journal, round_number: int, responses: dict[str, Any], target: Target,
    rc: RequestContext, *, purpose: str, ask: AskForInput, running: Running | None = None,
    on_defer: OnDefer | None = None, on_worker: Running | None = None, answers_digest: str | None = None,
    stopped_on_worker: Callable[[str], Awaitable[None]] | None = None,
) -> dict[str, Any]:
    """Apply a client's answers to a suspended round, then run the next round.

    ``ask`` builds the flavor's answer when the call needs input again. Stale or
    concurrent retries of a round are settled by :func:`repeat_outcome` (``on_worker``:
    the flavor's answer for a call a worker runs now, without queueing it again), by
    ``answers_digest``: the digest of everything the client sent, ``responses`` by default.
    ``stopped_on_worker``: what the flavor does with a background call whose answers this request
    recorded when the request is stopped before ``running`` has it (see :func:`run_next_round`).
    """
    if answers_digest is None:
        answers_digest = digest(responses)
    carried = isinstance(call, CarriedCall)
    if call.status == "cancelled":
        # The caller's own token for a call that was cancelled: say so, not "invalid token".
        return ended_answer(target.method, call.status)
    if call.round != round_number:
        async def take_over() -> dict[str, Any]:
            return await rerun_round(call.id, round_number + 1, target, rc, ask=ask, on_defer=on_defer)

        return await repeat_outcome(call.id, round_number, answers_digest, purpose, take_over, on_worker)
    if call.status != "input_required":
        raise invalid_token(purpose)
    try:
        answers = _answers(journal, responses)
    except McpError:
        if carried:  # a cancelled or advanced call answers otherwise: let the row decide
            raise NotCurrent() from None
        raise
    if not answers:
        if carried:
            raise NotCurrent()
        # Nothing new: ask again with the same round's token.
        return ask(str(call.id), round_number, journal.pending, carriable(journal))
    return await run_next_round(call, journal, round_number, answers, answers_digest, target, rc, purpose=purpose, ask=ask,
                                running=running, on_defer=on_defer, on_worker=on_worker, stopped_on_worker=stopped_on_worker)


def _answers(journal: Journal, responses: dict[str, Any]) -> dict[int, tuple[str, Any, Any]]:
    """Check the client's answers against the journal's pending steps and apply them (in memory).

    Answers to steps that are not pending are ignored (never journaled): the 2026-07-28 spec's rule
    for keys a server does not recognize or need. (The saga flavor refuses step ids its call never
    asked for before it gets here: its history names every step.)
    """
    pending = {step.key: step for step in journal.pending}
    answers: dict[int, tuple[str, Any, Any]] = {}
    for key, step in pending.items():
        if key in responses:
            apply_answer(step, responses[key], key)
            answers[step.seq] = ("done", step.response, None)
    return answers


async def run_next_round(
    call: Any, journal: Journal, round_number: int, answers: dict[int, tuple[str, Any, Any]], answers_digest: str,
    target: Target, rc: RequestContext, *, purpose: str, ask: AskForInput, running: Running | None = None,
    on_defer: OnDefer | None = None, on_worker: Running | None = None,
    stopped_on_worker: Callable[[str], Awaitable[None]] | None = None,
) -> dict[str, Any]:
    """Run the handler again with ``answers``, and record them with a compare-and-set on the round.

    The answers are written when the run reaches its first effect (then the round
    is advanced before the effect runs, see :func:`claim`) or, for a run without
    effects, together with its outcome in one transaction. Either way exactly one
    of concurrent retries of the round wins; the others get :func:`repeat_outcome`.
    A background call goes back to a worker instead (advanced first), and the
    client gets the flavor's ``running`` answer (when the flavor has one).
    """
    if call.background and running is not None:
        advanced = False

        def stopped(won: bool) -> None:
            nonlocal advanced
            advanced = won

        try:
            advanced = await written(store.advance(call.id, round_number, answers, answers_digest, on_worker=True), stopped)
            if not advanced:
                return await repeat_outcome(call.id, round_number, answers_digest, purpose, on_worker=on_worker)
            return await running(str(call.id))
        except asyncio.CancelledError:
            # Stopped (the client left) once its answers were in: the call, taken from the client, must
            # not wait for a worker nobody queued (the flavor ends it, or queues it).
            if advanced and stopped_on_worker is not None:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await asyncio.shield(stopped_on_worker(str(call.id)))
            raise
    next_round = round_number + 1
    inv = new_invocation(target, rc, journal, str(call.id))
    # The page the call runs (a paginate=True tool's), which its row keeps; a token's carried call
    # has none: only a first page (no cursor) can suspend in the request (resume.run_again).
    inv.cursor = row_cursor(getattr(call, "arguments", None))
    for step in journal.steps:
        step.persisted = True
    inv.state["pending_round"] = PendingRound(round_number, answers, answers_digest)
    try:
        outcome = await execute(target, inv)
        if isinstance(outcome, engine.NeedsInput):
            answer = ask(str(call.id), next_round, outcome.pending, carriable(inv.journal))
            # The answer is stored with the round, so an identical retry gets the very same one.
            await suspend(inv, rc, next_round, settle_taken=True, last_outcome={"round": next_round, "answer": answer})
            return answer
        if isinstance(outcome, engine.Deferred):
            if on_defer is None:
                # The call ends here, as the client is told: not a working row no worker runs.
                return await finish(inv, target, error_result(CANNOT_FOLLOW_WORKER), rc, next_round)
            try:
                await claim(inv)  # the answers are recorded (and the round advanced) before the worker runs
                return await on_defer(inv, next_round)
            except asyncio.CancelledError as exc:
                await end_before_hand_off(inv, exc)
                raise
        return await finish(inv, target, outcome, rc, next_round)
    except RoundTaken:
        if isinstance(call, CarriedCall):
            raise NotCurrent() from None  # nothing was written: answer from the row instead
        # Another retry advanced the round first, or the call ended meanwhile.
        row = await store.call_status(call.id)
        if row is not None and row[1] == round_number and row[0] in ("cancelled", "expired"):
            return ended_answer(target.method, row[0])
        return await repeat_outcome(call.id, round_number, answers_digest, purpose, on_worker=on_worker)
    except McpError:
        # A protocol error of a run that wrote nothing (its round unclaimed: the next step needs a
        # capability the client did not declare, say), when the call ended meanwhile (an operator
        # cancelled or expired it while the client answered): the call's end is the answer, as for
        # a round that another request took, not an error about a step that will never run.
        if unclaimed_round(inv) is None:
            raise
        row = await store.call_status(call.id)
        if row is None or row[1] != round_number or row[0] not in ("cancelled", "expired"):
            raise
        if isinstance(call, CarriedCall):
            raise NotCurrent() from None
        return ended_answer(target.method, row[0])


async def end_before_hand_off(inv: engine.Invocation, exc: asyncio.CancelledError) -> None:
    """A run stopped after its handler deferred (a fresh call, or a round it advanced) and before a worker
    was handed the call (``background.defer`` sets ``handed_off``): nobody would run it (or the sweep
    would, for a client that is gone), so the stop ends the call, as it ends a running handler's
    (:func:`execute`); a round another request advanced is not this one's."""
    pending: PendingRound | None = inv.state.get("pending_round")
    rc: RequestContext = inv.state["rc"]
    if inv.state.get("handed_off") or (pending is not None and not pending.won) or inv.call_id is None \
            or not ends_when_stopped(rc, exc, asyncio.current_task()):
        return
    with contextlib.suppress(asyncio.CancelledError):
        if await asyncio.shield(store.end_call(inv.call_id, "cancelled", CLIENT_CANCELLED if rc.cancel_requested else "")):
            await wakeups.notify(inv.call_id)


async def rerun_round(
    call_id: Any, round_number: int, target: Target, rc: RequestContext, *, ask: AskForInput, on_defer: OnDefer | None,
) -> dict[str, Any]:
    """Run a call's current round again from its journal (its answers are recorded already)."""
    loaded = await store.load_call(call_id)
    if loaded is None:
        return ended_answer(target.method, "cancelled")
    row, journal = loaded
    inv = new_invocation(target, rc, journal, str(call_id))
    inv.cursor = row_cursor(row.arguments)  # the page the call runs (a paginate=True tool's)
    outcome = await execute(target, inv)
    if isinstance(outcome, engine.NeedsInput):
        answer = ask(str(call_id), round_number, outcome.pending, carriable(inv.journal))
        await suspend(inv, rc, round_number, settle_taken=True, last_outcome={"round": round_number, "answer": answer})
        return answer
    if isinstance(outcome, engine.Deferred):
        if on_defer is None:
            return await finish(inv, target, error_result(CANNOT_FOLLOW_WORKER), rc, round_number)
        return await on_defer(inv, round_number)
    return await finish(inv, target, outcome, rc, round_number)


async def repeat_outcome(
    call_id: Any, round_number: int, answers_digest: str, purpose: str,
    take_over: Callable[[], Awaitable[dict[str, Any]]] | None = None, on_worker: Running | None = None,
) -> dict[str, Any]:
    """A retry of a round that already advanced: identical answers get the identical outcome.

    If the process that advanced the round died before its outcome (the row stays
    untouched), ``take_over`` runs the round again here from the journal, where the
    answers are recorded: the call stays resumable instead of stuck ``working``. A round
    that went on a worker (its ``last_outcome`` says ``on_worker``) answers as the flavor
    answers for a call on a worker (``on_worker``), until the worker's outcome is there.
    """
    deadline = time.monotonic() + 30
    poll = float(mcp_settings.CANCEL_POLL_SECONDS)
    while True:
        row = await store.call_status(call_id)
        if row is None:
            break
        status, current_round, last_outcome, digest_now = row
        if current_round != round_number + 1 or digest_now != answers_digest:
            break
        if last_outcome and last_outcome.get("round") == round_number + 1:
            if "answer" in last_outcome:
                return last_outcome["answer"]
            if "error" in last_outcome:  # the round ended the call with a protocol error (_end_failed)
                raise stored_error(last_outcome["error"])
            if last_outcome.get("on_worker") and on_worker is not None:
                return await on_worker(str(call_id))
        if take_over is not None and poll > 0 and status == "working" and \
                await store.take_over_round(call_id, round_number + 1, answers_digest, 3 * poll):
            logger.warning("Call %s: the process running round %s is gone; this request runs it again", call_id, round_number + 1)
            try:
                return await take_over()
            except RoundTaken:
                # It was not gone, only stalled (a blocked event loop, a paused process), and wrote the
                # round first: its stored outcome is the answer, read on the next pass.
                take_over = None
                continue
        if time.monotonic() > deadline:
            raise McpError(INTERNAL_ERROR, "The round is still being processed; retry later")
        await asyncio.sleep(0.02)
    logger.info("Refused replayed %s token for call %s round %s", purpose, call_id, round_number)
    raise invalid_token(purpose)


#: The status message of a call the client stopped (its ``notifications/cancelled``; the store's, which
#: a process's row check reads to stop the request as the client's cancel, with no response).
CLIENT_CANCELLED = store.CLIENT_CANCELLED


async def end_call(call_id: str, status: str = "cancelled", message: str = "") -> bool:
    """Cancel or expire a call from outside (the admin, a task cancel, cleanup).

    Marks the row first (compare-and-set: only a live call moves, and False says
    it had ended already), then stops its handler wherever it runs and wakes
    whoever waits on it, so the client's wait ends with the cancellation.
    """
    if not await store.end_call(call_id, status, message):
        return False
    await after_end(str(call_id))
    return True


def end_call_sync(call_id: str, status: str = "cancelled", message: str = "") -> bool:
    """:func:`end_call` for sync code (the admin, management commands, Celery workers)."""
    if not store.sync_calls.end_call(call_id, status, message):
        return False
    async_to_sync(after_end)(str(call_id))
    return True


def abandon_sync(request_state: Any, principal: Principal, message: str) -> bool:
    """The only client of a call gives up on it while it waits for input: end it cancelled.

    ``request_state`` is the ``requestState`` of the round the client stopped at
    (an in-process client such as ``manage.py mcp_call`` that fails on ``--no-input``,
    a closed stdin or Ctrl-C). Nobody else holds that token, so without this the row
    would show the call waiting for its user until ``CALL_TTL`` expires it. A token
    that does not open, or is another principal's, ends nothing (False), as does a
    call that has ended already.
    """
    try:
        payload = tokens.unseal("request", request_state)
    except tokens.InvalidToken:
        return False
    if not tokens.names_principal(payload.get("p"), principal.id) or not payload.get("c"):
        return False
    return end_call_sync(str(payload["c"]), "cancelled", message)


async def after_end(call_id: str) -> None:
    """A call's row has ended: stop its handler wherever it runs and wake its waiters.

    A background call's Celery message still queued is not revoked: a worker that takes it finds the
    call ended and does nothing (``claim_for_worker``), and Celery's revoke logs a warning on every
    worker when there is no result backend, which background work does not need (docs/background.md).
    """
    await cancellation.stop_call(call_id)
    await wakeups.notify(call_id)
