"""What the server offers: tools, resources and prompts, their schemas and result shapes.

:mod:`.registry` holds the registry and the decorators that fill it,
:mod:`.schemas` derives JSON Schema from type hints and DRF serializers, and
:mod:`.results` turns handler return values into ``CallToolResult`` objects.
"""

from __future__ import annotations

from .registry import (
    AlreadyRegistered,
    NotRegistered,
    Prompt,
    Registry,
    Resource,
    Tool,
    make_tool,
    prompt,
    registry,
    resource,
    tool,
)

__all__ = [
    "AlreadyRegistered", "NotRegistered", "Prompt", "Registry", "Resource", "Tool",
    "make_tool", "prompt", "registry", "resource", "tool",
]
