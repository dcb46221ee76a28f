"""Arguments that fail a tool's validation are a tool execution error, not a JSON-RPC error.

Both revisions' server/tools, Error Handling (and the 2025-11-25 changelog, SEP-1303): "Input
validation errors (e.g., date in wrong format, value out of range)" are Tool Execution Errors,
"reported in tool results with isError: true", so the model can correct its call. Protocol errors
stay for an unknown tool and a request the CallToolRequest schema refuses (no name, ``arguments``
not an object), for a continuation whose token was sealed for other arguments, and for prompts.

Before the fix every flavor answered echo(text=5) with -32602.
"""
from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from mcp_tools import Page, ToolContext
from mcp_tools.models import ToolCall
from mcp_tools.registry import make_tool, registry
from mcp_tools.server import background
from tests.asgi_client import ARGUMENT_ERRORS_META, ARGUMENT_ERRORS_OMITTED_META, HANDSHAKE, MODERN, argument_errors, call_modern, handshake_message, post_headers, post_json
from tests.test_background_review import queued  # noqa: F401
from tests.test_http_spec_edges import APP, open_session

pytestmark = pytest.mark.django_db(transaction=True)


async def legacy(session: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    r = await post_json(APP, handshake_message(method, params), post_headers(version=HANDSHAKE, session=session))
    assert r.status == 200, (r.status, r.body)
    return r.json()


async def answer(era: str, method: str, params: dict[str, Any], capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
    if era == MODERN:
        return (await call_modern(APP, method, params, capabilities=capabilities)).json()
    return await legacy(await open_session(capabilities), method, params)


def assert_argument_errors(body: dict[str, Any], fields: list[str]) -> dict[str, Any]:
    assert [e["field"] for e in argument_errors(body)] == fields, body
    result: dict[str, Any] = body["result"]
    return result


@pytest.mark.parametrize("era", [HANDSHAKE, MODERN])
@pytest.mark.parametrize("arguments, fields", [({"text": 5}, ["text"]), ({}, ["text"]), ({"text": "x", "extra": 1}, ["extra"])])
async def test_invalid_arguments_are_a_tool_execution_error(era: str, arguments: dict[str, Any], fields: list[str]) -> None:
    result = assert_argument_errors(await answer(era, "tools/call", {"name": "echo", "arguments": arguments}), fields)
    if era == MODERN:
        assert result["resultType"] == "complete"


@pytest.mark.parametrize("era", [HANDSHAKE, MODERN])
@pytest.mark.parametrize("params, message", [
    ({"name": "no_such_tool", "arguments": {}}, "Unknown tool"),
    ({"arguments": {"text": "x"}}, '"name"'),
    ({"name": "echo", "arguments": ["x"]}, "must be an object"),
    ({"name": "echo", "arguments": "x"}, "must be an object"),
])
async def test_a_request_the_schema_refuses_is_still_a_protocol_error(era: str, params: dict[str, Any], message: str) -> None:
    if era == MODERN and "name" not in params:
        pytest.skip("2026-07-28 refuses a tools/call without a name before it is dispatched (Mcp-Name)")
    body = await answer(era, "tools/call", params)
    assert body.get("error", {}).get("code") == -32602 and message in body["error"]["message"], body


async def test_a_prompt_with_invalid_arguments_is_still_a_protocol_error() -> None:
    body = (await call_modern(APP, "prompts/get", {"name": "no_such_prompt", "arguments": {"x": 1}})).json()
    assert body["error"]["code"] == -32602, body


async def test_a_saga_with_invalid_arguments_completes_with_the_tool_error() -> None:
    session = await open_session({"elicitation": {}, "sampling": {}})
    assert_argument_errors(await legacy(session, "tools/callSaga", {"name": "deploy", "arguments": {"service": 5}}), ["service"])


async def test_a_background_tool_with_invalid_arguments_goes_to_no_worker(queued: list[str]) -> None:  # noqa: F811
    """The handler never runs, so nothing is queued and no row is written: the caller is answered at once."""
    session = await open_session()
    assert_argument_errors(await legacy(session, "tools/call", {"name": "generate_report", "arguments": {"rows": 0}}), ["rows"])
    assert queued == []
    assert await sync_to_async(ToolCall.objects.count)() == 0


async def test_a_task_with_invalid_arguments_ends_with_the_tool_error(queued: list[str]) -> None:  # noqa: F811
    """2025-11-25 tasks: a task-augmented call answers its CreateTaskResult; the task's result is
    the tool error (tasks/result "returns exactly what the underlying request would have returned")."""
    session = await open_session({"tasks": {}})
    created = await legacy(session, "tools/call", {"name": "generate_report", "arguments": {"rows": 0}, "task": {}})
    task_id = created["result"]["task"]["taskId"]
    assert queued == [task_id]
    await background.run_in_worker(task_id, "w")
    got = await legacy(session, "tasks/result", {"taskId": task_id})
    assert_argument_errors(got, ["rows"])
    # A 2025-11-25 task whose tool result has isError is failed (basic/utilities/tasks: "the task
    # should reach failed status"), unlike the 2026 extension's, which is completed.
    status = await legacy(session, "tasks/get", {"taskId": task_id})
    assert status["result"]["status"] == "failed", status


# -- continuations: a token is bound to the arguments it was sealed for ---------------------------

CAPS = {"elicitation": {"form": {}}, "sampling": {}}


def _snapshot() -> list[tuple[str, int, str]]:
    return sorted((str(c.id), c.round, c.status) for c in ToolCall.objects.all())


async def test_an_mrtr_retry_with_invalid_arguments_is_refused_and_changes_nothing() -> None:
    first = (await call_modern(APP, "tools/call", {"name": "deploy", "arguments": {"service": "x"}}, capabilities=CAPS)).json()["result"]
    assert first["resultType"] == "input_required", first
    before = await sync_to_async(_snapshot)()
    retry = {"name": "deploy", "arguments": {"service": 5}, "requestState": first["requestState"],
             "inputResponses": {"target": {"action": "accept", "content": {"env": "staging", "confirm": True}}}}
    body = (await call_modern(APP, "tools/call", retry, capabilities=CAPS)).json()
    assert body.get("error", {}).get("code") == -32602 and "requestState" in body["error"]["message"], body
    assert await sync_to_async(_snapshot)() == before


async def pages(ctx: ToolContext, size: int) -> Page[list[int]]:
    """Numbers, ``size`` at a time."""
    start = int(ctx.cursor or 0)
    return Page(list(range(start, start + size)), next_cursor=start + size)


async def test_a_resume_token_with_invalid_arguments_is_refused() -> None:
    with registry.registered_temporarily(make_tool(pages, name="rv_pages")):
        first = (await call_modern(APP, "tools/call", {"name": "rv_pages", "arguments": {"size": 2}})).json()["result"]
        token = first["nextResumeToken"]
        body = (await call_modern(APP, "tools/call", {"name": "rv_pages", "arguments": {"size": "2"}, "resumeToken": token})).json()
    assert body.get("error", {}).get("code") == -32602 and "resumeToken" in body["error"]["message"], body


def test_the_errors_read_as_text_and_as_data() -> None:
    from mcp_tools.protocol.errors import InvalidArguments

    refusal = InvalidArguments("echo", [{"field": "text", "message": "Input should be a valid string", "type": "string_type"}])
    assert (refusal.code, refusal.data) == (-32602, {"errors": refusal.errors})  # still a -32602 where no result carries it
    result = refusal.to_result()
    assert result["content"][0]["text"] == "Invalid arguments for tool 'echo':\n- text: Input should be a valid string"
    assert json.loads(json.dumps(result))["_meta"] == {ARGUMENT_ERRORS_META: refusal.errors}


# -- many errors: the first 50 are listed, the rest counted --------------------------------------


def _unknown_keys(count: int) -> dict[str, Any]:
    return {"text": "x", **{f"k{i}": 1 for i in range(count)}}


@pytest.mark.parametrize("era", [HANDSHAKE, MODERN])
async def test_thousands_of_unknown_arguments_list_fifty_errors_and_count_the_rest(era: str) -> None:
    """A security review sent one tools/call with 350,000 unknown argument keys (3.7 MB, under
    MAX_BODY_BYTES): the answer listed every one, in its text and in ``_meta`` (45 MB), and the
    server took some 500 MB to build it, most of it pydantic's own errors. Unknown keys past
    the 50 listed are now counted before pydantic runs, and every list of errors is cut at 50."""
    body = await answer(era, "tools/call", {"name": "echo", "arguments": _unknown_keys(5000)})
    errors = argument_errors(body)
    assert [e["field"] for e in errors] == [f"k{i}" for i in range(50)], errors[:3]
    assert errors[0] == {"field": "k0", "message": "Extra inputs are not permitted", "type": "extra_forbidden"}
    result = body["result"]
    assert result["_meta"][ARGUMENT_ERRORS_OMITTED_META] == 4950
    assert result["content"][0]["text"].endswith("\n- k49: Extra inputs are not permitted\n(and 4950 more)")


async def test_fifty_unknown_arguments_are_all_listed_as_before() -> None:
    body = (await call_modern(APP, "tools/call", {"name": "echo", "arguments": _unknown_keys(50)})).json()
    assert [e["field"] for e in argument_errors(body)] == [f"k{i}" for i in range(50)]
    assert ARGUMENT_ERRORS_OMITTED_META not in body["result"]["_meta"]
    assert "more)" not in body["result"]["content"][0]["text"]


def _total(ids: list[int]) -> int:
    return sum(ids)


async def test_a_list_of_thousands_of_wrong_items_lists_fifty_errors_and_counts_the_rest() -> None:
    """pydantic's errors themselves (one per item): the first 50 read, not a dict made for each."""
    with registry.registered_temporarily(make_tool(_total, name="rv_total")):
        body = (await call_modern(APP, "tools/call", {"name": "rv_total", "arguments": {"ids": ["x"] * 3000}})).json()
    errors = argument_errors(body)
    assert [e["field"] for e in errors] == [f"ids.{i}" for i in range(50)]
    assert errors[0] == {"field": "ids.0", "message": "Input should be a valid integer", "type": "int_type"}
    assert body["result"]["_meta"][ARGUMENT_ERRORS_OMITTED_META] == 2950
    assert body["result"]["content"][0]["text"].endswith("\n(and 2950 more)")


def test_a_model_tool_lists_fifty_unknown_arguments_and_counts_the_rest() -> None:
    from mcp_tools.protocol.errors import InvalidArguments

    tool = registry.get_tool("shop.orders.list")
    assert tool is not None
    with pytest.raises(InvalidArguments) as refused:
        tool.validate_arguments({f"k{i:04}": 1 for i in range(3000)})
    assert [e["field"] for e in refused.value.errors] == [f"k{i:04}" for i in range(50)]  # in order, as before
    assert refused.value.omitted == 2950
    assert refused.value.data == {"errors": refused.value.errors, "omitted": 2950}  # a -32602's data where no result carries it


def test_an_alias_pydantic_accepts_is_not_counted_unknown_before_it_runs() -> None:
    """The early refusal of many unknown keys knows every name a field's validation_alias takes
    (AliasChoices, an AliasPath's first key): "regionCode" is the tool's, only the junk is listed."""
    from pydantic import AliasChoices, AliasPath, Field

    from mcp_tools.protocol.errors import InvalidArguments
    from mcp_tools.registry import make_tool

    def lookup(region: str = Field(validation_alias=AliasChoices("region", "regionCode")),
               zone: str = Field(default="", validation_alias=AliasPath("where", "zone"))) -> str:
        return region + zone

    tool = make_tool(lookup)
    with pytest.raises(InvalidArguments) as refused:
        tool.validate_arguments({"regionCode": "eu", "where": {"zone": "1"}, **{f"junk{i}": 1 for i in range(60)}})
    fields = [error["field"] for error in refused.value.errors]
    assert "regionCode" not in fields and "where" not in fields, fields
    assert len(fields) == 50 and refused.value.omitted == 10
