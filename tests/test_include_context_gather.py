"""A sampling request of a ``ctx.gather`` keeps the ``includeContext`` its own journal entry holds.

Since includeContext "thisServer" / "allServers" goes only to clients that declare ``sampling.context``,
a step an earlier release journaled with the value keeps it on replay (its digest holds it). That
was decided when the request was built, from the journal entry at the context's cursor; a gather
builds all its requests before the first is resolved, so each one looked at the gather's first
entry: a call in flight across the upgrade whose gather sent the value in a later request failed
its replay with NonDeterministicHandler.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync

from mcp_tools import ToolContext
from mcp_tools.engine import Invocation, NeedsInput, run
from mcp_tools.engine.journal import Journal, Step, digest
from tests.test_engine_corners import StubRuntime


async def plain_then_with_context(ctx: ToolContext) -> str:
    answers = await ctx.gather(
        ctx.sample_step("First, the plain question"),
        ctx.sample_step("Then with the context", includeContext="thisServer"),
    )
    return str(answers)


def sampling(text: str, **params: Any) -> dict[str, Any]:
    return {"method": "sampling/createMessage", "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": text}}], "maxTokens": 1000, **params}}


def pending(capabilities: dict[str, Any], journal: Journal) -> list[dict[str, Any] | None]:
    """The requests ``plain_then_with_context`` waits on for a 2025-11-25 client of ``capabilities``."""
    inv = Invocation(fn=plain_then_with_context, is_async=True, kwargs={}, context_param="ctx", principal=None,
                     protocol_version="2025-11-25", client_capabilities=capabilities,
                     runtime=StubRuntime(), journal=journal)  # type: ignore[arg-type]
    outcome = async_to_sync(run)(inv)
    assert isinstance(outcome, NeedsInput)
    return [step.request for step in outcome.pending]


def test_a_gather_journaled_with_it_in_a_later_request_by_an_earlier_release_still_replays() -> None:
    # What the earlier release journaled: both requests as the handler gave them, waiting for answers.
    first, second = sampling("First, the plain question"), sampling("Then with the context", includeContext="thisServer")
    journal = Journal([
        Step(seq=0, kind="sample", key="sample-0", digest=digest(["sample", first]), request=first),
        Step(seq=1, kind="sample", key="sample-1", digest=digest(["sample", second]), request=second),
    ])
    assert pending({"sampling": {}}, journal) == [first, second]


def test_a_new_gather_sends_it_only_to_a_client_that_declares_sampling_context() -> None:
    first = sampling("First, the plain question")
    assert pending({"sampling": {}}, Journal()) == [first, sampling("Then with the context")]
    assert pending({"sampling": {"context": {}}}, Journal()) == [
        first, sampling("Then with the context", includeContext="thisServer")]
