"""Settings of the ``mcp_stdio`` processes that tests/test_stdio_defects.py starts: the live
servers' settings plus ``tests.stdio_app`` (a tool that prints, slow sync tools)."""

from tests.server_settings import *  # noqa: F401,F403
from tests.server_settings import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "tests.stdio_app"]
