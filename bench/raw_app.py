"""The ceiling of the HTTP benchmark: a raw ASGI app, no framework, no MCP work.

``bench.raw_app:app`` reads the POST body, takes the JSON-RPC ``id`` out of it with a byte
search (no JSON parsing) and answers exactly the bytes mcp_tools's demo ``echo`` answers to
the 2026-07-28 request of ``bench/echo.lua``: the same ``content-type`` and ``content-length``
headers (mcp_tools states the length of a JSON answer, so uvicorn does not frame it in chunks)
and the same body with that id. Whatever a server spends per request beyond this row is its
own work, not uvicorn's. ``bench.raw_app:chunked_app`` leaves ``content-length`` out: uvicorn
then sends the body chunked, as mcp_tools did before the third pass of issue 9 (the ceiling for
a ``--baseline`` checkout of that time).
"""

import os
from collections.abc import Awaitable, Callable
from typing import Any

ECHO_TEXT = os.environ.get("BENCH_ECHO_TEXT", "bench-echo-7f3a")
# The demo's echo answer (bench_settings: the demo's server name and version), split around the id.
HEAD = b'{"jsonrpc":"2.0","id":'
TAIL = (
    ',"result":{"content":[{"type":"text","text":"%s"}],"resultType":"complete",'
    '"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"mcp-tools-demo","version":"0.1.0"}}}}' % ECHO_TEXT
).encode()

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


def request_id(body: bytes) -> bytes:
    """The raw JSON value of the first ``"id":`` member (echo.lua sends a number)."""
    start = body.find(b'"id":')
    if start < 0:
        return b"null"
    start += 5
    end = start
    while end < len(body) and body[end] not in b",}":
        end += 1
    return body[start:end].strip() or b"null"


async def app(scope: dict[str, Any], receive: Receive, send: Send) -> None:
    """Answer every HTTP request with the echo result and its length; accept lifespan events."""
    await _serve(scope, receive, send, sized=True)


async def chunked_app(scope: dict[str, Any], receive: Receive, send: Send) -> None:
    """The same without ``content-length`` (uvicorn frames the body in chunks)."""
    await _serve(scope, receive, send, sized=False)


async def _serve(scope: dict[str, Any], receive: Receive, send: Send, *, sized: bool) -> None:
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] != "http":
        return
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    body = HEAD + request_id(b"".join(chunks)) + TAIL
    headers = [(b"content-type", b"application/json")]
    if sized:
        headers.append((b"content-length", b"%d" % len(body)))
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})
