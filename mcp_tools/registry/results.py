"""What a handler may return, and how it becomes a ``CallToolResult``.

A tool returns a plain value (typed by its annotation), a :class:`ToolResult`
for full control, an ``mcp_types`` content model, or a list of content blocks.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import pydantic_core
from django.utils.functional import Promise
from pydantic import BaseModel


class ToolError(Exception):
    """Raise from a tool to return ``isError: true`` with this message to the model."""


@dataclass
class ToolResult:
    """A hand-built tool result.

    ``next_tool`` sets ``_meta.nextTool`` (tool chaining): the server checks
    that the named tool exists, that the caller may call it and that the
    arguments pass its validation and its advertised ``inputSchema`` before
    sending it.
    """

    content: list[Any] = field(default_factory=list)
    structured_content: dict[str, Any] | None = None
    is_error: bool = False
    meta: dict[str, Any] | None = None
    next_tool: tuple[str, dict[str, Any]] | None = None

    def to_wire(self) -> dict[str, Any]:
        result: dict[str, Any] = {"content": [content_to_wire(item) for item in self.content]}
        if self.structured_content is not None:
            result["structuredContent"] = self.structured_content
        if self.is_error:
            result["isError"] = True
        meta = dict(self.meta or {})
        if self.next_tool is not None:
            meta["nextTool"] = {"tool": self.next_tool[0], "arguments": self.next_tool[1]}
        if meta:
            result["_meta"] = meta
        return result


T = TypeVar("T")


@dataclass
class Page(Generic[T]):
    """One page of a large result; return ``Page[T]`` from a ``paginate=True`` tool.

    ``items`` is shaped like a plain return value of type ``T``. When
    ``next_cursor`` is set, the result carries ``nextResumeToken``; the client
    calls again with ``resumeToken`` and the tool gets ``ctx.cursor`` back (the
    cursor is sealed in the token, so it may be any JSON value the tool trusts).
    """

    items: T
    next_cursor: Any = None

    def __post_init__(self) -> None:
        # Sealed in the token as JSON: a datetime (a keyset's last row) failed there, and the client was
        # told only that the result "does not match its output schema".
        try:
            json.dumps(self.next_cursor, allow_nan=False)
        except (TypeError, ValueError):
            raise TypeError(f"Page.next_cursor must be a JSON value (text, a number, a list or a dict of them), not "
                            f"{self.next_cursor!r}: convert it (a datetime's isoformat(), a Decimal's str())") from None


#: The most values one ``completion/complete`` answer carries (the spec's limit).
MAX_COMPLETION_VALUES = 100


@dataclass
class Completions:
    """What a completer returns when it does not list every match (a plain list of strings says
    it does: its length is the answer's ``total``).

    ``values``: the matches it found, best first (at most :data:`MAX_COMPLETION_VALUES` are sent);
    ``total``: how many match in all, when known (None leaves ``total`` out of the answer);
    ``has_more``: matches exist past ``values``. A completer that cuts its query can fetch one row
    more than it sends and say ``has_more=len(found) > 100``, with no count.
    """

    values: Sequence[str]
    total: int | None = None
    has_more: bool = False

    def to_wire(self) -> dict[str, Any]:
        """The ``completion`` object of a ``CompleteResult``."""
        given = [self.values] if isinstance(self.values, str) else self.values  # one string: one match
        values = [str(value) for value in given if value is not None]
        shown = values[:MAX_COMPLETION_VALUES]
        has_more = self.has_more or len(values) > len(shown) or (self.total is not None and self.total > len(shown))
        completion: dict[str, Any] = {"values": shown}
        if self.total is not None:
            completion["total"] = max(self.total, len(values))
        completion["hasMore"] = has_more
        return completion


@dataclass
class Pending:
    """Return from a tool whose state converges over time: "not yet, ask again".

    A client that resumes calls gets ``message`` (and any progress) with a
    ``nextResumeToken``; calling again runs the tool again. For other clients
    the server runs the tool again itself every ``poll_seconds``, within
    ``CONVERGE_WAIT_SECONDS``, holding the request; if the state has not
    converged by then, they get it as the result, an error result
    (``isError: true``) for a tool with an output schema.
    """

    message: str
    progress: float | None = None
    total: float | None = None
    poll_seconds: float = 1.0

    def __post_init__(self) -> None:
        # 0 or less re-ran the tool without a pause for the whole CONVERGE_WAIT_SECONDS (thousands of runs
        # for one call); text failed the call after its first run (found by the author review).
        seconds = self.poll_seconds
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
            raise TypeError(f"Pending.poll_seconds must be a number of seconds, not {seconds!r}")
        if not (math.isfinite(seconds) and seconds > 0):
            raise ValueError(f"Pending.poll_seconds must be a number of seconds above 0, not {seconds!r}")


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def image(data: bytes | str, mime_type: str) -> dict[str, Any]:
    return {"type": "image", "data": _b64(data), "mimeType": mime_type}


def audio(data: bytes | str, mime_type: str) -> dict[str, Any]:
    return {"type": "audio", "data": _b64(data), "mimeType": mime_type}


def embedded_text_resource(uri: str, text_value: str, mime_type: str = "text/plain") -> dict[str, Any]:
    return {"type": "resource", "resource": {"uri": uri, "mimeType": mime_type, "text": text_value}}


def resource_link(uri: str, name: str, **extra: Any) -> dict[str, Any]:
    return {"type": "resource_link", "uri": uri, "name": name, **extra}


def _b64(data: bytes | str) -> str:
    return data if isinstance(data, str) else base64.b64encode(data).decode()


def content_to_wire(item: Any) -> dict[str, Any]:
    item = lazy_text(item)  # a ToolResult's or a prompt's text may be a lazy translation
    if isinstance(item, dict):
        return item
    if isinstance(item, BaseModel):
        return item.model_dump(by_alias=True, exclude_none=True, mode="json")
    if isinstance(item, str):
        return text(item)
    raise TypeError(f"Not a content block: {item!r}")


#: The keys each kind of content block of a ``CallToolResult`` must have (MCP's ``ContentBlock``).
_BLOCK_KEYS: dict[str, tuple[str, ...]] = {
    "text": ("text",), "image": ("data", "mimeType"), "audio": ("data", "mimeType"),
    "resource_link": ("uri", "name"), "resource": ("resource",),
}


def content_block(item: Any) -> dict[str, Any] | None:
    """``item`` as a content block if it is one (a dict or a pydantic model such as ``mcp_types.TextContent``
    with a block's ``type`` and its required keys), else None.

    A value that only looks like one is not: a row with a ``type`` column, a model whose ``type`` field
    says "text" but has no ``text``. Taken for blocks, they were sent as invalid content (the official
    client refused the result) instead of as the JSON value they are.
    """
    if isinstance(item, BaseModel):
        item = item.model_dump(by_alias=True, exclude_none=True, mode="json")
    if not isinstance(item, dict):
        return None
    kind = item.get("type")
    required = _BLOCK_KEYS.get(kind)  # type: ignore[arg-type]
    if required is None:
        return None
    if kind == "resource":  # an embedded resource: its uri, and its text or blob
        resource = item.get("resource")
        if not (isinstance(resource, dict) and isinstance(resource.get("uri"), str)
                and (isinstance(resource.get("text"), str) or isinstance(resource.get("blob"), str))):
            return None
    elif not all(isinstance(item.get(key), str) for key in required):  # a NULL column's None is no text
        return None
    return item


def content_blocks(value: Any) -> list[dict[str, Any]] | None:
    """``value`` as a list of content blocks if it is a non-empty list of them (:func:`content_block`), else None."""
    if not isinstance(value, list) or not value:
        return None
    blocks = [content_block(item) for item in value]
    return None if None in blocks else blocks  # type: ignore[return-value]


#: What a hand-built ``CallToolResult`` dict may hold besides its content (a tool without an output schema);
#: ``resultType`` (2026-07-28, what a dumped ``mcp_types.CallToolResult`` holds) is the server's to write.
CALL_TOOL_RESULT_KEYS = frozenset({"content", "structuredContent", "isError", "_meta", "resultType"})


def call_tool_result(value: Any) -> dict[str, Any] | None:
    """``value`` as a whole ``CallToolResult`` dict if it is one (an ``mcp_types.CallToolResult``, or a dict
    of its keys only whose ``content`` is a list of content blocks, empty too), its blocks as wire dicts
    and without ``resultType``; else None."""
    if isinstance(value, BaseModel) and type(value).__name__ == "CallToolResult":
        value = value.model_dump(by_alias=True, exclude_none=True, mode="json")
    if not isinstance(value, dict) or not value.keys() <= CALL_TOOL_RESULT_KEYS or not isinstance(value.get("content"), list):
        return None
    blocks = content_blocks(value["content"]) if value["content"] else []
    if blocks is None:
        return None
    return {key: item for key, item in value.items() if key != "resultType"} | {"content": blocks}



def lazy_text(value: Any) -> Any:
    """``value``, a lazy translation (``gettext_lazy``, no ``str``) as its text: a tool's value went out
    JSON-quoted, a resource's as JSON, a prompt's as one message per character (found by the author review)."""
    return str(value) if isinstance(value, Promise) else value


def json_text(value: Any) -> str:
    """``value`` as JSON text: pydantic models (anywhere in it) as their JSON, what pydantic writes as JSON
    (a dataclass, a date, a set, a UUID, an Enum...) so, anything else unknown as its ``str``."""
    return json.dumps(value, ensure_ascii=False, default=_jsonable)


def as_json_values(value: Any) -> Any:
    """``value`` as the JSON values :func:`json_text` writes it as: for what the wire's own encoder writes,
    which takes any other object for its ``str()`` (a ``ctx.log`` line's data: a pydantic model went out
    as ``"name='x' level=0"``, found by the author review)."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return json.loads(json_text(value))


def _jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True)  # as structuredContent dumps it
    # A dataclass went out as its repr, a datetime as "2024-01-01 00:00:00", a set as "{1}" (found by the
    # author review): what pydantic can write as JSON is written so, as structuredContent would be.
    try:
        return pydantic_core.to_jsonable_python(value, by_alias=True, fallback=str)
    except ValueError:  # bytes that are no UTF-8: as before
        return str(value)
