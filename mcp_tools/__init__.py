"""mcp_tools: host Model Context Protocol tools on a Django site.

Register functions with :func:`tool`, :func:`resource` and :func:`prompt`;
route :class:`mcp_tools.transports.http.McpEndpoint` (see
:func:`mcp_tools.routing.http_urlpatterns`) and every MCP client generation
can call them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

__version__ = "0.1.0"

__all__ = [
    "AlreadyRegistered",
    "Completions",
    "ElicitationCancelled",
    "ElicitationDeclined",
    "ModelToolset",
    "NonDeterministicHandler",
    "NotRegistered",
    "Page",
    "Pending",
    "ResourceNotFound",
    "SamplingResult",
    "StepFailed",
    "ToolContext",
    "ToolError",
    "ToolResult",
    "UnstorableOnceValue",
    "model_action",
    "notify_resource_updated",
    "notify_resource_updated_sync",
    "prompt",
    "register_model_action",
    "register_toolset",
    "resource",
    "tool",
]

# Importing these does not touch Django settings or models, so `import mcp_tools`
# is safe in settings modules and before apps are ready.
from .engine.context import SamplingResult, ToolContext
from .engine.errors import ElicitationCancelled, ElicitationDeclined, NonDeterministicHandler, StepFailed, UnstorableOnceValue
from .protocol.errors import ResourceNotFound
from .registry.registry import AlreadyRegistered, NotRegistered, prompt, resource, tool
from .registry.results import Completions, Page, Pending, ToolError, ToolResult


if TYPE_CHECKING:
    from .modeltools import ModelToolset, model_action, register_model_action, register_toolset, unregister_toolset

#: Model tools reach the ORM and DRF: imported on first use (``@mcp_tools.model_action`` in a models module).
_MODEL_TOOLS = ("ModelToolset", "model_action", "register_model_action", "register_toolset", "unregister_toolset")


def __getattr__(name: str) -> object:
    # Imported lazily: they reach the ORM, and `import mcp_tools` (or its protocol
    # layer) must not pull in django.db or channels.
    if name in ("notify_resource_updated", "notify_resource_updated_sync"):
        from .server import sessions

        return getattr(sessions, name)
    if name in _MODEL_TOOLS:
        from . import modeltools

        return getattr(modeltools, name)
    raise AttributeError(f"module 'mcp_tools' has no attribute {name!r}")
