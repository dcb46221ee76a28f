"""The server side of sampling with tools (seed 003): running the tools the client's model asks for.

The tools come resolved from the layer above (:meth:`Runtime.resolve_tools`); the
engine only needs their duck-typed shape (name, permissions, validation, function).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async

from ..protocol.errors import InvalidArguments, McpError
from .wrapped import call_async

if TYPE_CHECKING:
    from ..registry import Tool
    from .context import ToolContext


def _error_result(use_id: str, message: str) -> dict[str, Any]:
    return {"type": "tool_result", "toolUseId": use_id, "content": [{"type": "text", "text": message}], "isError": True}


def repeated_tool_use(use: dict[str, Any]) -> dict[str, Any]:
    """The error ``tool_result`` of a ``tool_use`` whose id an earlier use of the same answer has:
    its run would be a second journal step under one key, so it is not run."""
    return _error_result(
        str(use.get("id", "")),
        f"Not run: tool use id {use.get('id', '')!r} repeats the id of an earlier tool use in this answer;"
        " give each tool use its own id",
    )


async def tools_the_caller_may_use(ctx: ToolContext, tools: list[Tool]) -> list[Tool]:
    """The ``tools`` the call's caller holds every permission (and token scope) of: the ones its
    model is offered. A tool the caller may not use is not shown to its model, as ``tools/list``
    and ``tools/call`` hide it from the caller: its name, description and schema say it exists."""
    return [tool for tool in tools if not tool.permissions or await sync_to_async(ctx.principal.has_perms)(tool.permissions)]


async def run_tool_use(ctx: ToolContext, tools: list[Tool], use: dict[str, Any]) -> dict[str, Any]:
    """Run one ``tool_use`` block the client's model asked for; return its ``tool_result`` block.

    Unknown tools, invalid arguments and missing permissions become error
    results the model can read, never exceptions that fail the whole call;
    so do tools this loop cannot run as declared (a context parameter,
    ``background=True``) and a run past the tool's ``time_limit``.
    """
    use_id = str(use.get("id", ""))
    tool = next((t for t in tools if t.name == use.get("name")), None)
    if tool is None:
        return _error_result(use_id, f"Unknown tool {use.get('name')!r}")
    if tool.permissions and not await sync_to_async(ctx.principal.has_perms)(tool.permissions):
        # (Offered, but the permission was taken away since: unknown now, as to tools/call.)
        return _error_result(use_id, f"Unknown tool {use.get('name')!r}")
    try:
        arguments = use.get("input") or {}
        # A serializer's, as a tools/call validates it: in a thread, with the caller in its context.
        kwargs = await ctx._inv.runtime.tool_arguments(tool, arguments, ctx.principal) if tool.input.threaded else tool.validate_arguments(arguments)
    except InvalidArguments as exc:  # the text a tools/call with these arguments answers
        return _error_result(use_id, exc.describe())
    except McpError as exc:
        return _error_result(use_id, f"{exc.message}: {exc.data}")
    if tool.context_param:
        return _error_result(use_id, f"Tool {tool.name!r} needs a context and cannot run inside sampling")
    if tool.background:
        # A background tool is promised a worker: its queue, its retry policy, Celery's hard limit
        # and a lease another worker takes over. Run here, as one step of another call, it would
        # get none of them (in the request, it would hold it), so the model goes without it.
        return _error_result(use_id, f"Tool {tool.name!r} runs on a background worker and cannot run inside sampling")
    # The tool's time_limit holds here as on a worker (server.core.execute): an overrun is a
    # tool error the model reads, not a call hung on it. None is no limit.
    deadline = asyncio.timeout(tool.time_limit)
    try:
        async with deadline:
            if tool.is_async:
                value = await call_async(tool.fn, **kwargs)  # a sync wrapper of an async def: in a thread
            else:
                # A sync tool's thread cannot be stopped: past the limit the model is answered
                # and the thread finishes on its own.
                fn = ctx._inv.runtime.tool_function(tool)  # a thread-insensitive one gets the connection rules
                value = await sync_to_async(fn, thread_sensitive=tool.thread_sensitive)(**kwargs)
    except Exception as exc:  # the model sees that the tool failed and may try again
        if isinstance(exc, TimeoutError) and deadline.expired():
            return _error_result(use_id, f"Tool {tool.name!r} ran out of time ({tool.time_limit:g} s)")
        return _error_result(use_id, ctx._inv.runtime.failure_text(tool, exc))
    try:
        result = tool.shape_result(value)
    except Exception as exc:  # a value that cannot be its result (its outputSchema, rows read on the loop)
        return _error_result(use_id, ctx._inv.runtime.failure_text(tool, exc))
    block: dict[str, Any] = {"type": "tool_result", "toolUseId": use_id, "content": result.get("content", [])}
    if "structuredContent" in result:
        block["structuredContent"] = result["structuredContent"]
    if result.get("isError"):
        block["isError"] = True
    return block
