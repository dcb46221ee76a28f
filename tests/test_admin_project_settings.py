"""The admin console under project settings other than the demo's: each failing before its mend.

``USE_TZ = False`` (naive datetimes everywhere), a user model whose login field is not ``username``,
and a site served below a script prefix (``FORCE_SCRIPT_NAME``, an ASGI ``root_path``).
"""
from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.test import override_settings
from django.urls import reverse

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
