"""The official MCP SDK (``mcp`` 2.3.0) server with one ``echo`` tool, as a Streamable HTTP ASGI app.

Stateful (session) mode with JSON responses: the same app serves 2025-11-25
sessions (``initialize`` + ``Mcp-Session-Id``) and stateless 2026-07-28 requests.
Run: ``uvicorn bench.sdk_app:app``.
"""

import warnings

from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings

warnings.filterwarnings("ignore")

mcp = MCPServer("sdk-bench", version="1.0")


@mcp.tool()
async def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


app = mcp.streamable_http_app(
    json_response=True,
    stateless_http=False,
    transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
)
