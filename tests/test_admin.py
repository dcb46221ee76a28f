"""The monitoring admin: staff see calls and their steps, and can cancel calls in flight."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from mcp_tools.models import CallStep, ToolCall


@pytest.fixture
def staff_client(client):  # type: ignore[no-untyped-def]
    user = get_user_model().objects.create_superuser("boss", "boss@example.com", "pw")
    client.force_login(user)
    return client


def make_call(status: str) -> ToolCall:
    call = ToolCall.objects.create(tool_name="deploy", principal="user:1", flavor="mrtr", params_digest="0" * 64,
                                   status=status, arguments={"service": "api"})
    CallStep.objects.create(call=call, seq=0, kind="elicit", key="target", digest="0" * 64,
                            request={"method": "elicitation/create", "params": {"message": "Target?"}})
    return call


@pytest.mark.django_db
def test_changelist_and_detail_show_calls_and_steps(staff_client) -> None:  # type: ignore[no-untyped-def]
    call = make_call("input_required")
    changelist = staff_client.get(reverse("admin:mcp_tools_toolcall_changelist"))
    assert changelist.status_code == 200
    assert b"deploy" in changelist.content
    detail = staff_client.get(reverse("admin:mcp_tools_toolcall_change", args=[call.pk]))
    assert detail.status_code == 200
    assert b"Target?" in detail.content


@pytest.mark.django_db
def test_cancel_action_cancels_only_calls_in_flight(staff_client) -> None:  # type: ignore[no-untyped-def]
    waiting = make_call("input_required")
    done = make_call("completed")
    response = staff_client.post(
        reverse("admin:mcp_tools_toolcall_changelist"),
        {"action": "cancel_calls", "_selected_action": [str(waiting.pk), str(done.pk)]},
    )
    assert response.status_code == 302
    assert ToolCall.objects.get(pk=waiting.pk).status == "cancelled"
    assert ToolCall.objects.get(pk=done.pk).status == "completed"


@pytest.mark.django_db
def test_admin_is_read_only(staff_client) -> None:  # type: ignore[no-untyped-def]
    call = make_call("working")
    assert staff_client.get(reverse("admin:mcp_tools_toolcall_add")).status_code == 403
    assert staff_client.post(reverse("admin:mcp_tools_toolcall_delete", args=[call.pk]), {"post": "yes"}).status_code == 403
    assert ToolCall.objects.filter(pk=call.pk).exists()
