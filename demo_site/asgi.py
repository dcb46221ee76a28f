"""ASGI entry point: the MCP endpoint (a Channels consumer) in front of Django.

Run with ``daphne demo_site.asgi:application`` (or ``python manage.py runserver``,
which uses daphne because it is first in INSTALLED_APPS), or with
``uvicorn demo_site.asgi:application``.
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "demo_site.settings")

# Set Django up (apps, settings) before importing anything that touches models.
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

import mcp_tools.routing  # noqa: E402

application = ProtocolTypeRouter(
    {
        # MCP_TOOLS["PATH"] (default /mcp): every MCP transport lives here. Everything else: the
        # ordinary Django site (admin, index page). The demo serves its static files (admin CSS,
        # the console's script) under any ASGI server, as runserver does; a production site
        # serves them with its web server or WhiteNoise.
        "http": mcp_tools.routing.mcp_asgi_app(ASGIStaticFilesHandler(django_asgi_app)),
        # The admin's live dashboard of calls (staff only, the admin session's cookie).
        "websocket": mcp_tools.routing.console_websocket_app(),
    }
)
