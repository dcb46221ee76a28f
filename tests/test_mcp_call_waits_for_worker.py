"""``mcp_call`` says so when the call it waits on sits queued for a Celery worker nobody runs.

A tool that defers to a worker with ``ctx.defer()`` (``task_support``, not ``background=True``, which
says so up front) was waited on in silence: with the test settings' embedded broker (``mcpfs://``) and
no worker consuming it, the command printed nothing and never returned (found from the
known-defects list, reproduced with ``call_command`` in a thread: nothing on stdout or stderr after
8 s). Now, after ``WORKER_NOTE_SECONDS`` without progress, one line on stderr says the call waits for a
Celery worker and how to start one, and the command keeps waiting: here a worker run started by the
test then finishes the call, and the command prints its result.
"""

from __future__ import annotations

import io
import threading
import time
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.core.management import call_command

from mcp_tools import ToolContext
from mcp_tools.management.commands import mcp_call
from mcp_tools.registry import make_tool, registry
from mcp_tools.server import background

pytestmark = pytest.mark.django_db(transaction=True)

NOTE = "waits for a Celery worker"


async def deferring(ctx: ToolContext) -> str:
    await ctx.defer()
    return "done on a worker"


def poll(condition: Any, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_mcp_call_says_a_deferred_call_waits_for_a_worker_and_keeps_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    from mcp_tools.models import ToolCall

    monkeypatch.setattr(mcp_call, "WORKER_NOTE_SECONDS", 0.2, raising=False)
    out, err = io.StringIO(), io.StringIO()
    failed: list[BaseException] = []

    def run() -> None:
        try:
            call_command("mcp_call", "zz_deferring", "--no-input", stdout=out, stderr=err)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            failed.append(exc)

    with registry.registered_temporarily(make_tool(deferring, name="zz_deferring", task_support="optional")):
        command = threading.Thread(target=run, daemon=True)
        command.start()
        poll(lambda: NOTE in err.getvalue() or not command.is_alive(), "the note on stderr")
        assert command.is_alive(), (failed, out.getvalue(), err.getvalue())  # it keeps waiting
        [line] = [line for line in err.getvalue().splitlines() if NOTE in line]
        assert line == ("(zz_deferring waits for a Celery worker: none has taken the call yet. Start one beside the "
                        "server, e.g. celery -A demo_site worker (docs/background.md); Ctrl-C cancels the call)"), line
        assert out.getvalue() == ""
        # A worker comes: the command, still waiting, gets the result.
        [call_id] = [str(pk) for pk in ToolCall.objects.filter(tool_name="zz_deferring").values_list("id", flat=True)]
        assert async_to_sync(background.run_in_worker)(call_id, "w") == "finished"
        command.join(60)
    assert not command.is_alive() and failed == [], failed
    assert out.getvalue().strip() == "done on a worker"
    assert err.getvalue().count(NOTE) == 1, err.getvalue()


ATTEMPTS: list[int] = []


async def flaky_deferring(ctx: ToolContext) -> str:
    await ctx.defer()
    ATTEMPTS.append(1)
    if len(ATTEMPTS) == 1:
        raise ConnectionError("upstream down")
    return "done on a worker"


def test_mcp_call_does_not_say_no_worker_took_a_call_that_waits_for_its_retry(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker ran the call and its ``retry_on`` exception has it wait for its retry (``retry_backoff``):
    the row is ``worker=""`` again, but a worker has it (its lease covers the wait), and its retry takes it.
    The note said "none has taken the call yet. Start one beside the server": false, and a second worker
    started for it runs nothing sooner. Found by reading queued_for_a_worker against background.run_in_worker's
    retry (it leaves ``worker=""`` with a lease)."""
    from mcp_tools import store
    from mcp_tools.models import ToolCall

    ATTEMPTS.clear()
    monkeypatch.setattr(mcp_call, "WORKER_NOTE_SECONDS", 0.2, raising=False)
    real = store.sync_calls.queued_for_a_worker
    retry_waits = threading.Event()
    looked: list[bool] = []  # what the command's looks found once the call waits for its retry

    def queued_for_a_worker(*args: Any) -> bool:
        if not retry_waits.is_set():
            return False  # the command looks only once the worker ran the call (below), not before it
        looked.append(real(*args))
        return looked[-1]

    monkeypatch.setattr(store.sync_calls, "queued_for_a_worker", queued_for_a_worker)
    out, err = io.StringIO(), io.StringIO()
    failed: list[BaseException] = []

    def run() -> None:
        try:
            call_command("mcp_call", "zz_flaky_deferring", "--no-input", stdout=out, stderr=err)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            failed.append(exc)

    tool = make_tool(flaky_deferring, name="zz_flaky_deferring", task_support="optional",
                     retry_on=(ConnectionError,), max_retries=1, retry_backoff=60.0)
    with registry.registered_temporarily(tool):
        command = threading.Thread(target=run, daemon=True)
        command.start()
        poll(lambda: ToolCall.objects.filter(tool_name="zz_flaky_deferring").exists() or not command.is_alive(), "the call's row")
        [call_id] = [str(pk) for pk in ToolCall.objects.filter(tool_name="zz_flaky_deferring").values_list("id", flat=True)]
        with pytest.raises(background.RetryCall) as retry:  # attempt 0 fails on the worker: the retry runs in 60 s
            async_to_sync(background.run_in_worker)(call_id, "w")
        retry_waits.set()
        poll(lambda: len(looked) >= 2 or NOTE in err.getvalue() or not command.is_alive(), "the command's looks at the call")
        assert NOTE not in err.getvalue(), err.getvalue()
        assert command.is_alive(), (failed, out.getvalue(), err.getvalue())
        assert async_to_sync(background.run_in_worker)(call_id, "w", retry.value.task_id) == "finished"  # the retry
        command.join(60)
    assert not command.is_alive() and failed == [], failed
    assert out.getvalue().strip() == "done on a worker"
    assert NOTE not in err.getvalue(), err.getvalue()
