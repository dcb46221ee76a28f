"""``demo_setup`` prints 'clerk' and 'viewer' as admin logins under the admin's: they are staff,
with the calls console roles of docs/admin.md (the clerk may act, the viewer may only look), and
their shop permissions (used by the model tools and their tests) are as they were."""

from __future__ import annotations

import io

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_demo_staff_logins_open_the_admin_with_their_console_roles() -> None:
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from demo_site.shop.seed import STAFF

    out = io.StringIO()
    call_command("demo_setup", "--no-input", stdout=out, stderr=io.StringIO())
    assert "staff users 'clerk' and 'viewer' too, password: the username" in out.getvalue()
    for name in ("clerk", "viewer"):
        client = Client()
        response = client.post("/admin/login/?next=/admin/", {"username": name, "password": name, "next": "/admin/"})
        assert response.status_code == 302, f"{name!r} cannot log into the admin the demo points them to"
        assert client.get("/admin/mcp_tools/toolcall/").status_code == 200
        user = get_user_model().objects.get(username=name)
        assert {p for p in user.get_all_permissions() if p.startswith("shop.")} == set(STAFF[name][1])
    clerk, viewer = (get_user_model().objects.get(username=name) for name in ("clerk", "viewer"))
    assert clerk.has_perm("mcp_tools.change_toolcall") and clerk.has_perm("mcp_tools.view_toolcall")
    assert viewer.has_perm("mcp_tools.view_toolcall") and not viewer.has_perm("mcp_tools.change_toolcall")
    # Run again (scripts/demo does on every start): nothing changes.
    call_command("demo_setup", "--no-input", stdout=io.StringIO(), stderr=io.StringIO())
    assert get_user_model().objects.get(username="viewer").is_staff
