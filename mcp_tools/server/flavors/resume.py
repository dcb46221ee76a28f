"""Resume tokens (seed 002), for clients that have no tasks.

A call that runs on, on a worker, answers at once with a ``CallToolResult`` that
says how far it got and carries ``nextResumeToken`` (in ``_meta`` too). The
client repeats the same call with ``resumeToken`` and gets the progress so far,
or the final result with no token. 
A token is sealed and expires (``TOKEN_TTL``), and is bound to the caller, the
tool and a digest of the original arguments: a changed argument, another user
or another tool gets the same ``-32602 Invalid or expired resumeToken``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from ... import store
from ...protocol.errors import McpError, invalid_params
from .. import core, tokens
from ..context import RequestContext

logger = logging.getLogger("mcp_tools.calls")

PURPOSE = "resume"
META_NEXT = "nextResumeToken"


def client_supports(rc: RequestContext) -> bool:
    """Whether the client said it resumes calls: ``capabilities.experimental.resumeTokens``.

    Only such clients get an interim answer with ``nextResumeToken``: a client that
    does not know the extension would take that answer for the result (and one that
    checks results against the tool's output schema would refuse it).
    """
    experimental = rc.client_capabilities.get("experimental")
    return isinstance(experimental, dict) and "resumeTokens" in experimental


def invalid() -> McpError:
    return invalid_params("Invalid or expired resumeToken")


def seal(rc: RequestContext, target: core.Target, *, call_id: str) -> str:
    """A token that asks again about a running call, for this caller, tool and arguments."""
    return tokens.seal(PURPOSE, {"p": rc.principal.id, "t": target.name, "d": target.params_digest, "c": call_id})


def with_next_token(result: dict[str, Any], token: str) -> dict[str, Any]:
    """``result`` carrying ``nextResumeToken`` in the result and in ``_meta``."""
    meta = dict(result.get("_meta") or {})
    meta[META_NEXT] = token
    return {**result, META_NEXT: token, "_meta": meta}


def running_answer(call_id: str, rc: RequestContext, target: core.Target, row: Any = None) -> dict[str, Any]:
    """What a call still running on a worker answers: its progress so far, and the token to ask again."""
    text = "The call is running in the background."
    structured: dict[str, Any] = {"status": "working"}
    if row is not None and row.progress is not None:
        total = f"/{row.progress_total:g}" if row.progress_total else ""
        text = f"Working: {row.progress:g}{total}" + (f" ({row.status_message})" if row.status_message else "")
        structured.update(progress=row.progress, total=row.progress_total, message=row.status_message or None)
    result = {"content": [{"type": "text", "text": text}], "_meta": {"io.modelcontextprotocol/status": structured}}
    return with_next_token(result, seal(rc, target, call_id=call_id))


def token_of(params: dict[str, Any]) -> Any:
    """The ``resumeToken`` of a request (in params, or in ``_meta``), or None."""
    if "resumeToken" in params:
        return params["resumeToken"]
    meta = params.get("_meta")
    return meta.get("resumeToken") if isinstance(meta, dict) else None


async def resume(
    params: dict[str, Any], rc: RequestContext, token: Any,
    ask_input: Callable[[Any, RequestContext, core.Target], Awaitable[dict[str, Any]]] | None = None,
) -> dict[str, Any]:
    """``tools/call`` with a ``resumeToken``: the state of the running call, or its result.

    ``ask_input`` builds the answer for a call that waits for the client's input
    (the 2026-07-28 ``InputRequiredResult``); without it such a call reads as running.
    """
    target = await core.resolve_target("tools/call", params, rc.principal)
    try:
        payload = tokens.unseal(PURPOSE, token)
    except tokens.InvalidToken:
        raise invalid() from None
    if payload.get("p") != rc.principal.id or payload.get("t") != target.name or payload.get("d") != target.params_digest:
        logger.info("Refused resume token: bound to another principal, tool or arguments")
        raise invalid()
    loaded = await store.load_call(payload.get("c"))
    if loaded is None:
        raise invalid()
    row, _ = loaded
    if row.status in ("completed", "failed"):
        result: dict[str, Any] = row.result or {"content": []}
        return result
    if row.status in ("cancelled", "expired"):
        return core.ended_answer(target, row.status)
    if row.status == "input_required" and ask_input is not None:
        return await ask_input(row, rc, target)
    return running_answer(str(row.id), rc, target, row)

