"""The models and the migrations agree (no migration is missing)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command


@pytest.mark.django_db
def test_makemigrations_check_finds_no_changes() -> None:
    out = StringIO()
    try:
        call_command("makemigrations", "--check", "--dry-run", stdout=out, stderr=out)
    except SystemExit as exc:  # --check exits 1 when a migration is missing
        pytest.fail(f"makemigrations --check found model changes without a migration (exit {exc.code}):\n{out.getvalue()}")
    assert "No changes detected" in out.getvalue()


@pytest.mark.django_db
def test_makemigrations_check_mcp_tools_app_alone() -> None:
    out = StringIO()
    call_command("makemigrations", "mcp_tools", "--check", "--dry-run", stdout=out, stderr=out)
    assert "No changes detected in app 'mcp_tools'" in out.getvalue()
