"""Mounting the endpoint in a Channels ``ProtocolTypeRouter``.

One line in ``asgi.py``, and one more for the admin's live dashboard::

    application = ProtocolTypeRouter({
        "http": mcp_tools.routing.mcp_asgi_app(django_asgi_app),
        "websocket": mcp_tools.routing.console_websocket_app(),
    })
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from asgiref.sync import markcoroutinefunction
from django.urls import path


def mcp_path() -> str:
    """The endpoint's route in a ``URLRouter``: ``MCP_TOOLS["PATH"]`` without its leading ``/``."""
    from .conf import endpoint_path

    return endpoint_path()[1:]


def require_installed() -> None:
    """Raise ``ImproperlyConfigured`` unless ``mcp_tools`` is in ``INSTALLED_APPS``.

    Called where the endpoint is mounted: without the app its system checks do not run, so
    ``check`` passed, and every MCP request was a 500 (``ToolCall`` "doesn't declare an explicit
    app_label").
    """
    from django.apps import apps
    from django.core.exceptions import ImproperlyConfigured

    if not apps.is_installed("mcp_tools"):
        raise ImproperlyConfigured("The MCP endpoint is mounted but mcp_tools is not installed: add 'mcp_tools' to "
                                   "INSTALLED_APPS (its models, system checks and tool discovery need it).")


def http_urlpatterns() -> list[Any]:
    """URL patterns for Channels' ``URLRouter`` serving MCP at ``MCP_TOOLS["PATH"]``.

    Raises ``ImproperlyConfigured`` if ``mcp_tools`` is not in ``INSTALLED_APPS``.
    """
    require_installed()
    from .transports.http import McpEndpoint
    from .transports.oauth import SUFFIXED_ROUTE, ProtectedResourceMetadata

    metadata = ProtectedResourceMetadata.as_asgi()
    # Channels' URLRouter takes ASGI applications where Django's path() expects views.
    return [
        path(mcp_path(), McpEndpoint.as_asgi(), name="mcp_tools_endpoint"),  # type: ignore[arg-type]
        # RFC 9728 metadata (404 unless MCP_TOOLS["OAUTH"] is set): root and path-suffixed forms, the
        # latter for every path the endpoint is served at (this mount, the URLconf's includes, RESOURCE's).
        path(".well-known/oauth-protected-resource", metadata, name="mcp_tools_resource_metadata"),  # type: ignore[arg-type]
        path(SUFFIXED_ROUTE, metadata),  # type: ignore[arg-type]
    ]


def mcp_asgi_app(django_asgi_app: Any) -> Any:
    """An ASGI app that serves MCP at the configured path and everything else with Django.

    Raises ``ImproperlyConfigured`` if ``mcp_tools`` is not in ``INSTALLED_APPS``.
    """
    from django.urls import re_path

    return McpRouter([*http_urlpatterns(), re_path(r"", django_asgi_app)])


_NO_PATH = object()  # equal to no request path


class McpRouter:
    """Channels' ``URLRouter`` over ``routes``, with a shortcut to the MCP endpoint.

    A request for exactly the MCP path (the outermost router, no ``root_path``) goes
    straight to the endpoint the routes mount there: the ``URLRouter`` would find the
    same one after a regex match and a copy of the scope (``url_route`` stays unset:
    the endpoint has no URL parameters). Every other request, WebSocket ones included,
    goes through the ``URLRouter`` as before.
    """

    def __init__(self, routes: list[Any]) -> None:
        from channels.routing import URLRouter

        self.router = URLRouter(routes)
        self.endpoint: Any = None
        self.path: Any = _NO_PATH
        for route in routes:
            if getattr(route, "name", None) == "mcp_tools_endpoint":
                route_text = str(route.pattern)
                if "<" not in route_text:  # a plain path: compared as a string below
                    self.endpoint, self.path = route.callback, "/" + route_text
                break

    # A plain function that hands back the chosen application's coroutine, not a coroutine that
    # awaits it: one coroutine less on every request (~0.45% of a plain echo's instructions).
    # Marked as a coroutine function, so that servers and routers that tell ASGI 3 from ASGI 2
    # by ``asyncio.iscoroutinefunction(app.__call__)`` (uvicorn's "auto") still see ASGI 3.
    @markcoroutinefunction
    def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Awaitable[None]:
        if scope.get("path") == self.path and not scope.get("root_path") and "path_remaining" not in scope:
            return self.endpoint(scope, receive, send)
        return self.router(scope, receive, send)


def websocket_urlpatterns() -> list[Any]:
    """WebSocket routes of the admin's live dashboard (bare: add session auth and an Origin check yourself)."""
    from .console.consumers import ConsoleConsumer, websocket_path

    return [path(websocket_path(), ConsoleConsumer.as_asgi(), name="mcp_tools_console")]


def console_websocket_app() -> Any:
    """The dashboard's WebSocket app, authenticated by the admin session, Origin checked against ALLOWED_HOSTS.

    The Origin check matters: a browser sends the admin's session cookie with a
    WebSocket opened by any page, so without it another site could watch the console.

    A WebSocket to any other path is refused at the handshake (the server answers 403), as a
    foreign Origin is: Channels' ``URLRouter`` raises ``ValueError`` for a path none of its routes
    match, which the server answered with a 500 and a logged traceback for every stray client.
    """
    from channels.auth import AuthMiddlewareStack
    from channels.routing import URLRouter
    from channels.security.websocket import AllowedHostsOriginValidator, WebsocketDenier
    from django.urls import re_path

    routes = [*websocket_urlpatterns(), re_path(r"", WebsocketDenier.as_asgi())]
    return AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(routes)))
