"""``mcp_call`` at an input prompt stops at the first Ctrl-C, and ends the call it leaves as cancelled.

Found by a first-hour review (``mcp_call deploy`` in a terminal, Ctrl-C at "Accept, decline or
cancel?"): the prompt read stdin on the event loop's own thread, so asyncio's SIGINT handler could only
cancel a task that never got to run; the read went on, the first Ctrl-C did nothing, and a second one
ended in a KeyboardInterrupt traceback. The README: "a call the command stops on, with --no-input, a
closed stdin or Ctrl-C, is ended as cancelled".
"""

from __future__ import annotations

import os
import pty
import select
import signal
import sys
import time
from pathlib import Path

import pytest
from django.contrib.auth.models import User

from mcp_tools.models import ToolCall

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parent.parent


def _read_until(fd: int, wanted: bytes, seconds: float) -> bytes:
    seen = b""
    end = time.monotonic() + seconds
    while wanted not in seen and time.monotonic() < end:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    return seen


def _exited(pid: int, seconds: float) -> int | None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        time.sleep(0.1)
    return None


def test_ctrl_c_at_a_prompt_stops_the_command_at_once_and_cancels_the_call(django_db_setup: None) -> None:
    User.objects.create_superuser("operator", "op@example.com", "x")
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.stdio_settings", "PYTHONPATH": str(ROOT)}
    pid, fd = pty.fork()
    if pid == 0:  # the child: the command, as at a terminal
        os.chdir(ROOT)
        os.execve(sys.executable, [sys.executable, "manage.py", "mcp_call", "deploy", "--arg", "service=ctrl-c", "--user", "operator"], env)
    status: int | None = None
    try:
        seen = _read_until(fd, b"cancel?", 60)
        assert b"cancel?" in seen, seen.decode(errors="replace")
        time.sleep(0.3)
        os.write(fd, b"\x03")  # Ctrl-C, once
        status = _exited(pid, 15)
        assert status is not None, "the command went on after the first Ctrl-C"
        said = _read_until(fd, b"never printed", 1).decode(errors="replace")
    finally:
        if status is None:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(fd)
    call = ToolCall.objects.get(tool_name="deploy")
    assert call.status == "cancelled", (call.status, call.status_message)
    # A terminal user stopped it: one line that says so, the shell's usual status for SIGINT, and no
    # traceback (found by a first-hour review: a KeyboardInterrupt traceback of asyncio's runner).
    assert "Traceback" not in said and "interrupted" in said.lower(), said
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 130, status
