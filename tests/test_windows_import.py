"""mcp_stdio's Windows claims (9636e55: cp1252 pipes, "no signal handlers in Windows' event loops"):
os.register_at_fork does not exist on Windows, and server/threads.py (new today; store/hop.py,
store/lane.py and server/background.py before it) calls it unconditionally at import, so the stdio
transport cannot even be imported there. Emulated here by removing os.register_at_fork in a child."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = """
import os
del os.register_at_fork, os.fork  # as on Windows (neither exists there)
import django
django.setup()
import mcp_tools.server.threads
import mcp_tools.transports.stdio
print("imported")
"""


def test_the_stdio_transport_imports_where_os_has_no_register_at_fork() -> None:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "demo_site.settings", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "imported" in done.stdout, done.stderr[-600:]
