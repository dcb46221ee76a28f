"""Review of the Streamable HTTP wire (what the conformance suite does not pin): the status of a
missing tasks extension, the id of an Invalid Request, media types, and CORS for allowed browser
origins. Each test failed before its fix."""
from __future__ import annotations

from typing import Any

import pytest

from mcp_tools.registry import make_tool, registry
from tests.asgi_client import call_modern
from tests.test_http_spec_edges import APP, _in_memory_layer  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


# -- 1. MissingRequiredClientCapability of the tasks extension is a 400 ---------------------------------


def tasks_only() -> str:
    """Runs only as a task."""
    return "done"


@pytest.mark.parametrize("method, params", [
    ("tasks/get", {"taskId": "00000000-0000-0000-0000-000000000000"}),
    ("tasks/cancel", {"taskId": "00000000-0000-0000-0000-000000000000"}),
    ("tools/call", {"name": "review_tasks_only", "arguments": {}}),
])
async def test_missing_tasks_extension_is_a_400(method: str, params: dict[str, Any]) -> None:
    """2026-07-28 basic/index, Per-request protocol fields: a request that needs a capability the client did
    not declare gets MissingRequiredClientCapabilityError (-32021), and on HTTP "the response status MUST be
    400 Bad Request", as ctx.elicit's -32021 is. The tasks extension's (tasks/get, tasks/cancel and a
    taskSupport="required" tool without the extension) answered 200."""
    with registry.registered_temporarily(make_tool(tasks_only, name="review_tasks_only", task_support="required")):
        headers = {"mcp-name": params["taskId"]} if "taskId" in params else None  # the extension's Mcp-Name
        response = await call_modern(APP, method, params, capabilities={}, headers=headers)
    body = response.json()
    assert body["error"]["code"] == -32021, body
    assert response.status == 400, (response.status, body)
