"""A value sent as JSON text (a resource's value that is no text, blob or contents; a tool's value
without a return annotation) is the value in JSON: a dataclass as its fields, a date or time in ISO
8601, a set as a list, a UUID or Decimal as its text, an Enum as its value, also inside dicts and lists.

Found by the author review: each went out as its Python ``str()``: a dataclass as
``"P(x=1, when=datetime.date(2024, 1, 1))"``, a datetime as ``"2024-01-01 00:00:00"``, a set as ``"{1}"``,
in a document labelled ``application/json``. What has no JSON form (a Django model instance) is still
its ``str()``, as bytes that are no UTF-8 are.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import mcp_tools
from mcp_tools.registry import make_tool, registry
from mcp_tools.transports.http import McpEndpoint
from tests.asgi_client import call_modern

pytestmark = pytest.mark.django_db(transaction=True)
APP = McpEndpoint()


class Kind(enum.Enum):
    OPEN = "open"


@dataclasses.dataclass
class Slot:
    x: int
    when: datetime.date


class Opaque:
    def __str__(self) -> str:
        return "opaque"


def value() -> dict[str, Any]:
    return {"slot": Slot(1, datetime.date(2024, 1, 2)), "at": datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc),
            "ids": {uuid.UUID(int=1)}, "price": decimal.Decimal("1.50"), "kind": Kind.OPEN, "other": Opaque(), "raw": b"\xff"}


EXPECTED = {"slot": {"x": 1, "when": "2024-01-02"}, "at": "2024-01-02T03:04:05Z", "ids": ["00000000-0000-0000-0000-000000000001"],
            "price": "1.50", "kind": "open", "other": "opaque", "raw": "b'\\xff'"}


@pytest.fixture(autouse=True)
def json_valued() -> Iterator[None]:
    mcp_tools.resource("author-json://value")(value)

    def unannotated():  # type: ignore[no-untyped-def]
        return value()

    try:
        with registry.registered_temporarily(make_tool(unannotated, name="author_json_value")):
            yield
    finally:
        registry.unregister_resource("author-json://value")


async def test_a_resources_value_is_sent_as_its_json() -> None:
    body = (await call_modern(APP, "resources/read", {"uri": "author-json://value"})).json()
    contents = body["result"]["contents"][0]
    assert contents["mimeType"] == "application/json" and json.loads(contents["text"]) == EXPECTED, contents


async def test_an_unannotated_tools_value_is_sent_as_its_json() -> None:
    body = (await call_modern(APP, "tools/call", {"name": "author_json_value", "arguments": {}})).json()
    assert json.loads(body["result"]["content"][0]["text"]) == EXPECTED, body
