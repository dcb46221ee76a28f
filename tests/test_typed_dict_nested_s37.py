"""A ``typing.TypedDict`` (not typing_extensions') works at any depth, as at the top level. Before
Python 3.12 pydantic refuses typing's TypedDict, and only a top-level one was rebuilt: ``a: Addr |
None`` and ``a: list[Addr]`` raised ImproperlyConfigured ("use typing_extensions.TypedDict"), and
``-> list[Addr]`` / ``-> Addr | None`` silently had no outputSchema and no structuredContent.
Found by a review."""

from __future__ import annotations

import typing
from typing import Any

import pytest

from mcp_tools import tool
from mcp_tools.registry import registry
from mcp_tools.registry.registry import make_tool
from mcp_tools.testing import McpTestClient

pytestmark = pytest.mark.django_db(transaction=True)


class Addr(typing.TypedDict):
    city: str


class Base(typing.TypedDict, total=False):
    note: str


class Person(Base):  # total: "name" required, the base's "note" still optional
    name: str
    home: Addr | None
    past: list[Addr]


def test_nested_typing_typed_dicts_make_an_input_schema_and_validate() -> None:
    def s37_addresses(first: Addr | None = None, many: typing.List[Addr] | None = None,  # noqa: UP006 - typing's spelling too
                      by_name: dict[str, Addr] | None = None, person: typing.Optional[Person] = None) -> str:  # noqa: UP045
        return "ok"

    built = make_tool(s37_addresses)
    defs = built.input.schema["$defs"]
    assert defs["Addr"]["required"] == ["city"], defs
    assert sorted(defs["Person"]["required"]) == ["home", "name", "past"], defs  # the base's "note" is not
    kwargs = built.validate_arguments({"first": {"city": "a"}, "many": [{"city": "b"}], "by_name": {"x": {"city": "c"}},
                                       "person": {"name": "n", "home": None, "past": [{"city": "d"}]}})
    assert kwargs["many"] == [{"city": "b"}] and kwargs["person"]["past"] == [{"city": "d"}], kwargs
    assert built.input.schema_errors({"many": [{"town": "b"}]}), "the nested schema checks the items"


@pytest.mark.parametrize(("annotation", "value"), [
    (list[Addr], [{"city": "a"}]),
    (typing.Optional[Addr], {"city": "a"}),  # noqa: UP045
    (Addr | None, None),
    (dict[str, list[Addr]], {"k": [{"city": "a"}]}),
], ids=["list", "optional", "union-none", "dict-of-lists"])
def test_nested_typing_typed_dicts_in_the_return_annotation_make_an_output_schema(annotation: Any, value: Any) -> None:
    def s37_out() -> None: ...

    s37_out.__annotations__["return"] = annotation
    built = make_tool(s37_out)
    assert built.output.mode == "wrapped" and built.output.schema is not None, built.output
    assert "Addr" in built.output.schema["$defs"], built.output.schema
    assert built.shape_result(value)["structuredContent"] == {"result": value}


async def test_a_tool_taking_and_returning_a_list_of_typed_dicts_is_called() -> None:
    @tool(name="s37_cities")
    def s37_cities(addresses: list[Addr]) -> list[Addr]:
        return [{"city": address["city"].upper()} for address in addresses]

    try:
        result = await McpTestClient().call_tool("s37_cities", {"addresses": [{"city": "oslo"}]})
    finally:
        registry.unregister_tool("s37_cities")
    assert result["structuredContent"] == {"result": [{"city": "OSLO"}]}, result
