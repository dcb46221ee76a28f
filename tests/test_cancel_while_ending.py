"""A 2025-11-25 call waiting for its client's answers, cancelled, and cancelled again while its row is being ended.

``mcp_stdio``'s shutdown (SIGTERM, SIGINT, the grace period's end) cancels a request still running every
0.1 s until it ends, then the process exits. The row's ``cancelled`` write was awaited unshielded: when it
took longer than 0.1 s (a full garbage collection of the process lands there, a busy database), the next
cancel cut it off, and the call stayed ``input_required`` though its request was answered
("test_sigterm_ends_the_calls_in_flight_as_end_of_input_does" failed now and then). The write now runs
to its end.
"""
from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import AnonymousUser

from mcp_tools import store
from mcp_tools.engine.journal import Step
from mcp_tools.models import ToolCall
from mcp_tools.server.auth import Principal
from mcp_tools.server.context import RequestContext
from mcp_tools.server.flavors import session
from mcp_tools.store import sync_calls

pytestmark = pytest.mark.django_db(transaction=True)


async def test_a_second_cancel_does_not_cut_off_the_write_that_ends_the_call(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = Step(seq=0, kind="elicit", key="env", digest="d", request={"method": "elicitation/create", "params": {}})
    call_id = await sync_to_async(sync_calls.create_call)(
        [asked], method="tools/call", tool_name="deploy", arguments={"service": "s"}, principal="anon",
        protocol_version="2025-11-25", flavor="stdio", status="input_required")
    writing, go_on = asyncio.Event(), asyncio.Event()
    end_call = store.end_call

    async def slow_end_call(*args: Any, **kwargs: Any) -> bool:
        writing.set()
        await go_on.wait()  # a write that takes a while
        return await end_call(*args, **kwargs)

    monkeypatch.setattr(store, "end_call", slow_end_call)
    rc = RequestContext(principal=Principal(user=AnonymousUser(), id="anon"), protocol_version="2025-11-25", modern=False,
                        client_capabilities={}, flavor="stdio")
    waiting = asyncio.ensure_future(session._wait_for_answers(call_id, 0, rc))
    while not rc.awaiting_input:
        await asyncio.sleep(0)
    waiting.cancel()  # the server stops
    await writing.wait()
    waiting.cancel()  # and cancels again, while the row is being ended
    go_on.set()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    row = await sync_to_async(ToolCall.objects.get)(id=call_id)
    assert row.status == "cancelled"  # before: input_required
