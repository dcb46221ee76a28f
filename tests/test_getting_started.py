"""docs/getting-started.md, run as written: a new Django project, a tool, a real client.

The page marks what a reader does with fenced blocks whose info string says so:
``bash step`` (commands, run in order in one shell directory that ``cd`` moves),
``python file=PATH`` (a new file) and ``python append=PATH`` (added to a file), both
relative to the folder the steps are in; ``bash server`` (the server, started in the
background) and ``bash client`` (the client run against it). This test runs them in a
temporary directory with this test run's virtualenv (whose interpreter and scripts come
first on ``PATH``), so the page cannot drift from what works.

Two substitutions keep it fast and parallel-safe: the ``pip install`` step is checked
against the virtualenv (the package and its extra are already installed there, from this
checkout) and against this checkout (the folder the page names, with the extras it asks
for) rather than run, and the server's port 8000 becomes a free port.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.conftest import free_port

CHECKOUT = Path(__file__).resolve().parent.parent
PAGE = CHECKOUT / "docs" / "getting-started.md"
#: The page's stand-in for the folder a reader cloned the repository into (it is not on PyPI).
CHECKOUT_ON_PAGE = "/path/to/django-mcp-tools"
BLOCK = re.compile(r"^```(\w+) ([^\n]+)\n(.*?)^```$", re.M | re.S)

pytestmark = pytest.mark.live


@dataclass
class Block:
    language: str
    marker: str
    text: str


def page_blocks() -> list[Block]:
    return [Block(language, marker.strip(), text) for language, marker, text in BLOCK.findall(PAGE.read_text())]


def clean_env(venv_bin: Path) -> dict[str, str]:
    """The environment of a reader's shell: this virtualenv first on PATH, none of the test run's Django settings."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("DJANGO_", "MCP_", "PYTEST", "COV_")) and key not in ("DATABASE_URL", "REDIS_URL", "PYTHONPATH", "CI")}
    env["PATH"] = f"{venv_bin}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(venv_bin.parent)
    return env


def install_requirement(command: str) -> Requirement:
    """What a ``pip install '/path/to/django-mcp-tools[extra]'`` step installs, as a requirement.

    The page installs from a checkout (the package is not on PyPI): the folder must be this
    checkout's stand-in, whose ``pyproject.toml`` names the distribution and defines the extras.
    """
    words = shlex.split(command)
    assert words[:2] == ["pip", "install"] and len(words) == 3, f"unexpected install step: {command!r}"
    folder, bracket, extras = words[2].partition("[")
    assert folder == CHECKOUT_ON_PAGE, f"the step installs {folder!r}, not a checkout ({CHECKOUT_ON_PAGE})"
    project = tomllib.loads((CHECKOUT / "pyproject.toml").read_text())["project"]
    wanted = Requirement(project["name"] + bracket + extras)
    assert wanted.extras <= set(project.get("optional-dependencies", {})), f"no such extra: {wanted.extras}"
    return wanted


def test_the_install_step_installs_a_checkout_with_the_client_extra() -> None:
    [step] = [block.text for block in page_blocks() if block.marker == "step" and block.text.startswith("pip install")]
    assert install_requirement(step.splitlines()[0]).extras == {"client"}


def check_installed(command: str) -> None:
    """A ``pip install`` step: the distribution and the extra's requirements are in this venv."""
    wanted = install_requirement(command)
    dist = metadata.distribution(wanted.name)
    for spec in dist.requires or []:
        requirement = Requirement(spec)
        # The base requirements, and those of the extras the step names.
        if requirement.marker is not None and not any(requirement.marker.evaluate({"extra": extra}) for extra in wanted.extras or {""}):
            continue
        installed = metadata.version(requirement.name)
        assert requirement.specifier.contains(installed, prereleases=True), f"{requirement} but {installed} is installed"


def run_shell(script: str, cwd: Path, env: dict[str, str], timeout: float = 180) -> tuple[str, Path]:
    """Run a step in bash from ``cwd``; returns its output and the directory it ended in."""
    marker = "__CWD__="
    completed = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", f"{script}\necho {marker}\"$PWD\""],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
    )
    assert completed.returncode == 0, f"step failed ({completed.returncode}):\n{script}\n{completed.stdout}\n{completed.stderr}"
    output, _, where = completed.stdout.rpartition(marker)
    return output, Path(where.strip())


def wait_for_port(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"the server exited: {log.read_text()[-3000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"the server did not listen in 60 s: {log.read_text()[-3000:]}")


def console_websocket_status(port: int) -> int:
    """The HTTP status a WebSocket handshake to the admin dashboard's live updates gets (no admin session)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall((
            "GET /mcp-tools/console/ws/ HTTP/1.1\r\n"
            f"Host: 127.0.0.1:{port}\r\nOrigin: http://127.0.0.1:{port}\r\n"
            "Upgrade: websocket\r\nConnection: Upgrade\r\n"
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        ).encode())
        head = b""
        while b"\r\n" not in head:
            chunk = sock.recv(4096)
            if not chunk:
                break
            head += chunk
    return int(head.split()[1]) if head.startswith(b"HTTP/") else 0


def test_the_page_marks_every_kind_of_step() -> None:
    markers = [block.marker.split("=")[0] for block in page_blocks()]
    assert {"step", "file", "append", "server", "client"} <= set(markers)
    # Every fenced block of the page is a step this test runs: no unmarked commands or files.
    assert PAGE.read_text().count("```") == 2 * len(markers)


def test_getting_started_runs_as_written(tmp_path: Path) -> None:
    env = clean_env(Path(sys.executable).parent)
    port = free_port()
    cwd = tmp_path
    outputs: list[str] = []
    server: subprocess.Popen[bytes] | None = None
    log = tmp_path / "server.log"
    try:
        for block in page_blocks():
            kind, _, path = block.marker.partition("=")
            if kind == "step":
                lines = block.text.splitlines()
                if lines and lines[0].startswith("pip install"):
                    check_installed(lines[0])
                    lines = lines[1:]
                if lines:
                    output, cwd = run_shell("\n".join(lines), cwd, env)
                    outputs.append(output)
            elif kind == "file":
                target = cwd / path
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(block.text.replace("127.0.0.1:8000", f"127.0.0.1:{port}"))
            elif kind == "append":
                target = cwd / path
                target.write_text(target.read_text() + "\n" + block.text)
            elif kind == "server":
                command = block.text.strip().replace(" 8000", f" {port}")
                # "Ctrl-C stops it": the test sends SIGINT to the server's process group at the end.
                server = subprocess.Popen(["bash", "-c", f"exec {command}"], cwd=cwd, env=env, stdout=log.open("wb"),
                                          stderr=subprocess.STDOUT, start_new_session=True)
                wait_for_port(port, server, log)
            elif kind == "client":
                token = re.search(r"Generated token (\w+) for user me", "\n".join(outputs))
                assert token, f"no token in the steps' output: {outputs}"
                output, _ = run_shell(block.text.replace("YOUR_TOKEN", token.group(1)), cwd, env, timeout=60)
                outputs.append(output)
            else:
                raise AssertionError(f"unknown step marker {block.marker!r}")
        # The admin's dashboard (docs/admin.md) opens its live updates' WebSocket: asgi.py serves
        # it (the console refuses a caller with no admin session) rather than failing with no
        # application for the scope type, which the page retries, and the server logs, every 30 s.
        assert server is not None and console_websocket_status(port) == 403
    finally:
        if server is not None and server.poll() is None:
            os.killpg(server.pid, signal.SIGINT)
            try:
                server.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait(5)
    assert server is not None, "the page never started the server"
    printed = "\n".join(outputs)
    # What the page promises each step prints. Step 5's `check` finds nothing (no W005: the
    # settings step makes SQLite's transactions IMMEDIATE), so no later command warns either.
    assert "System check identified no issues" in printed, printed
    assert "Hello, Ada!" in outputs[-2], "mcp_call did not print the tool's answer"
    assert "tools: ['greet']" in outputs[-1] and "Hello, Ada!" in outputs[-1], printed
    # The server logged the client's requests to /mcp.
    assert "POST /mcp" in log.read_text()
    assert "No application configured for scope type" not in log.read_text()


def test_the_settings_step_says_what_a_404_at_the_endpoint_under_runserver_means() -> None:
    """Without "daphne" in INSTALLED_APPS ``runserver`` serves WSGI, never ``asgi.py``: ``POST /mcp`` is Django's
    404 page and ``check`` is clean (no check: a site serving ``asgi.py`` with uvicorn or daphne directly has no
    reason to install the app). The step that adds daphne says so."""
    step = PAGE.read_text().split("## 3. Settings", 1)[1].split("\n## ", 1)[0]
    prose = " ".join(step.split("```", 1)[0].split())
    assert "without it `runserver` serves WSGI" in prose and "`POST /mcp` gets Django's \"Page not found\" (404)" in prose
