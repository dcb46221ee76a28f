"""The URLconf mount: the endpoint's sync code runs in Django's thread for the request.

Behind a sync-only middleware Django calls the async view through ``async_to_sync`` from the
request's thread; the endpoint's task inherited that thread's executor, which has quit once the
view returned and the answer streams on. A permission check then (the ``nextTool`` hint's, after
a tool that reported progress) failed the call with "Internal error". A first fix gave the
endpoint threads of its own, which lost what middleware set up in the request's thread (a
tenant's connection). Now the work is handed over to that same thread when the view returns.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connection
from django.test import override_settings
from django.utils.deprecation import MiddlewareMixin

from mcp_tools.engine.context import ToolContext
from mcp_tools.registry import make_tool, registry
from mcp_tools.registry.results import ToolResult
from tests.asgi_client import modern_message, post_headers, request
from tests.clients import create_user_with_token

pytestmark = pytest.mark.django_db(transaction=True)


class TenantMiddleware(MiddlewareMixin):
    """What django-tenants' middleware does: set the request's tenant on the thread's connection."""

    def process_request(self, req):  # type: ignore[no-untyped-def]
        connection.tenant = "acme"


def which_tenant() -> str:
    """A sync tool: the tenant its connection is set to."""
    return str(getattr(connection, "tenant", None))


async def tenant_after_progress(ctx: ToolContext) -> str:
    """The same, after the answer started streaming."""
    await ctx.report_progress(1, 2, "half")
    for _ in range(20):
        await asyncio.sleep(0.01)
    return await sync_to_async(which_tenant)()


class SyncOnlyMiddleware:
    """A middleware as many third-party packages still ship: sync only."""

    sync_capable = True
    async_capable = False

    def __init__(self, get_response):  # type: ignore[no-untyped-def]
        self.get_response = get_response

    def __call__(self, req):  # type: ignore[no-untyped-def]
        return self.get_response(req)


async def gated_next() -> str:
    """A tool that needs a permission."""
    return "next"


def count_rows() -> int:
    """Sync code that runs after the answer started streaming."""
    from mcp_tools.models import ToolCall

    return ToolCall.objects.count()


async def streams_then_hints(ctx: ToolContext) -> ToolResult:
    """Progress first (the answer streams), then sync ORM code, then a result hinting a gated tool."""
    await ctx.report_progress(1, 2, "half")
    for _ in range(20):  # let the view hand the stream to Django: its middleware thread then quits
        await asyncio.sleep(0.01)
    rows = await sync_to_async(count_rows)()
    return ToolResult(content=[{"type": "text", "text": f"done ({rows >= 0})"}], next_tool=("gated_next", {}))


async def test_sync_code_after_the_stream_started_runs_under_a_sync_only_middleware() -> None:
    from django.core.handlers.asgi import ASGIHandler

    token = await sync_to_async(create_user_with_token)("mw-user", ("inventory.view_product",))
    middleware = [*settings.MIDDLEWARE, f"{__name__}.SyncOnlyMiddleware"]
    with override_settings(MIDDLEWARE=middleware), registry.registered_temporarily(
            make_tool(gated_next, permissions=["inventory.view_product"]), make_tool(streams_then_hints)):
        params = {"name": "streams_then_hints", "arguments": {}, "_meta": {"progressToken": "p1"}}
        headers = post_headers(token=token, extra={"mcp-method": "tools/call", "mcp-name": "streams_then_hints"})
        answer = await request(ASGIHandler(), "POST", "/mcp-via-django", headers=headers,
                               body=json.dumps(modern_message("tools/call", params)).encode())
    text = answer.body.decode()
    assert answer.status == 200 and "Internal error" not in text, text
    assert "done (True)" in text and "gated_next" in text, text


@pytest.mark.parametrize("sync_only", [False, True], ids=["async-capable", "sync-only-too"])
@pytest.mark.parametrize("tool", ["which_tenant", "tenant_after_progress"])
async def test_what_a_middleware_set_up_in_the_request_thread_reaches_the_tools(sync_only: bool, tool: str) -> None:
    from django.core.handlers.asgi import ASGIHandler

    middleware = [*settings.MIDDLEWARE, f"{__name__}.TenantMiddleware"] + ([f"{__name__}.SyncOnlyMiddleware"] if sync_only else [])
    with override_settings(MIDDLEWARE=middleware), registry.registered_temporarily(
            make_tool(which_tenant), make_tool(tenant_after_progress)):
        params = {"name": tool, "arguments": {}, "_meta": {"progressToken": "p1"}}
        headers = post_headers(extra={"mcp-method": "tools/call", "mcp-name": tool})
        answer = await request(ASGIHandler(), "POST", "/mcp-via-django", headers=headers,
                               body=json.dumps(modern_message("tools/call", params)).encode())
    text = answer.body.decode()
    assert answer.status == 200 and "acme" in text, text
