"""The admin console: what a review of it found, each failing before its mend.

A search term too long for the database's LIKE, staff without the permission told which call ids
exist, a dashboard that kept pushing to an operator who lost the permission, and a retry that a
double click ran twice.
"""
from __future__ import annotations
import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Permission
from django.urls import reverse
from tests.test_admin_console import (CHANGELIST, _communicator, _session_cookie, client_for, make_call, make_user)

from mcp_tools import store


@pytest.mark.django_db
def test_a_very_long_search_term_is_not_a_server_error() -> None:
    operator = client_for(make_user("operator", perms=("view_toolcall", "change_toolcall")))
    make_call("deploy", "working")
    # A pasted blob (a result, a log line) in the search box. SQLite refuses LIKE patterns over 50,000 bytes.
    response = operator.get(reverse(CHANGELIST), {"q": "a" * 60000})
    assert response.status_code == 200
    assert "Search terms are limited to 500 characters." in response.content.decode()


@pytest.mark.django_db
def test_staff_without_the_permission_get_403_for_any_call_id() -> None:
    """docs/admin.md: staff without view/change_toolcall get 403 on every page (no probing which ids exist)."""
    intern = client_for(make_user("intern"))
    missing = "00000000-0000-0000-0000-000000000000"
    assert intern.get(f"/admin/mcp_tools/toolcall/{missing}/change/").status_code == 403
    assert intern.post(f"/admin/mcp_tools/toolcall/{missing}/act/cancel/").status_code == 403


@pytest.mark.django_db(transaction=True)
async def test_the_console_stops_when_the_operator_loses_the_permission() -> None:
    viewer = await sync_to_async(make_user)("viewer", perms=("view_toolcall",))
    call = await sync_to_async(make_call)("slow_count", "working")
    socket = await _communicator(await sync_to_async(_session_cookie)(viewer))
    assert (await socket.connect())[0]
    await socket.receive_json_from(timeout=5)

    def revoke() -> None:
        viewer.user_permissions.clear()
        viewer.is_staff = False
        viewer.save()

    await sync_to_async(revoke)()
    await store.record_progress(call.pk, 7, 10, "secret step 7")
    try:
        message = await socket.receive_output(timeout=3)
    except Exception:  # nothing more: fine
        message = None
    await socket.disconnect()
    assert message is None or message.get("type") == "websocket.close", f"a revoked user still receives: {str(message)[:200]}"


@pytest.mark.django_db
def test_retrying_the_same_failed_call_twice_starts_it_once() -> None:
    """A double click on "Retry" (or two operators) must not run the background job twice."""
    from mcp_tools.models import ToolCall
    from tests.test_admin_console import act_url

    operator = client_for(make_user("operator", perms=("view_toolcall", "change_toolcall")))
    failed = make_call("slow_count", "failed", background=True, arguments={"n": 3})
    operator.post(act_url(failed, "retry"))
    operator.post(act_url(failed, "retry"))
    copies = list(ToolCall.objects.exclude(pk=failed.pk).values_list("pk", flat=True))
    assert len(copies) == 1, f"{len(copies)} new calls for one failed call"
    failed.refresh_from_db()
    assert failed.retried_as == copies[0] and failed.status == "failed"
