"""Follow tool chains (``_meta.nextTool``, seed 001) with the official ``mcp`` client.

::

    from mcp import Client
    from mcp_tools.client import call_tool_chain

    async with Client(transport, mode="2026-07-28") as client:   # or mode="legacy"
        chain = await call_tool_chain(client, "check_account_issue", {"customer_id": 7})
        chain.result        # the last tool's CallToolResult
        chain.steps         # every hop: tool, arguments, result

Each hop is an ordinary ``tools/call``, so the server authorizes it like any
other call. Before a hop the helper checks what the seed asks clients to check:
the named tool is one ``tools/list`` shows this caller, the arguments validate
against its ``inputSchema`` (JSON Schema, with ``jsonschema``), the chain is no
longer than ``max_depth`` calls (5 by default) and it does not come back to a
call it made already (same tool, same arguments). A chain that breaks a rule, or
a server whose ``tools/list`` never ends or whose ``inputSchema`` is no valid
JSON Schema, raises a :class:`ChainError` carrying the steps made so far;
nothing is called for the offending hop.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Protocol

from .protocol.schemas import InvalidSchema, compile_schema, schema_errors

DEFAULT_MAX_DEPTH = 5
#: The most ``tools/list`` pages the helper reads: a server that pages on and on is refused.
MAX_LIST_PAGES = 100


class ToolClient(Protocol):
    """What the helper needs: ``mcp.Client`` and ``mcp.ClientSession`` both fit."""

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> Any: ...

    async def list_tools(self, *, cursor: str | None = None) -> Any: ...


@dataclass
class ChainStep:
    """One call of a chain."""

    tool: str
    arguments: dict[str, Any]
    result: Any


@dataclass
class Chain:
    """What a followed chain did; ``result`` is the last call's ``CallToolResult``."""

    steps: list[ChainStep] = field(default_factory=list)

    @property
    def result(self) -> Any:
        return self.steps[-1].result if self.steps else None

    @property
    def tools(self) -> list[str]:
        return [step.tool for step in self.steps]


class ChainError(Exception):
    """A chain stopped before a hop; ``chain`` holds the calls already made, ``hop`` the refused one."""

    def __init__(self, message: str, chain: Chain, hop: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.chain = chain
        self.hop = hop


class ChainTooDeep(ChainError):
    """The chain would need more than ``max_depth`` calls."""


class ChainCycle(ChainError):
    """A hop repeats a call the chain made already (same tool and arguments)."""


class UnknownChainedTool(ChainError):
    """A hop names a tool this caller's ``tools/list`` does not show (unknown, or hidden from them)."""


class InvalidChainArguments(ChainError):
    """A hop's arguments do not validate against the next tool's ``inputSchema`` (or that schema is
    no valid JSON Schema, so nothing could); ``errors`` lists why."""

    def __init__(self, message: str, chain: Chain, hop: dict[str, Any], errors: list[str]) -> None:
        super().__init__(message, chain, hop)
        self.errors = errors


class ToolListError(Exception):
    """``tools/list`` gave no complete listing: a page repeated a cursor, or there were too many pages."""


class ToolListFailed(ChainError):
    """The tools could not be listed to check a hop (:class:`ToolListError`)."""


def next_tool(result: Any) -> dict[str, Any] | None:
    """The ``_meta.nextTool`` of a ``CallToolResult`` (model or dict), or None."""
    meta = result.get("_meta") if isinstance(result, dict) else getattr(result, "meta", None)
    hint = meta.get("nextTool") if isinstance(meta, dict) else None
    return hint if isinstance(hint, dict) else None


def _is_error(result: Any) -> bool:
    return bool(result.get("isError") if isinstance(result, dict) else getattr(result, "is_error", False))


async def list_input_schemas(client: ToolClient, *, max_pages: int = MAX_LIST_PAGES) -> dict[str, dict[str, Any]]:
    """``{tool name: inputSchema}`` of every tool ``tools/list`` shows (all pages).

    Raises :class:`ToolListError` when a page names a cursor the listing gave already, or
    the listing runs past ``max_pages`` pages: a server that pages on would hold the caller for good.
    """
    schemas: dict[str, dict[str, Any]] = {}
    cursor: str | None = None
    cursors: set[str] = set()
    for _ in range(max_pages):
        listed = await (client.list_tools(cursor=cursor) if cursor else client.list_tools())
        for tool in listed.tools:
            schemas[tool.name] = tool.input_schema if hasattr(tool, "input_schema") else tool.inputSchema
        cursor = getattr(listed, "next_cursor", None) or getattr(listed, "nextCursor", None)
        if not cursor:
            return schemas
        if cursor in cursors:
            raise ToolListError(f"tools/list gave the cursor {cursor!r} twice: its pages would never end")
        cursors.add(cursor)
    raise ToolListError(f"tools/list has more than {max_pages} pages")


def validation_errors(schema: dict[str, Any], arguments: Any) -> list[str]:
    """Why ``arguments`` do not fit ``schema`` (JSON Schema; empty when they do).

    Raises :class:`~mcp_tools.protocol.schemas.InvalidSchema` (a ``ValueError``) when ``schema``
    itself is no valid JSON Schema.
    """
    return schema_errors(compile_schema(schema), arguments)


def _call_key(tool: str, arguments: dict[str, Any]) -> str:
    return json.dumps([tool, arguments], sort_keys=True, default=str)


async def call_tool_chain(
    client: ToolClient,
    name: str,
    arguments: dict[str, Any] | None = None,
    *,
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> Chain:
    """Call ``name`` and follow each ``_meta.nextTool`` until a result names none.

    ``max_depth`` is the most calls one chain may make (the first included).
    A result with ``isError`` ends the chain. Raises :class:`ChainTooDeep`,
    :class:`ChainCycle`, :class:`UnknownChainedTool` or
    :class:`InvalidChainArguments` instead of making a hop that breaks a rule,
    and :class:`ToolListFailed` when ``tools/list`` does not end.
    """
    if max_depth < 1:
        raise ValueError("max_depth must be at least 1")
    chain = Chain()
    seen: set[str] = set()
    schemas: dict[str, dict[str, Any]] | None = None
    tool, args = name, dict(arguments or {})
    while True:
        seen.add(_call_key(tool, args))
        result = await client.call_tool(tool, args)
        chain.steps.append(ChainStep(tool, args, result))
        hint = next_tool(result)
        if hint is None or _is_error(result):
            return chain
        next_name = hint.get("tool")
        next_args = hint.get("arguments", {})
        if not isinstance(next_name, str) or not isinstance(next_args, dict):
            raise InvalidChainArguments(f"{tool} returned a malformed nextTool: {hint!r}", chain, hint, ["malformed nextTool"])
        if len(chain.steps) >= max_depth:
            raise ChainTooDeep(f"The chain would need more than {max_depth} calls (next: {next_name})", chain, hint)
        if _call_key(next_name, next_args) in seen:
            raise ChainCycle(f"The chain comes back to {next_name} with the same arguments: {' -> '.join([*chain.tools, next_name])}",
                             chain, hint)
        if schemas is None or next_name not in schemas:
            try:
                schemas = await list_input_schemas(client)  # listed again once: the tool list may have changed
            except ToolListError as exc:
                raise ToolListFailed(f"Cannot check {tool}'s hop to {next_name}: {exc}", chain, hint) from None
        schema = schemas.get(next_name)
        if schema is None:
            raise UnknownChainedTool(f"{tool} chains to {next_name!r}, which this client's tools/list does not show", chain, hint)
        try:
            errors = validation_errors(schema, next_args)
        except InvalidSchema as exc:  # nothing could validate against it: the hop is not checked, so not made
            raise InvalidChainArguments(f"{tool} chains to {next_name}, whose inputSchema is no valid JSON Schema: {exc}",
                                        chain, hint, [f"invalid inputSchema: {exc}"]) from None
        if errors:
            raise InvalidChainArguments(f"{tool} chains to {next_name} with invalid arguments: {'; '.join(errors)}",
                                        chain, hint, errors)
        tool, args = next_name, next_args
