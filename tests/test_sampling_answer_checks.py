"""A sampling answer's ``stopReason`` is a string: found by a review of the seed extensions,
``"stopReason": 7`` was accepted and journaled. The refusal failed before the fix; the accepted
answers pass both ways. (A ``tool_use`` block answering a request that offered no tools stays
accepted: ``ctx.sample(tools=...)`` whose caller may use none of them sends none, and answers
the model's call "Unknown tool", tests/test_sampling_tools.py.)"""
from __future__ import annotations

from typing import Any

import pytest

from mcp_tools.protocol.answers import InvalidAnswer, check_answer

TEXT = {"type": "text", "text": "yes"}
TOOL_USE = {"type": "tool_use", "id": "1", "name": "lookup", "input": {}}
TOOLS = [{"name": "lookup", "inputSchema": {"type": "object"}}]


@pytest.mark.parametrize(("params", "answer"), [
    ({}, {"role": "assistant", "content": TEXT, "model": "m", "stopReason": 7}),
    ({}, {"role": "assistant", "content": TEXT, "model": "m", "stopReason": ["endTurn"]}),
], ids=["stop-reason-int", "stop-reason-list"])
def test_refused(params: dict[str, Any], answer: dict[str, Any]) -> None:
    with pytest.raises(InvalidAnswer):
        check_answer("sampling/createMessage", params, answer)


@pytest.mark.parametrize(("params", "answer"), [
    ({}, {"role": "assistant", "content": TEXT, "model": "m", "stopReason": "endTurn"}),
    ({}, {"role": "assistant", "content": TEXT}),
    ({}, {"role": "assistant", "content": TEXT, "model": "m", "stopReason": None}),
    ({"tools": TOOLS}, {"role": "assistant", "content": [TOOL_USE], "model": "m", "stopReason": "toolUse"}),
], ids=["text", "text-without-model", "stop-reason-null", "tool-use-offered"])
def test_accepted(params: dict[str, Any], answer: dict[str, Any]) -> None:
    check_answer("sampling/createMessage", params, answer)
