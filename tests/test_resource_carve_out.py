"""A gated fixed resource inside an open template's range is not served through the template.

Which resource serves a URI is decided first (the fixed one registered at it, else the first
template that matches), then its permissions: a caller without them is told "Resource not found"
and the URI is not handed to a later, open template. Otherwise a template that serves any name
would give every caller what the gated resource at one of its URIs protects (docs/protocol.md).
"""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

import mcp_tools
from mcp_tools.protocol.errors import INVALID_PARAMS, RESOURCE_NOT_FOUND
from mcp_tools.registry import registry
from tests.asgi_client import call_modern
from tests.clients import create_user_with_token
from tests.test_resources_review import APP, _in_memory_layer, legacy, open_session  # noqa: F401 (an autouse fixture)

pytestmark = pytest.mark.django_db(transaction=True)

OPEN = "carve://{name}"
GATED = "carve://payroll"
OTHER = "carve://menu"


@pytest.fixture
def carved() -> Any:
    def any_page(name: str) -> str:
        return f"page {name}"

    def payroll() -> str:
        return "salaries"

    mcp_tools.resource(OPEN)(any_page)
    mcp_tools.resource(GATED, permissions=["inventory.change_product"])(payroll)
    yield
    registry.unregister_resource(GATED)
    registry.unregister_resource(OPEN)


async def test_a_2026_caller_without_the_permission_is_not_served_the_gated_uri_by_the_open_template(carved: Any) -> None:
    token = await sync_to_async(create_user_with_token)("carve-reader", ())
    refused = (await call_modern(APP, "resources/read", {"uri": GATED}, token=token)).json()
    assert refused["error"] == {"code": INVALID_PARAMS, "message": "Resource not found", "data": {"uri": GATED}}, refused
    served = (await call_modern(APP, "resources/read", {"uri": OTHER}, token=token)).json()
    assert served["result"]["contents"] == [{"uri": OTHER, "text": "page menu"}], served


async def test_a_2025_caller_without_the_permission_can_neither_read_nor_subscribe_to_the_gated_uri(carved: Any) -> None:
    token = await sync_to_async(create_user_with_token)("carve-subscriber", ())
    session = await open_session(token)
    for method in ("resources/read", "resources/subscribe"):
        refused = await legacy(session, method, {"uri": GATED}, token)
        assert refused["error"] == {"code": RESOURCE_NOT_FOUND, "message": "Resource not found", "data": {"uri": GATED}}, refused
    assert (await legacy(session, "resources/subscribe", {"uri": OTHER}, token))["result"] == {}


async def test_a_caller_with_the_permission_reads_the_gated_resource_not_the_template(carved: Any) -> None:
    token = await sync_to_async(create_user_with_token)("carve-clerk", ("inventory.change_product",))
    served = (await call_modern(APP, "resources/read", {"uri": GATED}, token=token)).json()
    assert served["result"]["contents"][0]["text"] == "salaries", served
