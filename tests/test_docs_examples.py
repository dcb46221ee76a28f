"""Examples in the docs, taken from the docs and run as written, so they stay true.

A review of the docs found both broken: the ``mcp_tools.testing`` docstring's test answered the
``deploy`` tool's sampling request with an elicitation answer and used the ``db`` fixture where
the endpoint needs ``django_db(transaction=True)``; README's "Register a tool" used
``DeployReport`` and ``record_audit`` without defining them (pasted, it raised NameError).
"""

from __future__ import annotations

import importlib
import re
import textwrap
from pathlib import Path
from typing import Any

import pytest

import mcp_tools.testing
from mcp_tools.registry import Registry

ROOT = Path(__file__).resolve().parent.parent
#: The module whose ``registry`` the decorators fill (the package's ``registry`` is that object).
registry_module = importlib.import_module("mcp_tools.registry.registry")


def docstring_example() -> str:
    """The code block of ``mcp_tools.testing``'s docstring: the indented lines after its ``::``."""
    doc = mcp_tools.testing.__doc__ or ""
    _, found, after = doc.partition("::\n\n")
    assert found, "mcp_tools.testing's docstring has no example block"
    block = re.match(r"(?:(?: {4}.*)?\n)+", after)
    assert block is not None
    return textwrap.dedent(block.group(0))


def readme_tool_example() -> str:
    """README's "Register a tool" code block."""
    section = (ROOT / "README.md").read_text().split("## Register a tool", 1)[1]
    block = re.search(r"^```python\n(.*?)^```$", section, re.M | re.S)
    assert block is not None
    return block.group(1)


def _docstring_tests() -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "mcp_tools_testing_docstring"}
    exec(compile(docstring_example(), "<mcp_tools.testing docstring>", "exec"), namespace)
    tests = {name: value for name, value in namespace.items() if name.startswith("test_") and callable(value)}
    assert tests, "the docstring's example defines no test"
    return tests


@pytest.fixture(autouse=True)
def no_anonymous_callers(settings: Any) -> None:
    """As in a project's settings (ALLOW_ANONYMOUS defaults to False; tests/settings.py turns it
    on): the docstring's test passed here only because anonymous calls were allowed."""
    settings.MCP_TOOLS = {**settings.MCP_TOOLS, "ALLOW_ANONYMOUS": False}


# The docstring's tests, collected by pytest as they would be in a project's own test module:
# with the markers and fixtures the example gives them.
for _name, _test in _docstring_tests().items():
    globals()[f"{_name}_from_the_testing_docstring"] = _test


def test_readme_tool_example_registers_as_pasted(monkeypatch: pytest.MonkeyPatch) -> None:
    # Its tools are defined and registered (hints resolved, schemas derived) in a registry of
    # their own: the demo registers tools named echo and deploy too.
    fresh = Registry()
    monkeypatch.setattr(registry_module, "registry", fresh)
    exec(compile(readme_tool_example(), "<README.md Register a tool>", "exec"), {"__name__": "readme_example"})
    assert {tool.name for tool in fresh.tools} == {"echo", "deploy"}


@pytest.mark.django_db(transaction=True)
async def test_the_testing_docstrings_user_logs_in_by_the_user_models_login_field(monkeypatch: pytest.MonkeyPatch) -> None:
    """The example made its user with ``User.objects.acreate(username=...)``: a project whose
    ``AUTH_USER_MODEL`` logs in by email has no ``username`` to set (a TypeError there). Here the demo's
    user logs in by email, as such a model's does: the example's user must have that login set."""
    from asgiref.sync import sync_to_async
    from django.contrib.auth import get_user_model

    user_model = get_user_model()
    monkeypatch.setattr(user_model, "USERNAME_FIELD", "email")
    (test,) = _docstring_tests().values()
    await test()
    [user] = await sync_to_async(list)(user_model._default_manager.all())
    assert user.get_username(), "the example's user has no login in the field the user model names"
