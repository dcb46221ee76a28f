"""Review of elicitation (URL mode, client capabilities, answer validation).

Each test asserts the correct behaviour and fails on the current code.
"""
from __future__ import annotations

import datetime
import json
from typing import Any, Literal

import pytest
from pydantic import BaseModel, Field

from mcp_tools import ToolContext
from mcp_tools.registry import make_tool, registry
from tests.asgi_client import call_modern

pytestmark = pytest.mark.django_db(transaction=True)
FORM = {"elicitation": {"form": {}}}
URL_ONLY = {"elicitation": {"url": {}}}


async def ask_name(ctx: ToolContext) -> str:
    """Form-mode elicitation."""
    answer = await ctx.elicit("Your name?", {"type": "object", "properties": {"name": {"type": "string"}}}, key="name")
    return str(answer.get("name"))


class Code(BaseModel):
    code: str = Field(pattern=r"^[A-Z]{3}$")


async def ask_code(ctx: ToolContext) -> str:
    """A pydantic schema with a string pattern (part of the 2025-11-25 restricted schema)."""
    answer = await ctx.elicit("Three capital letters", schema=Code, key="code")
    return answer.code


FORMATS = {"type": "object", "properties": {
    "site": {"type": "string", "format": "uri"},
    "when": {"type": "string", "format": "date-time"},
}}


async def ask_formats(ctx: ToolContext) -> str:
    """A dict schema using two of the four formats the spec supports."""
    answer = await ctx.elicit("Where and when?", FORMATS, key="fmt")
    return json.dumps(answer, sort_keys=True)


class Meeting(BaseModel):
    when: datetime.datetime


async def ask_meeting(ctx: ToolContext) -> str:
    """A pydantic datetime field: requestedSchema says format date-time."""
    answer = await ctx.elicit("When?", schema=Meeting, key="meeting")
    return answer.when.isoformat()


@pytest.fixture
def app():  # type: ignore[no-untyped-def]
    from demo_site.asgi import application

    with registry.registered_temporarily(make_tool(ask_name), make_tool(ask_code), make_tool(ask_formats), make_tool(ask_meeting)):
        yield application


async def _first(app: Any, name: str, caps: dict[str, Any] = FORM) -> dict[str, Any]:
    body = (await call_modern(app, "tools/call", {"name": name, "arguments": {}}, capabilities=caps)).json()
    return body


async def _answer(app: Any, name: str, first: dict[str, Any], key: str, content: dict[str, Any]) -> dict[str, Any]:
    return (await call_modern(app, "tools/call", {
        "name": name, "arguments": {}, "requestState": first["requestState"],
        "inputResponses": {key: {"action": "accept", "content": content}}}, capabilities=FORM)).json()


# -- 1. a client that declared URL mode only is sent a form elicitation --------------------------------


async def test_form_elicitation_is_not_sent_to_a_client_that_declared_url_mode_only(app: Any) -> None:
    """2025-11-25 elicitation, Capabilities: "Servers MUST NOT send elicitation requests with modes that are
    not supported by the client." {"url": {}} declares URL mode only (only an *empty* object means form)."""
    response = await call_modern(app, "tools/call", {"name": "ask_name", "arguments": {}}, capabilities=URL_ONLY)
    body = response.json()
    assert "error" in body, f"a form elicitation was sent to a url-only client: {body}"
    assert body["error"]["code"] == -32021
    assert body["error"]["data"] == {"requiredCapabilities": {"elicitation": {"form": {}}}}


# -- 2. a model constraint requestedSchema does not carry (pattern): a non-matching answer kills the call ---------


async def test_an_answer_breaking_a_pydantic_pattern_is_refused_and_the_call_still_waits(app: Any) -> None:
    """_model_elicitation_schema keeps no "pattern" (nor exclusiveMinimum/Maximum, multipleOf), so the answer
    passes the arrival check, is journaled, and model_validate then raises StepFailed on replay: the call
    ends as a failed tool call on one typo, with no chance to answer again."""
    first = (await _first(app, "ask_code"))["result"]
    bad = await _answer(app, "ask_code", first, "code", {"code": "abc"})
    assert "error" in bad and bad["error"]["code"] == -32602, f"the call did not stay waiting: {bad}"
    good = await _answer(app, "ask_code", first, "code", {"code": "ABC"})
    assert good.get("result", {}).get("content") == [{"type": "text", "text": "ABC"}], good


# -- 3. the uri and date-time formats are not checked ----------------------------------------------------


@pytest.mark.parametrize("content", [
    {"site": "not a uri at all", "when": "2025-01-01T10:00:00Z"},
    {"site": "https://example.com/", "when": "yesterday"},
])
async def test_an_answer_breaking_a_uri_or_date_time_format_is_refused(app: Any, content: dict[str, Any]) -> None:
    """docs/durable-calls.md: a form answer is checked against the whole requestedSchema, formats included.
    The spec supports four formats (email, uri, date, date-time); jsonschema's FormatChecker checks uri and
    date-time only when optional packages (rfc3987, rfc3339-validator) are installed, and neither is a dependency."""
    first = (await _first(app, "ask_formats"))["result"]
    body = await _answer(app, "ask_formats", first, "fmt", content)
    assert "error" in body and body["error"]["code"] == -32602, f"reached the handler: {body}"


async def test_an_answer_breaking_date_time_is_refused_not_a_failed_call(app: Any) -> None:
    first = (await _first(app, "ask_meeting"))["result"]
    assert first["inputRequests"]["meeting"]["params"]["requestedSchema"]["properties"]["when"]["format"] == "date-time"
    bad = await _answer(app, "ask_meeting", first, "meeting", {"when": "yesterday"})
    assert "error" in bad and bad["error"]["code"] == -32602, f"the call did not stay waiting: {bad}"
    good = await _answer(app, "ask_meeting", first, "meeting", {"when": "2025-01-01T10:00:00+00:00"})
    assert good.get("result", {}).get("content") == [{"type": "text", "text": "2025-01-01T10:00:00+00:00"}], good


@pytest.mark.parametrize(("fmt", "good", "bad"), [
    ("uri", ["https://example.com/a?b=c#d", "mailto:a@b.org", "urn:isbn:0451450523", "http://[::1]:8080/"],
     ["not a uri at all", "/relative/path", "//example.com/x", "https://exa mple.com", "http://x/%zz", "https://bücher.de"]),
    ("date-time", ["2025-01-01T10:00:00Z", "2025-01-01t10:00:00.5z", "2025-01-01T10:00:00+05:30", "1998-12-31T23:59:60Z"],
     ["yesterday", "2025-01-01T10:00:00", "2025-01-01 10:00:00Z", "2025-02-30T10:00:00Z", "2025-01-01T24:00:00Z",
      "1998-12-31T22:59:60Z", "2025-01-01T10:00:00+24:00"]),
    ("email", ["a@b.org", "first.last+tag@example.co.uk", '"a b"@x.org', "u@[192.0.2.1]", "u@[IPv6:2001:db8::1]"],
     ["a", "a@", "@b.org", "a..b@c.org", "a b@c.org", "a@-b.org", "u@[::1]"]),
])
def test_the_spec_s_formats_are_checked_by_their_rfcs(fmt: str, good: list[str], bad: list[str]) -> None:
    """RFC 3986 (uri), RFC 3339 (date-time), RFC 5321 (email), as JSON Schema defines the formats (jsonschema's
    own checker let all of these through but the "date" one, which it checks well already)."""
    from mcp_tools.protocol.answers import InvalidAnswer, check_answer

    params = {"mode": "form", "requestedSchema": {"type": "object", "properties": {"v": {"type": "string", "format": fmt}}}}
    for value in good:
        check_answer("elicitation/create", params, {"action": "accept", "content": {"v": value}})
    for value in bad:
        with pytest.raises(InvalidAnswer):
            check_answer("elicitation/create", params, {"action": "accept", "content": {"v": value}})


async def test_the_model_s_own_schema_stays_on_the_server(app: Any) -> None:
    """What the answer is checked against beyond requestedSchema is journaled with the step, not sent."""
    first = (await _first(app, "ask_code"))["result"]
    assert set(first["inputRequests"]["code"]) == {"method", "params"}, first["inputRequests"]["code"]
    assert "pattern" not in json.dumps(first["inputRequests"]), first["inputRequests"]


class Quantity(BaseModel):
    count: int = Field(gt=0, multiple_of=5)
    note: str = Field(default="", max_length=10)


def test_constraints_requested_schema_cannot_carry_are_checked_against_the_model_s_schema() -> None:
    from mcp_tools.engine.context import _model_answer_schema, _model_elicitation_schema
    from mcp_tools.protocol.answers import InvalidAnswer, checked_step_answer

    assert _model_answer_schema(Meeting) is None  # requestedSchema says all (no journal bloat)
    request = {"method": "elicitation/create",
               "params": {"mode": "form", "message": "How many?", "requestedSchema": _model_elicitation_schema(Quantity)},
               "answerSchema": _model_answer_schema(Quantity)}
    assert checked_step_answer(request, {"action": "accept", "content": {"count": 10, "extra": 1}}) == {
        "action": "accept", "content": {"count": 10}}
    for count in (0, 7):
        with pytest.raises(InvalidAnswer, match="count"):
            checked_step_answer(request, {"action": "accept", "content": {"count": count}})
    assert checked_step_answer(request, {"action": "decline"}) == {"action": "decline"}


class Profile(BaseModel):
    nickname: str | None = None
    age: int | None = None
    plan: str = "free"
    newsletter: bool | None = True


def test_an_optional_field_s_null_default_is_not_sent() -> None:
    """The spec's primitive schemas take a default of their own type only (``StringSchema.default?:
    string``, ``NumberSchema.default?: number``): ``"default": null`` made clients that check requests
    against them (the TypeScript SDK) refuse the elicitation. A real default is still sent."""
    from mcp_tools.engine.context import _model_elicitation_schema

    properties = _model_elicitation_schema(Profile)["properties"]
    assert properties["nickname"] == {"type": "string", "title": "Nickname"}, properties
    assert properties["age"] == {"type": "integer", "title": "Age"}, properties
    assert properties["plan"]["default"] == "free"
    assert properties["newsletter"]["default"] is True
    assert "required" not in _model_elicitation_schema(Profile)


async def ask_profile(ctx: ToolContext) -> str:
    profile = await ctx.elicit("Your profile?", Profile)
    return f"{profile.nickname}/{profile.plan}"


def test_a_step_journaled_with_the_null_default_by_an_earlier_release_still_replays() -> None:
    """A call in flight across the upgrade: its step's digest holds the schema with ``"default": null``."""
    from asgiref.sync import async_to_sync

    from mcp_tools.engine import Completed, Invocation, run
    from mcp_tools.engine.journal import Journal, Step, digest
    from tests.test_engine_corners import StubRuntime

    earlier_schema = {"type": "object", "properties": {
        "nickname": {"type": "string", "title": "Nickname", "default": None},
        "age": {"type": "integer", "title": "Age", "default": None},
        "plan": {"type": "string", "title": "Plan", "default": "free"},
        "newsletter": {"type": "boolean", "title": "Newsletter", "default": True},
    }}
    request = {"method": "elicitation/create", "params": {"mode": "form", "message": "Your profile?", "requestedSchema": earlier_schema}}

    def replay(step_digest: str) -> Any:
        journal = Journal([Step(seq=0, kind="elicit", key="elicit-0", digest=step_digest, request=request, status="done",
                                response={"action": "accept", "content": {"nickname": "ada"}})])
        inv = Invocation(fn=ask_profile, is_async=True, kwargs={}, context_param="ctx", principal=None,
                         protocol_version="2025-11-25", client_capabilities={"elicitation": {}},
                         runtime=StubRuntime(), journal=journal)  # type: ignore[arg-type]
        return async_to_sync(run)(inv)

    outcome = replay(digest(["elicit", request]))
    assert isinstance(outcome, Completed), outcome
    assert outcome.value == "ada/free"
    # Any other request under that step is still a different step.
    other = {**request, "params": {**request["params"], "message": "Another question?"}}
    with pytest.raises(Exception, match="different request"):
        replay(digest(["elicit", other]))


class Item(BaseModel):
    name: str


class FreeTags(BaseModel):
    tags: list[str]


class Numbers(BaseModel):
    values: list[int]


class Items(BaseModel):
    items: list[Item]


class Colours(BaseModel):
    colours: list[Literal["red", "green"]] = []


@pytest.mark.parametrize("model", [FreeTags, Numbers, Items])
def test_a_list_that_is_no_multi_select_enum_is_refused_before_it_is_sent(model: type[BaseModel]) -> None:
    """The spec's array form field is a multi-select enum (``items.enum`` or ``items.anyOf`` of consts): a
    ``list[str]`` was sent all the same, and the TypeScript SDK refused the whole elicitation (``mcp_call``
    could answer no value either). Found by a review of the tool author's API; docs/durable-calls.md says a
    field no form field expresses raises ``TypeError`` before anything is sent."""
    from mcp_tools.engine.context import _model_elicitation_schema

    with pytest.raises(TypeError, match="cannot be asked in an elicitation form"):
        _model_elicitation_schema(model)


def test_a_list_of_enum_values_is_still_a_form_field() -> None:
    from mcp_tools.engine.context import _model_elicitation_schema

    field = _model_elicitation_schema(Colours)["properties"]["colours"]
    assert field["type"] == "array" and field["items"]["enum"] == ["red", "green"], field


async def ask_with_a_dataclass(ctx: ToolContext) -> str:
    import dataclasses

    @dataclasses.dataclass
    class Target:
        env: str

    await ctx.elicit("Where?", Target)  # type: ignore[arg-type]
    return "asked"


async def test_a_schema_that_is_no_model_nor_dict_says_what_to_use(caplog: Any) -> None:
    """Found by a review of the tool author's API: a dataclass (tool parameters take them) failed with
    ``AttributeError: ... has no attribute 'model_json_schema'``."""
    import logging

    from demo_site.asgi import application

    calls = logging.getLogger("mcp_tools.calls")
    calls.addHandler(caplog.handler)
    try:
        with registry.registered_temporarily(make_tool(ask_with_a_dataclass)):
            result = (await call_modern(application, "tools/call", {"name": "ask_with_a_dataclass", "arguments": {}},
                                        capabilities={"elicitation": {"form": {}}})).json()["result"]
    finally:
        calls.removeHandler(caplog.handler)
    assert result["isError"] is True, result
    assert "ctx.elicit's schema is a pydantic model class or a JSON Schema dict" in caplog.text, caplog.text
