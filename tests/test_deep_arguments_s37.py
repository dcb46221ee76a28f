"""Arguments nested deeper than pydantic's JSON reader reads (200 levels), which the transport takes
(256 levels, docs/protocol.md), are validated. Found by a review: they were refused as "(root): Invalid
JSON: recursion limit exceeded"."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from pydantic import BaseModel

from mcp_tools.protocol.errors import InvalidArguments
from mcp_tools.registry import registry
from mcp_tools.registry.registry import make_tool
from mcp_tools.testing import McpTestClient

pytestmark = pytest.mark.django_db(transaction=True)


class Node(BaseModel):
    child: Node | None = None


def nested_lists(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


def nested_nodes(levels: int) -> Any:
    value: Any = None
    for _ in range(levels):
        value = {"child": value}
    return value


def depth(node: Node | None) -> int:
    levels = 0
    while node is not None:
        levels, node = levels + 1, node.child
    return levels


async def test_arguments_nested_250_levels_reach_the_tool() -> None:
    """250 levels in ``arguments``: the message nests 253, within the transport's 256."""
    def s37_deep(data: Any, tree: Node) -> str:
        return f"{depth(tree)}"

    with registry.registered_temporarily(make_tool(s37_deep)):
        result = await McpTestClient().call_tool("s37_deep", {"data": nested_lists(249), "tree": nested_nodes(249)})
    assert result.get("content") == [{"type": "text", "text": "249"}], result


def test_a_deep_call_is_still_strict() -> None:
    def s37_deep_strict(data: Any, count: int) -> str:
        return ""

    built = make_tool(s37_deep_strict)
    with pytest.raises(InvalidArguments) as raised:
        built.validate_arguments({"data": nested_lists(230), "count": "5"})
    assert [error["field"] for error in raised.value.errors] == ["(root)", "count"], raised.value.errors
    assert "nest deeper than the 200 levels" in raised.value.errors[0]["message"]
    assert "recursion limit" not in str(raised.value.errors)


def test_deep_arguments_say_why_a_date_string_is_refused() -> None:
    """Validated as Python values, an ISO string is no date: the first error says the nesting is why."""
    def s37_deep_date(data: Any, when: datetime.date) -> str:
        return ""

    built = make_tool(s37_deep_date)
    assert built.validate_arguments({"data": nested_lists(3), "when": "2024-01-02"})["when"] == datetime.date(2024, 1, 2)
    with pytest.raises(InvalidArguments) as raised:
        built.validate_arguments({"data": nested_lists(230), "when": "2024-01-02"})
    assert raised.value.errors[0]["type"] == "json_depth" and raised.value.errors[1]["field"] == "when", raised.value.errors
