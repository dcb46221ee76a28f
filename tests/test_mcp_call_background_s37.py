"""``mcp_call`` on a background tool says it waits for a Celery worker (found by a review of operations: with no
worker running it waited in silence, even at ``-v 2``). The worker is simulated in a thread of the test."""
from __future__ import annotations

import io
import threading
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.core.management import call_command

from mcp_tools.registry import make_tool, registry
from mcp_tools.server import background

pytestmark = pytest.mark.django_db(transaction=True)


def report(rows: int) -> str:
    return f"{rows} rows"


def test_mcp_call_says_a_background_tool_waits_for_a_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    def send(call_id: str, tool: Any, task_id: Any) -> None:
        threading.Thread(target=lambda: async_to_sync(background.run_in_worker)(call_id, "w"), daemon=True).start()

    monkeypatch.setattr(background, "send", send)
    out, err = io.StringIO(), io.StringIO()
    with registry.registered_temporarily(make_tool(report, name="zz_report", background=True)):
        call_command("mcp_call", "zz_report", "--arg", "rows=3", "--no-input", stdout=out, stderr=err)
    assert "runs on a Celery worker: waiting for one" in err.getvalue(), err.getvalue()
    assert "3 rows" in out.getvalue(), out.getvalue()
