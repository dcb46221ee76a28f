"""Transports: Streamable HTTP on Channels (:mod:`.http`) and stdio (the ``mcp_stdio`` command)."""
