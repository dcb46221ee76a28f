"""A review of the docs found it: docs/protocol.md "Both eras" on a tool whose schema comes from a DRF serializer (README:
`@mcp_tools.tool(serializer=MySerializer)`): arguments are checked strictly against the JSON
types the inputSchema advertises ("5" or 1.0 for an integer, "true" or 1 for a boolean are
refused, not converted), and argument errors [{field, message, type}] are reported (a tool error since the
spec's server/tools, Error Handling, was followed: it was -32602 with them as data.errors)."""
from __future__ import annotations

from typing import Any

import pytest
from rest_framework import serializers

from mcp_tools.registry import registry
from mcp_tools.registry.registry import make_tool
from mcp_tools.testing import McpTestClient
from tests.asgi_client import argument_errors

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
        result = await McpTestClient().call_tool("counter", arguments)  # answered "5 False" / "1 True": converted
    assert argument_errors({"result": result}), result


async def test_serializer_tool_errors_carry_field_message_and_type() -> None:
    with registry.registered_temporarily(make_tool(counter, name="counter", serializer=CountSerializer)):
        result = await McpTestClient().call_tool("counter", {"count": "x"})
    errors = argument_errors({"result": result})
    assert errors and all({"field", "message", "type"} <= set(error) for error in errors), errors
