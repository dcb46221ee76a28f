"""``notifications/cancelled`` for requests that may run in another process.

Each process registers the handler tasks of its in-flight 2025-11-25 requests.
A cancellation that arrives at a process which does not run the request is
broadcast on the shared channel layer (when there is one) to the process that does.
"""

from __future__ import annotations

import asyncio
from typing import Any

from . import broadcast

GROUP = "mcp_tools.cancel"

_running: dict[tuple[str, str], asyncio.Task[Any]] = {}


def _key(session_id: str, request_id: Any) -> tuple[str, str]:
    return session_id, repr(request_id)


def register(session_id: str, request_id: Any, task: asyncio.Task[Any]) -> None:
    _running[_key(session_id, request_id)] = task
    broadcast.listen(GROUP, _on_cancel)


def unregister(session_id: str, request_id: Any) -> None:
    _running.pop(_key(session_id, request_id), None)


def _cancel_local(session_id: str, request_id: Any) -> bool:
    task = _running.get(_key(session_id, request_id))
    if task is None:
        return False
    task.cancel()
    return True


def _on_cancel(message: dict[str, Any]) -> None:
    _cancel_local(message.get("session_id", ""), message.get("request_id"))


async def cancel(session_id: str, request_id: Any) -> None:
    """Cancel the request's handler here, or ask the other processes to."""
    if _cancel_local(session_id, request_id):
        return
    await broadcast.publish(GROUP, {"type": "mcp.cancel", "session_id": session_id, "request_id": request_id})
