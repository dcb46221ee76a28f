"""What the registry builds from a function holds to what it advertises: arguments of the schema's
JSON types only, a ``Field(...)`` default as a field, ``structuredContent`` that conforms to the
outputSchema (or a tool error), prompts whose arguments are the parameters a client can send.

Each test failed before its fix (a review of the registry): "5" and true were taken for an integer,
a Field default reached the handler as a FieldInfo, a result against its outputSchema was sent as
is (a NaN or infinity for a float as null), bytes that are not text were -32603, a prompt's **kwargs was a required argument and its *args
an internal error, and falsy "arguments" of a prompt were taken for {}.
"""
from __future__ import annotations

import warnings
from typing import Any

import pytest
from pydantic import BaseModel, Field

from mcp_tools import prompt
from mcp_tools.registry import make_tool, registry
from mcp_tools.registry.schemas import output_from_annotation
from mcp_tools.transports.http import McpEndpoint
from tests.asgi_client import argument_errors, call_modern

pytestmark = pytest.mark.django_db(transaction=True)
APP = McpEndpoint()


async def tool_call(name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    r = await call_modern(APP, "tools/call", {"name": name, "arguments": arguments or {}})
    assert r.status in (200, 400), r.body
    return r.json()


# -- arguments of the schema's JSON types only (validation was lax: "5", true, 1.0, "true" were taken)
def scale(n: int, flag: bool = False) -> int:
    return n * 2


@pytest.mark.parametrize("arguments, field", [({"n": "5"}, "n"), ({"n": True}, "n"), ({"n": 1.5 - 0.5}, "n"),
                                               ({"n": 1, "flag": "true"}, "flag"), ({"n": 1, "flag": 1}, "flag")])
async def test_an_argument_of_another_json_type_than_the_schema_is_refused(arguments: dict[str, Any], field: str) -> None:
    with registry.registered_temporarily(make_tool(scale)):
        body = await tool_call("scale", arguments)
    assert body["result"].get("isError"), f"accepted {arguments} against {make_tool(scale).input.schema}: {body['result']}"
    assert field in [e["field"] for e in argument_errors(body)]


# -- Field(...) as a parameter's default: the field, with its default and constraints
def page(limit: int = Field(10, ge=1, description="Rows")) -> str:
    return repr(limit)


async def test_a_pydantic_field_default_gives_its_default_and_constraints() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # as in production: pydantic only warns (PydanticJsonSchemaWarning)
        built = make_tool(page)
    assert built.input.schema["properties"]["limit"].get("default") == 10
    assert built.input.schema["properties"]["limit"].get("minimum") == 1, built.input.schema
    with registry.registered_temporarily(built):
        body = await tool_call("page", {})
        assert body["result"]["content"][0]["text"] == "10", body  # not the FieldInfo itself
        refused = await tool_call("page", {"limit": 0})
    assert [e["field"] for e in argument_errors(refused)] == ["limit"], refused


# -- structuredContent MUST conform to the advertised outputSchema (tools.mdx "Output Schema")
def count_or_nothing() -> int:
    return None  # type: ignore[return-value]


class Point(BaseModel):
    x: int


def bad_point() -> Point:
    return {"x": "left"}  # type: ignore[return-value]


@pytest.mark.parametrize("fn", [count_or_nothing, bad_point])
async def test_structured_content_conforms_to_output_schema_or_is_an_error(fn: Any) -> None:
    built = make_tool(fn)
    with registry.registered_temporarily(built), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # as in production: pydantic only warns
        body = await tool_call(fn.__name__)
    assert "result" in body, f"a JSON-RPC error for a tool's bad result: {body}"
    result = body["result"]
    assert result["isError"] is True and "does not match its output schema" in result["content"][0]["text"], result
    assert "structuredContent" not in result


# -- NaN and infinity are no JSON numbers: jsonrpc.dumps wrote them as null, against "type": "number"
def ratio() -> float:
    return float("nan")


def too_far() -> list[float]:
    return [1.5, float("inf")]


class Reading(BaseModel):
    label: str
    value: float


def reading() -> Reading:
    return Reading(label="x", value=float("-inf"))


@pytest.mark.parametrize("fn", [ratio, too_far, reading])
async def test_a_non_finite_float_in_structured_content_is_a_tool_error(fn: Any) -> None:
    """tools.mdx, Output Schema: "Servers MUST provide structured results that conform to this schema".
    (Where the schema takes any value, pydantic's dump already writes NaN as null, which conforms.)"""
    import jsonschema

    with registry.registered_temporarily(make_tool(fn)):
        listed = (await call_modern(APP, "tools/list")).json()["result"]["tools"]
        schema = next(t for t in listed if t["name"] == fn.__name__)["outputSchema"]
        body = await tool_call(fn.__name__)
    result = body["result"]
    if not result.get("isError"):  # what a client's output validation would say
        jsonschema.validate(result["structuredContent"], schema, cls=jsonschema.Draft202012Validator)
    assert result["isError"] is True and "does not match its output schema" in result["content"][0]["text"], result
    assert "structuredContent" not in result


class Tree(BaseModel):
    children: list[Tree] = []
    weight: float = 1.0


class Count(BaseModel):
    children: list[Count] = []
    n: int = 0


def test_only_a_schema_that_can_hold_a_float_is_searched_for_one() -> None:
    """A recursive model is checked through its reference once; finite floats pass."""
    trees = output_from_annotation(Tree)
    assert trees.dump(Tree(children=[Tree(weight=2.5)])) == {"children": [{"children": [], "weight": 2.5}], "weight": 1.0}
    with pytest.raises(ValueError, match="NaN or infinity"):
        trees.dump(Tree(children=[Tree(children=[Tree(weight=float("nan"))])]))
    counts = output_from_annotation(Count)
    assert counts.dump(Count(children=[Count(n=2)])) == {"children": [{"children": [], "n": 2}], "n": 0}
    assert counts._may_hold_float is False


# -- a result that cannot be shaped: isError, never a JSON-RPC error (docs/protocol.md)
def raw() -> bytes:
    return b"\xff\xfe"


async def test_a_result_that_cannot_be_shaped_is_a_tool_error_not_internal_error() -> None:
    with registry.registered_temporarily(make_tool(raw)):
        body = await tool_call("raw")
    assert "result" in body and body["result"].get("isError") is True, body


# -- a prompt's *args / **kwargs name no argument
async def test_prompt_var_parameters_are_not_arguments() -> None:
    @prompt(name="rv_kw")
    def rv_kw(topic: str, **extra: str) -> str:
        return topic

    @prompt(name="rv_args")
    def rv_args(*parts: str) -> str:
        return " ".join(parts)

    try:
        listed = (await call_modern(APP, "prompts/list", {})).json()["result"]["prompts"]
        by_name = {p["name"]: [a["name"] for a in p["arguments"]] for p in listed}
        assert by_name["rv_kw"] == ["topic"] and by_name["rv_args"] == [], by_name
        got = (await call_modern(APP, "prompts/get", {"name": "rv_kw", "arguments": {"topic": "x"}})).json()
        assert "result" in got, got  # not "Missing required arguments: extra"
        got = (await call_modern(APP, "prompts/get", {"name": "rv_args", "arguments": {"parts": "y"}})).json()
        assert "result" in got, got  # "parts" names no argument: the prompt runs without it, no TypeError
    finally:
        registry.unregister_prompt("rv_kw")
        registry.unregister_prompt("rv_args")


# -- prompts/get: "arguments" must be an object (or absent), falsy or not
@pytest.mark.parametrize("arguments", [[], False, 0, ""])
async def test_prompt_arguments_not_an_object_are_refused(arguments: Any) -> None:
    @prompt(name="rv_opt")
    def rv_opt(style: str = "plain") -> str:
        return style

    try:
        got = (await call_modern(APP, "prompts/get", {"name": "rv_opt", "arguments": arguments})).json()
    finally:
        registry.unregister_prompt("rv_opt")
    assert got.get("error", {}).get("code") == -32602, got
