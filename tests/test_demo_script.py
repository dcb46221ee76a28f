"""``scripts/demo``: the port it is given, and the URLs it prints.

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
