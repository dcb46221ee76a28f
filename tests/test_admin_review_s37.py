"""The staff console under per-object permissions, a stricter admin site, a second admin site, and retry.

Found by a review; each test failed before its fix:

- the changelist's Cancel / Expire / Retry actions ignored a ``ToolCallAdmin`` subclass's
  per-object ``has_change_permission(request, obj)``: the report page's buttons respected it,
  the bulk actions ended or retried every selected call;
"""
from __future__ import annotations

from typing import Any

import pytest
from django.contrib import messages as django_messages
from django.contrib.admin.models import LogEntry
from django.urls import reverse

from mcp_tools.admin import ToolCallAdmin
from mcp_tools.models import ToolCall
from tests.test_admin_console import CHANGELIST, client_for, make_call, make_user

pytestmark = pytest.mark.django_db

OPERATOR = ("view_toolcall", "change_toolcall", "view_mcpsession")


def _protect(monkeypatch: pytest.MonkeyPatch, tool: str = "protected") -> None:
    """A project's per-object rule: calls of ``tool`` may be looked at, never changed."""
    allowed = ToolCallAdmin.has_change_permission

    def per_object(self: Any, request: Any, obj: Any = None) -> bool:
        return False if obj is not None and obj.tool_name == tool else allowed(self, request, obj)

    monkeypatch.setattr(ToolCallAdmin, "has_change_permission", per_object)


def _messages(response: Any) -> list[str]:
    return [str(m) for m in django_messages.get_messages(response.wsgi_request)]


@pytest.mark.parametrize("action, status", [("cancel_calls", "cancelled"), ("expire_calls", "expired")])
def test_bulk_cancel_and_expire_leave_the_calls_the_object_permission_refuses(monkeypatch: pytest.MonkeyPatch, action: str, status: str) -> None:
    _protect(monkeypatch)
    operator = client_for(make_user("op", perms=OPERATOR))
    protected, other = make_call("protected", "working"), make_call("deploy", "working")
    response = operator.post(reverse(CHANGELIST), {"action": action, "_selected_action": [str(protected.pk), str(other.pk)]}, follow=True)
    protected.refresh_from_db()
    other.refresh_from_db()
    assert (protected.status, other.status) == ("working", status)
    assert list(LogEntry.objects.values_list("object_id", flat=True)) == [str(other.pk)]
    said = " ".join(_messages(response))
    assert "1 call(s) marked" in said and "1 selected call(s) you may not change" in said, said


def test_bulk_retry_leaves_the_calls_the_object_permission_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    _protect(monkeypatch)
    operator = client_for(make_user("op", perms=OPERATOR))
    protected = make_call("protected", "failed", background=True, arguments={"n": 1})
    other = make_call("slow_count", "failed", background=True, arguments={"n": 3})
    response = operator.post(reverse(CHANGELIST) + "?state=all",
                             {"action": "retry_calls", "_selected_action": [str(protected.pk), str(other.pk)]}, follow=True)
    new = ToolCall.objects.exclude(pk__in=[protected.pk, other.pk])
    assert list(new.values_list("tool_name", flat=True)) == ["slow_count"]
    said = " ".join(_messages(response))
    assert "1 call(s) started again" in said and "1 selected call(s) you may not change" in said, said
