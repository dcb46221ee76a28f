"""Settings of a live server whose clients without resume tokens wait only briefly for converging state.

``CONVERGE_WAIT_SECONDS`` 0.5 s, shorter than the demo's rollout (3 s): the wait runs
out and such a client gets the pending state (tests/test_resume_tokens.py).
"""

from tests.server_settings import *  # noqa: F401,F403
from tests.server_settings import MCP_TOOLS

MCP_TOOLS = {**MCP_TOOLS, "CONVERGE_WAIT_SECONDS": 0.5}
