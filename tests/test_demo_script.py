"""``scripts/demo``: the port it is given, the URLs it prints, and how Ctrl-C stops it.

It refuses a port another program holds, before it installs or starts anything.

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


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("listen", "printed"), [("http://0.0.0.0:9000", "http://127.0.0.1:9000"),
                                                 ("http://[::]:9000", "http://[::1]:9000")])
def test_a_wildcard_host_prints_urls_the_demo_answers(listen: str, printed: str) -> None:
    """``HOST=0.0.0.0 scripts/demo`` (a README example) listens everywhere; the URLs it prints are loopback's.

    A client cannot send 0.0.0.0 as its Host: the demo refused the URLs it printed (403 on the
    MCP endpoint, DisallowedHost on the admin).
    """
    import io
    import re

    from django.core.management import call_command
    from django.http.request import split_domain_port, validate_host
    from django.test import Client

    import demo_site.settings

    out = io.StringIO()
    call_command("demo_setup", "--no-input", "--host", listen, stdout=out, stderr=io.StringIO())
    text = out.getvalue()
    urls = re.findall(r"https?://\S+", text)
    assert urls and all(url.startswith(printed + "/") for url in urls), text
    assert "listens on all interfaces" in text
    admin_url = next(url for url in urls if url.endswith("/admin/"))
    # The demo's own ALLOWED_HOSTS (which the MCP endpoint's Host check uses too) accepts what is printed.
    domain, _ = split_domain_port(printed.removeprefix("http://"))
    assert validate_host(domain, demo_site.settings.ALLOWED_HOSTS)
    assert Client().get(admin_url).status_code == 302  # to the login page, not 400 DisallowedHost


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.live
def test_ctrl_c_stops_an_idle_demo_with_its_worker_stopping_by_itself(tmp_path: Path) -> None:
    """Ctrl-C (SIGINT to the terminal's process group) on a running, idle demo.

    The demo runs from a copy of the script, ``manage.py`` and ``demo_site`` (its database, broker
    folder and beat schedule then live in ``tmp_path``), with a ``.venv/bin/python`` that is this
    interpreter and skips pip: nothing is installed. Ctrl-C reached the sed that prefixes the
    worker's lines too, which died at once, so the worker's shutdown went on writing into a closed
    pipe and nothing it said while stopping was shown; and whatever the worker's warm shutdown
    (5-10 s when idle, Celery's own polling) had not finished in 10 s was killed. Now the worker's
    "Warm shutdown" is shown, it stops by itself (the script says when it has to kill it), and no
    process of the demo is left.
    """
    import signal
    import time

    (tmp_path / "scripts").mkdir()
    shutil.copy2(CHECKOUT / "scripts" / "demo", tmp_path / "scripts" / "demo")
    shutil.copy2(CHECKOUT / "manage.py", tmp_path / "manage.py")
    shutil.copytree(CHECKOUT / "demo_site", tmp_path / "demo_site", ignore=shutil.ignore_patterns("__pycache__", "*.sqlite3*"))
    venv = tmp_path / ".venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").write_text(f'#!/bin/sh\nif [ "$1 $2" = "-m pip" ]; then exit 0; fi\nexec {sys.executable} "$@"\n')
    (venv / "python").chmod(0o755)
    port = free_port()
    unset = ("HOST", "PORT", "REDIS_URL", "DATABASE_URL", "MCP_TOOLS_BROKER_DIR", "DJANGO_SETTINGS_MODULE")
    environ = {key: value for key, value in os.environ.items() if key not in unset}
    environ.update(HOST="127.0.0.1", PORT=str(port), PYTHONPATH=str(CHECKOUT))  # mcp_tools of this checkout
    log = tmp_path / "demo.log"
    with log.open("w") as output:
        # As a terminal runs it: a process group of its own, Ctrl-C not ignored (it is in a background job).
        demo = subprocess.Popen([str(tmp_path / "scripts" / "demo")], cwd=tmp_path, env=environ, stdout=output,
                                stderr=subprocess.STDOUT, start_new_session=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 180
        while "Stop the demo with Ctrl-C." not in log.read_text():
            assert demo.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)
        # Idle, not starting: the worker answers a ping (a signal that catches its pool starting is another story).
        ping = [str(venv / "python"), "-m", "celery", "-A", "demo_site", "inspect", "ping", "--timeout", "2"]
        while subprocess.run(ping, cwd=tmp_path, env=environ, capture_output=True, timeout=60).returncode != 0:
            assert time.monotonic() < deadline, log.read_text()[-3000:]
        os.killpg(demo.pid, signal.SIGINT)
        demo.wait(timeout=60)
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGKILL)
            demo.wait()
    text = log.read_text()
    assert "[worker] worker: Warm shutdown" in text, text[-3000:]
    assert "did not stop" not in text, text[-3000:]
    for _ in range(50):  # the worker's last children are reaped once it is gone
        try:
            os.killpg(demo.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.2)
    else:
        raise AssertionError(subprocess.run(["ps", "-o", "pid,stat,args", "-g", str(demo.pid)], capture_output=True, text=True).stdout)
