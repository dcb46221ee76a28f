"""``ctx.log(level, data)`` sends ``data`` as JSON (the spec's "any JSON serializable type"): a pydantic model
as its JSON object, a dataclass as its fields, a date in ISO 8601, as a tool's results are written.

Found by the author review: a model went out as its ``str()`` (``"name='x' age=0"``), a dataclass as its
repr and a datetime as ``"2024-01-01 00:00:00"``, to both eras' clients.
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

import pytest
from pydantic import BaseModel

from mcp_tools import ToolContext
from mcp_tools.registry import make_tool, registry
from mcp_tools.transports.http import McpEndpoint
from tests.asgi_client import call_modern

pytestmark = pytest.mark.django_db(transaction=True)
APP = McpEndpoint()


class Reading(BaseModel):
    name: str
    level: int = 0


@dataclasses.dataclass
class Spot:
    x: int
    at: datetime.date


async def log_objects(ctx: ToolContext) -> str:
    await ctx.log("info", Reading(name="x"))
    await ctx.log("info", {"spot": Spot(1, datetime.date(2024, 1, 2)), "at": datetime.datetime(2024, 1, 2, 3, 4, 5)})
    await ctx.log("info", "plain text")
    return "ok"


async def test_log_data_goes_out_as_json() -> None:
    params: dict[str, Any] = {"name": "author_log_objects", "arguments": {}, "_meta": {"io.modelcontextprotocol/logLevel": "info"}}
    with registry.registered_temporarily(make_tool(log_objects, name="author_log_objects")):
        response = await call_modern(APP, "tools/call", params)
    logs = [m["params"]["data"] for m in response.sse_messages() if m.get("method") == "notifications/message"]
    assert logs == [{"name": "x", "level": 0}, {"spot": {"x": 1, "at": "2024-01-02"}, "at": "2024-01-02T03:04:05"}, "plain text"], logs
