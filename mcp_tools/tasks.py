"""Celery tasks of mcp_tools, found by the project's ``app.autodiscover_tasks()``.

They are thin, as Celery's Django guide asks: each takes a call id and hands it
to :mod:`mcp_tools.server.background`. The call row, not Celery's result backend,
holds the result.
"""

from __future__ import annotations

from typing import Any

from celery import shared_task
from celery.signals import worker_ready


# max_retries=None: the tool's max_retries bounds its retries (on the row); Celery's default of 3 would
# refuse a 4th retry of a tool that allows more.
@shared_task(name="mcp_tools.run_call", bind=True, acks_late=True, reject_on_worker_lost=True, ignore_result=True,
             max_retries=None)
def run_call(self: Any, call_id: str) -> str:
    """Run one round of a background call on this worker.

    Its sync code (a sync tool, sampling's, the caller's rebuild) runs in a request thread of its
    own, with the connection rules of a request's start and end, as a server's request has it:
    in the thread asgiref shares with the whole process nothing ever closed or checked its
    connection, and once the database dropped it every later round with sync code failed.
    """
    from .server.background import RetryCall, run_call_sync, worker_name
    from .server.threads import RequestThread

    try:
        with RequestThread():
            # The task id, not Celery's retry count: a call waiting for its retry is that task's alone,
            # and the attempt count is on the row (a second message for the call starts at 0 again).
            return run_call_sync(call_id, worker_name(), task_id=self.request.id)
    except RetryCall as retry:
        # Under the task id the call now waits on: this message, if delivered again, finds it claimed.
        raise self.retry(countdown=retry.countdown, task_id=retry.task_id) from retry


@shared_task(name="mcp_tools.sweep", ignore_result=True)
def sweep() -> dict[str, int]:
    """Periodic: expire overdue calls, queue again calls whose worker was lost, and cancel the foreground
    calls a stopped server left ``working`` that no client can resume (Celery beat)."""
    from .models import ToolCall
    from .server.background import sweep as run_sweep

    swept = run_sweep()
    swept["cancelled"] = ToolCall.objects.cancel_abandoned()
    return swept


@shared_task(name="mcp_tools.cleanup", ignore_result=True)
def cleanup() -> dict[str, Any]:
    """Periodic (Celery beat, e.g. hourly): what ``manage.py mcp_cleanup`` does, on the settings'
    retention: expire overdue calls, cancel abandoned ones (``ToolCall.objects.cancel_abandoned``),
    delete old SSE events, idle sessions and old finished calls."""
    from .console.retention import cleanup as run_cleanup

    return run_cleanup().as_dict()


def retry_call(call_id: str) -> str | None:
    """Run a failed background call again as a new call (what the admin's "Retry" does); its id, or None."""
    from .server.background import retry_failed

    return retry_failed(call_id)


@worker_ready.connect
def _sweep_when_a_worker_starts(**kwargs: Any) -> None:
    """A worker that starts (often: one that replaces a lost worker) looks for calls to take over."""
    sweep.delay()
