"""A JSON field's ``exact`` and ``in`` filters take JSON values, and compare them as JSON.

They were typed as strings, like a text field's: a client could not filter a ``JSONField`` by a
number, an object, a boolean or null (an invalid argument), and the string it could send was not
the value it meant. They take any JSON value now (``in``: an array of them), compared as Django's
``JSONField`` lookups compare them: ``5`` is not ``"5"`` nor ``5.5``, ``true`` is not ``1``, and
``null`` is no filter, as for any argument (``in: [null]`` matches a JSON null). Tested through the tool, on a plain
``JSONField`` and on the store's ``ExactJSONField`` (a ``json`` column on PostgreSQL).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connection, models

import mcp_tools
from demo_site.inventory.models import AuditLog
from mcp_tools.models import ExactJSONField, ToolCall
from tests.asgi_client import call_modern

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("filter_backend")]

#: A value of each JSON type, stored one a row, in this order.
VALUES: list[Any] = [{"a": 1, "b": [2]}, [1, 2], 5, "5", True, None, 1.5, "x"]
TOOL = "jsonvalues.rows.list"
#: A case where a JSON string and the scalar of the same text must differ. Django's JSONField compares
#: ``JSON_UNQUOTE(column)`` with the value on MySQL/MariaDB: there ``5`` is ``"5"`` and ``"true"`` is ``true``.
TYPED = pytest.mark.skipif(connection.vendor == "mysql", reason="Django's JSONField on MySQL/MariaDB compares unquoted text: 5 = '5'")


def toolset_of(queryset: models.QuerySet[Any], field: str) -> type[mcp_tools.ModelToolset]:
    class JsonRows(mcp_tools.ModelToolset):
        basename = "jsonvalues.rows"
        actions = ["list"]
        permissions = {"list": []}
        filterset_fields = {field: ["exact", "in", "isnull"]}

    JsonRows.queryset = queryset
    return JsonRows


def store_rows(model: str) -> tuple[type[mcp_tools.ModelToolset], list[str]]:
    """The rows of ``VALUES`` in ``model``'s JSON field, and a toolset listing only them."""
    if model == "audit":
        pks = [AuditLog.objects.create(action="jsonvalues", detail=models.Value(None, models.JSONField()) if value is None else value).pk
               for value in VALUES]
        return toolset_of(AuditLog.objects.filter(action="jsonvalues"), "detail"), [str(pk) for pk in pks]
    pks = [ToolCall.objects.create(tool_name="jsonvalues", principal="p", params_digest="d",
                                   arguments=models.Value(None, ExactJSONField()) if value is None else value).pk
           for value in VALUES]
    return toolset_of(ToolCall.objects.filter(tool_name="jsonvalues"), "arguments"), [str(pk) for pk in pks]


@pytest.fixture(params=["audit", "call"], ids=["JSONField", "ExactJSONField"])
def rows(request: pytest.FixtureRequest) -> Iterator[tuple[str, list[str]]]:
    tools, pks = store_rows(request.param)
    mcp_tools.register_toolset(tools)
    try:
        yield next(iter(tools._filterset_spec())), pks
    finally:
        mcp_tools.unregister_toolset(tools)


async def listed(arguments: dict[str, Any]) -> dict[str, Any]:
    from demo_site.asgi import application

    return (await call_modern(application, "tools/call", {"name": TOOL, "arguments": arguments})).json()


def found(body: dict[str, Any], pks: list[str]) -> list[int]:
    """Which of ``VALUES`` the list answered (their indexes)."""
    assert "error" not in body and not body["result"].get("isError"), body
    return sorted(pks.index(str(row["id"])) for row in body["result"]["structuredContent"]["results"])


@pytest.mark.parametrize(("value", "expected"), [
    ({"a": 1, "b": [2]}, [0]), ([1, 2], [1]), pytest.param(5, [2], marks=TYPED), pytest.param("5", [3], marks=TYPED),
    (True, [4]), (1.5, [6]), ("x", [7]), (1, []), ({"a": 1}, []),
], ids=["object", "array", "number", "string-of-digits", "true", "float", "string", "1-is-not-true", "part-of-object"])
async def test_exact_compares_json_values(rows: tuple[str, list[str]], value: Any, expected: list[int]) -> None:
    field, pks = rows
    assert found(await listed({field: value}), pks) == expected


@pytest.mark.parametrize(("values", "expected"), [
    pytest.param([5, {"a": 1, "b": [2]}], [0, 2], marks=TYPED), pytest.param([None, "5"], [3, 5], marks=TYPED), ([None], [5]),
    ([True, "x", 1.5], [4, 6, 7]), pytest.param(["true", 6], [], marks=TYPED),
    # Python's 1 == True (and 0 == False): Django's IN de-duplicates hashable values, and dropped the second.
    ([1, True], [4]), pytest.param([5.0, 5], [2], marks=TYPED),
], ids=["number-and-object", "null-and-string", "only-null", "scalars", "none", "1-then-true", "float-then-int"])
async def test_in_compares_json_values(rows: tuple[str, list[str]], values: list[Any], expected: list[int]) -> None:
    field, pks = rows
    assert found(await listed({f"{field}__in": values}), pks) == expected


async def test_a_filter_left_out_is_no_filter(rows: tuple[str, list[str]]) -> None:
    field, pks = rows
    assert found(await listed({}), pks) == list(range(len(VALUES)))
    # null: no filter, as for any argument (a model may send null for each optional one); a JSON null is in: [null].
    assert found(await listed({f"{field}__in": None}), pks) == list(range(len(VALUES)))
    assert found(await listed({field: None}), pks) == list(range(len(VALUES)))
    # isnull is SQL NULL, not JSON null: these columns hold none.
    assert found(await listed({f"{field}__isnull": False}), pks) == list(range(len(VALUES)))


async def test_the_schema_says_any_json_value(rows: tuple[str, list[str]]) -> None:
    from demo_site.asgi import application

    field, _ = rows
    body = (await call_modern(application, "tools/list", {})).json()
    [tool] = [tool for tool in body["result"]["tools"] if tool["name"] == TOOL]
    properties = tool["inputSchema"]["properties"]
    assert {key: value for key, value in properties[field].items() if key != "description"} == {}
    assert properties[f"{field}__in"]["type"] == "array" and properties[f"{field}__in"]["items"] == {}
    assert properties[f"{field}__in"]["minItems"] == 1


async def test_an_objects_key_order_matters_only_where_the_database_compares_text(rows: tuple[str, list[str]]) -> None:
    from django.db import connection

    field, pks = rows
    assert found(await listed({field: {"b": [2], "a": 1}}), pks) == ([0] if connection.vendor == "postgresql" else [])
