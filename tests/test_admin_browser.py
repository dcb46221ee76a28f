"""The operator's console in a real browser (Debian's Chromium, driven by Selenium) against a live server.

An MCP client (the official SDK, 2025-11-25 session) calls ``deploy``, which waits
for the user's answer. The operator, logged in to the admin, watches the dashboard
pick the call up without reloading, opens it from the changelist, cancels it, and
the client's call ends with the cancellation.

Skipped, saying why, only when Chromium and its driver are not installed; under
``CI=true`` (``.ci/run`` installs them) a missing browser fails the test instead.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types as t
import pytest
from asgiref.sync import sync_to_async

from tests.clients import sdk_client
from tests.conftest import LiveServer

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

#: Headless, and nothing that reaches the network or a shared profile.
CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run", "--window-size=1400,1000",
)
WAIT = 20


def chromium_paths() -> tuple[str, str] | None:
    """Debian's ``chromium`` and ``chromedriver`` binaries, if both are installed."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


def start_chromium(profile: Path) -> Any:
    """A headless Chromium under Selenium with a fresh profile; skips (or fails under CI) without one."""
    paths = chromium_paths()
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        paths = None
    if paths is None:
        reason = "Chromium, chromium-driver or selenium is not installed (apt-get install -y chromium chromium-driver)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason}; .ci/run installs them, so under CI this is a failure")
        pytest.skip(reason)
    options = webdriver.ChromeOptions()
    options.binary_location = paths[0]
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    return webdriver.Chrome(service=Service(executable_path=paths[1]), options=options)


@pytest.fixture
def chromium(tmp_path: Path) -> Iterator[Any]:
    driver = start_chromium(tmp_path / "profile")
    yield driver
    driver.quit()


class Operator:
    """What a person at the admin does, as Selenium steps (sync: run them in a thread from async tests)."""

    def __init__(self, driver: Any, base_url: str) -> None:
        self.driver = driver
        self.base = base_url

    def wait(self, condition: Any, message: str) -> Any:
        from selenium.webdriver.support.ui import WebDriverWait

        return WebDriverWait(self.driver, WAIT, poll_frequency=0.1).until(condition, message)

    def text_of(self, css: str) -> str:
        """The text of an element, read in one step (the dashboard replaces its elements when it updates)."""
        text = self.driver.execute_script("const e = document.querySelector(arguments[0]); return e ? e.innerText : '';", css)
        return str(text)

    def log_in(self, username: str, password: str, next_path: str) -> None:
        from selenium.webdriver.common.by import By

        self.driver.get(f"{self.base}/admin/login/?next={next_path}")
        self.driver.find_element(By.ID, "id_username").send_keys(username)
        self.driver.find_element(By.ID, "id_password").send_keys(password)
        self.driver.find_element(By.CSS_SELECTOR, "input[type=submit]").click()
        self.wait(lambda d: d.current_url.endswith(next_path), f"not taken to {next_path} after logging in")

    def open_dashboard_live(self) -> None:
        """The dashboard, once its WebSocket is open (the page says "live")."""
        self.driver.get(f"{self.base}/admin/mcp_tools/toolcall/dashboard/")
        self.wait(
            lambda d: d.execute_script("return document.getElementById('mcp-live-state').dataset.state") == "websocket",
            "the dashboard's WebSocket did not open",
        )

    def wait_for_text(self, css: str, text: str) -> None:
        self.wait(lambda d: text in self.text_of(css), f"{text!r} never appeared in {css}")

    def open_call_from_changelist(self, tool: str) -> None:
        from selenium.webdriver.common.by import By

        self.driver.get(f"{self.base}/admin/mcp_tools/toolcall/")
        self.driver.find_element(By.LINK_TEXT, tool).click()
        self.wait(lambda d: "mcp-detail" in d.find_element(By.TAG_NAME, "body").get_attribute("class"), "no detail page")

    def cancel_call(self) -> None:
        from selenium.webdriver.common.by import By

        self.driver.find_element(By.ID, "mcp-cancel").click()
        self.wait(lambda d: "Cancelled" in self.text_of(".mcp-summary h2"), "the call page never said Cancelled")


async def test_operator_watches_a_waiting_call_live_and_cancels_it(start_server: type[LiveServer], chromium: Any) -> None:
    from django.contrib.auth.models import User

    server = start_server().start()
    operator = Operator(chromium, server.url.removesuffix("/mcp"))
    await sync_to_async(User.objects.create_superuser)("operator", "op@example.com", "browser-pw")
    dashboard = "/admin/mcp_tools/toolcall/dashboard/"
    await asyncio.to_thread(operator.log_in, "operator", "browser-pw", dashboard)
    await asyncio.to_thread(operator.open_dashboard_live)
    assert "deploy" not in await asyncio.to_thread(operator.text_of, "#mcp-oldest")
    await asyncio.to_thread(chromium.execute_script, "window.stillTheSamePage = true;")

    asked = asyncio.Event()
    released = asyncio.Event()

    async def the_user_does_not_answer(ctx: Any, params: t.ElicitRequestParams) -> t.ElicitResult:
        asked.set()
        await released.wait()  # the operator acts first
        return t.ElicitResult(action="cancel")

    async with sdk_client(server.url, "legacy", elicitation_callback=the_user_does_not_answer) as client:
        call = asyncio.ensure_future(client.call_tool("deploy", {"service": "api"}))
        try:
            await asyncio.wait_for(asked.wait(), WAIT)
            # The dashboard shows the waiting call without a reload.
            await asyncio.to_thread(operator.wait_for_text, "#mcp-oldest", "deploy")
            assert "Input required" in await asyncio.to_thread(operator.text_of, "#mcp-oldest")
            assert await asyncio.to_thread(chromium.execute_script, "return window.stillTheSamePage === true;"), \
                "the dashboard was reloaded instead of updated in place"

            await asyncio.to_thread(operator.open_call_from_changelist, "deploy")
            assert "Where should api be deployed?" in await asyncio.to_thread(operator.text_of, "#mcp-timeline")
            await asyncio.to_thread(operator.cancel_call)

            # The client's wait ends with the cancellation: a tool error saying so.
            result = await asyncio.wait_for(call, WAIT)
            assert result.is_error and "cancelled" in result.content[0].text, result
        finally:
            released.set()
            if not call.done():
                call.cancel()

    # Back on the dashboard: the call has left the calls in flight.
    await asyncio.to_thread(operator.open_dashboard_live)
    assert "deploy" not in await asyncio.to_thread(operator.text_of, "#mcp-oldest")
