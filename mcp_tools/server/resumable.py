"""Results that continue: resume tokens (seed 002) for running calls, pages and converging state.

Shared by the call core (a handler returning :class:`~mcp_tools.Page` or
:class:`~mcp_tools.Pending`) and the flavors that answer for background calls.
A token is sealed and bound to the caller, the tool and a digest of the arguments.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ..registry.results import Page, Pending
from . import tokens
from .context import RequestContext

if TYPE_CHECKING:
    from .core import Target


RESUME_PURPOSE = "resume"
NEXT_RESUME_TOKEN = "nextResumeToken"
#: The key, in the ``_meta`` of the params a call's row keeps, of the cursor of the page the call runs.
CURSOR_META = "mcp-tools/cursor"


def client_resumes(rc: RequestContext) -> bool:
    """Whether the client said it resumes calls: ``capabilities.experimental.resumeTokens``.

    Only such clients get an interim answer ("still working", "not yet") with
    ``nextResumeToken``: a client that does not know the extension would take it
    for the result (and one that checks results against the tool's output
    schema would refuse it, hence :func:`pending_is_error`). Pages carry a token
    for every client.
    """
    experimental = rc.client_capabilities.get("experimental")
    return isinstance(experimental, dict) and "resumeTokens" in experimental


def seal_resume(rc: RequestContext, target: Target, **payload: Any) -> str:
    """A resume token for this caller, tool and arguments: ``c`` (a running call) or ``k`` (a cursor)."""
    return tokens.seal(RESUME_PURPOSE, {"p": tokens.principal_tag(rc.principal.id), "t": target.name, "d": target.params_digest, **payload})


def row_arguments(target: Target, cursor: Any) -> dict[str, Any]:
    """The params a call's row keeps: those it is bound to, and the cursor of the page it runs (``ctx.cursor``).

    A run from the row (a worker's, for a page of a background tool) gets the cursor back from
    there (:func:`row_cursor`): the request that sealed it in its token is gone by then. It goes
    under ``_meta``, which binds nothing, so the row's arguments still digest as the call's. It is kept
    as its JSON text with every non-ASCII character escaped: a cursor is the tool's own value, which the
    token carries whatever it holds, and a U+0000 or a lone surrogate in it would make the row unstorable.
    """
    if cursor is None:
        return target.bound_params
    return {**target.bound_params, "_meta": {CURSOR_META: json.dumps(cursor)}}


def row_cursor(arguments: Any) -> Any:
    """The cursor :func:`row_arguments` kept in a row's params, or None."""
    meta = arguments.get("_meta") if isinstance(arguments, dict) else None
    kept = meta.get(CURSOR_META) if isinstance(meta, dict) else None
    return json.loads(kept) if isinstance(kept, str) else None


def with_next_token(result: dict[str, Any], token: str) -> dict[str, Any]:
    """``result`` carrying ``nextResumeToken`` in the result and in ``_meta``."""
    meta = dict(result.get("_meta") or {})
    meta[NEXT_RESUME_TOKEN] = token
    return {**result, NEXT_RESUME_TOKEN: token, "_meta": meta}


def handed_out(result: dict[str, Any]) -> dict[str, Any]:
    """A result a call's row kept, as it is handed to the client now: its ``nextResumeToken`` (a page's,
    a converging state's, sealed when the call ended) sealed again, so that it lasts ``TOKEN_TTL`` from
    now. A task keeps its result for its ttl, longer than ``TOKEN_TTL``: read late, its token had expired."""
    token = result.get(NEXT_RESUME_TOKEN)
    if not isinstance(token, str):
        return result
    return with_next_token(result, tokens.reseal(RESUME_PURPOSE, token))


def status_result(text: str, status: dict[str, Any]) -> dict[str, Any]:
    """An interim ``CallToolResult``: a line for the model, the state under ``_meta``."""
    return {"content": [{"type": "text", "text": text}], "_meta": {"io.modelcontextprotocol/status": status}}


def shape_value(target: Target, value: Any, rc: RequestContext) -> dict[str, Any]:
    """The wire result of a handler's return value, pages and converging state included."""
    if isinstance(value, Page):
        result = target.shape(value.items)
        if value.next_cursor is not None:
            result = with_next_token(result, seal_resume(rc, target, k=value.next_cursor))
        return result
    if isinstance(value, Pending):
        status: dict[str, Any] = {"status": "pending", "message": value.message}
        if value.progress is not None:
            status.update(progress=value.progress, total=value.total)
        result = status_result(value.message, status)
        if pending_is_error(target, rc):
            result["isError"] = True
        return with_next_token(result, seal_resume(rc, target))
    return target.shape(value)


def pending_is_error(target: Target, rc: RequestContext) -> bool:
    """Whether the pending state is answered as the tool's error (``isError: true``).

    So it is for a client without resume tokens (it got the state because
    ``CONVERGE_WAIT_SECONDS`` ran out) calling a tool with an ``outputSchema``:
    the state is no structured content of that schema, and a result that is not
    an error MUST carry some that fits it (clients such as the official SDK
    refuse one without). An error result is exempt. A tool without an output
    schema answers the state as its result, as a client that resumes gets it.
    """
    tool = target.tool
    return tool is not None and tool.output.schema is not None and not client_resumes(rc)
