"""The demo site's ASGI application with what some live tests need and the demo has not.

- An SSE keep-alive every second, not every 15 s: a client whose read timeout is a few seconds
  (standing in for the official SDK's 300 s) sees an idle stream kept alive within the test's time.
"""

from demo_site.asgi import application
from mcp_tools.transports import http

http.KEEPALIVE_SECONDS = 1.0

__all__ = ["application"]
