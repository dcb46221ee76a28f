"""Mounting the endpoint in a Channels ``ProtocolTypeRouter``.

One line in ``asgi.py``::

    application = ProtocolTypeRouter({
        "http": URLRouter([*mcp_tools.routing.http_urlpatterns(), re_path(r"", django_asgi_app)]),
    })
"""

from __future__ import annotations

from typing import Any

from django.urls import path


def mcp_path() -> str:
    from .conf import mcp_settings

    return str(mcp_settings.PATH).strip("/")


def http_urlpatterns() -> list[Any]:
    """URL patterns for Channels' ``URLRouter`` serving MCP at ``MCP_TOOLS["PATH"]``."""
    from .transports.http import McpEndpoint

    # Channels' URLRouter takes ASGI applications where Django's path() expects views.
    return [path(mcp_path(), McpEndpoint.as_asgi(), name="mcp_tools_endpoint")]  # type: ignore[arg-type]


def mcp_asgi_app(django_asgi_app: Any) -> Any:
    """An ASGI app that serves MCP at the configured path and everything else with Django."""
    from channels.routing import URLRouter
    from django.urls import re_path

    return URLRouter([*http_urlpatterns(), re_path(r"", django_asgi_app)])
