"""A 2026-07-28 call that ends (an operator cancels or expires it) while its client answers is answered
as ended, even when the handler's next step needs a capability the client did not declare.

The answering round replays from the token before it reads the row: it reached ``deploy``'s
sampling step and answered -32021 (a capability error) for a call that an operator had
cancelled, where a client with sampling got "cancelled" (console review).
"""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from demo_site.inventory.models import AuditLog
from mcp_tools.models import ToolCall
from mcp_tools.server.core import end_call_sync
from tests.asgi_client import call_modern
from tests.test_mrtr_security import APP, TARGET

pytestmark = pytest.mark.django_db(transaction=True)

#: No sampling: deploy's second step (the model's verdict) needs a capability this client lacks.
ELICITATION_ONLY = {"elicitation": {"form": {}}}


async def round_of(state: Any = None, responses: dict[str, Any] | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": "deploy", "arguments": {"service": "ended"}}
    if state is not None:
        params.update(requestState=state, inputResponses=responses)
    answer: dict[str, Any] = (await call_modern(APP, "tools/call", params, capabilities=ELICITATION_ONLY)).json()
    return answer


@pytest.mark.parametrize(("status", "expected"), [("cancelled", "result"), ("expired", "error")])
async def test_a_call_ended_while_its_client_answers_is_answered_as_ended(status: str, expected: str) -> None:
    first = (await round_of())["result"]
    assert first["resultType"] == "input_required", first
    call_id = await sync_to_async(lambda: str(ToolCall.objects.get().id))()
    assert await sync_to_async(end_call_sync)(call_id, status, f"{status.capitalize()} by an operator.")
    answer = await round_of(first["requestState"], {"target": TARGET})
    if expected == "result":
        assert answer["result"]["isError"] is True, answer
        assert answer["result"]["content"][0]["text"] == "The call was cancelled before it finished.", answer
    else:
        assert answer["error"]["message"] == "Invalid or expired requestState", answer
    assert await sync_to_async(lambda: ToolCall.objects.get().status)() == status
    assert not await AuditLog.objects.aexists()


async def test_a_live_call_still_answers_the_capability_it_needs() -> None:
    """The control: nothing ended the call, so the client is told what its next step needs."""
    first = (await round_of())["result"]
    answer = await round_of(first["requestState"], {"target": TARGET})
    assert answer["error"]["code"] == -32021, answer
