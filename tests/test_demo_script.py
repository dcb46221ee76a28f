"""``scripts/demo`` refuses a port another program holds, before it installs or starts anything.

Otherwise daphne only logs "Address already in use" and keeps running, while the script's
readiness probe reaches the other program and prints "The demo is ready" for a demo that is
not there. The script runs from a copy in a temporary folder: had the check let it go on, it
would make its ``.venv`` there (which the test sees), never in this checkout.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parent.parent


def run_demo(folder: Path, **env: str) -> subprocess.CompletedProcess[str]:
    (folder / "scripts").mkdir()
    shutil.copy2(CHECKOUT / "scripts" / "demo", folder / "scripts" / "demo")
    environ = {key: value for key, value in os.environ.items() if key not in ("HOST", "PORT")}
    return subprocess.run([str(folder / "scripts" / "demo")], env={**environ, "PYTHON": sys.executable, **env},
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("host", ["127.0.0.1", "0.0.0.0"])
def test_a_port_in_use_stops_the_demo_before_it_starts(tmp_path: Path, host: str) -> None:
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        completed = run_demo(tmp_path, HOST=host, PORT=str(port))
    assert completed.returncode != 0
    assert f"port {port} is in use" in completed.stderr and "PORT=" in completed.stderr
    assert "The demo is ready" not in completed.stdout
    assert not (tmp_path / ".venv").exists(), "the demo went on to install itself"
