"""A form field of one allowed value (``Literal["yes"]``, also ``| None``) is asked as the one-option enum it
is, not as free text.

Found by the author review: pydantic writes it ``{"const": "yes", "type": "string"}``, and the form kept the
type and dropped ``const``: the client showed a free text field whose every other answer the server then
refused (``'yes' was expected``; in a 2025-11-25 session the step failed, and with it the call). A step an
earlier release journaled with the free text form still replays.
"""

from __future__ import annotations

from typing import Any, Literal

import pytest
from asgiref.sync import async_to_sync
from pydantic import BaseModel

from mcp_tools import ToolContext
from mcp_tools.engine import Completed, Invocation, run
from mcp_tools.engine.context import _model_elicitation_schema
from mcp_tools.engine.journal import Journal, Step, digest
from tests.test_engine_corners import StubRuntime


class Consent(BaseModel):
    agree: Literal["yes"]
    again: Literal["yes"] | None = None
    name: str = ""


def test_a_single_value_field_is_a_one_option_enum() -> None:
    properties = _model_elicitation_schema(Consent)["properties"]
    assert properties["agree"] == {"type": "string", "enum": ["yes"], "title": "Agree"}, properties
    assert properties["again"] == {"type": "string", "enum": ["yes"], "title": "Again"}, properties
    assert properties["name"] == {"type": "string", "title": "Name", "default": ""}, properties


async def ask_consent(ctx: ToolContext) -> str:
    consent = await ctx.elicit("Agree?", Consent)
    return consent.agree


@pytest.mark.parametrize("earlier", [True, False])
def test_a_step_journaled_with_the_free_text_form_still_replays(earlier: bool) -> None:
    properties: dict[str, Any] = {
        "agree": {"title": "Agree", "type": "string"},
        "again": {"type": "string", "title": "Again"},
        "name": {"default": "", "title": "Name", "type": "string"},
    }
    if not earlier:
        properties = _model_elicitation_schema(Consent)["properties"]
    schema = {"type": "object", "properties": properties, "required": ["agree"]}
    request = {"method": "elicitation/create", "params": {"mode": "form", "message": "Agree?", "requestedSchema": schema}}
    journal = Journal([Step(seq=0, kind="elicit", key="elicit-0", digest=digest(["elicit", request]), request=request, status="done",
                            response={"action": "accept", "content": {"agree": "yes"}})])
    inv = Invocation(fn=ask_consent, is_async=True, kwargs={}, context_param="ctx", principal=None, protocol_version="2025-11-25",
                     client_capabilities={"elicitation": {}}, runtime=StubRuntime(), journal=journal)  # type: ignore[arg-type]
    outcome = async_to_sync(run)(inv)
    assert isinstance(outcome, Completed) and outcome.value == "yes", outcome
