"""What an install of the distribution puts on ``sys.path``: the ``mcp_tools`` package, and nothing else.

The demo site runs from a checkout (``scripts/demo``, the tests), where the editable install's
path entry is the project root; shipped in the distribution, it became a top-level
``demo_site`` package in every project that installs the library.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from setuptools import find_packages

CHECKOUT = Path(__file__).resolve().parent.parent


def test_the_distribution_holds_the_library_and_all_of_it() -> None:
    setuptools_config = tomllib.loads((CHECKOUT / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = find_packages(where=str(CHECKOUT), include=setuptools_config["packages"]["find"]["include"])
    assert sorted({name.split(".")[0] for name in found}) == ["mcp_tools"]
    # Every package folder under mcp_tools/ (migrations, management commands...) is in it.
    folders = {".".join(path.parent.relative_to(CHECKOUT).parts) for path in (CHECKOUT / "mcp_tools").rglob("__init__.py")}
    assert folders == set(found)
