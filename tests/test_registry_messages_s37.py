"""The registry's errors say what is wrong in the author's terms. Found by a review: a tool parameter
named ``model_config`` was refused with "'FieldInfo' object is not iterable"; and a return value that
does not fit the output schema was logged as "does not match the output schema: (arguments): ...",
calling the result "arguments"."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from mcp_tools.registry.registry import make_tool


@pytest.mark.parametrize("parameter", ["model_config", "model_dump", "model_validate_json", "_private", "__dunder"])
def test_a_parameter_named_as_pydantic_keeps_for_itself_is_refused_saying_to_rename_it(parameter: str) -> None:
    namespace: dict[str, Any] = {}
    exec(f"def s37_reserved({parameter}: int = 1) -> str:\n    return ''", namespace)  # noqa: S102 - names no def can spell here
    with pytest.raises(ImproperlyConfigured) as raised:
        make_tool(namespace["s37_reserved"])
    message = str(raised.value)
    assert f"Tool 's37_reserved'" in message and f"its parameter {parameter!r}" in message and "rename the parameter" in message, message
    assert "not iterable" not in message, message


def test_the_alias_the_message_offers_keeps_the_arguments_name() -> None:
    def s37_aliased(config: Annotated[int, Field(alias="model_config")] = 1,
                    private: Annotated[int, Field(alias="_private")] = 0) -> str:
        return ""

    built = make_tool(s37_aliased)
    assert set(built.input.schema["properties"]) == {"model_config", "_private"}
    assert built.validate_arguments({"model_config": 3, "_private": 4}) == {"config": 3, "private": 4}


class Labelled(BaseModel):
    """Read under its field's name, written under its alias: a result pydantic's validation cannot read
    back, so the advertised schema decides; the schema requires a key the result lacks."""

    model_config = ConfigDict(json_schema_extra={"required": ["label", "id"]})
    name: str = Field(serialization_alias="label")


class Counted(BaseModel):
    count: Annotated[int, WithJsonSchema({"type": "string"})] = Field(serialization_alias="n")


def test_a_result_that_does_not_fit_the_output_schema_is_called_the_result() -> None:
    def s37_labelled() -> Labelled:
        return Labelled(name="x")

    with pytest.raises(ValueError, match="output schema") as raised:
        make_tool(s37_labelled).shape_result(Labelled(name="x"))
    assert "(result): 'id' is a required property" in str(raised.value), raised.value
    assert "(arguments)" not in str(raised.value), raised.value


def test_a_nested_misfit_is_named_by_its_path_in_the_result() -> None:
    def s37_counted() -> list[Counted]:
        return []

    with pytest.raises(ValueError, match="output schema") as raised:
        make_tool(s37_counted).shape_result([Counted(count=1)])
    assert "result.0.n: 1 is not of type 'string'" in str(raised.value), raised.value
