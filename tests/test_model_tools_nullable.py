"""A model toolset's create/update: null for a nullable field (allow_null) is what the advertised
inputSchema allows (type [..., "null"]); 284362d's field_schemas maps each field with
AutoSchema.map_field alone, which leaves out the "nullable" map_serializer adds, so null is
refused as "Expected integer." before the serializer sees it."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User

import mcp_tools
from demo_site.operations.models import ReportRun
from tests.asgi_client import call_modern

pytestmark = pytest.mark.django_db(transaction=True)


class ReportTools(mcp_tools.ModelToolset):
    queryset = ReportRun.objects.all()
    basename = "review.reports"
    actions = ["create", "update"]
    permissions = {"create": [], "update": []}


@pytest.fixture
def report_tools() -> Any:
    mcp_tools.register_toolset(ReportTools)
    try:
        yield
    finally:
        mcp_tools.unregister_toolset(ReportTools)


def _token() -> str:
    from rest_framework.authtoken.models import Token

    user = User.objects.create_superuser("root", "root@example.com", "x")
    return Token.objects.get_or_create(user=user)[0].key


async def test_null_for_a_nullable_field_is_accepted_as_the_schema_advertises(report_tools: Any) -> None:
    from demo_site.asgi import application

    token = await sync_to_async(_token)()
    listed = (await call_modern(application, "tools/list", {}, token=token)).json()["result"]["tools"]
    [create] = [t for t in listed if t["name"] == "review.reports.create"]
    assert "null" in create["inputSchema"]["properties"]["total"]["type"], create["inputSchema"]
    body = (await call_modern(application, "tools/call", {"name": "review.reports.create",
                                                          "arguments": {"call_id": "c1", "rows": 3, "total": None}}, token=token)).json()
    result = body["result"]
    assert result.get("isError") is not True, result
    assert await sync_to_async(ReportRun.objects.filter(call_id="c1", total__isnull=True).exists)()
