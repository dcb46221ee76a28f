"""A review of the docs found it: docs/protocol.md "Both eras" on a tool whose schema comes from a DRF serializer (README:
`@mcp_tools.tool(serializer=MySerializer)`): arguments are checked strictly against the JSON
types the inputSchema advertises ("5" or 1.0 for an integer, "true" or 1 for a boolean are
refused, not converted), and argument errors are -32602 with data.errors [{field, message, type}]."""
from __future__ import annotations

from typing import Any

import pytest
from rest_framework import serializers

from mcp_tools.registry import registry
from mcp_tools.registry.registry import make_tool
from mcp_tools.testing import McpTestClient, McpTestError

pytestmark = pytest.mark.django_db(transaction=True)


class CountSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    flag = serializers.BooleanField(required=False)


def counter(count: int, flag: bool = False) -> str:
    return f"{count!r} {flag!r}"


@pytest.mark.parametrize("arguments", [{"count": "5"}, {"count": 1.0}, {"count": 1, "flag": "true"}, {"count": 1, "flag": 1}])
async def test_serializer_tool_refuses_other_json_types(arguments: dict[str, Any]) -> None:
    with registry.registered_temporarily(make_tool(counter, name="counter", serializer=CountSerializer)):
        listed = await McpTestClient().request("tools/list")
        schema = next(t for t in listed["tools"] if t["name"] == "counter")["inputSchema"]
        assert schema["properties"]["count"]["type"] == "integer"
        with pytest.raises(McpTestError) as caught:
            await McpTestClient().call_tool("counter", arguments)  # answered "5 False" / "1 True": converted
    assert caught.value.code == -32602


async def test_serializer_tool_errors_carry_field_message_and_type() -> None:
    with registry.registered_temporarily(make_tool(counter, name="counter", serializer=CountSerializer)):
        with pytest.raises(McpTestError) as caught:
            await McpTestClient().call_tool("counter", {"count": "x"})
    errors = caught.value.error["data"]["errors"]
    assert errors and all({"field", "message", "type"} <= set(error) for error in errors), errors
