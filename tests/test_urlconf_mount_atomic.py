"""The URLconf mount (``path("mcp", include("mcp_tools.urls"))``) on a site with ``ATOMIC_REQUESTS``.

Django refuses to wrap an async view in the request's transaction: every request to the mount was
an HTML 500 ("You cannot use ATOMIC_REQUESTS with async views") until the view was exempted, on every
database, as ``transaction.non_atomic_requests`` exempts a view from one.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

from tests.asgi_client import call_modern
from tests.test_urlconf_mount_wsgi import post
from tests.clients import create_user_with_token

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def atomic_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    """``DATABASES["default"]["ATOMIC_REQUESTS"] = True``, which Django reads on every request."""
    monkeypatch.setitem(connection.settings_dict, "ATOMIC_REQUESTS", True)


async def test_the_urlconf_mount_serves_calls_with_atomic_requests(atomic_requests: None, settings: Any) -> None:
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    from django.core.asgi import get_asgi_application

    app = get_asgi_application()

    async def via_django(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await app({**scope, "path": "/mcp-via-django", "raw_path": b"/mcp-via-django"}, receive, send)

    reply = await call_modern(via_django, "tools/call", {"name": "echo", "arguments": {"text": "hi"}})
    assert reply.status == 200, (reply.status, reply.body[:500])
    assert reply.json()["result"]["content"][0]["text"] == "hi"


def test_under_wsgi_the_mount_still_says_to_serve_the_site_over_asgi(atomic_requests: None) -> None:
    status, content_type, reply = post(create_user_with_token("visitor"))
    assert (status, content_type) == (500, "application/json")
    assert "ASGI" in reply["error"]["message"]  # type: ignore[index]


def test_the_view_is_exempt_on_every_database() -> None:
    """Aliases the project defines (a replica, say) as well as ``default``, as Django's handler asks."""
    from mcp_tools.transports.view import mcp_view

    exempt = getattr(mcp_view, "_non_atomic_requests", set())
    assert all(alias in exempt for alias in ("default", "replica", "analytics"))  # Django asks `alias in`
