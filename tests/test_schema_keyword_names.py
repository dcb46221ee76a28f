"""A review of the docs found it: README "Register a tool": the input schema comes from the type hints, the output schema from the
return annotation. A parameter or field whose name happens to be a JSON Schema keyword (title,
description, format, minimum...) must be described like any other."""
from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from pydantic import BaseModel
from rest_framework import serializers

from mcp_tools.registry import registry
from mcp_tools.registry.registry import make_tool
from mcp_tools.testing import McpTestClient

pytestmark = pytest.mark.django_db(transaction=True)


def create_note(title: str, description: str = "") -> str:
    """Create a note.

    Args:
        title: The note's title.
        description: What the note is about.
    """
    return title


def bounded(minimum: int, maximum: int) -> int:
    return maximum - minimum


class Book(BaseModel):
    title: str
    pages: int


def get_book() -> Book:
    return Book(title="Dune", pages=412)


class NoteSerializer(serializers.Serializer):
    title = serializers.CharField(max_length=50)


def note_from_serializer(title: str) -> str:
    return title


async def listed(name: str) -> dict[str, Any]:
    result = await McpTestClient().request("tools/list")
    return next(tool for tool in result["tools"] if tool["name"] == name)


async def test_a_parameter_named_title_gets_an_object_schema() -> None:
    with registry.registered_temporarily(make_tool(create_note, name="create_note")):
        tool = await listed("create_note")
    jsonschema.Draft202012Validator.check_schema(tool["inputSchema"])
    assert tool["inputSchema"]["properties"]["title"] == {"type": "string", "description": "The note's title."}


def test_a_parameter_named_minimum_can_be_registered() -> None:
    tool = make_tool(bounded, name="bounded")  # TypeError: float() argument must be ... not 'dict'
    assert tool.input.schema["properties"]["minimum"]["type"] == "integer"


async def test_an_output_field_named_title_gets_an_object_schema() -> None:
    with registry.registered_temporarily(make_tool(get_book, name="get_book")):
        tool = await listed("get_book")
        result = await McpTestClient().call_tool("get_book", {})
    jsonschema.Draft202012Validator.check_schema(tool["outputSchema"])
    assert tool["outputSchema"]["properties"]["title"]["type"] == "string"
    assert result["structuredContent"] == {"title": "Dune", "pages": 412}


async def test_a_serializer_field_named_title_gets_an_object_schema() -> None:
    with registry.registered_temporarily(make_tool(note_from_serializer, name="note_ser", serializer=NoteSerializer)):
        tool = await listed("note_ser")
    jsonschema.Draft202012Validator.check_schema(tool["inputSchema"])
    assert tool["inputSchema"]["properties"]["title"] == {"type": "string", "maxLength": 50}
