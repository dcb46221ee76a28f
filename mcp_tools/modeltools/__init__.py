"""Models' actions as tools: :func:`model_action`, :func:`register_model_action` and :class:`ModelToolset`.

See docs/model-tools.md. Imported lazily through ``mcp_tools`` (it reaches the
ORM and DRF), so ``import mcp_tools`` stays light.
"""

from __future__ import annotations

from .actions import ModelAction, model_action, register_model_action, unregister_model_action
from .base import declarations
from .toolsets import ModelToolset, register_toolset, unregister_toolset

__all__ = [
    "ModelAction",
    "ModelToolset",
    "check_model_tools",
    "declarations",
    "model_action",
    "register_model_action",
    "register_toolset",
    "unregister_model_action",
    "unregister_toolset",
]


def check_model_tools() -> list[object]:
    """The problems of every declared model tool (what ``manage.py check`` reports)."""
    from . import actions, base

    known = base.known_permissions()
    problems: list[object] = list(actions.registration_problems)
    for declaration in list(base.declarations):
        problems.extend(declaration.check(known))
    return problems
