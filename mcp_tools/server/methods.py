"""The method table: what each MCP method does, for both protocol eras.

Transports parse and authenticate; this module answers. It knows nothing
about HTTP, only :class:`~mcp_tools.server.context.RequestContext`.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import dataclasses
import functools
import logging
from collections.abc import Awaitable, Callable
from importlib.metadata import PackageNotFoundError, version as package_version
from typing import Any

from asgiref.sync import sync_to_async
from django.core.signals import setting_changed
from django.dispatch import receiver

from .. import store
from ..conf import RELOAD_ON, mcp_settings
from ..protocol import versions
from ..protocol.errors import INTERNAL_ERROR, INVALID_REQUEST, McpError, ResourceNotFound, invalid_params, method_not_found
from ..protocol.levels import LOG_LEVELS
from ..registry import registry
from ..registry.registry import takes_caller
from ..registry.results import Completions
from . import sessions, threads
from .context import RequestContext
from .core import handler_failure, holds_lazy_rows, permitted
from .flavors import mrtr, resume, saga, session, tasks

logger = logging.getLogger("mcp_tools.server")

Handler = Callable[[dict[str, Any], RequestContext], Awaitable[dict[str, Any]]]


_server_info: dict[str, Any] | None = None


def reset_server_info() -> None:
    global _server_info
    _server_info = None


@receiver(setting_changed)
def _reset_on_setting_change(*, setting: str, **kwargs: Any) -> None:
    if setting in RELOAD_ON:
        reset_server_info()


def server_info() -> dict[str, Any]:
    """``serverInfo``; computed once (looking up the package version scans installed packages)."""
    global _server_info
    if _server_info is None:
        _server_info = _build_server_info()
    return _server_info


def _build_server_info() -> dict[str, Any]:
    name = mcp_settings.SERVER_NAME
    ver = mcp_settings.SERVER_VERSION
    if ver is None:
        try:
            ver = package_version("django-mcp-tools")
        except PackageNotFoundError:
            ver = "0.0.0"
    info = {"name": name, "version": ver}
    if mcp_settings.SERVER_TITLE:
        info["title"] = mcp_settings.SERVER_TITLE
    return info


def capabilities(modern: bool) -> dict[str, Any]:
    """The server's capabilities in either era (``initialize`` or ``server/discover``).

    Both eras declare ``logging`` (the server sends ``notifications/message``; in 2026-07-28 the
    request's ``_meta`` asks for them instead of ``logging/setLevel``) and resources ``subscribe``
    (2026-07-28: updates of the URIs a ``subscriptions/listen`` lists in ``resourceSubscriptions``).
    """
    caps: dict[str, Any] = {
        "tools": {"listChanged": True},
        "resources": {"subscribe": True, "listChanged": True},
        "prompts": {"listChanged": True},
        "completions": {},
        "logging": {},
    }
    # Seed extensions: tool chaining (results may carry _meta.nextTool, checked against the
    # caller) and resume tokens (seed 002) always; sagas (seed 000) when enabled.
    experimental: dict[str, Any] = {"nextTool": {}, "resumeTokens": {}}
    if mcp_settings.ENABLE_SAGAS:
        experimental["sagas"] = {"methods": ["tools/callSaga", "tools/resumeSaga"]}
    caps["experimental"] = experimental
    if modern:
        caps["extensions"] = {tasks.EXTENSION: {}}
    else:
        caps["tasks"] = tasks.LEGACY_CAPABILITY
    return caps


# -- cursors ------------------------------------------------------------------------------

def _page(items: list[Any], params: dict[str, Any]) -> tuple[list[Any], str | None]:
    size = int(mcp_settings.PAGE_SIZE)
    cursor = params.get("cursor")
    start = 0
    if cursor is not None:
        try:
            if not isinstance(cursor, str):
                raise ValueError
            start = int(base64.urlsafe_b64decode(cursor.encode()).decode())
            if start < 0 or start > len(items):
                raise ValueError
        except (ValueError, binascii.Error, UnicodeDecodeError):
            raise invalid_params("Invalid cursor") from None
    end = start + size
    next_cursor = base64.urlsafe_b64encode(str(end).encode()).decode() if end < len(items) else None
    return items[start:end], next_cursor


async def _visible(items: list[Any], rc: RequestContext) -> list[Any]:
    """The items the caller may use (a tool the caller may not call is not listed)."""
    if not any(item.permissions for item in items):
        return items
    if rc.principal.is_anonymous:
        return [item for item in items if not item.permissions]
    principal = rc.principal
    return await threads.run_sync(lambda: [i for i in items if principal.has_perms(i.permissions)])


# -- handlers -----------------------------------------------------------------------------

async def ping(params: dict[str, Any], rc: RequestContext) -> dict[str, Any]:
    return {}


async def discover(params: dict[str, Any], rc: RequestContext) -> dict[str, Any]:
    result: dict[str, Any] = {
        "supportedVersions": list(versions.MODERN_VERSIONS),
        "capabilities": capabilities(True),
        "ttlMs": int(mcp_settings.CACHE_TTL_MS),
        "cacheScope": "public",
    }
    if mcp_settings.INSTRUCTIONS:
        result["instructions"] = mcp_settings.INSTRUCTIONS
    return result


async def _list(key: str, items: list[Any], params: dict[str, Any], rc: RequestContext) -> dict[str, Any]:
    """One page of a ``*/list`` answer: visible items only, cursor, cache hints (2026-07-28)."""
    visible = await _visible(items, rc)
    page, next_cursor = _page(visible, params)
    result: dict[str, Any] = {key: _wired(page)}
    if next_cursor:
        result["nextCursor"] = next_cursor
    # The answer depends on the caller whenever any item is permission-gated.
    return _cacheable(result, rc, items)


def _wired(page: list[Any]) -> list[dict[str, Any]]:
    """The page's items as the wire has them, but for one whose description cannot be built (a model
    tool whose serializer has a field no schema fits, mcp_tools.E034): that one is left out and
    logged, so one broken tool does not make the whole list an internal error."""
    wired = []
    for item in page:
        try:
            wired.append(item.to_wire())
        except Exception:
            logger.exception("%s cannot be listed: its description failed to build (manage.py check says why)",
                             getattr(item, "name", None) or getattr(item, "uri", None) or item)
    return wired


async def list_tools(params: dict[str, Any], rc: RequestContext) -> dict[str, Any]:
    return await _list("tools", registry.tools, params, rc)


def _cacheable(result: dict[str, Any], rc: RequestContext, items: list[Any] | None = None) -> dict[str, Any]:
    if rc.modern:
        result["ttlMs"] = int(mcp_settings.CACHE_TTL_MS)
        # Lists filtered by permission differ per caller.
        private = items is None or any(getattr(item, "permissions", ()) for item in items)
        result["cacheScope"] = "private" if private else "public"
    return result


def call_tool(params: dict[str, Any], rc: RequestContext) -> Awaitable[dict[str, Any]]:
    """``tools/call``: a plain function that hands back the coroutine of the flavor that serves the
    call, for :func:`dispatch` to await, not a coroutine that awaits it: a plain call makes one
    coroutine less (two for a 2025-11-25 call, whose task check is a coroutine only for a refusal);
    ~0.4% / ~0.8% of an echo's instructions. What it checks first raises where a coroutine of it
    raised when awaited: inside :func:`dispatch`'s ``await handler(...)``."""
    token = resume.token_of(params)
    if rc.modern:
        name = params.get("name")
        tool = registry.get_tool(name) if isinstance(name, str) else None
        # Also with a resumeToken: a background tool's next page or poll is a new call on a worker.
        if tasks.needs_tasks(tool, rc):  # a coroutine only for a refusal
            return _call_task_only_tool(params, rc, tool, token)
        if token is not None:
            return resume.resume(params, rc, token, mrtr.input_required_of, mrtr.resumed_on_worker,
                                 functools.partial(mrtr.call, "tools/call", params, rc))
        return mrtr.call("tools/call", params, rc)
    if token is not None:
        return _resume_legacy(params, rc, token)
    augmented, _, refusal = tasks.legacy_tool_call(params)
    if refusal is None and not augmented:
        return session.call("tools/call", params, rc)
    return _call_tool_legacy(params, rc)


async def _call_task_only_tool(params: dict[str, Any], rc: RequestContext, tool: Any, token: Any) -> dict[str, Any]:
    """A 2026-07-28 call of a tool that runs only as a task, from a client without the extension:
    refused unless the caller may not use the tool (then it goes on, to "Unknown tool")."""
    await tasks.refuse_tool_call(tool, rc)
    if token is not None:
        return await resume.resume(params, rc, token, mrtr.input_required_of, mrtr.resumed_on_worker)
    return await mrtr.call("tools/call", params, rc)


async def _resume_legacy(params: dict[str, Any], rc: RequestContext, token: Any) -> dict[str, Any]:
    """A 2025-11-25 ``tools/call`` with a ``resumeToken``: checked against the tool's taskSupport as any
    other (-32601), and the next page or poll asked for as a task is one (``CreateTaskResult``)."""
    if await tasks.check_legacy_tool_call(params, rc):
        return await resume.resume(params, rc, token, as_task=functools.partial(tasks.resumed_legacy, params))
    return await resume.resume(params, rc, token, to_worker=session.resumed_on_worker)


async def _call_tool_legacy(params: dict[str, Any], rc: RequestContext) -> dict[str, Any]:
    """A 2025-11-25 call that is task-augmented or that its tool's ``taskSupport`` refuses
    (:func:`tasks.legacy_tool_call`)."""
    if await tasks.check_legacy_tool_call(params, rc):
        return await tasks.create_legacy(params, rc)
    return await session.call("tools/call", params, rc)


async def call_saga(params: dict[str, Any], rc: RequestContext) -> dict[str, Any]:
    return await saga.call(params, rc)


async def resume_saga(params: dict[str, Any], rc: RequestContext) -> dict[str, Any]:
    return await saga.resume(params, rc)


async def list_resources(params: dict[str, Any], rc: RequestContext) -> dict[str, Any]:
    return await _list("resources", registry.resources, params, rc)


async def list_resource_templates(params: dict[str, Any], rc: RequestContext) -> dict[str, Any]:
    return await _list("resourceTemplates", registry.resource_templates, params, rc)


async def read_resource(params: dict[str, Any], rc: RequestContext) -> dict[str, Any]:
    if rc.modern:
        result = await mrtr.call("resources/read", params, rc)
        if result.get("resultType") != "input_required":
            # The resource's own freshness (0 unless it says otherwise): a read right after a tool
            # changed what it shows must not come from the client's cache (CACHE_TTL_MS is the lists').
            found = registry.find_resource(params["uri"]) if isinstance(params.get("uri"), str) else None
            result["ttlMs"] = found[0].cache_ttl_ms if found is not None else 0
            result["cacheScope"] = "private"
        return result
    return await session.call("resources/read", params, rc)


async def subscribe_resource(params: dict[str, Any], rc: RequestContext) -> dict[str, Any]:
    if not rc.session_id:  # stdio, mcp_call: nothing would ever deliver the updates
        raise method_not_found("resources/subscribe (resource subscriptions need a 2025-11-25 HTTP session)")
    uri = _subscription_uri(params)
    # Refused exactly as resources/read refuses a URI the caller may not read.
    found = registry.find_resource(uri)
    if found is None or not await permitted(rc.principal, found[0].permissions):
        raise ResourceNotFound(uri)
    limit = int(mcp_settings.SESSION_MAX_SUBSCRIPTIONS)
    outcome = await store.subscribe(rc.session_id, uri, limit)
    if outcome == "session_gone":  # ended by another process since this request found it
        raise McpError(INVALID_REQUEST, "Session not found")
    if outcome == "uri_too_long":
        raise invalid_params("Resource URI too long to subscribe to")
    if outcome == "limit_reached":
        # Each subscription is a row kept for the session's life: one session may not hold unboundedly many.
        raise invalid_params(f"This session is subscribed to {limit} resources, the most it may be; "
                             "unsubscribe from one first", {"limit": limit})
    return {}


async def unsubscribe_resource(params: dict[str, Any], rc: RequestContext) -> dict[str, Any]:
    # Not checked against the registry or the caller's permissions: a session can always drop a
    # subscription of its own, also once the resource is gone or the caller may no longer read it.
    uri = _subscription_uri(params)
    if rc.session_id:
        await store.unsubscribe(rc.session_id, uri)
    return {}


def _subscription_uri(params: dict[str, Any]) -> str:
    uri = params.get("uri")
    if not isinstance(uri, str):
        raise invalid_params('"uri" must be a string')
    return uri


async def list_prompts(params: dict[str, Any], rc: RequestContext) -> dict[str, Any]:
    return await _list("prompts", registry.prompts, params, rc)


async def get_prompt(params: dict[str, Any], rc: RequestContext) -> dict[str, Any]:
    if rc.modern:
        return await mrtr.call("prompts/get", params, rc)
    return await session.call("prompts/get", params, rc)


async def complete(params: dict[str, Any], rc: RequestContext) -> dict[str, Any]:
    ref = params.get("ref")
    argument = params.get("argument")
    if not isinstance(ref, dict) or not isinstance(argument, dict) or not isinstance(argument.get("name"), str):
        raise invalid_params('completion/complete needs "ref" and "argument": {name, value}')
    value = argument.get("value", "")
    if not isinstance(value, str):
        raise invalid_params('"argument.value" must be a string')
    context = params.get("context")
    context = {} if context is None else context  # null: as absent (what a writer of optional fields sends)
    context_args = (context.get("arguments") if context.get("arguments") is not None else {}) if isinstance(context, dict) else None
    if not isinstance(context_args, dict):  # 0, "", [] and false too: falsy is not an object
        raise invalid_params('"context" must be an object with an "arguments" object')
    completer = None
    if ref.get("type") == "ref/prompt":
        prompt = registry.get_prompt(str(ref.get("name")))
        if prompt is None or not await permitted(rc.principal, prompt.permissions):
            raise invalid_params(f"Unknown prompt: {ref.get('name')}")
        completer = prompt.completions.get(argument["name"])
    elif ref.get("type") == "ref/resource":
        # "The URI or URI template of the resource": a fixed resource's URI has no argument to
        # complete (no values), as a template's argument without a completer has none.
        template = registry.get_template(str(ref.get("uri"))) or registry.get_resource(str(ref.get("uri")))
        if template is None or not await permitted(rc.principal, template.permissions):
            raise invalid_params(f"Unknown resource template: {ref.get('uri')}")
        completer = template.completions.get(argument["name"])
    else:
        raise invalid_params('"ref.type" must be "ref/prompt" or "ref/resource"')
    found: Any = ()
    if completer is not None:
        try:
            # The caller, to a completer that names it (registry.takes_caller): to leave out what they may not see.
            given = (value, context_args, rc.principal) if takes_caller(completer) else (value, context_args)
            if asyncio.iscoroutinefunction(completer):
                found = await completer(*given)
            else:
                found = await sync_to_async(completer, thread_sensitive=True)(*given)
            # Rows (a values_list QuerySet, Completions of one) read on a thread, not on the loop here.
            if holds_lazy_rows(found):
                found = await threads.run_sync(list, found)
            elif isinstance(found, Completions) and holds_lazy_rows(found.values):
                found = dataclasses.replace(found, values=await threads.run_sync(list, found.values))
        except Exception:
            raise  # answered by the transport as any method's error
        except BaseException as exc:
            # A completer's own sys.exit() (or another library's BaseException) is a failure like any
            # other, as a tool's is (core.execute): let out, it would stop the server process. A real
            # Ctrl-C still stops it.
            if not handler_failure(exc):
                raise
            logger.error("A completer of %r raised %s", argument["name"], type(exc).__name__, exc_info=True)
            raise McpError(INTERNAL_ERROR, "Internal error") from None
    if not isinstance(found, Completions):  # a list of every match: its length is the total
        # One string is one match (listed, it was its characters); None, none at all.
        values = [found] if isinstance(found, str) else [] if found is None else [v for v in found if v is not None]
        found = Completions(values, total=len(values))
    return {"completion": found.to_wire()}


async def set_log_level(params: dict[str, Any], rc: RequestContext) -> dict[str, Any]:
    level = params.get("level")
    if level not in LOG_LEVELS:
        raise invalid_params(f'"level" must be one of {", ".join(LOG_LEVELS)}')
    if rc.session_id:
        await sessions.set_log_level(rc.session_id, level)
    return {}


HANDSHAKE_METHODS: dict[str, Handler] = {
    "ping": ping,
    "tools/list": list_tools,
    "tools/call": call_tool,
    "resources/list": list_resources,
    "resources/templates/list": list_resource_templates,
    "resources/read": read_resource,
    "resources/subscribe": subscribe_resource,
    "resources/unsubscribe": unsubscribe_resource,
    "prompts/list": list_prompts,
    "prompts/get": get_prompt,
    "completion/complete": complete,
    "logging/setLevel": set_log_level,
    "tools/callSaga": call_saga,
    "tools/resumeSaga": resume_saga,
    "tasks/get": tasks.legacy_get,
    "tasks/result": tasks.legacy_result,
    "tasks/list": tasks.legacy_list,
    "tasks/cancel": tasks.legacy_cancel,
}

MODERN_METHODS: dict[str, Handler] = {
    "server/discover": discover,
    "tools/list": list_tools,
    "tools/call": call_tool,
    "resources/list": list_resources,
    "resources/templates/list": list_resource_templates,
    "resources/read": read_resource,
    "prompts/list": list_prompts,
    "prompts/get": get_prompt,
    "completion/complete": complete,
    "tools/callSaga": call_saga,
    "tools/resumeSaga": resume_saga,
    "tasks/get": tasks.get,
    "tasks/update": tasks.update,
    "tasks/cancel": tasks.cancel,
}


async def dispatch(method: str, params: dict[str, Any], rc: RequestContext) -> dict[str, Any]:
    """Answer one request. Raises :class:`McpError` for protocol errors."""
    table = MODERN_METHODS if rc.modern else HANDSHAKE_METHODS
    handler = table.get(method)
    if handler is None or (method in ("tools/callSaga", "tools/resumeSaga") and not mcp_settings.ENABLE_SAGAS):
        raise method_not_found(method, http_status=404 if rc.modern else 200)
    try:
        result = await handler(params, rc)
    except ResourceNotFound as exc:
        if method == "resources/read" and isinstance(params.get("uri"), str):
            # data.uri is the URI the client asked for (SEP-2164), not one a handler rebuilt from
            # decoded template variables ("a%2Fb" read back as "a/b").
            exc.data = {**(exc.data if isinstance(exc.data, dict) else {}), "uri": params["uri"]}
        raise exc if rc.modern else exc.for_handshake_era()
    if rc.modern:
        result.setdefault("resultType", "complete")
        meta = result.get("_meta")
        info = _server_info or server_info()
        if isinstance(meta, dict):
            meta = dict(meta)  # the handler's own dict may be shared: never add to it
            meta[versions.META_SERVER_INFO] = info
        else:
            meta = {versions.META_SERVER_INFO: info}
        result["_meta"] = meta
    return result


def initialize_result(negotiated: str, *, notifications: bool = True) -> dict[str, Any]:
    """The ``initialize`` result. ``notifications=False`` (stdio): no ``listChanged`` and no resource
    ``subscribe`` are advertised, as that transport delivers neither."""
    caps = capabilities(False)
    if not notifications:
        caps.update(tools={}, prompts={}, resources={})
    result: dict[str, Any] = {"protocolVersion": negotiated, "capabilities": caps, "serverInfo": server_info()}
    if mcp_settings.INSTRUCTIONS:
        result["instructions"] = mcp_settings.INSTRUCTIONS
    return result
