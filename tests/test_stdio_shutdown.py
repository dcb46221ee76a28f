"""``mcp_stdio`` when stdin closes: accepted requests finish and their replies are written before it exits.

A client that pipes its requests and closes stdin (``echo ... | manage.py mcp_stdio``)
reads stdout to the end: before the fix the server cancelled everything still
running at end of input, so a slow request's reply was never written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


def run_stdio(messages: list[dict[str, Any]], *args: str) -> tuple[dict[Any, dict[str, Any]], list[dict[str, Any]], int]:
    """Pipe ``messages`` into ``manage.py mcp_stdio``, close stdin, read stdout to the end.

    Returns the replies by id, every message the server wrote, and the exit code.
    """
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.server_settings", "PYTHONPATH": str(ROOT)}
    stdin = "".join(json.dumps(message) + "\n" for message in messages)
    done = subprocess.run([sys.executable, "manage.py", "mcp_stdio", *args], cwd=ROOT, env=env, input=stdin,
                          capture_output=True, text=True, timeout=60)
    written = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    replies = {m["id"]: m for m in written if "id" in m and ("result" in m or "error" in m)}
    return replies, written, done.returncode


def handshake(capabilities: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    return [
        {"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": capabilities or {}, "clientInfo": {"name": "pipe", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ]


def test_a_slow_request_piped_before_eof_gets_its_reply(django_db_setup: None) -> None:
    replies, _, code = run_stdio([
        *handshake(),
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "slow_count", "arguments": {"n": 20}}},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "last"}}},
    ])
    assert code == 0
    assert replies[1]["result"]["content"] == [{"type": "text", "text": "counted to 20"}], replies.get(1)
    assert replies[2]["result"]["content"] == [{"type": "text", "text": "last"}]


def test_past_the_grace_period_each_accepted_request_gets_an_error_reply(django_db_setup: None) -> None:
    """A request that cannot finish (here: waiting for an elicitation answer that can never come) is answered, not dropped."""
    replies, written, code = run_stdio([
        *handshake({"elicitation": {"form": {}}}),
        {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "deploy", "arguments": {"service": "pipe"}}},
        {"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "slow_count", "arguments": {"n": 100}}},
    ], "--grace", "1")
    assert code == 0
    assert any(m.get("method") == "elicitation/create" for m in written), "the server asked before stdin closed"
    for request_id in (7, 8):
        error = replies[request_id]["error"]
        assert error["code"] == -32603
        assert "shutting down" in error["message"]
    # Exactly one reply per request id.
    ids = [m["id"] for m in written if "id" in m and ("result" in m or "error" in m)]
    assert sorted(map(str, ids)) == sorted(map(str, ["init", 7, 8]))


def test_a_line_nested_deeper_than_the_stack_is_a_parse_error_and_the_server_goes_on(django_db_setup: None) -> None:
    """Found by the fuzzer (the same decoder as HTTP): the RecursionError used to end the stdio server."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.server_settings", "PYTHONPATH": str(ROOT)}
    messages = handshake() + [{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "after"}}}]
    lines = [json.dumps(messages[0]), json.dumps(messages[1]), "[" * 100_000, json.dumps(messages[2])]
    done = subprocess.run([sys.executable, "manage.py", "mcp_stdio"], cwd=ROOT, env=env, input="\n".join(lines) + "\n",
                          capture_output=True, text=True, timeout=60)
    written = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    assert any(m.get("error", {}).get("code") == -32700 and m.get("id") is None for m in written), written
    assert [m["result"]["content"] for m in written if m.get("id") == 3] == [[{"type": "text", "text": "after"}]]
