"""Benchmark of the MCP endpoint against the official SDK, fastmcp and bare Channels (not a test; see README.md)."""
