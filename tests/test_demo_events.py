"""``demo_setup`` gives the demo's ``list_events`` events to page through.

It created none, so the paging tool, there to show resume tokens (seed 002), always answered
``[]`` and never a second page.
"""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from mcp_tools.transports.http import McpEndpoint
from tests.asgi_client import call_modern

pytestmark = pytest.mark.django_db(transaction=True)

APP = McpEndpoint()


async def page(resume_token: str | None) -> dict[str, object]:
    params: dict[str, object] = {"name": "list_events", "arguments": {"page_size": 10}}
    if resume_token is not None:
        params["resumeToken"] = resume_token
    response = await call_modern(APP, "tools/call", params)
    body = response.json()
    assert "error" not in body and not body["result"].get("isError"), body
    result: dict[str, object] = body["result"]
    return result


async def test_the_demo_pages_through_its_events_with_resume_tokens() -> None:
    from asgiref.sync import sync_to_async

    from demo_site.operations.models import Event
    from demo_site.operations.seed import EVENT_COUNT

    await sync_to_async(call_command)("demo_setup", "--no-input", stdout=io.StringIO(), stderr=io.StringIO())
    await sync_to_async(call_command)("demo_setup", "--no-input", stdout=io.StringIO(), stderr=io.StringIO())
    assert await Event.objects.acount() == EVENT_COUNT  # run again (scripts/demo does on every start): no more
    seen: list[int] = []
    token: str | None = None
    pages = 0
    while True:
        result = await page(token)
        pages += 1
        seen += [event["id"] for event in result["structuredContent"]["result"]]  # type: ignore[index]
        if "nextResumeToken" not in result:
            break
        token = str(result["nextResumeToken"])
    assert len(seen) == EVENT_COUNT and seen == sorted(set(seen))
    assert pages == -(-EVENT_COUNT // 10), pages  # 10 a page, as asked


async def test_since_at_the_edge_of_the_date_range_is_answered_not_an_internal_error() -> None:
    """Found by a review (hostile input): a valid date-time that is before year 1 or after 9999 in UTC
    passed the input schema, then failed converting to UTC (OverflowError): an internal error."""
    from asgiref.sync import sync_to_async

    await sync_to_async(call_command)("demo_setup", "--no-input", stdout=io.StringIO(), stderr=io.StringIO())
    for since, some in (("0001-01-01T00:00:00+01:00", True), ("9999-12-31T23:59:59-14:00", False)):
        body = (await call_modern(APP, "tools/call", {"name": "list_events", "arguments": {"since": since, "page_size": 5}})).json()
        assert body["result"].get("isError") is not True, (since, body)
        assert bool(body["result"]["structuredContent"]["result"]) is some, (since, body)
