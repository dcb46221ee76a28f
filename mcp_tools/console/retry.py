"""Retrying a failed background call, when the installed mcp_tools offers it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..models import ToolCall
from ..states import CallStatus


def retry_api() -> Callable[[str], Any] | None:
    """``mcp_tools.tasks.retry_call(call_id) -> new call id | None``, when it exists (the retry action needs it).

    Looked up at each use rather than imported, so the admin works with a
    ``tasks`` module that lacks it (the action is then hidden).
    """
    try:
        from .. import tasks
    except ImportError:  # Celery not importable
        return None
    fn = getattr(tasks, "retry_call", None)
    return fn if callable(fn) else None


def is_retryable(call: ToolCall) -> bool:
    """Only a failed background call can be queued again, once."""
    return call.status == CallStatus.FAILED and bool(getattr(call, "background", False)) and getattr(call, "retried_as", None) is None
