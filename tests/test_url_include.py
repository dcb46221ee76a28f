"""The endpoint mounted with ``include("mcp_tools.urls")`` (behind Django's middleware) works for real clients.

Also behind Django's ``GZipMiddleware`` (``tests.gzip_server_settings``): it compressed each chunk of a
streamed answer as a gzip member of its own, httpx (the official client's) decodes only the first
member, and the client saw the first SSE event alone: a call that reported progress or asked for input
timed out (legacy) or ended "without a response" (2026). Streamed answers are left uncompressed.
"""

from __future__ import annotations

import mcp_types as t
import pytest

from tests.clients import audit_rows, sdk_client
from tests.conftest import LiveServer

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("settings", ["tests.server_settings", "tests.gzip_server_settings"], ids=["plain", "gzip-middleware"])
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_url_include_serves_calls_progress_and_elicitation(start_server: type[LiveServer], mode: str, settings: str) -> None:
    url = start_server(env={"DJANGO_SETTINGS_MODULE": settings}).start().url.replace("/mcp", "/mcp-via-django")
    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async def on_elicit(ctx: object, params: t.ElicitRequestParams) -> t.ElicitResult:
        return t.ElicitResult(action="accept", content={"env": "staging", "confirm": True})

    async def on_sample(ctx: object, params: t.CreateMessageRequestParams) -> t.CreateMessageResult:
        return t.CreateMessageResult(role="assistant", content=t.TextContent(text="yes"), model="m", stop_reason="endTurn")

    async with sdk_client(url, mode, elicitation_callback=on_elicit, sampling_callback=on_sample) as client:
        echoed = await client.call_tool("echo", {"text": "via include"})
        assert echoed.content[0].text == "via include"
        counted = await client.call_tool("slow_count", {"n": 3}, progress_callback=on_progress)
        assert counted.content[0].text == "counted to 3"
        deployed = await client.call_tool("deploy", {"service": f"include-{mode}"})
    assert progress == [1, 2, 3]
    assert deployed.structured_content["env"] == "staging"
    assert len(await audit_rows(f"include-{mode}")) == 1
