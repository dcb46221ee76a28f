"""CORS in a real browser: a page on one origin calls the MCP endpoint on another with ``fetch()``.

Debian's Chromium (headless, under Selenium, as tests/test_admin_browser.py drives it) loads a
tiny page from a static server on another port of 127.0.0.1 (a different origin: the port is
part of it) and runs its script there, so the browser makes its own CORS decisions: whether to
preflight, whether the preflight allows the request's method and headers, and which response
headers the script may read.

Skipped, saying why, only when Chromium and its driver are not installed; under ``CI=true`` a
missing browser fails the test instead (tests/test_admin_browser.py ``start_chromium``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.clients import JSON_ACCEPT, LEGACY, _create_products, create_user_with_token, modern_headers, modern_meta
from tests.conftest import LiveServer
from tests.test_admin_browser import WAIT, start_chromium

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

PAGE = b"<!doctype html><meta charset=utf-8><title>A browser MCP client</title><p>client page</p>"


class PageHandler(BaseHTTPRequestHandler):
    """Serves the client page at every path (its scripts come from the test, through Selenium)."""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass


@pytest.fixture
def page_origins() -> Iterator[tuple[str, str]]:
    """Two static page servers on 127.0.0.1: the origin the MCP server allows, and one it does not."""
    servers = [ThreadingHTTPServer(("127.0.0.1", 0), PageHandler) for _ in range(2)]
    threads = [threading.Thread(target=server.serve_forever, daemon=True) for server in servers]
    for thread in threads:
        thread.start()
    yield tuple(f"http://127.0.0.1:{server.server_address[1]}" for server in servers)  # type: ignore[misc]
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    driver = start_chromium(tmp_path / "profile")
    driver.set_script_timeout(WAIT)
    yield driver
    driver.quit()


#: Run in the page: ``fetch(url, init)``, then what a script can see of the answer (or the failure).
FETCH = """
const [url, init, done] = arguments;
fetch(url, init).then(
  async (response) => done({
    status: response.status,
    body: await response.text(),
    sessionId: response.headers.get("Mcp-Session-Id"),
  }),
  (error) => done({error: String(error)}),
);
"""


def browser_fetch(driver: Any, url: str, method: str, headers: dict[str, str], body: Any = None) -> dict[str, Any]:
    """What a script on the page the browser shows gets from ``fetch()``."""
    import json

    init: dict[str, Any] = {"method": method, "headers": headers, "cache": "no-store"}
    if body is not None:
        init["body"] = json.dumps(body)
    answer = driver.execute_async_script(FETCH, url, init)
    assert isinstance(answer, dict), answer
    return answer


def stock(sku: str) -> int:
    from demo_site.inventory.models import Product

    return int(Product.objects.get(sku=sku).stock)


def restock_call(quantity: int) -> tuple[dict[str, str], dict[str, Any]]:
    """A 2026-07-28 ``tools/call`` of ``restock``: its headers (no credentials yet) and its body."""
    params = {"name": "restock", "arguments": {"sku": "WID-001", "quantity": quantity}, "_meta": modern_meta()}
    return modern_headers("tools/call", params), {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}


#: The ASGI mount (daphne) and the URLconf mount (``include("mcp_tools.urls")``, under uvicorn).
MOUNTS = [pytest.param("daphne", "/mcp", id="asgi-mount"), pytest.param("uvicorn", "/mcp-via-django", id="urlconf-mount")]


@pytest.mark.parametrize(("server_name", "path"), MOUNTS)
def test_a_page_at_an_allowed_origin_calls_tools_and_reads_the_session_id(
        start_server: type[LiveServer], page_origins: tuple[str, str], browser: Any, server_name: str, path: str) -> None:
    import json

    allowed, refused = page_origins
    started = start_server(server=server_name, env={"DJANGO_SETTINGS_MODULE": "tests.cors_server_settings",
                                                    "MCP_TESTS_ALLOWED_ORIGINS": allowed}).start()
    url = started.url.removesuffix("/mcp") + path
    _create_products()
    token = create_user_with_token("browser-client", ("inventory.change_product",))
    before = stock("WID-001")

    # (a) 2026-07-28: a tools/call with the protocol's headers and Authorization (preflighted).
    browser.get(f"{allowed}/client.html")
    headers, body = restock_call(5)
    answer = browser_fetch(browser, url, "POST", {**headers, "Authorization": f"Token {token}"}, body)
    assert "error" not in answer, f"the browser refused the allowed origin's call: {answer}"
    assert answer["status"] == 200, answer
    result = json.loads(answer["body"])["result"]
    assert result["structuredContent"]["stock"] == before + 5, result
    assert stock("WID-001") == before + 5

    # 2025-11-25: initialize, then the session id the script reads (exposed), used in the session.
    init_headers = {"Accept": JSON_ACCEPT, "Content-Type": "application/json", "Authorization": f"Token {token}"}
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "browser", "version": "1"}}}
    answer = browser_fetch(browser, url, "POST", init_headers, initialize)
    assert answer.get("status") == 200, answer
    session_id = answer["sessionId"]
    assert session_id, f"the script could not read Mcp-Session-Id (not exposed): {answer}"
    in_session = {**init_headers, "Mcp-Session-Id": session_id, "MCP-Protocol-Version": LEGACY}
    answer = browser_fetch(browser, url, "POST", in_session,
                           {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "restock", "arguments": {"sku": "WID-001", "quantity": 1}}})
    assert answer.get("status") == 200, answer
    assert json.loads(answer["body"])["result"]["structuredContent"]["stock"] == before + 6
    # DELETE is preflighted too (not a CORS-safelisted method).
    answer = browser_fetch(browser, url, "DELETE", in_session)
    assert answer.get("status") in (200, 204), answer

    # (b) A page at an origin not allowed: the browser's preflight is refused, the call never runs.
    browser.get(f"{refused}/client.html")
    headers, body = restock_call(7)
    answer = browser_fetch(browser, url, "POST", {**headers, "Authorization": f"Token {token}"}, body)
    assert "TypeError" in answer.get("error", ""), f"an origin not allowed reached the endpoint: {answer}"
    answer = browser_fetch(browser, url, "POST", init_headers, initialize)
    assert "TypeError" in answer.get("error", ""), answer
    assert stock("WID-001") == before + 6
