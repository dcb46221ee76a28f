"""Settings of the live servers tests/test_keepalive.py starts: the live servers' settings plus
``tests.race_app`` (a slow sync ``ctx.once`` effect), and ``CANCEL_POLL_SECONDS`` said outright:
a round looks abandoned after 3 s without a touch. (0.25 s, abandoned after 0.75 s, took a living
process for a dead one on a loaded machine: its touches came late, and the other process took the
round over.)"""

from tests.server_settings import *  # noqa: F401,F403
from tests.server_settings import INSTALLED_APPS, MCP_TOOLS

INSTALLED_APPS = [*INSTALLED_APPS, "tests.race_app"]
MCP_TOOLS = {**MCP_TOOLS, "CANCEL_POLL_SECONDS": 1.0}
