"""Filter lookups of array, hstore and JSON fields are typed as what they compare.

``contains`` (and ``icontains``...) were typed as text for every field: a list (``tags__contains``
of a PostgreSQL ``ArrayField``) or an object (``HStoreField``, ``JSONField``) was refused as an
invalid argument, and the schema told clients to send a string, which the database then refused.
JSON ``contains`` is not supported on SQLite (Django raises ``NotSupportedError`` at each query).
It was an Error there (E030), which blocked ``runserver``, ``migrate`` and ``test`` on a site that
develops on SQLite and deploys on PostgreSQL, for a declaration valid where it runs. It is a
Warning now (W030); the tool keeps advertising the argument, and a call that uses it on such a
database is a tool error, before any query, while the tool's other filters keep working.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.core import checks
from django.db import connection, models
from django.test.utils import isolate_apps

import mcp_tools
from mcp_tools.models import ToolCall
from mcp_tools.modeltools.base import known_permissions
from tests.asgi_client import call_modern

postgres_fields = pytest.importorskip("django.contrib.postgres.fields")  # needs a PostgreSQL driver, not the database

pytestmark = pytest.mark.django_db(transaction=True)

JSON_CONTAINS = connection.features.supports_json_field_contains


class Tagged(models.Model):
    tags = postgres_fields.ArrayField(models.CharField(max_length=10, choices=[("red", "Red"), ("blue", "Blue")]))
    scores = postgres_fields.ArrayField(models.IntegerField(), default=list)
    matrix = postgres_fields.ArrayField(postgres_fields.ArrayField(models.IntegerField()), default=list)
    data = models.JSONField(default=dict)

    class Meta:
        abstract = True


def tagged_model(hstore: bool = True) -> type[models.Model]:
    """A model of every container field (made inside ``isolate_apps``: no installed app has it). Its
    table goes without the hstore column: Django's hstore values need ``django.contrib.postgres``
    installed, which the demo is not."""
    extra = {"attributes": postgres_fields.HStoreField(default=dict)} if hstore else {}
    meta = type("Meta", (), {"app_label": "shop"})  # of an isolated registry: the shop's own models never see it
    return type("TaggedRow", (Tagged,), {"__module__": __name__, "Meta": meta, **extra})


def toolset_of(model: type[models.Model], filters: dict[str, list[str]], name: str = "lookups.tagged") -> type[mcp_tools.ModelToolset]:
    class TaggedTools(mcp_tools.ModelToolset):
        queryset = model.objects.all()
        basename = name
        actions = ["list"]
        permissions = {"list": []}
        filterset_fields = filters

    return TaggedTools


@isolate_apps("demo_site.shop")
def test_container_lookups_are_typed_as_what_they_compare() -> None:
    tools = toolset_of(tagged_model(), {
        "tags": ["contains", "overlap", "icontains"], "scores": ["contained_by"],
        "attributes": ["contains", "has_key", "has_keys"], "data": ["contains", "has_key", "icontains"]})
    schema = tools.input_spec("list").schema["properties"]
    assert schema["tags__contains"]["type"] == "array" and schema["tags__contains"]["items"] == {"enum": ["red", "blue"], "type": "string"}
    assert schema["tags__overlap"]["items"] == {"enum": ["red", "blue"], "type": "string"}
    assert schema["scores__contained_by"]["items"]["type"] == "integer"
    assert schema["attributes__contains"]["type"] == "object"
    assert schema["attributes__contains"]["additionalProperties"] == {"anyOf": [{"type": "string"}, {"type": "null"}]}
    assert schema["attributes__has_key"]["type"] == "string" and schema["data__has_key"]["type"] == "string"
    assert schema["attributes__has_keys"]["type"] == "array" and schema["attributes__has_keys"]["minItems"] == 1
    # The case-insensitive forms compare the column as text, on these fields too.
    assert schema["tags__icontains"]["type"] == "string" and schema["data__icontains"]["type"] == "string"
    # Any JSON value (an object, an array, a scalar), on every database: a tool's schema is the same
    # on the SQLite a site develops on and the PostgreSQL it deploys to.
    assert "type" not in schema["data__contains"]
    tools.input_spec("list").validate({"tags__contains": ["red"], "attributes__contains": {"size": "L"}})


@pytest.fixture
def no_json_containment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The database as SQLite and Oracle are: no JSON ``contains`` / ``contained_by`` (Django raises
    ``NotSupportedError`` at the query), so PostgreSQL runs these tests too. Set on the features
    class, which every thread's connection shares."""
    monkeypatch.setattr(type(connection.features), "supports_json_field_contains", False)


@isolate_apps("demo_site.shop")
def test_the_check_refuses_what_cannot_be_typed() -> None:
    tools = toolset_of(tagged_model(), {"matrix": ["contains"], "data": ["has_key"], "scores": ["has_key"]})
    problems = tools.check_declaration(known_permissions())
    assert [(problem.id, problem.msg.split("names lookup ")[1]) for problem in problems] == [
        ("mcp_tools.E030", "'contains' of 'matrix': model tools cannot type a list of ArrayField values."),
        ("mcp_tools.E030", "'has_key' of 'scores': Django knows no lookup 'has_key' for a ArrayField.")]


@isolate_apps("demo_site.shop")
def test_json_containment_the_database_cannot_run_is_a_warning_not_an_error(no_json_containment: None) -> None:
    tools = toolset_of(tagged_model(), {"data": ["contains", "contained_by", "has_key"]})
    problems = tools.check_declaration(known_permissions())
    assert [(type(problem), problem.id) for problem in problems] == [(checks.Warning, "mcp_tools.W030")] * 2
    assert not any(problem.is_serious() for problem in problems)  # runserver, migrate and test still run
    assert [problem.msg.split("names lookup ")[1] for problem in problems] == [
        f"'{lookup}' of 'data', which the model's database cannot run: {lookup} lookup is not supported on this "
        f"database backend ({connection.vendor}, database 'default'); a call that uses it is a tool error here."
        for lookup in ("contains", "contained_by")]


@isolate_apps("demo_site.shop")
def test_json_containment_is_no_problem_where_the_database_runs_it() -> None:
    if not JSON_CONTAINS:
        pytest.skip("this database has no JSON contains")
    assert toolset_of(tagged_model(), {"data": ["contains", "contained_by"]}).check_declaration(known_permissions()) == []


@pytest.mark.parametrize("arguments", [{"tags__contains": "red"}, {"tags__contains": ["green"]},
                                       {"attributes__contains": ["size"]}, {"attributes__has_keys": []}])
@isolate_apps("demo_site.shop")
def test_a_value_of_another_shape_is_an_argument_error(arguments: dict[str, Any]) -> None:
    from mcp_tools.protocol.errors import InvalidArguments

    tools = toolset_of(tagged_model(), {"tags": ["contains"], "attributes": ["contains", "has_keys"]})
    with pytest.raises(InvalidArguments) as raised:
        tools.input_spec("list").validate(arguments)
    assert [error["field"] for error in raised.value.errors] == list(arguments)


# -- the lookups run: JSON on every database, arrays on PostgreSQL ----------------------------------


async def listed(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    from demo_site.asgi import application

    return (await call_modern(application, "tools/call", {"name": name, "arguments": arguments})).json()


@pytest.fixture
def calls_tools() -> Iterator[type[mcp_tools.ModelToolset]]:
    tools = toolset_of(ToolCall, {"arguments": ["contains", "has_key"]}, name="lookups.calls")
    mcp_tools.register_toolset(tools)
    try:
        yield tools
    finally:
        mcp_tools.unregister_toolset(tools)


async def two_calls() -> list[str]:
    def rows() -> list[str]:
        return [str(ToolCall.objects.create(tool_name="t", arguments=arguments, principal="p", params_digest="d").pk)
                for arguments in ({"order": 5, "tags": ["a", "b"]}, {"order": 6})]

    return await sync_to_async(rows)()


@pytest.mark.usefixtures("filter_backend")
async def test_json_lookups_filter_the_list(calls_tools: type[mcp_tools.ModelToolset]) -> None:
    if not JSON_CONTAINS:
        pytest.skip("this database has no JSON contains (see the next test)")
    first, second = await two_calls()
    keyed = await listed("lookups.calls.list", {"arguments__has_key": "tags"})
    assert [row["id"] for row in keyed["result"]["structuredContent"]["results"]] == [first]
    contains = await listed("lookups.calls.list", {"arguments__contains": {"tags": ["b"]}})
    assert [row["id"] for row in contains["result"]["structuredContent"]["results"]] == [first]


def test_manage_py_check_passes_with_a_warning(no_json_containment: None, calls_tools: type[mcp_tools.ModelToolset]) -> None:
    from django.core.management import call_command

    err = io.StringIO()
    call_command("check", stdout=io.StringIO(), stderr=err)  # SystemCheckError if it were an Error
    assert "mcp_tools.W030" in err.getvalue() and "'contains' of 'arguments'" in err.getvalue()


@pytest.mark.usefixtures("filter_backend")
async def test_json_containment_the_database_cannot_run_is_a_tool_error(
        no_json_containment: None, calls_tools: type[mcp_tools.ModelToolset]) -> None:
    first, second = await two_calls()
    contains = await listed("lookups.calls.list", {"arguments__contains": {"tags": ["b"]}, "arguments__has_key": "tags"})
    assert "error" not in contains, contains  # no -32603, no 500: an answer the model can read
    result = contains["result"]
    assert result["isError"] is True and "structuredContent" not in result, result
    assert result["content"][0]["text"] == (
        f"The filter arguments__contains cannot be used here: contains lookup is not supported on this database "
        f"backend ({connection.vendor}, database 'default'). Call the tool without it.")
    assert "Traceback" not in str(result)
    # The tool's other filters still work here, and the schema still offers the argument.
    keyed = await listed("lookups.calls.list", {"arguments__has_key": "tags"})
    assert [row["id"] for row in keyed["result"]["structuredContent"]["results"]] == [first]
    assert "arguments__contains" in calls_tools.input_spec("list").schema["properties"]
    assert await sync_to_async(ToolCall.objects.filter(pk__in=[first, second]).count)() == 2


@pytest.fixture
def tagged_table() -> Iterator[type[models.Model]]:
    if connection.vendor != "postgresql":
        pytest.skip("array fields are PostgreSQL's")
    with isolate_apps("demo_site.shop"):
        model = tagged_model(hstore=False)
        with connection.schema_editor() as editor:
            editor.create_model(model)
        try:
            yield model
        finally:
            with connection.schema_editor() as editor:
                editor.delete_model(model)


@pytest.mark.usefixtures("filter_backend")
async def test_array_lookups_filter_the_list(tagged_table: type[models.Model]) -> None:
    tools = toolset_of(tagged_table, {"tags": ["contains", "overlap"], "scores": ["contained_by"]}, name="lookups.tagged_rows")

    def rows() -> list[int]:
        return [tagged_table.objects.create(tags=tags, scores=scores).pk  # type: ignore[attr-defined]
                for tags, scores in ((["red", "blue"], [1, 2]), (["blue"], [3]))]

    first, second = await sync_to_async(rows)()
    mcp_tools.register_toolset(tools)
    try:
        both = await listed("lookups.tagged_rows.list", {"tags__contains": ["red", "blue"], "ordering": "pk"})
        blue = await listed("lookups.tagged_rows.list", {"tags__overlap": ["blue"], "ordering": "pk"})
        small = await listed("lookups.tagged_rows.list", {"scores__contained_by": [1, 2, 4]})
    finally:
        mcp_tools.unregister_toolset(tools)
    assert [row["id"] for row in both["result"]["structuredContent"]["results"]] == [first]
    assert [row["id"] for row in blue["result"]["structuredContent"]["results"]] == [first, second]
    assert [row["id"] for row in small["result"]["structuredContent"]["results"]] == [first]
