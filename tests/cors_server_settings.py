"""Settings of live servers that browser pages reach across origins (tests/test_cors_browser.py).

``MCP_TESTS_ALLOWED_ORIGINS`` (space-separated) is the servers' ``ALLOWED_ORIGINS``.
"""

import os

from tests.server_settings import *  # noqa: F401,F403
from tests.server_settings import MCP_TOOLS

MCP_TOOLS["ALLOWED_ORIGINS"] = os.environ["MCP_TESTS_ALLOWED_ORIGINS"].split()
