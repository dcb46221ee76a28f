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
    # Found by a review (hostile input): an unknown block type passed unchecked, and so did an image's
    # data that is not base64; the handler got an empty text and ran its side effect on it.
    ({}, {"role": "assistant", "content": {"type": "bogus"}, "model": "m"}),
    ({}, {"role": "assistant", "content": [TEXT, {"type": "resource_link", "uri": "file:///x", "name": "x"}], "model": "m"}),
    ({}, {"role": "assistant", "content": {"type": "image", "data": "!!not base64!!", "mimeType": "image/png"}, "model": "m"}),
    ({}, {"role": "assistant", "content": {"type": "audio", "data": "QUI", "mimeType": "audio/wav"}, "model": "m"}),
    ({}, {"role": "assistant", "content": {"type": "image", "data": "\u00e9", "mimeType": "image/png"}, "model": "m"}),
    # Found by a review of the 2026 era: a tool's result is the user's turn, never the model's answer.
    ({"tools": TOOLS}, {"role": "assistant", "content": [{"type": "tool_result", "toolUseId": "1", "content": []}], "model": "m"}),
], ids=["stop-reason-int", "stop-reason-list", "unknown-block", "resource-link-block", "image-not-base64",
        "audio-bad-padding", "image-non-ascii", "tool-result-from-the-model"])
def test_refused(params: dict[str, Any], answer: dict[str, Any]) -> None:
    with pytest.raises(InvalidAnswer):
        check_answer("sampling/createMessage", params, answer)


@pytest.mark.parametrize(("params", "answer"), [
    ({}, {"role": "assistant", "content": TEXT, "model": "m", "stopReason": "endTurn"}),
    ({}, {"role": "assistant", "content": TEXT}),
    ({}, {"role": "assistant", "content": TEXT, "model": "m", "stopReason": None}),
    ({"tools": TOOLS}, {"role": "assistant", "content": [TOOL_USE], "model": "m", "stopReason": "toolUse"}),
    ({}, {"role": "assistant", "content": {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}, "model": "m"}),
    ({}, {"role": "assistant", "content": {"type": "audio", "data": "", "mimeType": "audio/wav"}, "model": "m"}),
], ids=["text", "text-without-model", "stop-reason-null", "tool-use-offered", "image-base64", "audio-empty"])
def test_accepted(params: dict[str, Any], answer: dict[str, Any]) -> None:
    check_answer("sampling/createMessage", params, answer)


@pytest.mark.parametrize("roots", [[{"uri": "http://example.com"}], [{"uri": "file:///a"}, {"uri": "/home/x"}]],
                         ids=["http", "bare-path"])
def test_a_root_that_is_not_a_file_uri_is_refused(roots: list[dict[str, Any]]) -> None:
    """Found by a review of the 2026 era: the spec says a root's uri MUST be a file:// URI."""
    with pytest.raises(InvalidAnswer, match="file://"):
        check_answer("roots/list", {}, {"roots": roots})
    check_answer("roots/list", {}, {"roots": [{"uri": "file:///home/x", "name": "x"}]})


def test_a_refused_block_type_is_named_escaped_so_it_writes_no_log_line_of_its_own() -> None:
    """Found by a diff review: the client's block type went into the refusal, and the refusal into the
    server log, as written: a newline in it forged a line of its own."""
    forged = "text\n2026-01-01 00:00:00,000 ERROR django.security: FORGED"
    with pytest.raises(InvalidAnswer) as refused:
        check_answer("sampling/createMessage", {}, {"role": "assistant", "content": {"type": forged}, "model": "m"})
    assert "\n" not in str(refused.value) and "FORGED" in str(refused.value)


@pytest.mark.parametrize(("method", "params", "answer"), [
    ("roots/list", {}, {"roots": [{"uri": "file:///a", "name": 5}]}),
    ("roots/list", {}, {"roots": [{"uri": "file:///a", "_meta": []}]}),
    ("elicitation/create", {"mode": "form", "message": "m", "requestedSchema": {"type": "object", "properties": {}}},
     {"action": "accept", "content": {}, "_meta": 5}),
    ("sampling/createMessage", {}, {"role": "assistant", "content": {"type": "text", "text": "t"}, "model": "m", "_meta": "x"}),
], ids=["root-name-number", "root-meta-array", "elicitation-meta-number", "sampling-meta-string"])
def test_optional_fields_of_the_wrong_type_are_refused(method: str, params: dict[str, Any], answer: dict[str, Any]) -> None:
    """Found by a review with hostile input: a root's ``name`` of 5 was handed to the handler as it was
    (``ctx.list_roots``), and a result's ``_meta`` of 5 was taken; the schema types them string and object."""
    with pytest.raises(InvalidAnswer):
        check_answer(method, params, answer)
    check_answer(method, params, {k: v for k, v in answer.items() if k != "_meta"} if method != "roots/list"
                 else {"roots": [{"uri": "file:///a", "name": "home", "_meta": {}}]})
