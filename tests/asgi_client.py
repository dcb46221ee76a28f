"""A tiny in-process ASGI client for the tests: send one HTTP request, collect the whole response.

No sockets and no server process: the application coroutine is called with a
``scope``, a ``receive`` that hands over the body (then waits until the
response is complete before reporting ``http.disconnect``, like a client that
keeps its connection open) and a ``send`` that records what the app sends.

Plus a few MCP conveniences: the headers every Streamable HTTP POST needs, and
2026-07-28 request builders (``_meta`` with protocol version and capabilities).
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

MODERN = "2026-07-28"
HANDSHAKE = "2025-11-25"
FULL_CAPABILITIES: dict[str, Any] = {"elicitation": {"form": {}}, "sampling": {}, "roots": {}}

#: The param each method's ``Mcp-Name`` header mirrors (2026-07-28).
NAME_PARAM = {"tools/call": "name", "tools/callSaga": "name", "prompts/get": "name", "resources/read": "uri"}

_ids = itertools.count(1)


@dataclass
class AsgiResponse:
    """What the application sent: status, headers (lower-cased names) and the full body."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes
    messages: list[dict[str, Any]] = field(default_factory=list, repr=False)

    def header(self, name: str) -> str | None:
        name = name.lower()
        for key, value in self.headers:
            if key == name:
                return value
        return None

    @property
    def content_type(self) -> str:
        return self.header("content-type") or ""

    def sse_messages(self) -> list[dict[str, Any]]:
        """The JSON-RPC messages of an SSE body (``data:`` lines of ``event: message`` events)."""
        found = []
        for event in self.body.decode().split("\n\n"):
            data = "\n".join(line[5:].lstrip() for line in event.splitlines() if line.startswith("data:"))
            if data.strip():
                found.append(json.loads(data))
        return found

    def json(self) -> Any:
        """The JSON body, or the last message of an SSE stream (the answer to the request)."""
        if self.content_type.startswith("text/event-stream"):
            messages = self.sse_messages()
            return messages[-1] if messages else None
        return json.loads(self.body)


def _header_list(headers: Mapping[str, str] | Iterable[tuple[str, str]] | None) -> list[tuple[bytes, bytes]]:
    items = headers.items() if isinstance(headers, Mapping) else (headers or [])
    return [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in items]


async def request(
    app: Any,
    method: str = "POST",
    path: str = "/mcp",
    *,
    headers: Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
    body: bytes | None = None,
    chunks: list[bytes] | None = None,
    timeout: float = 20.0,
) -> AsgiResponse:
    """Run one request through ``app``. ``chunks`` sends the body in pieces (``more_body``)."""
    parts = list(chunks) if chunks is not None else [body or b""]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": _header_list(headers),
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80),
    }
    sent: list[dict[str, Any]] = []
    finished = asyncio.Event()
    pending = list(parts)

    async def receive() -> dict[str, Any]:
        if pending:
            chunk = pending.pop(0)
            return {"type": "http.request", "body": chunk, "more_body": bool(pending)}
        await finished.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body"):
            finished.set()

    try:
        await asyncio.wait_for(app(scope, receive, send), timeout)
    finally:
        finished.set()
    starts = [m for m in sent if m["type"] == "http.response.start"]
    assert len(starts) == 1, f"expected one http.response.start, got {sent!r}"
    assert finished.is_set()
    start = starts[0]
    return AsgiResponse(
        status=start["status"],
        headers=[(k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in start.get("headers", [])],
        body=b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body"),
        messages=sent,
    )


def receive_then_disconnect(body: bytes, gone: asyncio.Event) -> Any:
    """An ASGI ``receive``: the whole body, then ``http.disconnect`` once ``gone`` is set (the client leaves)."""
    pending = [body]

    async def receive() -> dict[str, Any]:
        if pending:
            return {"type": "http.request", "body": pending.pop(), "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    return receive


def http_scope(method: str, path: str, headers: Mapping[str, str]) -> dict[str, Any]:
    """The ASGI scope of a request a test drives with its own ``receive`` and ``send``."""
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
            "path": path, "raw_path": path.encode(), "root_path": "", "query_string": b"",
            "headers": [(k.encode(), v.encode("latin-1")) for k, v in headers.items()],
            "client": ("127.0.0.1", 1), "server": ("testserver", 80)}


# -- MCP conveniences ------------------------------------------------------------------------


def post_headers(
    *,
    version: str | None = MODERN,
    session: str | None = None,
    token: str | None = None,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The headers of a well-formed Streamable HTTP POST (``extra`` overrides; a None value drops one)."""
    headers = {
        "host": "testserver",
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
    }
    if version is not None:
        headers["mcp-protocol-version"] = version
    if session is not None:
        headers["mcp-session-id"] = session
    if token is not None:
        headers["authorization"] = f"Token {token}"
    for key, value in (extra or {}).items():
        if value is None:
            headers.pop(key.lower(), None)
        else:
            headers[key.lower()] = value
    return headers


def modern_message(
    method: str,
    params: dict[str, Any] | None = None,
    *,
    capabilities: dict[str, Any] | None = None,
    version: str = MODERN,
    request_id: Any = None,
) -> dict[str, Any]:
    """A 2026-07-28 request: ``params._meta`` carries the protocol version and client capabilities."""
    params = dict(params or {})
    meta = dict(params.get("_meta") or {})
    meta.setdefault("io.modelcontextprotocol/protocolVersion", version)
    meta.setdefault("io.modelcontextprotocol/clientCapabilities", FULL_CAPABILITIES if capabilities is None else capabilities)
    params["_meta"] = meta
    return {"jsonrpc": "2.0", "id": next(_ids) if request_id is None else request_id, "method": method, "params": params}


def handshake_message(method: str, params: dict[str, Any] | None = None, *, request_id: Any = None, notification: bool = False) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    if not notification:
        message["id"] = next(_ids) if request_id is None else request_id
    return message


async def post_json(app: Any, message: Any, headers: Mapping[str, str] | None = None, **kwargs: Any) -> AsgiResponse:
    """POST a JSON-serialisable message with ``headers`` (default: :func:`post_headers`)."""
    return await request(app, "POST", headers=headers if headers is not None else post_headers(), body=json.dumps(message).encode(), **kwargs)


async def call_modern(app: Any, method: str, params: dict[str, Any] | None = None, *, token: str | None = None,
                      capabilities: dict[str, Any] | None = None, headers: Mapping[str, str] | None = None) -> AsgiResponse:
    """POST one 2026-07-28 request with consistent ``MCP-Protocol-Version`` / ``Mcp-Method`` / ``Mcp-Name`` headers."""
    message = modern_message(method, params, capabilities=capabilities)
    extra: dict[str, Any] = {"mcp-method": method}
    name_key = NAME_PARAM.get(method)
    if name_key is not None and isinstance((params or {}).get(name_key), str):
        extra["mcp-name"] = (params or {})[name_key]
    extra.update(headers or {})
    return await post_json(app, message, post_headers(token=token, extra=extra))


#: The ``_meta`` key of a tool result that reports invalid arguments (docs/protocol.md).
ARGUMENT_ERRORS_META = "mcp-tools/argumentErrors"
#: The ``_meta`` key that counts the argument errors past the 50 listed (docs/protocol.md).
ARGUMENT_ERRORS_OMITTED_META = "mcp-tools/argumentErrorsOmitted"


def argument_errors(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The argument errors a ``tools/call`` answer (a JSON-RPC response) reports: a tool error
    (``isError``, not a JSON-RPC error) listing each field in its text, the errors in ``_meta``."""
    assert "error" not in body, body
    result = body["result"]
    assert result.get("isError") is True and "structuredContent" not in result, result
    text = result["content"][0]["text"]
    errors: list[dict[str, Any]] = result["_meta"][ARGUMENT_ERRORS_META]
    assert text.startswith("Invalid arguments for tool") and all(f"- {e['field']}: " in text for e in errors), result
    return errors
