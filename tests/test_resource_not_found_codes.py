"""A resource that is not there (or not the caller's to read) is answered with each era's own code.

2026-07-28 (SEP-2164): servers MUST answer -32602. 2025-11-25 (server/resources, Error Handling):
servers SHOULD answer -32002, which that era's clients look for; the server answered -32602 there too.
"""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from mcp_tools import resource
from mcp_tools.protocol.errors import INVALID_PARAMS, RESOURCE_NOT_FOUND
from mcp_tools.registry import registry
from tests.test_resources_review import APP, call_modern, legacy, open_session
from tests.test_stdio_review import INIT, answered, serve_lines
from tests.clients import create_user_with_token

pytestmark = pytest.mark.django_db(transaction=True)

MISSING = "nowhere://not/registered"
GATED = "codes://gated"


@pytest.fixture(autouse=True)
def _in_memory_layer(settings: Any) -> None:
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


@pytest.fixture
def gated_resource() -> Any:
    def gated() -> str:
        return "secret"

    resource(GATED, permissions=["inventory.change_product"])(gated)
    yield
    registry.unregister_resource(GATED)


def not_found(answer: dict[str, Any], code: int, uri: str) -> None:
    assert "result" not in answer, answer
    assert answer["error"] == {"code": code, "message": "Resource not found", "data": {"uri": uri}}, answer


async def test_a_2025_session_reads_an_unknown_resource_as_32002() -> None:
    session = await open_session()
    not_found(await legacy(session, "resources/read", {"uri": MISSING}), RESOURCE_NOT_FOUND, MISSING)


async def test_a_2025_session_subscribing_to_an_unknown_resource_gets_32002() -> None:
    session = await open_session()
    not_found(await legacy(session, "resources/subscribe", {"uri": MISSING}), RESOURCE_NOT_FOUND, MISSING)


async def test_a_resource_the_2025_caller_may_not_read_is_the_same_32002(gated_resource: Any) -> None:
    token = await sync_to_async(create_user_with_token)("codes-reader", ())
    session = await open_session(token)
    not_found(await legacy(session, "resources/read", {"uri": GATED}, token), RESOURCE_NOT_FOUND, GATED)


async def test_a_2026_request_for_an_unknown_resource_keeps_32602() -> None:
    r = await call_modern(APP, "resources/read", {"uri": MISSING})
    not_found(r.json(), INVALID_PARAMS, MISSING)


async def test_stdio_speaks_2025_and_answers_32002() -> None:
    import json

    written = await serve_lines([json.dumps(INIT), json.dumps({"jsonrpc": "2.0", "id": 2, "method": "resources/read",
                                                                "params": {"uri": MISSING}})])
    not_found(answered(written, 2), RESOURCE_NOT_FOUND, MISSING)


@pytest.fixture
def template_resource() -> Any:
    import mcp_tools

    def one(key: str) -> str:
        if key != "known":
            raise mcp_tools.ResourceNotFound(f"codes://items/{key}")
        return "here"

    resource("codes://items/{key}")(one)
    yield
    registry.unregister_resource("codes://items/{key}")


async def test_a_template_function_saying_not_found_is_answered_in_each_eras_code(template_resource: Any) -> None:
    session = await open_session()
    assert (await legacy(session, "resources/read", {"uri": "codes://items/known"}))["result"]["contents"][0]["text"] == "here"
    not_found(await legacy(session, "resources/read", {"uri": "codes://items/gone"}), RESOURCE_NOT_FOUND, "codes://items/gone")
    r = await call_modern(APP, "resources/read", {"uri": "codes://items/gone"})
    not_found(r.json(), INVALID_PARAMS, "codes://items/gone")
