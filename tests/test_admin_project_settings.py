"""The admin console under project settings other than the demo's: each failing before its mend.

``USE_TZ = False`` (naive datetimes everywhere), a time zone with daylight saving time, a user model
whose login field is not ``username``, and a site served below a script prefix (``FORCE_SCRIPT_NAME``,
an ASGI ``root_path``).
"""
from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from asgiref.sync import sync_to_async
from django.test import override_settings
from django.urls import clear_script_prefix, reverse, set_script_prefix

from mcp_tools.console import queries
from mcp_tools.models import ToolCall

from tests.test_admin_console import DASHBOARD, DATA, _communicator, _session_cookie, client_for, make_call, make_user

OPERATOR = ("view_toolcall", "change_toolcall")


# -- USE_TZ = False ---------------------------------------------------------------------------------


@pytest.mark.django_db
def test_dashboard_and_its_poll_without_time_zone_support() -> None:
    """Django returns naive local wall times; ``timezone.localtime()`` refuses them (it raised, a 500)."""
    with override_settings(USE_TZ=False, TIME_ZONE="America/New_York"):
        operator = client_for(make_user("operator", perms=OPERATOR))
        call = make_call("flaky", "failed")
        assert call.created_at.tzinfo is None
        html = operator.get(reverse(DASHBOARD)).content.decode()
        data = operator.get(reverse(DATA))
        assert data.status_code == 200
        # The chart's hour is the row's own (New York) hour, and the row is counted in it.
        assert f"{call.created_at:%H}:00: 1 call(s), 1 failed" in html
        assert f"{call.created_at:%H}:00: 1 call(s), 1 failed" in data.json()["html"]


@pytest.mark.django_db(transaction=True)
async def test_the_websocket_pushes_the_dashboard_without_time_zone_support(no_time_zone_support: None) -> None:
    viewer = await sync_to_async(make_user)("viewer", perms=("view_toolcall",))
    await sync_to_async(make_call)("deploy", "input_required")
    socket = await _communicator(await sync_to_async(_session_cookie)(viewer))
    assert (await socket.connect())[0]
    first = await socket.receive_json_from(timeout=5)
    await socket.disconnect()
    assert first["type"] == "dashboard" and "deploy" in first["html"]


# -- a time zone with daylight saving time ---------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(("now", "twice", "skipped"), [
    ("2025-03-09T16:30:00+00:00", None, "02"),  # New York springs forward: 02:00-02:59 is never on the clock
    ("2025-11-02T16:30:00+00:00", "01", None),  # and falls back: 01:00-01:59 happens twice
])
def test_the_hourly_chart_counts_real_hours_across_a_daylight_saving_change(now: str, twice: str | None, skipped: str | None) -> None:
    """The chart's hours were stepped back from the top of the hour in wall-clock time: on the day the
    clocks change one hour was counted twice and the chart spanned 23 or 25 real hours."""
    at = datetime.fromisoformat(now)
    for i in range(24):  # one call in each real hour of the last 24, the latest one failed
        call = make_call("deploy", "failed" if i == 0 else "completed", steps=0)
        ToolCall.objects.filter(pk=call.pk).update(created_at=at - timedelta(hours=i, minutes=1))
    with override_settings(TIME_ZONE="America/New_York"):
        buckets = queries._buckets(at)
        labels = [queries.local_time(start).strftime("%H") for start, _n, _failed in buckets]
    instants = [start.timestamp() for start, _n, _failed in buckets]
    assert len(buckets) == 24 and [b - a for a, b in zip(instants, instants[1:])] == [3600.0] * 23, labels
    assert instants[-1] <= at.timestamp() < instants[-1] + 3600
    assert [(n, failed) for _start, n, failed in buckets] == [(1, 0)] * 23 + [(1, 1)], labels
    if twice:
        assert labels.count(twice) == 2, labels
    if skipped:
        assert skipped not in labels and labels.count("01") == labels.count("03") == 1, labels


# -- a user model whose login field is not ``username`` -------------------------------------------


@pytest.mark.django_db
def test_the_console_names_users_by_the_user_models_login_field(monkeypatch: pytest.MonkeyPatch) -> None:
    """An ``AUTH_USER_MODEL`` logging in by email may have no ``username`` column: the dashboard's call
    tables read ``user__username`` and answered 500 there. Here the demo's user logs in by email, as such
    a model's does, and every table shows what ``get_username()`` gives, as the call's own page does."""
    ann = make_user("ann-login", perms=OPERATOR)  # email: ann-login@example.com
    monkeypatch.setattr(type(ann), "USERNAME_FIELD", "email")
    assert ann.get_username() == "ann-login@example.com"
    call = make_call("deploy", "input_required", user=ann)
    operator = client_for(ann)
    html = operator.get(reverse(DASHBOARD)).content.decode()
    oldest = html.split('id="mcp-oldest"')[1].split("</section>")[0]
    assert "<td>ann-login@example.com</td>" in oldest, oldest
    assert "<td>ann-login@example.com</td>" in operator.get(reverse(DATA)).json()["html"]
    # A call's page lists the other calls of its session in the same tables.
    ToolCall.objects.filter(pk=call.pk).update(session_id="s-1")
    other = make_call("deploy", "completed", user=ann, session_id="s-1")
    page = operator.get(reverse("admin:mcp_tools_toolcall_change", args=[other.pk])).content.decode()
    linked = page.split('id="mcp-linked"')[1]
    assert str(call.pk) in linked and "<td>ann-login@example.com</td>" in linked, linked


# -- a site below a script prefix -------------------------------------------------------------------


@pytest.mark.django_db
def test_the_dashboards_websocket_path_keeps_the_script_prefix() -> None:
    """A site served below ``/app`` (``FORCE_SCRIPT_NAME``, ``SCRIPT_NAME`` or an ASGI ``root_path``): the
    page opened ``/mcp-tools/console/ws/``, outside the site, while its poll URL kept the prefix."""
    operator = client_for(make_user("operator", perms=OPERATOR))
    url = reverse(DASHBOARD)
    set_script_prefix("/app/")  # what Django's WSGI and ASGI handlers do for such a site (its test client does not)
    try:
        html = operator.get(url).content.decode()
    finally:
        clear_script_prefix()
    assert 'data-poll-url="/app/admin/mcp_tools/toolcall/dashboard/data/"' in html
    assert 'data-ws-path="/app/mcp-tools/console/ws/"' in html
