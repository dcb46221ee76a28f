"""fb853ae: a serializer tool's arguments are now held to the JSON type its inputSchema advertises. DRF's
AutoSchema advertises a JSONField (which takes any JSON value) as {"type": "object"}, so a list, a string
or a number for it, which the serializer accepts and worked yesterday, is now refused -32602."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework import serializers

from mcp_tools.registry import registry
from mcp_tools.registry.registry import make_tool
from mcp_tools.testing import McpTestClient

pytestmark = pytest.mark.django_db(transaction=True)


class TagSerializer(serializers.Serializer):
    tags = serializers.JSONField()


def tagger(tags: Any) -> str:
    return repr(tags)


async def test_a_json_field_takes_any_json_value() -> None:
    with registry.registered_temporarily(make_tool(tagger, name="tagger", serializer=TagSerializer)):
        result = await McpTestClient().call_tool("tagger", {"tags": ["a", "b"]})
    assert result["content"][0]["text"] == "['a', 'b']", result
