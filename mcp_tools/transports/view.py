"""The endpoint as a Django view, for projects that mount it with ``include()``.

The ASGI mount (:mod:`mcp_tools.routing`) is the fast path; this view runs the
same endpoint behind the project's middleware stack::

    urlpatterns = [path("mcp", include("mcp_tools.urls"))]

It needs Django's ASGI handler (``daphne``/``uvicorn``), not WSGI: responses may
be long-lived SSE streams.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from .http import McpEndpoint

_endpoint = McpEndpoint()


@csrf_exempt  # MCP clients are not browsers; Origin and Host are checked by the endpoint
async def mcp_view(request: HttpRequest) -> HttpResponse | StreamingHttpResponse:
    """Serve one MCP request (any era) through the Django URLconf."""
    scope = getattr(request, "scope", None)
    if scope is None:
        return HttpResponse("mcp_tools needs an ASGI server", status=500)
    body = request.body
    outgoing: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    delivered = False
    gone = asyncio.Event()

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        await outgoing.put(message)

    task = asyncio.ensure_future(_endpoint(dict(scope), receive, send))

    async def stop_endpoint() -> None:
        gone.set()
        if not task.done():
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task

    try:
        start = await outgoing.get()
        first = await outgoing.get()
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in start.get("headers", [])]
        if not first.get("more_body"):
            await task
            response = HttpResponse(first.get("body", b""), status=start["status"])
            for name, value in headers:
                response[name] = value
            return response
    except asyncio.CancelledError:
        # Django cancels the view when the client leaves before the answer starts: the endpoint it
        # runs stops too (its receive() hears of it only from here), as it would served directly.
        await stop_endpoint()
        raise

    async def stream() -> AsyncIterator[bytes]:
        message = first
        try:
            while True:
                if message.get("body"):
                    yield message["body"]
                if not message.get("more_body"):
                    return
                message = await outgoing.get()
        finally:
            # The client went away (Django stops iterating) or the stream ended.
            await stop_endpoint()

    streaming = StreamingHttpResponse(stream(), status=start["status"])
    for name, value in headers:
        streaming[name] = value
    return streaming
