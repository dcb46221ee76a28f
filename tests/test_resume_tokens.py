"""Resume tokens (seed 002) for pages and converging state, with the official client in both modes."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from mcp_tools.models import CallStep, ToolCall
from tests.clients import ModernClient, http_client, sdk_client
from tests.conftest import LiveServer

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


def _create_events(count: int) -> None:
    from demo_site.operations.models import Event

    start = timezone.now() - timedelta(days=1)
    Event.objects.bulk_create(
        Event(kind="deploy" if i % 3 == 0 else "alert", message=f"event {i}", created_at=start + timedelta(seconds=i))
        for i in range(count)
    )


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_paging_through_1000_rows_with_resume_tokens(start_server: type[LiveServer], mode: str) -> None:
    await sync_to_async(_create_events)(1000)
    server = start_server().start()
    seen: list[str] = []
    pages = 0
    async with sdk_client(server.url, mode) as client:
        token = None
        while True:
            meta = {"resumeToken": token} if token else None
            result = await client.call_tool("list_events", {"page_size": 150}, meta=meta)
            assert result.is_error is False, result
            seen.extend(event["message"] for event in result.structured_content["result"])
            pages += 1
            token = (result.meta or {}).get("nextResumeToken")
            if token is None:
                break
    assert pages == 7
    assert seen == [f"event {i}" for i in range(1000)], "every row once, in order"
    assert await sync_to_async(ToolCall.objects.count)() == 0, "paging keeps no state on the server"
    assert await sync_to_async(CallStep.objects.count)() == 0


async def test_a_page_token_is_bound_to_the_arguments_and_the_tool(start_server: type[LiveServer]) -> None:
    await sync_to_async(_create_events)(30)
    server = start_server().start()
    async with http_client() as http:
        client = ModernClient(http, server.url)
        first = await client.request("tools/call", {"name": "list_events", "arguments": {"page_size": 10}})
        token = first["nextResumeToken"]
        _, changed = await client.post("tools/call", {"name": "list_events", "arguments": {"page_size": 11}, "resumeToken": token})
        _, other_tool = await client.post("tools/call", {"name": "wait_for_rollout", "arguments": {"deployment": "x"}, "resumeToken": token})
        _, garbage = await client.post("tools/call", {"name": "list_events", "arguments": {"page_size": 10}, "resumeToken": 42})
        second = await client.request("tools/call", {"name": "list_events", "arguments": {"page_size": 10}, "resumeToken": token})
    for refused in (changed, other_tool, garbage):
        assert refused["error"]["code"] == -32602, refused
        assert "resumeToken" in refused["error"]["message"]
    assert [e["message"] for e in second["structuredContent"]["result"]] == [f"event {i}" for i in range(10, 20)]


def _rollouts() -> list[dict[str, Any]]:
    from demo_site.operations.models import Rollout

    return list(Rollout.objects.values("deployment"))


async def test_a_client_that_resumes_polls_converging_state(start_server: type[LiveServer]) -> None:
    server = start_server().start()
    async with http_client() as http:
        client = ModernClient(http, server.url, capabilities={"experimental": {"resumeTokens": {}}})
        arguments = {"name": "wait_for_rollout", "arguments": {"deployment": "api"}}
        answer = await client.request("tools/call", arguments)
        pending = 0
        while "nextResumeToken" in answer:
            pending += 1
            assert answer["_meta"]["io.modelcontextprotocol/status"]["status"] == "pending"
            assert "still converging" in answer["content"][0]["text"]
            answer = await client.request("tools/call", {**arguments, "resumeToken": answer["nextResumeToken"]})
    assert pending >= 1
    assert answer["structuredContent"]["ready"] is True
    assert await sync_to_async(_rollouts)() == [{"deployment": "api"}]


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_client_without_resume_tokens_waits_for_converged_state(start_server: type[LiveServer], mode: str) -> None:
    server = start_server().start()
    async with sdk_client(server.url, mode) as client:
        result = await client.call_tool("wait_for_rollout", {"deployment": f"web-{mode}"})
    assert result.is_error is False, result
    assert result.structured_content["ready"] is True


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_client_without_resume_tokens_whose_wait_runs_out_gets_an_error(start_server: type[LiveServer], mode: str) -> None:
    """CONVERGE_WAIT_SECONDS runs out before the rollout converges: the official client, which checks a
    result against the tool's outputSchema, gets the pending state as an error result. Before, the state
    came as a result with no structuredContent and the client raised RuntimeError("... has an output
    schema but did not return structured content")."""
    server = start_server(env={"DJANGO_SETTINGS_MODULE": "tests.converge_settings"}).start()
    async with sdk_client(server.url, mode) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert listed["wait_for_rollout"].output_schema is not None
        result = await client.call_tool("wait_for_rollout", {"deployment": f"slow-{mode}"})
    assert result.is_error is True, result
    assert "still converging" in result.content[0].text
    assert result.meta["io.modelcontextprotocol/status"]["status"] == "pending"


# -- tokens are untrusted input (in process) -----------------------------------------------------


def _page_token(response: Any) -> str:
    return response.json()["result"]["nextResumeToken"]


@pytest.mark.django_db(transaction=True)
async def test_expired_and_cross_user_resume_tokens_are_refused_and_change_nothing() -> None:
    import time
    import types as pytypes
    from unittest import mock

    from django.conf import settings
    from django.core import signing
    from django.test import override_settings

    from mcp_tools.transports.http import McpEndpoint
    from tests.asgi_client import call_modern
    from tests.test_mrtr_security import create_user_token

    app = McpEndpoint.as_asgi()
    await sync_to_async(_create_events)(12)
    alice = await sync_to_async(create_user_token)("alice")
    bob = await sync_to_async(create_user_token)("bob")
    params = {"name": "list_events", "arguments": {"page_size": 5}}
    with override_settings(MCP_TOOLS={**settings.MCP_TOOLS, "TOKEN_TTL": 60}):
        token = _page_token(await call_modern(app, "tools/call", params, token=alice))
        real = time.time
        with mock.patch.object(signing, "time", pytypes.SimpleNamespace(time=lambda: real() + 61)):
            expired = (await call_modern(app, "tools/call", {**params, "resumeToken": token}, token=alice)).json()
        other_user = (await call_modern(app, "tools/call", {**params, "resumeToken": token}, token=bob)).json()
        tampered = (await call_modern(app, "tools/call", {**params, "resumeToken": token[:-3] + ("xyz" if token[-3:] != "xyz" else "abc")}, token=alice)).json()
        fresh = (await call_modern(app, "tools/call", {**params, "resumeToken": token}, token=alice)).json()
    for refused in (expired, other_user, tampered):
        assert refused["error"]["code"] == -32602 and refused["error"]["message"] == "Invalid or expired resumeToken", refused
    assert [e["message"] for e in fresh["result"]["structuredContent"]["result"]] == [f"event {i}" for i in range(5, 10)]
    assert await sync_to_async(ToolCall.objects.count)() == 0
