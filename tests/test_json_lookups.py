"""The JSON columns (PostgreSQL ``json``, models.ExactJSONField) take the ORM's JSON lookups.

``json`` has no ``=``, ``?`` or ``@>``: ``filter(arguments__order=5)``, ``__has_key``, ``__in``
and a whole-value match were ProgrammingErrors on PostgreSQL (they work on SQLite, and on any
jsonb JSONField). The field reads the column as jsonb for its lookups and key transforms. The
sessions changelist refuses lookups into its JSON columns from crafted URLs (a 500 on
PostgreSQL before; the calls changelist refused them already).
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client

from mcp_tools.models import CallStep, McpSession, ToolCall

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def call() -> ToolCall:
    row = ToolCall.objects.create(tool_name="t", arguments={"order": 5, "tags": ["a", "b"], "note": None},
                                  principal="p", params_digest="d", result={"_meta": {"nextTool": {"tool": "next"}}})
    ToolCall.objects.create(tool_name="t", arguments={"order": 6}, principal="p", params_digest="d")
    CallStep.objects.create(call=row, seq=0, kind="once", key="k", digest="d", response={"id": 1})
    return row


@pytest.mark.parametrize("lookup", [
    {"arguments__order": 5}, {"arguments__has_key": "tags"}, {"arguments__order__in": [5, 7]},
    {"arguments": {"order": 5, "tags": ["a", "b"], "note": None}}, {"arguments__tags__1": "b"},
    {"arguments__note__isnull": False, "arguments__order__gt": 4, "arguments__order__lt": 6},
    {"result___meta__nextTool__tool": "next"}, {"steps__response__id": 1},
], ids=["key", "has_key", "in", "whole", "index", "range", "nested", "join"])
def test_json_lookups_find_the_row_on_every_database(call: ToolCall, lookup: dict[str, Any]) -> None:
    assert list(ToolCall.objects.filter(**lookup).values_list("pk", flat=True)) == [call.pk]


def test_contains_where_the_database_has_it(call: ToolCall) -> None:
    if not connection.features.supports_json_field_contains:
        pytest.skip("SQLite has no JSON contains")
    assert list(ToolCall.objects.filter(arguments__contains={"order": 5}).values_list("pk", flat=True)) == [call.pk]


def test_isnull_on_the_column(call: ToolCall) -> None:
    assert ToolCall.objects.filter(result__isnull=True).count() == 1


@pytest.mark.parametrize("query", ["client_info__name=inspector", "client_capabilities__sampling__isnull=False",
                                   "client_info__name__in=a,b", "client_info__contains=x"])
def test_a_crafted_json_lookup_on_the_sessions_changelist_is_refused_not_a_500(query: str) -> None:
    McpSession.objects.create(id="s1", protocol_version="2025-11-25", principal="p", client_info={"name": "inspector"})
    client = Client(raise_request_exception=False)
    client.force_login(get_user_model().objects.create_superuser("boss", "boss@example.com", "pw"))
    assert client.get(f"/admin/mcp_tools/mcpsession/?{query}").status_code == 400
    assert client.get("/admin/mcp_tools/mcpsession/?q=s1").status_code == 200
