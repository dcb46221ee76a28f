"""The MCP conformance suite (``@modelcontextprotocol/conformance``) against the demo site.

``scripts/test`` installs the suite and Node 22 from npm (:func:`tests.clients.conformance_node`) and sets
``MCP_CONFORMANCE_DIR``. Every scenario's outcome is compared with
``tests/conformance/expected-failures.txt``: an unexpected failure and an
unexpected pass both fail the test.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.clients import conformance_node

CONFORMANCE_DIR = os.environ.get("MCP_CONFORMANCE_DIR")
EXPECTED_FILE = Path(__file__).parent / "conformance" / "expected-failures.txt"
SUMMARY_LINE = re.compile(r"^\s*([✓✗])\s+([\w.-]+):\s+(\d+) passed, (\d+) failed")

if not CONFORMANCE_DIR and os.environ.get("CI"):
    raise RuntimeError("CI run without MCP_CONFORMANCE_DIR: scripts/test did not install the conformance suite")

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(not CONFORMANCE_DIR, reason="conformance suite not installed (needs npm; scripts/test installs it)"),
]


def expected_failures(requirements: str) -> set[str]:
    entries = set()
    for line in EXPECTED_FILE.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            reqs, scenario = line.split()
            if reqs == requirements:
                entries.add(scenario)
    return entries


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("requirements", ["2025-11-25", "2026-07-28"])
def test_conformance_suite_scenarios_match_expectations(start_server, start_worker, requirements: str, tmp_path: Path) -> None:
    server = start_server(server="daphne").start()
    start_worker().start()  # task-supporting fixtures run on Celery
    base = Path(CONFORMANCE_DIR or "")
    node = conformance_node(base)
    cli = base / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
    completed = subprocess.run(
        [str(node), str(cli), "server", "--url", server.url, "--requirements", requirements, "-o", str(tmp_path)],
        capture_output=True, text=True, timeout=900,
    )
    outcomes: dict[str, bool] = {}
    in_summary = False
    for line in completed.stdout.splitlines():
        if "=== SUMMARY ===" in line:
            in_summary = True
            continue
        match = SUMMARY_LINE.match(line) if in_summary else None
        if match:
            outcomes[match.group(2)] = match.group(1) == "✓" and match.group(4) == "0"
    assert outcomes, f"no scenario summary in the suite's output:\n{completed.stdout[-3000:]}\n{completed.stderr[-2000:]}"
    failing = {name for name, passed in outcomes.items() if not passed}
    expected = expected_failures(requirements)
    passed = len(outcomes) - len(failing)
    print(f"conformance {requirements}: {passed} of {len(outcomes)} scenarios passed; failing: {sorted(failing)}")
    assert failing - expected == set(), f"unexpected failures: {sorted(failing - expected)}\n{completed.stdout[-6000:]}"
    assert expected - failing == set(), f"expected failures that now pass (remove them from the list): {sorted(expected - failing)}"
