"""Review of 2026-07-28 multi-round-trip requests and sampling with tools (session 29).

Each test asserts the behaviour the spec (or the project's own docs) asks for and failed on the code
before its fix.
"""
from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from mcp_tools import ToolContext
from mcp_tools.registry import make_tool, registry
from tests.asgi_client import call_modern

pytestmark = pytest.mark.django_db(transaction=True)
FORM = {"elicitation": {"form": {}}}
AGE_FORM = {"type": "object", "properties": {"age": {"type": "integer", "minimum": 0}}, "required": ["age"]}


class Person(BaseModel):
    name: str
    age: int


async def ask_age(ctx: ToolContext) -> str:
    """A dict schema with an integer field: the handler reads the answer as the client sent it."""
    answer = await ctx.elicit("Your age?", AGE_FORM, key="age")
    return f"{type(answer['age']).__name__} {answer['age']}"


async def ask_person(ctx: ToolContext) -> str:
    """A pydantic schema with an int field."""
    person = await ctx.elicit("Who?", schema=Person, key="who")
    return f"{person.name} {person.age}"


@pytest.fixture
def app():  # type: ignore[no-untyped-def]
    from demo_site.asgi import application

    with registry.registered_temporarily(make_tool(ask_age), make_tool(ask_person)):
        yield application


async def _ask(app: Any, name: str) -> dict[str, Any]:
    body = (await call_modern(app, "tools/call", {"name": name, "arguments": {}}, capabilities=FORM)).json()
    assert body["result"]["resultType"] == "input_required", body
    return body["result"]


async def _answer(app: Any, name: str, first: dict[str, Any], responses: dict[str, Any]) -> dict[str, Any]:
    return (await call_modern(app, "tools/call", {
        "name": name, "arguments": {}, "requestState": first["requestState"], "inputResponses": responses},
        capabilities=FORM)).json()


# -- a whole-number float is a JSON Schema integer ------------------------------------------------------


@pytest.mark.parametrize(("tool", "content", "text"), [
    ("ask_age", {"age": 5.0}, "int 5"),
    ("ask_person", {"name": "Zoe", "age": 5.0}, "Zoe 5"),
])
async def test_a_whole_number_float_answers_an_integer_field(app: Any, tool: str, content: dict[str, Any], text: str) -> None:
    """JSON Schema: "integer" is any number with a zero fractional part, so ``5.0`` fits; clients whose
    language has one number type (and Python's json for a float) write it so. It was refused ("must be
    of type integer"): the official SDK then raised in 2026-07-28 and the legacy call failed. The handler
    of a dict schema gets the int the schema declares."""
    first = await _ask(app, tool)
    key = next(iter(first["inputRequests"]))
    body = await _answer(app, tool, first, {key: {"action": "accept", "content": content}})
    assert body.get("result", {}).get("content") == [{"type": "text", "text": text}], body


@pytest.mark.parametrize("age", [5.5, True, "5"])
async def test_an_integer_field_still_refuses_what_is_not_a_whole_number(app: Any, age: Any) -> None:
    first = await _ask(app, "ask_age")
    body = await _answer(app, "ask_age", first, {"age": {"action": "accept", "content": {"age": age}}})
    assert body.get("error", {}).get("code") == -32602, body
    assert "age" in body["error"]["message"], body


# -- a saga's refusal of steps it never asked names 50 of them, not every one -----------------------


async def ask_age_saga(ctx: ToolContext) -> str:
    answer = await ctx.elicit("Your age?", AGE_FORM, key="age")
    return str(answer["age"])


async def test_a_saga_resume_with_many_unknown_step_ids_lists_fifty_and_counts_the_rest() -> None:
    """Each unknown stepId was echoed in ``data.keys``: a body of 90,000 of them got a 3.6 MB error.
    Capped like argument errors (``MAX_ARGUMENT_ERRORS``), the rest counted."""
    from mcp_tools.protocol.errors import MAX_ARGUMENT_ERRORS
    from mcp_tools.transports.http import McpEndpoint

    app = McpEndpoint()
    with registry.registered_temporarily(make_tool(ask_age_saga)):
        first = (await call_modern(app, "tools/callSaga", {"name": "ask_age_saga", "arguments": {}}, capabilities=FORM)).json()
        token = first["result"]["sagaToken"]
        steps = [{"stepId": "age", "result": {"action": "accept", "content": {"age": 3}}}]
        steps += [{"stepId": f"never-{n:04d}", "result": {}} for n in range(MAX_ARGUMENT_ERRORS + 7)]
        body = (await call_modern(app, "tools/resumeSaga", {"sagaToken": token, "completedSteps": steps}, capabilities=FORM)).json()
        assert body["error"]["code"] == -32602, body
        assert body["error"]["data"] == {"stepIds": [f"never-{n:04d}" for n in range(MAX_ARGUMENT_ERRORS)], "omitted": 7}
        # Nothing was recorded: the right answer alone still completes the saga.
        done = (await call_modern(app, "tools/resumeSaga", {"sagaToken": token, "completedSteps": steps[:1]}, capabilities=FORM)).json()
    assert done["result"]["content"] == [{"type": "text", "text": "3"}], done  # a completed saga: the tool result


# -- what a resource returns: rows with a uri field, and no rows, are JSON --------------------------


@pytest.mark.parametrize(("value", "contents"), [
    # Rows that merely have a uri field (bookmarks): sent as they were, with no text or blob, they made
    # an invalid ReadResourceResult, and the official SDK client raised a ValidationError on it.
    ([{"uri": "https://example.com/", "title": "Example"}],
     [{"uri": "test://rows", "text": '[{"uri": "https://example.com/", "title": "Example"}]', "mimeType": "application/json"}]),
    # No rows: "contents": [] (which the 2026-07-28 spec keeps for no resource at all), where two rows are JSON text.
    ([], [{"uri": "test://rows", "text": "[]", "mimeType": "application/json"}]),
    # Ready contents still are what they were.
    ([{"uri": "test://rows", "text": "hi"}], [{"uri": "test://rows", "text": "hi"}]),
    ([{"uri": "test://rows", "blob": "aGk=", "mimeType": "text/plain"}], [{"uri": "test://rows", "blob": "aGk=", "mimeType": "text/plain"}]),
])
@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_a_resource_s_list_is_contents_only_when_each_item_is_contents(value: list[Any], contents: list[Any], era: str) -> None:
    import json

    import mcp_types

    from mcp_tools import resource
    from mcp_tools.transports.http import McpEndpoint
    from tests.test_resources_review import legacy, open_session

    resource("test://rows")(lambda: value)
    try:
        if era == "2026-07-28":
            body = (await call_modern(McpEndpoint(), "resources/read", {"uri": "test://rows"})).json()
        else:
            body = await legacy(await open_session(), "resources/read", {"uri": "test://rows"})
    finally:
        registry.unregister_resource("test://rows")
    assert body["result"]["contents"] == contents, body
    # What the official SDK reads it as (it refused the first one).
    assert mcp_types.ReadResourceResult.model_validate(json.loads(json.dumps(body["result"]))).contents


async def test_completion_of_a_fixed_resource_s_uri_has_no_values_not_an_error() -> None:
    """2025-11-25 / 2026-07-28 ResourceTemplateReference.uri is "the URI or URI template of the
    resource"; a fixed resource's URI was refused as "Unknown resource template" (-32602). A hidden
    one still is, as one that does not exist."""
    from mcp_tools import resource
    from mcp_tools.transports.http import McpEndpoint

    resource("test://fixed")(lambda: "x")
    resource("test://hidden", permissions=["auth.delete_user"])(lambda: "x")
    try:
        params = {"ref": {"type": "ref/resource", "uri": "test://fixed"}, "argument": {"name": "q", "value": ""}}
        body = (await call_modern(McpEndpoint(), "completion/complete", params)).json()
        hidden = (await call_modern(McpEndpoint(), "completion/complete",
                                    {**params, "ref": {"type": "ref/resource", "uri": "test://hidden"}})).json()
    finally:
        registry.unregister_resource("test://fixed")
        registry.unregister_resource("test://hidden")
    assert body["result"]["completion"] == {"values": [], "total": 0, "hasMore": False}, body
    assert hidden["error"]["code"] == -32602 and "Unknown resource" in hidden["error"]["message"], hidden


async def test_a_listen_filter_asks_each_distinct_permission_once_not_once_per_uri(monkeypatch: pytest.MonkeyPatch) -> None:
    """A subscriptions/listen naming 190,000 URIs of one gated template took 24 s to acknowledge: a
    permission check (a thread hop) per URI. One per distinct set of permissions now; what is served
    is the same (the caller's readable URIs, in order, once each; unknown ones left out)."""
    from mcp_tools import resource
    from mcp_tools.server.auth import ANONYMOUS
    from mcp_tools.transports import http

    asked: list[tuple[str, ...]] = []

    async def counting(principal: Any, perms: tuple[str, ...]) -> bool:
        asked.append(tuple(perms))
        return "auth.delete_user" not in perms

    monkeypatch.setattr(http, "permitted", counting)
    resource("test://rows/{n}", permissions=["auth.view_user"])(lambda n: n)
    resource("test://secret/{n}", permissions=["auth.delete_user"])(lambda n: n)
    try:
        uris = [f"test://rows/{n}" for n in range(500)] + ["test://secret/1", "test://nowhere", "test://rows/3"]
        honoured = await http.listen_filter({"notifications": {"resourceSubscriptions": uris}}, 1, ANONYMOUS)
    finally:
        registry.unregister_resource("test://rows/{n}")
        registry.unregister_resource("test://secret/{n}")
    assert honoured == {"resourceSubscriptions": [f"test://rows/{n}" for n in range(500)]}, honoured
    assert sorted(asked) == [("auth.delete_user",), ("auth.view_user",)], asked
