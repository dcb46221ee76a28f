"""The staff console under a crafted filter, per-object permissions and a second admin site.

Found by a review; each test failed before its fix:

- a year or date filter Django checks only as it compiles the query (``?created_at__year=10000``)
  was a 500 on the calls' and the sessions' lists;
- the report page's Cancel / Expire / Retry buttons asked only the model's change permission when
  posted: a site with per-object permissions hid the button, and a POST ran the action all the same;
- under a second ``AdminSite``, the dashboard's poll and row links and the button's redirect went to
  the default site's ``/admin/``.
"""
from __future__ import annotations

import re
from typing import Any

import pytest
from django.db import connection
from django.test import override_settings
from django.urls import reverse

from mcp_tools.admin import ToolCallAdmin
from tests.test_admin_console import act_url, client_for, detail_url, make_call, make_user

pytestmark = pytest.mark.django_db

OPERATOR = ("view_toolcall", "change_toolcall", "view_mcpsession")


@pytest.mark.parametrize("query", [
    "admin:mcp_tools_toolcall_changelist?created_at__year=10000",
    "admin:mcp_tools_toolcall_changelist?state=all&finished_at__year=0",
    "admin:mcp_tools_toolcall_changelist?created_at__iso_year=99999999",
    "admin:mcp_tools_toolcall_changelist?created_at__year=99999999999",
    "admin:mcp_tools_mcpsession_changelist?last_seen_at__year=10000",
])
def test_a_filter_out_of_the_calendar_is_refused_not_a_500(query: str) -> None:
    name, _, params = query.partition("?")
    operator = client_for(make_user("op", perms=OPERATOR))
    make_call("deploy", "working")
    response = operator.get(reverse(name) + "?" + params)
    # Django's answer to a crafted filter: the list again, with ?e=1.
    assert response.status_code == 302 and response["Location"].endswith("?e=1"), response.status_code


def test_a_year_filter_in_range_still_filters() -> None:
    operator = client_for(make_user("op", perms=OPERATOR))
    call = make_call("deploy", "working")
    page = operator.get(reverse("admin:mcp_tools_toolcall_changelist") + f"?created_at__year={call.created_at.year}")
    assert page.status_code == 200 and detail_url(call) in page.content.decode()


def test_a_button_posted_for_a_call_the_object_permission_refuses_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    allowed = ToolCallAdmin.has_change_permission

    def per_object(self: Any, request: Any, obj: Any = None) -> bool:
        return False if obj is not None and obj.tool_name == "protected" else allowed(self, request, obj)

    monkeypatch.setattr(ToolCallAdmin, "has_change_permission", per_object)
    operator = client_for(make_user("op", perms=OPERATOR))
    protected, other = make_call("protected", "working"), make_call("deploy", "working")
    assert "mcp-cancel" not in operator.get(detail_url(protected)).content.decode()
    assert operator.post(act_url(protected, "cancel")).status_code == 403
    assert operator.post(act_url(other, "cancel")).status_code == 302
    protected.refresh_from_db()
    other.refresh_from_db()
    assert (protected.status, other.status) == ("working", "cancelled")


@override_settings(ROOT_URLCONF="tests.admin_sites.urls")
def test_the_console_of_a_second_admin_site_links_to_that_site() -> None:
    operator = client_for(make_user("op", perms=OPERATOR))
    call = make_call("deploy", "working")
    dashboard = operator.get("/ops/mcp_tools/toolcall/dashboard/").content.decode()
    assert re.search(r'data-poll-url="([^"]+)"', dashboard).group(1).startswith("/ops/")  # type: ignore[union-attr]
    links = set(re.findall(r'href="(/[a-z]+/mcp_tools/toolcall/[0-9a-f-]{36}/change/)"', dashboard))
    assert links and all(link.startswith("/ops/") for link in links), links
    panel = operator.get("/ops/mcp_tools/toolcall/dashboard/data/").json()["html"]
    assert f"/ops/mcp_tools/toolcall/{call.pk}/change/" in panel and "/admin/mcp_tools/" not in panel
    response = operator.post(f"/ops/mcp_tools/toolcall/{call.pk}/act/cancel/")
    assert response.status_code == 302 and response["Location"] == f"/ops/mcp_tools/toolcall/{call.pk}/change/"


@override_settings(TIME_ZONE="Asia/Tokyo")
def test_a_date_past_the_calendar_once_in_utc_is_refused_not_a_500() -> None:
    """SQLite's backend turns the date into UTC itself (an OverflowError: refused as a crafted filter);
    PostgreSQL's driver sends it with its offset, and the database takes it (an empty list)."""
    operator = client_for(make_user("op", perms=OPERATOR))
    response = operator.get(reverse("admin:mcp_tools_toolcall_changelist") + "?state=all&created_at__gte=0001-01-01T00:00:00%2B09:00")
    if connection.vendor == "sqlite":
        assert response.status_code == 302 and response["Location"].endswith("?e=1"), response.status_code
    else:
        assert response.status_code == 200
