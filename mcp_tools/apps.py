from __future__ import annotations

from django.apps import AppConfig
from django.utils.module_loading import autodiscover_modules


class SimpleMcpToolsConfig(AppConfig):
    """mcp_tools without autodiscovery of ``mcp_tools.py`` modules."""

    name = "mcp_tools"
    verbose_name = "MCP tools"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the system checks)


class McpToolsConfig(SimpleMcpToolsConfig):
    """The default config: imports each installed app's ``mcp_tools.py`` (like ``admin.py``)."""

    default = True

    def ready(self) -> None:
        super().ready()
        from django.core.exceptions import ImproperlyConfigured

        from .conf import mcp_settings

        try:
            discover = mcp_settings.AUTODISCOVER
        except ImproperlyConfigured:
            # A value that is no flag ("False" is true) discovers nothing: raised here, it ended
            # django.setup() with a traceback, and manage.py check never got to report E010.
            discover = False
        if discover:
            autodiscover_modules("mcp_tools")
