"""Settings of the server processes the fault-injection suite starts (tests/test_faults.py).

The tests' database and defaults, except that every call gets its row almost at
once (``SLOW_CALL_SECONDS`` 0.05 s, and ``RECORD_ALL_CALLS`` for calls faster
than that): each call a fault or a cancel hits can then be checked against what
its client saw. By default a call shorter than 2 s leaves no row at all.
"""

from tests.server_settings import *  # noqa: F401,F403
from tests.server_settings import MCP_TOOLS

MCP_TOOLS = {**MCP_TOOLS, "RECORD_ALL_CALLS": True, "SLOW_CALL_SECONDS": 0.05}
