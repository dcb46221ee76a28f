"""A model toolset's filters answer alike with and without django-filter installed.

With django-filter installed, ``filterset_fields`` went through a ``FilterSet`` built for the
model; without it, through ``QuerySet.filter``. The tests ran only the second. Each test here runs
both ways (the ``filter_backend`` fixture), on a model with a field of each kind, through the tool.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connection, models
from django.test.utils import isolate_apps

import mcp_tools
from demo_site.shop.models import Customer
from tests.asgi_client import argument_errors, call_modern

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("filter_backend")]

TOOL = "filterpaths.rows.list"
TOKEN = "12345678-1234-5678-1234-567812345678"


def row_model() -> type[models.Model]:
    """A model of a field of each kind (made inside ``isolate_apps``: no installed app has it)."""
    fields: dict[str, Any] = {
        "kind": models.CharField(max_length=5, choices=[("a", "A"), ("b", "B")], null=True),
        "level": models.IntegerField(choices=[(1, "Low"), (2, "High")], null=True),
        "flag": models.BooleanField(default=False),
        "maybe": models.BooleanField(null=True),
        "day": models.DateField(null=True),
        "at": models.DateTimeField(null=True),
        "clock": models.TimeField(null=True),
        "span": models.DurationField(null=True),
        "token": models.UUIDField(null=True),
        "amount": models.DecimalField(max_digits=8, decimal_places=2, null=True),
        "ratio": models.FloatField(null=True),
        "count": models.IntegerField(default=0),
        "customer": models.ForeignKey(Customer, null=True, on_delete=models.CASCADE, related_name="+"),
        "name": models.TextField(default="", blank=True),
        "data": models.JSONField(null=True),
    }
    meta = type("Meta", (), {"app_label": "shop"})  # of an isolated registry: the shop's own models never see it
    return type("FilterRow", (models.Model,), {"__module__": __name__, "Meta": meta, **fields})


LOOKUPS: dict[str, list[str]] = {
    "kind": ["exact", "in", "isnull"], "level": ["exact", "gte"], "flag": ["exact"], "maybe": ["exact", "isnull"],
    "day": ["exact", "gte", "year"], "at": ["exact", "gte", "range", "year__gte", "date", "month__lte"], "token": ["exact", "isnull", "startswith", "icontains"],
    "clock": ["exact", "gte"], "span": ["exact", "gte"],
    "amount": ["exact", "gte", "range"], "count": ["exact", "gte", "icontains"], "ratio": ["exact", "lt"], "customer": ["exact", "isnull"],
    "customer__email": ["iexact"], "name": ["exact", "regex", "iregex"], "data": ["exact", "isnull", "icontains"],
}


@pytest.fixture
def rows() -> Iterator[tuple[list[int], dict[str, int]]]:
    """Four rows, and a toolset listing them, registered: ``([pk of each row], {customer email: pk})``."""
    with isolate_apps("demo_site.shop"):
        model: Any = row_model()
        with connection.schema_editor() as editor:
            editor.create_model(model)
        ada = Customer.objects.create(name="Ada", email="ada@example.com")
        bob = Customer.objects.create(name="Bob", email="bob@example.com")
        pks = [model.objects.create(**values).pk for values in (
            {"kind": "a", "level": 1, "flag": True, "maybe": True, "day": datetime.date(2024, 2, 29),
             "at": datetime.datetime(2024, 2, 29, 10, 30, tzinfo=datetime.UTC), "clock": datetime.time(10, 30),
             "span": datetime.timedelta(hours=1, minutes=30), "token": uuid.UUID(TOKEN),
             "amount": "10.50", "ratio": 0.1, "count": 3, "customer": ada, "name": "Ada, Lovelace", "data": {"a": 1}},
            {"kind": "b", "level": 2, "maybe": False, "day": datetime.date(2025, 3, 1),
             "at": datetime.datetime(2025, 3, 1, 12, 0, 0, 250000, tzinfo=datetime.UTC),
             "clock": datetime.time(10, 30, 0, 250000), "span": datetime.timedelta(days=1), "token": uuid.uuid4(),
             "amount": "20", "ratio": 1e-8, "customer": bob, "name": "  padded  ", "data": 5},
            {"count": 5, "data": None},
            {"name": "Zed", "count": 1, "data": "x"},
        )]

        class FilterRows(mcp_tools.ModelToolset):
            queryset = model.objects.all()
            basename = "filterpaths.rows"
            actions = ["list"]
            permissions = {"list": []}
            filterset_fields = LOOKUPS

        mcp_tools.register_toolset(FilterRows)
        try:
            yield pks, {"ada@example.com": ada.pk, "bob@example.com": bob.pk}
        finally:
            mcp_tools.unregister_toolset(FilterRows)
            with connection.schema_editor() as editor:
                editor.delete_model(model)


async def listed(arguments: dict[str, Any]) -> dict[str, Any]:
    from demo_site.asgi import application

    body = (await call_modern(application, "tools/call", {"name": TOOL, "arguments": {**arguments, "ordering": "pk"}})).json()
    assert "error" not in body, body
    return dict(body["result"])


async def found(arguments: dict[str, Any], pks: list[int]) -> list[int]:
    """Which of the fixture's rows the list answers (their indexes)."""
    result = await listed(arguments)
    assert result.get("isError") is not True, result
    return [pks.index(row["id"]) for row in result["structuredContent"]["results"]]


@pytest.mark.parametrize(("arguments", "expected"), [
    ({"kind": "a"}, [0]), ({"kind__in": ["b"]}, [1]), ({"kind__isnull": True}, [2, 3]),
    ({"level": 2}, [1]), ({"level__gte": 1}, [0, 1]), ({"flag": True}, [0]), ({"flag": False}, [1, 2, 3]),
    ({"maybe": False}, [1]), ({"maybe__isnull": False}, [0, 1]),
    ({"day": "2024-02-29"}, [0]), ({"day__gte": "2024-03-01"}, [1]), ({"day__year": 2024}, [0]),
    ({"at__gte": "2024-03-01T00:00:00Z"}, [1]), ({"at__gte": "2024-02-29T11:30:00+01:00"}, [0, 1]),
    ({"at__year__gte": 2025}, [1]), ({"at__date": "2024-02-29"}, [0]), ({"at__month__lte": 2}, [0]),
    ({"token": TOKEN}, [0]), ({"token": TOKEN.replace("-", "")}, [0]), ({"token__isnull": True}, [2, 3]),
    ({"amount": "10.5"}, [0]), ({"amount": 20}, [1]), ({"amount__gte": "10.51"}, [1]), ({"amount__range": ["10", "20"]}, [0, 1]),
    ({"count": 0}, [1]), ({"count__gte": 3}, [0, 2]), ({"customer__isnull": True}, [2, 3]),
    ({"customer__email__iexact": "BOB@example.com"}, [1]), ({"name": "Ada, Lovelace"}, [0]),
], ids=repr)
async def test_typed_values_filter_alike(rows: tuple[list[int], dict[str, int]], arguments: dict[str, Any],
                                         expected: list[int]) -> None:
    pks, _ = rows
    assert await found(arguments, pks) == expected


async def test_a_foreign_key_filters_by_the_related_rows_key(rows: tuple[list[int], dict[str, int]]) -> None:
    """A key no related row has matches no row: the FilterSet refused it as an invalid filter
    ("Select a valid choice"), which told the caller which customers exist, rows or not."""
    pks, customers = rows
    assert await found({"customer": customers["bob@example.com"]}, pks) == [1]
    assert await found({"customer": max(customers.values()) + 1000}, pks) == []


@pytest.mark.parametrize(("arguments", "expected"), [
    ({"data__isnull": True}, [2]), ({"data__isnull": False}, [0, 1, 3]), ({"data__icontains": "A"}, [0]),
], ids=repr)
async def test_every_lookup_of_a_json_field_filters(rows: tuple[list[int], dict[str, int]], arguments: dict[str, Any],
                                                    expected: list[int]) -> None:
    """django-filter has no filter for a JSON field: its FilterSet failed (an AssertionError, an
    internal error) for the lookups not applied as given already, ``isnull``, ``icontains``..."""
    pks, _ = rows
    assert await found(arguments, pks) == expected


@pytest.mark.parametrize(("arguments", "expected"), [
    ({"token__startswith": "1234"}, [0]), ({"token__icontains": "5678-1234"}, [0]), ({"count__icontains": "-"}, []),
], ids=repr)
async def test_a_text_lookup_of_another_field_compares_text(rows: tuple[list[int], dict[str, int]], arguments: dict[str, Any],
                                                            expected: list[int]) -> None:
    """``contains``, ``startswith``... take text whatever the field (the database compares the column
    as text): the FilterSet read it as a value of the field, and refused part of a UUID, or a
    number's, as an invalid filter."""
    pks, _ = rows
    assert await found(arguments, pks) == expected


@pytest.mark.parametrize(("arguments", "expected"), [
    ({"name": ""}, [2]), ({"name": "  padded  "}, [1]), ({"customer__email__iexact": " "}, []),
], ids=repr)
async def test_text_is_compared_as_given(rows: tuple[list[int], dict[str, int]], arguments: dict[str, Any],
                                         expected: list[int]) -> None:
    """The FilterSet's form fields strip text, and take an empty text for no filter: ``name=""``
    listed every row, ``"  padded  "`` none."""
    pks, _ = rows
    assert await found(arguments, pks) == expected


@pytest.mark.parametrize(("arguments", "expected"), [
    ({"ratio": 1e300}, []), ({"ratio__lt": 1e60}, [0, 1]), ({"ratio__lt": 1e-7}, [1]),
], ids=repr)
async def test_a_number_past_1e50_is_compared_as_given(rows: tuple[list[int], dict[str, int]], arguments: dict[str, Any],
                                            expected: list[int]) -> None:
    """The FilterSet read a float as a decimal of at most 1e50, and refused a larger one."""
    pks, _ = rows
    assert await found(arguments, pks) == expected


@pytest.mark.parametrize("arguments", [
    {"amount": "1e999999"}, {"amount__gte": "1e999999"}, {"amount__gte": "1e-999999"}, {"amount__gte": 1e60},
    {"amount__range": ["1e999999", "2"]}, {"amount": "1234567.5"}, {"amount__gte": "10.505"},
], ids=repr)
async def test_a_decimal_its_column_cannot_hold_is_an_argument_error(rows: tuple[list[int], dict[str, int]],
                                                                     arguments: dict[str, Any]) -> None:
    """At most the field's ``max_digits`` digits (8), ``decimal_places`` (2) after the point. Past
    PostgreSQL's numeric range, ``1e999999`` or ``1e-999999``, it was an internal error (a
    DataError, "value overflows numeric format", logged at ERROR)."""
    assert [error["field"] for error in argument_errors({"result": await listed(arguments)})] == list(arguments)


async def test_a_decimal_its_column_holds_filters(rows: tuple[list[int], dict[str, int]]) -> None:
    pks, _ = rows
    assert await found({"amount__gte": "-999999.99", "amount__range": ["10.5", "999999.99"]}, pks) == [0, 1]
    assert await found({"amount": "10.500"}, pks) == [0]  # trailing zeros are no digits of the value


@pytest.mark.parametrize("arguments", [{"name__regex": "("}, {"name__iregex": "[z-a]"}, {"name__regex": "a{99999999999}"}], ids=repr)
async def test_a_regular_expression_the_database_cannot_compile_is_refused(
        rows: tuple[list[int], dict[str, int]], arguments: dict[str, Any], caplog: pytest.LogCaptureFixture) -> None:
    """It was an internal error logged at ERROR with a traceback (an OperationalError on SQLite, a
    DataError on PostgreSQL). On SQLite, whose ``REGEXP`` is Python's ``re``, it is an argument
    error naming the filter; elsewhere the database's own syntax decides, and its refusal is a
    tool error naming the filters (MariaDB's is an OperationalError, error 1139: it was an internal
    error there too)."""
    with caplog.at_level("ERROR"):
        result = await listed(arguments)
    if connection.vendor == "sqlite":
        errors = argument_errors({"result": result})
        assert [error["field"] for error in errors] == list(arguments)
        assert "regular expression" in errors[0]["message"], errors
    else:
        assert result.get("isError") is True and "structuredContent" not in result, result
        assert f"filters {next(iter(arguments))} " in result["content"][0]["text"], result
    assert not [record for record in caplog.records if record.levelname == "ERROR"], caplog.text


async def test_a_regular_expression_is_of_the_databases_syntax(rows: tuple[list[int], dict[str, int]]) -> None:
    """Python's ``re`` judges a pattern only where it runs it: PostgreSQL's ``\\m`` (start of a word) is none of its escapes."""
    pks, _ = rows
    assert await found({"name__regex": "^Ad", "name__iregex": "LOVELACE$"}, pks) == [0]
    if connection.vendor == "postgresql":
        assert await found({"name__regex": r"\mLove"}, pks) == [0]
    elif connection.vendor == "sqlite":
        assert [error["field"] for error in argument_errors({"result": await listed({"name__regex": r"\mLove"})})] == ["name__regex"]


@pytest.mark.parametrize(("arguments", "expected"), [
    ({"span": "PT1H30M"}, [0]), ({"span": "1 00:00:00"}, [1]), ({"span": "01:30:00"}, [0]), ({"span": 5400}, [0]),
    ({"span__gte": "P1D"}, [1]), ({"clock": "10:30:00"}, [0]), ({"clock": "10:30"}, [0]), ({"clock__gte": "10:30:00.1"}, [1]),
], ids=repr)
async def test_a_duration_or_a_time_filters(rows: tuple[list[int], dict[str, int]], arguments: dict[str, Any],
                                            expected: list[int]) -> None:
    """Typed as text, a duration was an internal error (``QuerySet.filter`` takes no text for it;
    the FilterSet did), and so was a time that was none. A duration is ISO 8601, Django's own
    text (as the list shows it), HH:MM:SS or seconds; a time is ISO 8601."""
    pks, _ = rows
    assert await found(arguments, pks) == expected


@pytest.mark.parametrize("arguments", [{"span": "garbage"}, {"clock": "garbage"}, {"clock": "10:30:00+01:00"}], ids=repr)
async def test_a_duration_or_a_time_of_another_shape_is_an_argument_error(rows: tuple[list[int], dict[str, int]],
                                                                          arguments: dict[str, Any]) -> None:
    """A time with a UTC offset too: the column holds a time of day in no time zone."""
    assert [error["field"] for error in argument_errors({"result": await listed(arguments)})] == list(arguments)


@pytest.mark.parametrize(("arguments", "expected"), [
    ({"at": "2024-02-29T10:30:00"}, [0]), ({"at__gte": "2024-02-29"}, [0, 1]),
    ({"at__range": ["2024-02-29T10:30:00", "2025-01-01"]}, [0]),
], ids=repr)
async def test_a_datetime_without_an_offset_is_of_the_current_time_zone(
        rows: tuple[list[int], dict[str, int]], arguments: dict[str, Any], expected: list[int]) -> None:
    """As a form reads it: ``QuerySet.filter`` read it in the default time zone, warning that it
    had no offset (a RuntimeWarning at each call); the FilterSet in the current one."""
    from django.utils import timezone

    pks, _ = rows
    with timezone.override("UTC"):
        assert await found(arguments, pks) == expected
    with timezone.override("Pacific/Kiritimati"):  # UTC+14: the first row's 10:30 UTC is 00:30 the next day there
        assert await found({"at__gte": "2024-03-01T00:30:00", "at__range": ["2024-03-01T00:30:00", "2024-03-01T00:30:00"]}, pks) == [0]


@pytest.mark.parametrize("arguments", [{"at__year__gte": 10000}, {"day__year": 0}, {"at__year__gte": -5}], ids=repr)
async def test_a_year_python_has_no_date_for_is_an_argument_error(rows: tuple[list[int], dict[str, int]],
                                                                  arguments: dict[str, Any]) -> None:
    """It was an internal error (a ValueError: Django compares a year as the dates it begins and ends)."""
    assert [error["field"] for error in argument_errors({"result": await listed(arguments)})] == list(arguments)


@pytest.mark.parametrize("arguments", [
    {"span__gte": "P9999999999D"},  # past timedelta's range: parse_duration raised OverflowError (-32603)
    {"span__gte": "1000000000 00:00:00"},  # the same in Django's own format
    {"span__gte": "P999999999D"},  # a timedelta, past what SQLite's column holds (an internal error there)
    {"span": 86399999999999.0},
    {"span__gte": "-P999999999D"},
], ids=["iso-past-timedelta", "django-past-timedelta", "iso-past-sqlite", "seconds-past-sqlite", "negative"])
async def test_a_duration_past_what_a_column_holds_is_an_invalid_argument(
    rows: tuple[list[int], dict[str, int]], arguments: dict[str, Any],
) -> None:
    """Found by a review: each was an internal error with a traceback (on SQLite; the first two everywhere)."""
    result = await listed(arguments)
    assert result.get("isError") is True, result
    text = result["content"][0]["text"]
    assert "106,751,991 days" in text and "Internal error" not in text, text


async def test_the_widest_duration_every_column_holds_is_a_filter(rows: tuple[list[int], dict[str, int]]) -> None:
    pks, _ = rows
    assert await found({"span__gte": "-P106751991D"}, pks) == [0, 1]  # the two rows that have a span
    assert await found({"span__gte": "P106751991D"}, pks) == []


async def test_a_filter_through_a_relation_to_many_rows_lists_each_row_once() -> None:
    """Found by a review: a customer with two matching orders was listed twice on one page, once when
    paged one row at a time (the same list, two answers), and a page's limit counted the copies."""
    import mcp_tools
    from demo_site.shop.models import Order

    class CustomersByOrder(mcp_tools.ModelToolset):
        queryset = Customer.objects.all()
        basename = "filterpaths.customers"
        actions = ["list"]
        permissions = {"list": []}
        filterset_fields = {"orders__total": ["gte"], "orders": ["isnull"]}
        ordering_fields = ["name"]

    def seed() -> None:
        ada = Customer.objects.create(name="Ada", email="ada@example.com")
        bob = Customer.objects.create(name="Bob", email="bob@example.com")
        for number, customer, total in (("N-1", ada, "60.00"), ("N-2", ada, "70.00"), ("N-3", bob, "80.00")):
            Order.objects.create(number=number, customer=customer, store="north", total=total)

    async def names(arguments: dict[str, Any]) -> tuple[list[str], str | None]:
        from demo_site.asgi import application

        body = (await call_modern(application, "tools/call", {"name": "filterpaths.customers.list", "arguments": arguments})).json()
        assert "result" in body, body
        return [row["name"] for row in body["result"]["structuredContent"]["results"]], body["result"]["structuredContent"].get("nextCursor")

    await sync_to_async(seed)()
    await sync_to_async(mcp_tools.register_toolset)(CustomersByOrder)
    try:
        # The relation itself too (the diff review: only the parts before the last were looked at).
        assert (await names({"orders__isnull": False, "ordering": "name"}))[0] == ["Ada", "Bob"]
        page, _ = await names({"orders__total__gte": "50", "ordering": "name"})
        paged: list[str] = []
        cursor = None
        while True:
            found, cursor = await names({"orders__total__gte": "50", "ordering": "name", "limit": 1, **({"cursor": cursor} if cursor else {})})
            paged += found
            if not cursor:
                break
    finally:
        await sync_to_async(mcp_tools.unregister_toolset)(CustomersByOrder)
    assert page == paged == ["Ada", "Bob"]


@pytest.mark.parametrize("arguments", [
    {"flag": 1}, {"flag": "yes"}, {"maybe": 0},  # a boolean is true or false
    {"level": True},  # a choice of 1 and 2: Python's True == 1 took it for 1
    {"ratio": True}, {"ratio": "nan"}, {"ratio": "0.1"},  # a number is a JSON number, and finite
    {"at__gte": 0}, {"at__gte": 1.5}, {"day": 0},  # a date is text: 0 was the Unix epoch
], ids=repr)
async def test_filter_values_are_strictly_of_their_type(rows: tuple[list[int], dict[str, int]], arguments: dict[str, Any]) -> None:
    """Found by a review: each was accepted and filtered rows (lax pydantic), though the docs say
    arguments are typed strictly, as integers already were."""
    assert [error["field"] for error in argument_errors({"result": await listed(arguments)})] == list(arguments)


@pytest.mark.parametrize(("arguments", "expected"), [
    ({"flag": True}, [0]), ({"maybe": False}, [1]), ({"level": 2}, [1]), ({"ratio__lt": 1}, [0, 1]),
    ({"day": "2024-02-29"}, [0]),
], ids=repr)
async def test_values_of_the_type_still_filter(rows: tuple[list[int], dict[str, int]], arguments: dict[str, Any],
                                               expected: list[int]) -> None:
    pks, _ = rows
    assert await found(arguments, pks) == expected
