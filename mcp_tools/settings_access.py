"""Small typed accessors over :data:`mcp_tools.conf.mcp_settings` used by the engine."""

from __future__ import annotations

from .conf import mcp_settings


def sampling_limits() -> tuple[int, int]:
    return int(mcp_settings.SAMPLING_MAX_TOOLS), int(mcp_settings.SAMPLING_MAX_TOOL_CALLS)
