"""fastmcp (on ``mcp`` 2.3.0) with one ``echo`` tool: stateful, JSON responses, like ``sdk_app``.

Run: ``uvicorn bench.fastmcp_app:app``.
"""

import warnings

from fastmcp import FastMCP

warnings.filterwarnings("ignore")

mcp = FastMCP("fastmcp-bench")


@mcp.tool
async def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


app = mcp.http_app(path="/mcp", json_response=True, stateless_http=False, host_origin_protection=False)
