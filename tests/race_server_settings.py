"""Settings of the live servers tests/test_keepalive.py starts: the live servers' settings plus
``tests.race_app`` (a slow sync ``ctx.once`` effect), and a short ``CANCEL_POLL_SECONDS`` so
that a round looks abandoned after 0.75 s without a touch."""

from tests.server_settings import *  # noqa: F401,F403
from tests.server_settings import INSTALLED_APPS, MCP_TOOLS

INSTALLED_APPS = [*INSTALLED_APPS, "tests.race_app"]
MCP_TOOLS = {**MCP_TOOLS, "CANCEL_POLL_SECONDS": 0.25}
