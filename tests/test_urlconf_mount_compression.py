"""The URLconf mount behind a project's compression middleware (Django's ``GZipMiddleware`` first in
``MIDDLEWARE``, a client sending ``Accept-Encoding: gzip`` as httpx does).

The middleware compressed a streamed answer chunk by chunk, each chunk a gzip member of its own:
httpx decodes the first member only, so the official client saw the first SSE event alone (the
live test with it: tests/test_url_include.py). A streamed answer is now sent uncompressed; a whole
JSON answer is compressed as before.
"""

from __future__ import annotations

import asyncio
import gzip
import json

import pytest
from django.conf import settings
from django.test import override_settings
from django.utils.deprecation import MiddlewareMixin

from mcp_tools.engine.context import ToolContext
from mcp_tools.registry import make_tool, registry
from tests.asgi_client import AsgiResponse, modern_message, post_headers, request

pytestmark = pytest.mark.django_db(transaction=True)



class HeadersReader(MiddlewareMixin):
    """A middleware that reads ``request.headers`` before the view (Django then keeps them) and
    says what ``Accept-Encoding`` it finds there when the response passes, as a compressor would."""

    def process_request(self, req):  # type: ignore[no-untyped-def]
        req.headers.get("Accept-Encoding")

    def process_response(self, req, response):  # type: ignore[no-untyped-def]
        response["X-Seen-Accept-Encoding"] = req.headers.get("Accept-Encoding", "none")
        return response


GZIP = ["django.middleware.gzip.GZipMiddleware", f"{__name__}.HeadersReader", *settings.MIDDLEWARE]


async def counts_with_progress(ctx: ToolContext) -> str:
    """Two progress notifications, then the result: three SSE events."""
    for step in (1, 2):
        await ctx.report_progress(step, 2, f"step {step}")
        await asyncio.sleep(0.01)
    return "counted " + "x" * 300  # past GZipMiddleware's 200 bytes, were the answer whole


async def post(method: str, params: dict[str, object]) -> AsgiResponse:
    from django.core.handlers.asgi import ASGIHandler

    extra = {"mcp-method": method, "accept-encoding": "gzip, deflate"}
    if "name" in params:
        extra["mcp-name"] = str(params["name"])
    with override_settings(MIDDLEWARE=GZIP), registry.registered_temporarily(make_tool(counts_with_progress)):
        return await request(ASGIHandler(), "POST", "/mcp-via-django", headers=post_headers(extra=extra),
                             body=json.dumps(modern_message(method, params)).encode())


async def test_a_streamed_answer_is_not_compressed() -> None:
    answer = await post("tools/call", {"name": "counts_with_progress", "arguments": {}, "_meta": {"progressToken": "p"}})
    assert answer.status == 200 and answer.content_type.startswith("text/event-stream"), answer
    assert answer.header("content-encoding") is None and answer.header("x-seen-accept-encoding") == "none", answer.headers
    events = answer.sse_messages()
    assert [m["params"]["progress"] for m in events if m.get("method") == "notifications/progress"] == [1, 2], events
    assert events[-1]["result"]["content"][0]["text"].startswith("counted x"), events[-1]


async def test_a_json_answer_is_still_compressed() -> None:
    answer = await post("tools/list", {})
    assert answer.status == 200 and answer.content_type.startswith("application/json"), answer
    assert answer.header("content-encoding") == "gzip", answer.headers
    assert answer.header("x-seen-accept-encoding") == "gzip, deflate", answer.headers
    assert "counts_with_progress" in json.dumps(json.loads(gzip.decompress(answer.body)))
