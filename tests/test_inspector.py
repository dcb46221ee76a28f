"""The MCP Inspector CLI (``@modelcontextprotocol/inspector --cli``) against a live demo server, in both eras.

``scripts/test`` installs the Inspector beside the conformance suite (``MCP_CONFORMANCE_DIR``)
with Node 22 from npm. The commands run here are the ones README.md documents.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.clients import conformance_node, create_user_with_token

CONFORMANCE_DIR = Path(os.environ.get("MCP_CONFORMANCE_DIR") or "/nonexistent")
NODE_DIR = CONFORMANCE_DIR / "node_modules"
NODE = conformance_node(CONFORMANCE_DIR)
INSPECTOR = NODE_DIR / "@modelcontextprotocol" / "inspector" / "clients" / "launcher" / "build" / "index.js"
INSTALLED = NODE.exists() and INSPECTOR.exists()

if not INSTALLED and os.environ.get("CI"):
    raise RuntimeError("CI run without the MCP Inspector: scripts/test did not install it into MCP_CONFORMANCE_DIR")

pytestmark = [
    pytest.mark.live,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not INSTALLED, reason="MCP Inspector not installed (needs npm; scripts/test installs it)"),
]

ERAS = ["legacy", "modern"]


def inspector(url: str, era: str, home: Path, *args: str, token: str | None = None) -> tuple[int, Any, str]:
    """Run ``mcp-inspector --cli URL --transport http [--header ...] --protocol-era ERA ARGS``.

    Returns the exit status, the JSON it printed (None if none) and its stderr.
    """
    headers = ["--header", f"Authorization: Token {token}"] if token else []
    completed = subprocess.run(
        [str(NODE), str(INSPECTOR), "--cli", url, "--transport", "http", *headers, "--protocol-era", era, *args],
        capture_output=True, text=True, timeout=120,
        # Its catalog and stored state go to a scratch home, not the user's.
        env={**os.environ, "HOME": str(home), "PATH": f"{NODE.parent}:{os.environ.get('PATH', '')}"},
    )
    try:
        printed = json.loads(completed.stdout) if completed.stdout.strip() else None
    except json.JSONDecodeError:
        printed = None
    return completed.returncode, printed, completed.stderr + completed.stdout


@pytest.fixture
def tokens() -> dict[str, str]:
    """A clerk who may restock products, and a visitor who may not."""
    return {"clerk": create_user_with_token("clerk", ("inventory.change_product",)), "visitor": create_user_with_token("visitor")}


@pytest.mark.parametrize("era", ERAS)
def test_inspector_lists_tools_as_the_token_user(start_server: Any, tokens: dict[str, str], era: str, tmp_path: Path) -> None:
    url = start_server().start().url
    status, clerk, output = inspector(url, era, tmp_path, "--method", "tools/list", token=tokens["clerk"])
    assert status == 0, output
    clerk_tools = {tool["name"] for tool in clerk["tools"]}
    assert {"echo", "deploy", "restock"} <= clerk_tools
    status, visitor, output = inspector(url, era, tmp_path, "--method", "tools/list", token=tokens["visitor"])
    assert status == 0, output
    visitor_tools = {tool["name"] for tool in visitor["tools"]}
    assert "echo" in visitor_tools and "restock" not in visitor_tools


@pytest.mark.parametrize("era", ERAS)
def test_inspector_calls_a_tool(start_server: Any, tokens: dict[str, str], era: str, tmp_path: Path) -> None:
    url = start_server().start().url
    status, result, output = inspector(
        url, era, tmp_path, "--method", "tools/call", "--tool-name", "echo", "--tool-arg", "text=hello from the inspector",
        token=tokens["visitor"],
    )
    assert status == 0, output
    assert result["content"] == [{"type": "text", "text": "hello from the inspector"}]
    if era == "modern":
        # Served by the stateless 2026-07-28 handler, not a session.
        assert result["resultType"] == "complete"


@pytest.mark.parametrize("era", ERAS)
def test_inspector_without_the_token_is_refused(start_server: Any, era: str, tmp_path: Path) -> None:
    # The demo server of the tests allows anonymous callers; this one does not (like scripts/demo).
    url = start_server(env={"MCP_TESTS_NO_ANON": "1"}).start().url
    status, _, output = inspector(url, era, tmp_path, "--stored-auth-only", "--method", "tools/list")
    assert status != 0
    assert '"code":"auth_required"' in output, output
