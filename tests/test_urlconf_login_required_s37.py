"""The URLconf mount on a site with Django's ``LoginRequiredMiddleware`` (Django 5.1+).

Found by a review of the first hour: every MCP request to ``path("mcp", include("mcp_tools.urls"))``, an
authenticated one too, was redirected to the site's login page (302), and so was the protected-resource
metadata a client reads before it has a token. The endpoint authenticates its callers itself.
"""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from tests.asgi_client import call_modern, request
from tests.clients import create_user_with_token

pytestmark = pytest.mark.django_db(transaction=True)


async def test_the_mount_and_its_metadata_answer_under_login_required_middleware(settings: Any) -> None:
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    settings.MIDDLEWARE = [*settings.MIDDLEWARE, "django.contrib.auth.middleware.LoginRequiredMiddleware"]
    from django.core.asgi import get_asgi_application

    app = get_asgi_application()

    async def via_django(scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = scope["path"]
        if path == "/mcp":
            path = "/mcp-via-django"
        await app({**scope, "path": path, "raw_path": path.encode()}, receive, send)

    token = await sync_to_async(create_user_with_token)("lena")
    reply = await call_modern(via_django, "tools/call", {"name": "echo", "arguments": {"text": "hi"}}, token=token)
    assert reply.status == 200, (reply.status, reply.headers if hasattr(reply, "headers") else None, reply.body[:300])
    assert reply.json()["result"]["content"][0]["text"] == "hi"
    metadata = await request(via_django, "GET", "/.well-known/oauth-protected-resource/mcp-via-django")
    assert metadata.status in (200, 404), (metadata.status, metadata.body[:300])  # not the login page's 302
