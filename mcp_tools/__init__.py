"""mcp_tools: host Model Context Protocol tools on a Django site.

Register functions with :func:`tool`, :func:`resource` and :func:`prompt`;
route :class:`mcp_tools.transports.http.McpEndpoint` (see
:func:`mcp_tools.routing.http_urlpatterns`) and every MCP client generation
can call them.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = [
    "AlreadyRegistered",
    "ElicitationCancelled",
    "ElicitationDeclined",
    "NonDeterministicHandler",
    "NotRegistered",
    "Page",
    "Pending",
    "SamplingResult",
    "StepFailed",
    "ToolContext",
    "ToolError",
    "ToolResult",
    "notify_resource_updated",
    "notify_resource_updated_sync",
    "prompt",
    "resource",
    "tool",
]

# Importing these does not touch Django settings or models, so `import mcp_tools`
# is safe in settings modules and before apps are ready.
from .engine.context import SamplingResult, ToolContext
from .engine.errors import ElicitationCancelled, ElicitationDeclined, NonDeterministicHandler, StepFailed
from .registry.registry import AlreadyRegistered, NotRegistered, prompt, resource, tool
from .registry.results import Page, Pending, ToolError, ToolResult


def __getattr__(name: str) -> object:
    # Imported lazily: they reach the ORM, and `import mcp_tools` (or its protocol
    # layer) must not pull in django.db or channels.
    if name in ("notify_resource_updated", "notify_resource_updated_sync"):
        from .interprocess import notifications

        return getattr(notifications, name)
    raise AttributeError(f"module 'mcp_tools' has no attribute {name!r}")
