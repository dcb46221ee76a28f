"""The registry and the schemas it derives: type hints, docstrings, DRF serializers, results."""

from __future__ import annotations

import dataclasses
import enum
import json
import typing
from typing import Annotated, Any, Literal, Optional

import pytest
from asgiref.sync import sync_to_async
from pydantic import BaseModel, Field
from rest_framework import serializers
from typing_extensions import TypedDict

from demo_site.inventory.models import Product
from mcp_tools import ToolContext, ToolResult, prompt, resource, tool
from mcp_tools.protocol.errors import INVALID_PARAMS, McpError
from mcp_tools.registry import AlreadyRegistered, NotRegistered, Registry, make_tool, registry
from mcp_tools.registry.schemas import parse_param_docs
from mcp_tools.transports.http import McpEndpoint
from tests.asgi_client import call_modern

# -- fixtures of the schema tests ------------------------------------------------------------


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


class LineItem(BaseModel):
    sku: str
    qty: int = 1


@dataclasses.dataclass
class Point:
    x: int
    y: int = 0


class Report(BaseModel):
    total: int = Field(description="The total")
    items: list[LineItem]


class PlainTotals(typing.TypedDict):  # typing's, not typing_extensions'
    count: int


class Totals(TypedDict):
    count: int
    label: str


def everything(
    item: LineItem,
    point: Point,
    mode: Literal["fast", "slow"],
    colour: Colour,
    note: Optional[str] = None,  # noqa: UP045 - the Optional spelling is what is under test
    limit: Annotated[int, Field(ge=1, le=50)] = 10,
    tags: list[str] | None = None,
) -> Report:
    """Summarise an order.

    Longer explanation that stays in the description.

    Args:
        item: The line item to add.
        mode: How to run,
            fast or slow.
        limit (int): At most this many.

    Returns:
        The report.
    """
    return Report(total=item.qty, items=[item])


def _schema(fn: Any, **options: Any) -> dict[str, Any]:
    return make_tool(fn, **options).input.schema


def _validation_error(fn_tool: Any, arguments: Any) -> McpError:
    with pytest.raises(McpError) as info:
        fn_tool.validate_arguments(arguments)
    assert info.value.code == INVALID_PARAMS
    return info.value


# -- input schemas from type hints -------------------------------------------------------------


def test_input_schema_required_defaults_and_closed_object() -> None:
    schema = _schema(everything)
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["item", "point", "mode", "colour"]
    assert set(schema["properties"]) == {"item", "point", "mode", "colour", "note", "limit", "tags"}
    assert schema["properties"]["limit"]["default"] == 10
    assert "title" not in schema


def test_input_schema_pydantic_model_argument_is_a_ref_to_its_definition() -> None:
    schema = _schema(everything)
    assert schema["properties"]["item"]["$ref"] == "#/$defs/LineItem"
    definition = schema["$defs"]["LineItem"]
    assert definition["properties"]["sku"] == {"type": "string"}
    assert definition["required"] == ["sku"]


def test_input_schema_dataclass_argument() -> None:
    schema = _schema(everything)
    assert schema["properties"]["point"]["$ref"] == "#/$defs/Point"
    assert schema["$defs"]["Point"]["required"] == ["x"]
    assert schema["$defs"]["Point"]["properties"]["y"]["default"] == 0


def test_input_schema_literal_is_enum_and_enum_class_is_enum_definition() -> None:
    schema = _schema(everything)
    assert schema["properties"]["mode"]["enum"] == ["fast", "slow"]
    assert schema["properties"]["mode"]["type"] == "string"
    assert schema["properties"]["colour"]["$ref"] == "#/$defs/Colour"
    assert schema["$defs"]["Colour"]["enum"] == ["red", "blue"]


def test_input_schema_optional_is_nullable_and_not_required() -> None:
    schema = _schema(everything)
    assert {"type": "null"} in schema["properties"]["note"]["anyOf"]
    assert {"type": "string"} in schema["properties"]["note"]["anyOf"]
    assert schema["properties"]["note"]["default"] is None
    assert "note" not in schema["required"]


def test_input_schema_annotated_constraints() -> None:
    limit = _schema(everything)["properties"]["limit"]
    assert (limit["minimum"], limit["maximum"], limit["type"]) == (1, 50, "integer")


def test_input_schema_google_docstring_descriptions_and_summary() -> None:
    built = make_tool(everything)
    properties = built.input.schema["properties"]
    assert properties["item"]["description"] == "The line item to add."
    assert properties["mode"]["description"] == "How to run, fast or slow."
    assert properties["limit"]["description"] == "At most this many."
    assert "description" not in properties["point"]
    assert built.description == "Summarise an order.\n\nLonger explanation that stays in the description."


def test_input_schema_sphinx_docstring_descriptions() -> None:
    def sphinx(query: str, limit: int = 5) -> str:
        """Find things.

        :param query: What to look for.
        :param int limit: How many to return.
        :returns: The matches.
        """
        return query

    built = make_tool(sphinx)
    assert built.description == "Find things."
    assert built.input.schema["properties"]["query"]["description"] == "What to look for."
    assert built.input.schema["properties"]["limit"]["description"] == "How many to return."


def test_an_annotated_field_description_is_kept_with_or_without_a_docstring_line() -> None:
    """``Annotated[T, Field(description=...)]`` was listed without its description when the
    docstring had no line for the parameter (an explicit ``description=None`` merged over it)."""

    def described(
        flag: Annotated[bool, Field(description="Whether to go.")],
        count: Annotated[int, Field(ge=0, description="How many, from the annotation.")] = 1,
        plain: str = "",
    ) -> str:
        """Do it.

        Args:
            count: How many, from the docstring.
            plain: Described by the docstring only.
        """
        return plain

    properties = make_tool(described).input.schema["properties"]
    assert properties["flag"]["description"] == "Whether to go."
    assert properties["count"]["description"] == "How many, from the annotation."  # the more specific one
    assert properties["count"]["minimum"] == 0
    assert properties["plain"]["description"] == "Described by the docstring only."


def test_parse_param_docs_numpy_style() -> None:
    summary, params = parse_param_docs(
        """Add numbers.

        Parameters
        ----------
        a : int
            The first number.
        b : int, optional
            The second number,
            if any.
        """
    )
    assert summary == "Add numbers."
    # The type after the colon is not the description (it was: "int The first number.").
    assert params == {"a": "The first number.", "b": "The second number, if any."}


def test_parse_param_docs_without_docstring() -> None:
    assert parse_param_docs(None) == ("", {})
    assert parse_param_docs("Just a summary.") == ("Just a summary.", {})


def test_explicit_description_and_title_win_over_docstring() -> None:
    built = make_tool(everything, name="summary", title="Order summary", description="Explicit.")
    wire = built.to_wire()
    assert (wire["name"], wire["title"], wire["description"]) == ("summary", "Order summary", "Explicit.")


def test_context_parameter_is_not_part_of_the_input_schema() -> None:
    async def uses_ctx(ctx: ToolContext, service: str) -> str:
        return service

    built = make_tool(uses_ctx)
    assert built.context_param == "ctx"
    assert built.is_async
    assert built.input.schema["properties"] == {"service": {"type": "string"}}
    assert built.validate_arguments({"service": "api"}) == {"service": "api"}


# -- argument validation -------------------------------------------------------------------------

VALID = {"item": {"sku": "A-1", "qty": 2}, "point": {"x": 1}, "mode": "fast", "colour": "red"}


def test_validate_arguments_builds_models_dataclasses_and_enums() -> None:
    kwargs = make_tool(everything).validate_arguments(VALID)
    assert kwargs["item"] == LineItem(sku="A-1", qty=2)
    assert kwargs["point"] == Point(x=1, y=0)
    assert kwargs["colour"] is Colour.RED
    assert (kwargs["note"], kwargs["limit"], kwargs["tags"]) == (None, 10, None)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"item": {"qty": 2}}, "item.sku"),
        ({"point": {"x": "left"}}, "point.x"),
        ({"mode": "medium"}, "mode"),
        ({"colour": "green"}, "colour"),
        ({"limit": 51}, "limit"),
        ({"limit": 0}, "limit"),
        ({"tags": "a,b"}, "tags"),
        ({"surprise": 1}, "surprise"),
    ],
    ids=["model-field-missing", "dataclass-field-type", "literal", "enum", "above-max", "below-min", "list", "unknown-argument"],
)
def test_validate_arguments_errors_name_the_failing_field(change: dict[str, Any], field: str) -> None:
    error = _validation_error(make_tool(everything), {**VALID, **change})
    assert field in [entry["field"] for entry in error.data["errors"]]
    assert "'everything'" in error.message


def test_validate_arguments_missing_required_lists_each_field() -> None:
    error = _validation_error(make_tool(everything), {})
    assert {entry["field"] for entry in error.data["errors"]} == {"item", "point", "mode", "colour"}
    assert all(entry["type"] == "missing" for entry in error.data["errors"])


@pytest.mark.parametrize("arguments", [["a"], "a", 5])
def test_validate_arguments_must_be_an_object(arguments: Any) -> None:
    error = _validation_error(make_tool(everything), arguments)
    assert "must be an object" in error.message


def test_validate_arguments_none_means_no_arguments() -> None:
    def no_args() -> str:
        return "ok"

    assert make_tool(no_args).validate_arguments(None) == {}


# -- DRF serializer input -------------------------------------------------------------------------


class OrderSerializer(serializers.Serializer):
    sku = serializers.CharField(max_length=8, help_text="The SKU")
    quantity = serializers.IntegerField(min_value=1)
    note = serializers.CharField(required=False)


def place_order(**data: Any) -> str:
    """Place an order."""
    return json.dumps(data)


def test_serializer_input_schema() -> None:
    schema = _schema(place_order, serializer=OrderSerializer)
    assert schema["type"] == "object"
    assert schema["required"] == ["sku", "quantity"]
    assert schema["properties"]["sku"]["type"] == "string"
    assert schema["properties"]["sku"]["maxLength"] == 8
    assert schema["properties"]["quantity"]["minimum"] == 1
    assert "note" in schema["properties"]


def test_serializer_input_validates_strictly_as_json() -> None:
    # As for type-hinted tools: a value of another JSON type than the schema's is refused, not converted.
    built = make_tool(place_order, serializer=OrderSerializer)
    assert built.validate_arguments({"sku": "A-1", "quantity": 3}) == {"sku": "A-1", "quantity": 3}
    error = _validation_error(built, {"sku": "A-1", "quantity": "3"})
    assert error.data["errors"] == [{"field": "quantity", "message": "Expected integer.", "type": "json_type"}]


def test_serializer_input_is_strict_inside_lists_and_nested_serializers_too() -> None:
    """A ``ListField(child=IntegerField())`` converted ``[1, "2"]`` to ``[1, 2]``, a nested serializer's field
    ``"3"`` to 3: the advertised schema refuses both, and docs/protocol.md says "strictly" for serializers."""
    from rest_framework import serializers

    class Line(serializers.Serializer):
        qty = serializers.IntegerField()

    class Batch(serializers.Serializer):
        ids = serializers.ListField(child=serializers.IntegerField())
        line = Line(required=False)

    def batch(**data: Any) -> str:
        """Takes a batch."""
        return "ok"

    built = make_tool(batch, serializer=Batch)
    assert built.validate_arguments({"ids": [1, 2], "line": {"qty": 3}}) == {"ids": [1, 2], "line": {"qty": 3}}
    for arguments, message in (({"ids": [1, "2"]}, "Expected integer at ids[1]."),
                               ({"ids": [1], "line": {"qty": "3"}}, "Expected integer at line.qty.")):
        error = _validation_error(built, arguments)
        assert [e["message"] for e in error.data["errors"]] == [message], error.data
        assert built.input.schema_errors(arguments), "the advertised schema refuses it as well"


def test_serializer_validation_errors_name_the_fields() -> None:
    error = _validation_error(make_tool(place_order, serializer=OrderSerializer), {"sku": "TOO-LONG-SKU", "quantity": 0})
    by_field = {entry["field"]: entry["message"] for entry in error.data["errors"]}
    assert set(by_field) == {"sku", "quantity"}
    assert "8" in by_field["sku"]
    assert "1" in by_field["quantity"]


# -- output schemas and results ---------------------------------------------------------------


def test_output_model_return_gives_object_schema_and_structured_content() -> None:
    built = make_tool(everything)
    assert built.output.mode == "object"
    assert built.output.schema["properties"]["total"]["description"] == "The total"
    assert "title" not in built.output.schema
    assert built.to_wire()["outputSchema"] == built.output.schema
    result = built.shape_result(Report(total=2, items=[LineItem(sku="A")]))
    expected = {"total": 2, "items": [{"sku": "A", "qty": 1}]}
    assert result["structuredContent"] == expected
    assert json.loads(result["content"][0]["text"]) == expected


def test_output_typed_dict_and_dataclass_returns_are_objects() -> None:
    def totals() -> Totals:
        return {"count": 1, "label": "x"}

    def point() -> Point:
        return Point(1, 2)

    built = make_tool(totals)
    assert built.output.mode == "object"
    assert built.shape_result({"count": 1, "label": "x"})["structuredContent"] == {"count": 1, "label": "x"}
    assert make_tool(point).shape_result(Point(1, 2))["structuredContent"] == {"x": 1, "y": 2}


def test_output_typing_typed_dict_return_is_an_object() -> None:
    def plain() -> PlainTotals:
        return {"count": 1}

    built = make_tool(plain)
    assert built.output.mode == "object"
    assert built.shape_result({"count": 1})["structuredContent"] == {"count": 1}


@pytest.mark.parametrize(
    ("annotation", "value", "structured", "inner_schema"),
    [
        (dict[str, int], {"a": 1}, {"result": {"a": 1}}, {"type": "object", "additionalProperties": {"type": "integer"}}),
        (list[int], [1, 2], {"result": [1, 2]}, {"type": "array", "items": {"type": "integer"}}),
        (int, 5, {"result": 5}, {"type": "integer"}),
        (list[LineItem], [LineItem(sku="A")], {"result": [{"sku": "A", "qty": 1}]}, None),
    ],
    ids=["dict", "list", "int", "list-of-models"],
)
def test_output_other_json_values_are_wrapped_under_result(annotation: Any, value: Any, structured: Any, inner_schema: Any) -> None:
    def fn() -> None: ...

    fn.__annotations__["return"] = annotation
    built = make_tool(fn)
    assert built.output.mode == "wrapped"
    assert built.output.schema["type"] == "object"
    assert built.output.schema["required"] == ["result"]
    if inner_schema is not None:
        assert built.output.schema["properties"]["result"] == inner_schema
    else:
        assert "$defs" in built.output.schema  # the model definition moved up next to the wrapper
    result = built.shape_result(value)
    assert result["structuredContent"] == structured
    assert json.loads(result["content"][0]["text"]) == structured["result"]


def test_output_str_return_is_text_without_schema() -> None:
    def greet(name: str) -> str:
        return f"hi {name}"

    built = make_tool(greet)
    assert built.output.schema is None
    assert "outputSchema" not in built.to_wire()
    assert built.shape_result("hi") == {"content": [{"type": "text", "text": "hi"}]}


def test_output_unannotated_and_none_returns() -> None:
    def anything():  # type: ignore[no-untyped-def]  # noqa: ANN202
        return {"a": 1}

    built = make_tool(anything)
    assert built.output.mode == "text"
    assert built.shape_result({"a": 1}) == {"content": [{"type": "text", "text": '{"a": 1}'}]}
    assert built.shape_result(None) == {"content": []}


def test_output_tool_result_is_passed_through() -> None:
    def custom() -> ToolResult:
        return ToolResult(content=["x"], is_error=True)

    built = make_tool(custom)
    assert built.output.schema is None
    assert built.shape_result(ToolResult(content=["x"], is_error=True)) == {"content": [{"type": "text", "text": "x"}], "isError": True}


# -- registration ------------------------------------------------------------------------------


def _fn(name: str) -> Any:
    def fn() -> str:
        return name

    fn.__name__ = fn.__qualname__ = name
    return fn


def test_register_duplicate_tool_raises_before_changing_anything() -> None:
    local = Registry()
    events: list[str] = []
    first = local.register_tool(make_tool(_fn("first"), name="dup"))
    local.add_listener(events.append)
    with pytest.raises(AlreadyRegistered, match="'dup'.*first"):
        local.register_tool(make_tool(_fn("second"), name="dup"))
    assert local.get_tool("dup") is first
    assert local.tools == [first]
    assert events == []


def test_register_duplicate_of_a_demo_tool_in_the_default_registry_raises() -> None:
    original = registry.get_tool("echo")
    assert original is not None
    count = len(registry.tools)
    with pytest.raises(AlreadyRegistered):
        registry.register_tool(make_tool(_fn("echo")))
    assert registry.get_tool("echo") is original
    assert len(registry.tools) == count


def test_register_duplicate_prompt_and_resource_raise() -> None:
    original_prompt = registry.get_prompt("restock_advice")
    assert original_prompt is not None
    with pytest.raises(AlreadyRegistered):
        prompt(name="restock_advice")(_fn("other"))
    assert registry.get_prompt("restock_advice") is original_prompt
    with pytest.raises(AlreadyRegistered):
        resource("inventory://products")(_fn("other"))
    assert registry.find_resource("inventory://products")[0].name == "products"


@pytest.mark.parametrize("name", ["", "has space", "a" * 129, "naïve", "semi;colon", "new\nline"], ids=["empty", "space", "too-long", "non-ascii", "semicolon", "newline"])
def test_register_invalid_tool_name_raises(name: str) -> None:
    local = Registry()
    with pytest.raises(ValueError, match="Invalid tool name"):
        # replace(): make_tool(name="") falls back to the function's name.
        local.register_tool(dataclasses.replace(make_tool(_fn("x")), name=name))
    assert local.tools == []


@pytest.mark.parametrize("name", ["a", "a.b/c-d_e", "A" * 128])
def test_register_valid_tool_names(name: str) -> None:
    local = Registry()
    local.register_tool(make_tool(_fn("x"), name=name))
    assert local.get_tool(name) is not None


def test_tool_decorator_registers_with_options_and_unregister() -> None:
    @tool(name="tmp_decorated", permissions=["inventory.view_product"], annotations={"readOnlyHint": True})
    def decorated(x: int) -> int:
        return x

    try:
        built = registry.get_tool("tmp_decorated")
        assert built is not None and built.fn is decorated
        assert built.permissions == ("inventory.view_product",)
        assert built.to_wire()["annotations"] == {"readOnlyHint": True}
    finally:
        registry.unregister_tool("tmp_decorated")
    assert registry.get_tool("tmp_decorated") is None
    with pytest.raises(NotRegistered):
        registry.unregister_tool("tmp_decorated")


def test_registered_temporarily_adds_and_removes_even_on_error() -> None:
    a, b = make_tool(_fn("tmp_a")), make_tool(_fn("tmp_b"))
    with registry.registered_temporarily(a, b):
        assert registry.get_tool("tmp_a") is a and registry.get_tool("tmp_b") is b
    assert registry.get_tool("tmp_a") is None and registry.get_tool("tmp_b") is None
    with pytest.raises(RuntimeError), registry.registered_temporarily(a):
        raise RuntimeError("boom")
    assert registry.get_tool("tmp_a") is None


def test_registered_temporarily_with_a_duplicate_rolls_back_earlier_items() -> None:
    before = [t.name for t in registry.tools]
    with pytest.raises(AlreadyRegistered), registry.registered_temporarily(make_tool(_fn("tmp_c")), make_tool(_fn("echo"))):
        pytest.fail("the block must not run")
    assert [t.name for t in registry.tools] == before


def test_make_tool_rejects_unknown_task_support() -> None:
    with pytest.raises(ValueError, match="task_support"):
        make_tool(_fn("x"), task_support="sometimes")


def test_make_tool_unresolvable_hint_names_the_function() -> None:
    def broken(x: "NoSuchType") -> str:  # type: ignore[name-defined]  # noqa: F821
        return ""

    with pytest.raises(TypeError, match="broken"):
        make_tool(broken)


# -- a sync tool using the ORM, called through the endpoint ---------------------------------------


def count_products(prefix: str = "") -> int:
    """Count products whose SKU starts with a prefix (sync, uses the ORM)."""
    return Product.objects.filter(sku__startswith=prefix).count()


@pytest.mark.django_db(transaction=True)
async def test_sync_tool_with_orm_runs_through_the_endpoint() -> None:
    await sync_to_async(lambda: [Product.objects.create(sku=f"ZZ-{i}", name=f"P{i}", price=1) for i in range(3)])()
    with registry.registered_temporarily(make_tool(count_products)):
        response = await call_modern(McpEndpoint(), "tools/call", {"name": "count_products", "arguments": {"prefix": "ZZ-"}})
    assert response.status == 200
    result = response.json()["result"]
    assert result["structuredContent"] == {"result": 3}
    assert result["content"] == [{"type": "text", "text": "3"}]
    assert not result.get("isError")


@pytest.mark.parametrize("parameter", ["_private", "model_config"])
def test_an_argument_pydantic_cannot_take_names_the_tool_that_has_it(parameter: str) -> None:
    """pydantic's message named neither the tool nor its function, and the project did not start."""
    from django.core.exceptions import ImproperlyConfigured

    namespace: dict[str, Any] = {}
    exec(f"def odd({parameter}: int) -> str:\n    return ''", namespace)  # noqa: S102 (a fixed test source)
    with pytest.raises(ImproperlyConfigured, match=r"Tool 'odd' \(builtins\.odd\)|Tool 'odd' \(.*odd\)"):
        make_tool(namespace["odd"])


NUMPY_WITH_RETURNS = """Double a number.

Parameters
----------
x : int
    The number to double.
scale : float, optional
    A factor.

Returns
-------
parts : list of str
    The doubled number.

Raises
------
ValueError
    When x is negative.
"""


def test_numpy_sections_after_the_parameters_are_no_description_of_them() -> None:
    """Their headers have no colon: "Returns ... Raises ..." was appended to the last parameter's description,
    and a named return ("parts : list of str") read as a parameter."""
    assert parse_param_docs(NUMPY_WITH_RETURNS) == ("Double a number.", {"x": "The number to double.", "scale": "A factor."})


def test_a_list_of_an_allow_null_child_takes_and_advertises_nulls() -> None:
    """DRF mapped the child without its allow_null: ``[1, null]``, which the field takes, was advertised as a list
    of integers and refused by the strict check."""
    from rest_framework import serializers

    class Readings(serializers.Serializer):
        values = serializers.ListField(child=serializers.IntegerField(allow_null=True))
        labels = serializers.DictField(child=serializers.CharField(allow_null=True))

    def readings(**data: Any) -> str:
        """Stores readings (a gap is null)."""
        return "ok"

    built = make_tool(readings, serializer=Readings)
    arguments = {"values": [1, None], "labels": {"a": None}}
    assert built.validate_arguments(arguments) == arguments
    assert built.input.schema_errors(arguments) == []
    assert _validation_error(built, {"values": [1, "2"], "labels": {}}).data["errors"][0]["message"] == "Expected integer or null at values[1]."



def test_numpy_other_parameters_go_on_describing_parameters() -> None:
    doc = """Search.

    Parameters
    ----------
    query : str
        What to find.

    Other Parameters
    ----------------
    limit : int
        How many.
    """
    assert parse_param_docs(doc) == ("Search.", {"query": "What to find.", "limit": "How many."})
