"""A tool's return value as its result: what a review of schemas and results found.

- One tool returning a recursive model (its schema a ``$ref``) or a ``RootModel`` of a list advertised an
  outputSchema without ``"type": "object"`` at its root, which 2025-11-25 requires: the official client
  refused the whole ``tools/list`` (every tool of the server unusable in legacy mode).
- A valid result of a model with a serialization alias, a computed field (``extra="forbid"``) or an excluded
  field was answered as an error: it was checked with the model's validation, not the advertised schema.
- A value that only looked like content (a model whose ``type`` field said "text", rows with a ``type``
  column, a dict with a ``content`` list) was sent as content blocks or as the whole result, invalid ones
  (the official client refused them) or losing the tool's structuredContent.
"""

from __future__ import annotations

from typing import Any, Literal

import mcp_types as mt
import pytest
from pydantic import BaseModel, ConfigDict, Field, RootModel, computed_field

from mcp_tools.protocol.schemas import compile_schema, schema_errors
from mcp_tools.registry import make_tool
from mcp_tools.registry.results import ToolResult, text


class Tree(BaseModel):
    value: int
    children: list[Tree] = []


class Ints(RootModel[list[int]]):
    pass


class Renamed(BaseModel):
    user_name: str = Field(serialization_alias="userName")


class Doubled(BaseModel):
    model_config = ConfigDict(extra="forbid")
    a: int

    @computed_field  # type: ignore[prop-decorator]
    @property
    def double(self) -> int:
        return self.a * 2


class Account(BaseModel):
    username: str
    password_hash: str = Field(exclude=True)


class Message(BaseModel):
    type: Literal["text", "image", "note"]
    body: str


def tree() -> Tree:
    return Tree(value=1, children=[Tree(value=2)])


def ints() -> Ints:
    return Ints([1, 2])


def renamed() -> Renamed:
    return Renamed(user_name="ada")


def doubled() -> Doubled:
    return Doubled(a=2)


def account() -> Account:
    return Account(username="ada", password_hash="x")


def message() -> Message:
    return Message(type="text", body="hello")


def conforming(fn: Any) -> dict[str, Any]:
    """``fn``'s result, its structuredContent checked against its outputSchema (an object at the root)."""
    tool = make_tool(fn)
    schema = tool.output.schema
    assert schema is not None and schema.get("type") == "object", schema
    wire = tool.shape_result(fn())
    assert "isError" not in wire, wire
    assert schema_errors(compile_schema(schema), wire["structuredContent"]) == [], wire
    return wire


@pytest.mark.parametrize("fn, structured", [
    (tree, {"value": 1, "children": [{"value": 2, "children": []}]}),
    (ints, {"result": [1, 2]}),
    (renamed, {"userName": "ada"}),
    (doubled, {"a": 2, "double": 4}),
    (account, {"username": "ada"}),
    (message, {"type": "text", "body": "hello"}),
], ids=["recursive-model", "root-model", "serialization-alias", "computed-field", "excluded-field", "type-field"])
def test_a_model_result_is_its_structured_content_under_an_object_schema(fn: Any, structured: dict[str, Any]) -> None:
    assert conforming(fn)["structuredContent"] == structured


class Count(BaseModel):
    n: int


def unvalidated_count() -> Count:
    return Count.model_construct(n=None)  # type: ignore[arg-type]  # never validated: serialized as null


def test_a_result_that_breaks_the_schema_is_still_refused() -> None:
    with pytest.raises(ValueError, match="n: None is not of type 'integer'"):
        make_tool(unvalidated_count).shape_result(unvalidated_count())


def rows() -> Any:
    return [{"type": "fruit", "name": "apple"}]


def post() -> Any:
    return {"title": "post", "content": ["para 1", "para 2"]}


@pytest.mark.parametrize("fn", [rows, post])
def test_a_value_that_only_looks_like_content_is_sent_as_json(fn: Any) -> None:
    import json

    wire = make_tool(fn).shape_result(fn())
    assert list(wire) == ["content"] and wire["content"][0]["type"] == "text", wire
    assert json.loads(wire["content"][0]["text"]) == fn()


def blocks() -> Any:
    return [{"type": "text", "text": "a"}, {"type": "image", "data": "AA==", "mimeType": "image/png"}]


def whole() -> Any:
    return {"content": [{"type": "text", "text": "done"}], "isError": True}


def one_block() -> Any:
    from mcp_types import TextContent

    return TextContent(type="text", text="hi")


@pytest.mark.parametrize("fn, wire", [
    (blocks, {"content": blocks()}),
    (whole, whole()),
    (one_block, {"content": [{"type": "text", "text": "hi"}]}),
])
def test_content_the_author_built_is_sent_as_it_is(fn: Any, wire: dict[str, Any]) -> None:
    assert make_tool(fn).shape_result(fn()) == wire


def test_a_tool_result_is_sent_as_built() -> None:
    def built() -> ToolResult:
        return ToolResult(content=[text("x")], structured_content={"k": 1})

    assert make_tool(built).shape_result(built()) == {"content": [{"type": "text", "text": "x"}], "structuredContent": {"k": 1}}


# -- what the diff review of the change above found ------------------------------------------------

def failed_empty() -> Any:
    return {"content": [], "isError": True}


def model_blocks() -> Any:
    import mcp_types as mt

    return {"content": [mt.TextContent(type="text", text="hi")], "isError": False}


def dumped_sdk_result() -> Any:
    import mcp_types as mt

    return mt.CallToolResult(content=[mt.TextContent(type="text", text="boom")], isError=True).model_dump(
        by_alias=True, exclude_none=True, mode="json")  # carries "resultType"


def sdk_result_model() -> Any:
    import mcp_types as mt

    return mt.CallToolResult(content=[mt.TextContent(type="text", text="boom")], isError=True)


@pytest.mark.parametrize("fn, wire", [
    (failed_empty, {"content": [], "isError": True}),
    (model_blocks, {"content": [{"type": "text", "text": "hi"}], "isError": False}),
    (dumped_sdk_result, {"content": [{"type": "text", "text": "boom"}], "isError": True}),
    (sdk_result_model, {"content": [{"type": "text", "text": "boom"}], "isError": True}),
], ids=["empty-content", "model-blocks", "dumped-mcp-types", "mcp-types-model"])
def test_a_whole_call_tool_result_is_sent_as_one(fn: Any, wire: dict[str, Any]) -> None:
    """An empty content list or a dumped ``mcp_types.CallToolResult`` (its ``resultType``) made the result JSON
    text, losing ``isError``; blocks given as models went out as their ``repr``."""
    assert make_tool(fn).shape_result(fn()) == wire


def chart() -> mt.ImageContent:
    return mt.ImageContent(type="image", data="iVBORw0KGgo=", mimeType="image/png")


def test_a_tool_annotated_with_a_content_model_sends_that_content_and_no_schema() -> None:
    """Such a tool became an "object" one: its image went out as JSON text, the model as its outputSchema."""
    tool = make_tool(chart)
    assert tool.output.schema is None
    assert tool.shape_result(chart()) == {"content": [{"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}]}


def maybe_chart() -> mt.ImageContent | None:
    return chart()


def chart_or_text() -> mt.ImageContent | str:
    return chart()


def charts() -> list[mt.ImageContent] | None:
    return [chart()]


@pytest.mark.parametrize("fn", [maybe_chart, chart_or_text, charts])
def test_content_beside_none_or_text_is_sent_as_content(fn: Any) -> None:
    """A union with None or str made a "wrapped" tool: its image sent as JSON text under ``result``."""
    tool = make_tool(fn)
    assert tool.output.schema is None
    assert tool.shape_result(fn())["content"] == [{"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}]
