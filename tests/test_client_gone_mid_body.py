"""A client that leaves while it sends its request's body.

Under uvicorn (and daphne) a client that declared ``Content-Length: 100``, sent 11 bytes and closed
its socket left ``ERROR: Exception in ASGI application`` with a traceback in the server's log: the
endpoint turned the ``http.disconnect`` it read into a ``CancelledError`` and raised it out of the
application. It now ends such a request quietly, while a cancellation of the request's task by the
server still propagates.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from mcp_tools.transports.http import McpEndpoint
from tests.asgi_client import post_headers

APP = McpEndpoint()


def _scope(headers: dict[str, str]) -> dict[str, Any]:
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
            "path": "/mcp", "raw_path": b"/mcp", "root_path": "", "query_string": b"",
            "headers": [(k.encode(), v.encode("latin-1")) for k, v in headers.items()],
            "client": ("127.0.0.1", 1), "server": ("testserver", 80)}


@pytest.mark.parametrize("extra", [
    {"content-length": "100"},
    {"content-length": "100", "transfer-encoding": "chunked"},
])
async def test_a_client_gone_mid_body_ends_the_request_quietly(extra: dict[str, str], caplog: pytest.LogCaptureFixture) -> None:
    messages = [{"type": "http.request", "body": b'{"jsonrpc":', "more_body": True}, {"type": "http.disconnect"}]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return messages.pop(0)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    with caplog.at_level(logging.DEBUG):
        await asyncio.wait_for(APP(_scope(post_headers(extra=extra)), receive, send), 10)  # raises nothing
    assert messages == []  # it read up to the disconnect
    assert sent == []  # nobody to answer
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


async def test_the_server_cancelling_a_request_reading_its_body_still_propagates() -> None:
    """A ``CancelledError`` from the server cancelling the task (shutdown) is not a client gone."""
    reading = asyncio.Event()

    async def receive() -> dict[str, Any]:
        reading.set()
        await asyncio.Event().wait()  # the rest of the body never comes
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        raise AssertionError(f"nothing to send: {message!r}")

    task = asyncio.ensure_future(APP(_scope(post_headers(extra={"content-length": "100"})), receive, send))
    await asyncio.wait_for(reading.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 10)
