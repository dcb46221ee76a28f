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


def doc_block(page: str, after: str) -> str:
    """The first ```python block of ``docs/<page>`` after the text ``after``."""
    section = (ROOT / "docs" / page).read_text().split(after, 1)[1]
    block = re.search(r"^```python\n(.*?)^```$", section, re.M | re.S)
    assert block is not None, f"no python block after {after!r} in {page}"
    return block.group(1)


def test_protocol_x_mcp_header_example_builds_the_schema_the_page_describes() -> None:
    """docs/protocol.md, "Arguments mirrored in headers": ``T | None`` is described as ``T`` alone, and
    both annotated arguments are mirrored in their headers."""
    from typing import Annotated

    from pydantic import Field

    from mcp_tools.registry import make_tool

    namespace: dict[str, Any] = {"Annotated": Annotated, "Field": Field, "tool": lambda fn: fn}
    exec(compile(doc_block("protocol.md", "### Arguments mirrored in headers"), "<protocol.md x-mcp-header>", "exec"), namespace)
    tool = make_tool(namespace["run_query"])
    properties = tool.to_wire()["inputSchema"]["properties"]
    assert properties["region"] == {"type": "string", "x-mcp-header": "Region"}
    assert properties["zone"] == {"type": "string", "x-mcp-header": "Zone"}
    assert tool.param_headers == ((("region",), "Region"), (("zone",), "Zone"))


@pytest.mark.django_db
def test_oauth_introspection_verifier_example_answers_what_check_takes() -> None:
    """docs/oauth.md's own verifier, with its ``introspect`` answering as RFC 7662 says: an active token
    becomes a ``TokenInfo`` (its ``aud`` one string or a list), an inactive one None."""
    from datetime import datetime, timezone

    from django.contrib.auth import get_user_model

    from mcp_tools.server.oauth import TokenInfo

    user_model = get_user_model()
    user = user_model._default_manager.create_user("introspected", "introspected@example.com")
    answers = {
        "one": {"active": True, "sub": "introspected", "scope": "mcp inventory:write", "exp": 2_000_000_000,
                "aud": "https://shop.example/mcp", "client_id": "app"},
        "many": {"active": True, "sub": "introspected", "exp": 2_000_000_000, "aud": ["https://a.example/mcp", "https://b.example/mcp"]},
        "off": {"active": False},
    }
    namespace: dict[str, Any] = {"introspect": answers.__getitem__, "User": user_model, "datetime": datetime, "timezone": timezone}
    exec(compile(doc_block("oauth.md", "Write your own verifier"), "<oauth.md IntrospectionVerifier>", "exec"), namespace)
    verifier = namespace["IntrospectionVerifier"]()
    one = verifier.verify("one")
    assert one == TokenInfo(user=user, scopes=frozenset({"mcp", "inventory:write"}),
                            expires_at=datetime.fromtimestamp(2_000_000_000, timezone.utc), audience=("https://shop.example/mcp",),
                            client_id="app")
    verifier.check(one, "https://shop.example/mcp")  # raises if refused
    assert verifier.verify("many").audience == ("https://a.example/mcp", "https://b.example/mcp")
    assert verifier.verify("off") is None
