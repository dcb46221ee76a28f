"""A sync background tool past its ``time_limit``: the call ends failed, and its function runs on in its
thread (Python cannot stop one). The Celery task waits for that thread before it returns, so the worker
takes no other call meanwhile and Celery's hard limit (prefork) still applies to the function.

The task runs eagerly in a thread of the test (``run_call.apply``); the tool blocks until the test
lets it go, which it does only once the task says it waits for it.
"""
from __future__ import annotations

import logging
import threading
from typing import Any

import pytest
from asgiref.sync import async_to_sync

from mcp_tools import tasks
from mcp_tools.models import ToolCall
from mcp_tools.registry import make_tool, registry
from tests.test_background_lost import _new_call

pytestmark = pytest.mark.django_db(transaction=True)

ORDER: list[str] = []
RELEASE = threading.Event()


def _blocking_report(rows: int = 1) -> str:
    """Sync, and slower than its time limit: it ends when the test lets it."""
    RELEASE.wait()
    ORDER.append("the function ended")
    return "done"


class _LetTheFunctionEnd(logging.Handler):
    """Lets the tool end once the worker says it waits for it."""

    def emit(self, record: logging.LogRecord) -> None:
        if "still runs" in record.getMessage():
            ORDER.append("the task waits")
            RELEASE.set()


def test_the_task_returns_only_after_the_overrun_sync_function_ended() -> None:
    ORDER.clear()
    RELEASE.clear()
    tool = make_tool(_blocking_report, name="blocking_report", background=True, time_limit=0.2)
    handler = _LetTheFunctionEnd()
    log = logging.getLogger("mcp_tools.background")
    log.addHandler(handler)
    outcome: list[Any] = []
    try:
        with registry.registered_temporarily(tool):
            call_id = async_to_sync(_new_call)("blocking_report")
            worker = threading.Thread(target=lambda: outcome.append(tasks.run_call.apply(args=[call_id], task_id="t-1")))
            worker.start()
            worker.join()  # without the wait, the task returns while the function still blocks
            ORDER.append("the task returned")
    finally:
        log.removeHandler(handler)
        RELEASE.set()  # never leave the function blocked
    row = ToolCall.objects.get(id=call_id)
    assert ORDER == ["the task waits", "the function ended", "the task returned"], ORDER
    assert (outcome[0].state, row.status) == ("SUCCESS", "failed") and "ran out of time" in str(row.result), row.result
