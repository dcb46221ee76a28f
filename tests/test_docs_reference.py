"""The reference parts of the docs cover what the package has: every public name, every setting with
its default, every system check id.

A review of the docs found ``mcp_tools.NotRegistered`` (in ``__all__``) named nowhere in README.md or
docs/: a user meeting it (``unregister_toolset`` of a toolset not registered) had nothing to read.
"""

from __future__ import annotations

import re
from pathlib import Path

import mcp_tools
from mcp_tools.conf import DEFAULTS

ROOT = Path(__file__).resolve().parent.parent
#: The pages a user reads (the benchmark reports are not reference).
PAGES = [ROOT / "README.md", *(page for page in sorted((ROOT / "docs").glob("*.md")) if not page.name.startswith("performance"))]


def test_every_public_name_has_a_docstring_and_is_documented() -> None:
    text = "\n".join(page.read_text() for page in PAGES)
    undocumented = [name for name in mcp_tools.__all__ if not re.search(rf"`@?(?:mcp_tools\.)?{re.escape(name)}\b", text)]
    assert undocumented == []
    no_docstring = [name for name in mcp_tools.__all__ if not (getattr(mcp_tools, name).__doc__ or "").strip()]
    assert no_docstring == []


def test_every_setting_is_in_the_settings_page() -> None:
    rows = [line for line in (ROOT / "docs" / "settings.md").read_text().splitlines() if line.startswith("| `")]
    listed = {key for row in rows for key in re.findall(r"`([A-Z_]+)`", row.split("|")[1])}
    assert set(DEFAULTS) - listed == set()


def test_every_check_id_is_in_the_settings_page() -> None:
    source = "\n".join(path.read_text() for path in (ROOT / "mcp_tools").rglob("*.py"))
    made = set(re.findall(r'"(mcp_tools\.[EW]\d{3})"', source))
    checks_table = (ROOT / "docs" / "settings.md").read_text().split("## System checks", 1)[1]
    listed = set(re.findall(r"^\| `(mcp_tools\.[EW]\d{3})` \|", checks_table, re.M))
    assert made and made - listed == set()
