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
