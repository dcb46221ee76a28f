"""``tools/callSaga`` with a ``resumeToken``: refused, not ignored.

Found by a review: the token was dropped, so a saga client repeating ``tools/callSaga`` with a
``paginate=True`` tool's ``nextResumeToken`` (as docs/protocol.md says for the same call) got
page 1 again with a new token, for ever, and a forged token was taken without a word. A saga
starts a call; its next page or poll is a ``tools/call`` with the token. Failed before the fix.
"""
from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from mcp_tools.models import ToolCall
from mcp_tools.server.flavors.saga import RESUME_WITH_TOOLS_CALL
from mcp_tools.transports.http import McpEndpoint
from tests.asgi_client import call_modern
from tests.test_resume_tokens import _create_events

pytestmark = pytest.mark.django_db(transaction=True)
APP = McpEndpoint()
PAGE = {"name": "list_events", "arguments": {"page_size": 5}}


async def rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return dict((await call_modern(APP, method, params)).json())


def texts(result: dict[str, Any]) -> list[str]:
    return [block["text"] for block in result["content"]]


@pytest.mark.parametrize("where", ["params", "_meta"])
async def test_a_saga_refuses_a_resume_token_which_tools_call_takes(where: str) -> None:
    await sync_to_async(_create_events)(12)
    first = (await rpc("tools/callSaga", PAGE))["result"]
    token = first["nextResumeToken"]
    with_token = {**PAGE, "resumeToken": token} if where == "params" else {**PAGE, "_meta": {"resumeToken": token}}
    rows = await sync_to_async(ToolCall.objects.count)()
    refused = await rpc("tools/callSaga", with_token)
    assert refused["error"]["code"] == -32602 and refused["error"]["message"] == RESUME_WITH_TOOLS_CALL
    forged = await rpc("tools/callSaga", {**PAGE, "resumeToken": "forged"})
    assert forged["error"]["code"] == -32602
    assert await sync_to_async(ToolCall.objects.count)() == rows, "a refusal writes nothing"
    second = (await rpc("tools/call", with_token))["result"]
    assert texts(second) != texts(first) and "event 5" in " ".join(texts(second))
