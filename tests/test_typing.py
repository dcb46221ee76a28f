"""The package type-checks (mypy with the django-stubs plugin; configuration in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_mcp_tools_passes_mypy() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "mypy", "mcp_tools"], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert completed.returncode == 0, completed.stdout[-4000:] + completed.stderr[-2000:]
