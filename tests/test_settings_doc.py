"""docs/settings.md lists every ``MCP_TOOLS`` key (README: "every key and its default"), and only those.

A review of the docs found 13 keys of ``conf.DEFAULTS`` without a row; this keeps the
table and the defaults from drifting apart again.
"""

from __future__ import annotations

import re
from pathlib import Path

from mcp_tools.conf import DEFAULTS

PAGE = Path(__file__).resolve().parent.parent / "docs" / "settings.md"


def documented_rows() -> list[str]:
    """The keys named in the first column of the page's table, one entry per naming (a cell may name several: `A` / `B`)."""
    keys: list[str] = []
    for line in PAGE.read_text().splitlines():
        if not line.startswith("|"):
            continue
        first_cell = line.split("|")[1]
        keys.extend(re.findall(r"`([A-Z][A-Z0-9_]*)`", first_cell))
    return keys


def documented_keys() -> set[str]:
    return set(documented_rows())


def test_every_setting_has_a_row_in_the_settings_page() -> None:
    missing = sorted(set(DEFAULTS) - documented_keys())
    assert not missing, f"MCP_TOOLS keys without a row in docs/settings.md: {missing}"


def test_every_row_of_the_settings_page_is_a_setting() -> None:
    unknown = sorted(documented_keys() - set(DEFAULTS))
    assert not unknown, f"docs/settings.md documents keys that MCP_TOOLS does not have: {unknown}"


def test_no_setting_has_two_rows() -> None:
    rows = documented_rows()
    twice = sorted({key for key in rows if rows.count(key) > 1})
    assert not twice, f"docs/settings.md documents these keys in more than one row: {twice}"


def test_the_system_checks_table_lists_every_check_id_of_the_code() -> None:
    """README pointed at 'E001–E007, W001–W005' while the code had E020, E030–E034, E040–E043 and
    W040 too: docs/settings.md "System checks" has a row for each id the code reports, and only those."""
    code = Path(__file__).resolve().parent.parent / "mcp_tools"
    in_code = {found for source in code.rglob("*.py") for found in re.findall(r'(?:id=)?"(mcp_tools\.[EW]\d{3})"', source.read_text())}
    section = PAGE.read_text().split("## System checks", 1)[1]
    in_table = set(re.findall(r"^\| `(mcp_tools\.[EW]\d{3})` \|", section, re.M))
    assert in_code and in_table == in_code
    readme = (PAGE.parent.parent / "README.md").read_text()
    assert "System checks" in readme and "W001`–`W005" not in readme


def test_the_accepted_values_section_says_what_each_key_accepts() -> None:
    """Each key stands in one bullet of "Accepted values", which says what conf.ACCEPTS tests and the check id."""
    from mcp_tools.conf import ACCEPTS

    section = PAGE.read_text().split("## Accepted values", 1)[1].split("\n## ", 1)[0]
    bullets = [line for line in section.splitlines() if line.startswith("- ")]
    for key, rule in ACCEPTS.items():
        naming = [line for line in bullets if f"`{key}`" in line.split("): ", 1)[-1]]
        assert len(naming) == 1, (key, naming)
        assert naming[0].startswith(f"- {rule.says} (`{rule.check_id}`): "), (key, naming[0])
