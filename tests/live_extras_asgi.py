"""The demo site's ASGI application with what some live tests need and the demo has not.

- An SSE keep-alive every second, not every 15 s: a client whose read timeout is a few seconds
  (standing in for the official SDK's 300 s) sees an idle stream kept alive within the test's time.
- Tools whose arguments are mirrored in ``Mcp-Param-*`` headers as users write them: an optional
  string, and a field of a nested model (tests/test_real_clients.py lists and calls them).
- A sampling with tools whose ``toolChoice`` is ``"required"`` (tests/test_real_clients.py).
"""

from typing import Annotated

from pydantic import BaseModel, Field

from demo_site.asgi import application
from demo_site.inventory.mcp_tools import calculator
from mcp_tools import ToolContext, tool
from mcp_tools.transports import http

http.KEEPALIVE_SECONDS = 1.0


@tool(name="live_zoned")
def zoned(zone: Annotated[str | None, Field(json_schema_extra={"x-mcp-header": "Zone"})] = None) -> str:
    """Say which zone the call was for."""
    return f"zone={zone}"


class Target(BaseModel):
    region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})]
    replicas: int = 1


@tool(name="live_deploy_to")
def deploy_to(target: Target) -> str:
    """Say where it would deploy."""
    return f"{target.region}x{target.replicas}"


@tool(name="live_ask_must_calculate")
async def ask_must_calculate(ctx: ToolContext, question: str) -> str:
    """Ask the client's model a question it must use the calculator for."""
    result = await ctx.sample(question, tools=[calculator], tool_choice={"mode": "required"}, max_tokens=500, key="ask")
    return result.text


__all__ = ["application"]
