"""``manage.py check`` reports tools that run on a Celery worker without a broker (``mcp_tools.E020``):
``background=True`` ones, and also those registered with ``task_support`` (``"optional"`` or
``"required"``), whose task-augmented calls (a 2025-11-25 ``tools/call`` with ``task``) a worker runs.

Found by the author review: ``@mcp_tools.tool(task_support="optional")`` on a plain tool passed the check
in a project without Celery, and every task-augmented call of it was queued to no worker and stayed
``working`` until it expired.
"""

from __future__ import annotations

import pytest

import mcp_tools.registry
from mcp_tools.checks import check_background_broker
from mcp_tools.registry import make_tool
from mcp_tools.registry.registry import Registry


def summarize(text: str) -> str:
    return text[:10]


@pytest.mark.parametrize("task_support", ["optional", "required"])
def test_a_task_tool_without_a_broker_is_reported(monkeypatch: pytest.MonkeyPatch, task_support: str) -> None:
    from celery import current_app

    only_tasks = Registry()
    only_tasks.register_tool(make_tool(summarize, task_support=task_support))
    monkeypatch.setattr(mcp_tools.registry, "registry", only_tasks)
    assert check_background_broker() == []  # the test settings configure a broker
    monkeypatch.setattr(current_app.conf, "broker_url", None)
    [error] = check_background_broker()
    assert error.id == "mcp_tools.E020" and "summarize" in error.msg, error


def test_plain_tools_need_no_broker(monkeypatch: pytest.MonkeyPatch) -> None:
    from celery import current_app

    plain = Registry()
    plain.register_tool(make_tool(summarize))
    monkeypatch.setattr(mcp_tools.registry, "registry", plain)
    monkeypatch.setattr(current_app.conf, "broker_url", None)
    assert check_background_broker() == []
