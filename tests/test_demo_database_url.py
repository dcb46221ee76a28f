"""The demo pointed at another SQLite file through ``DATABASE_URL`` keeps its SQLite options.

dj-database-url builds the database entry afresh, so before the demo merged its options back a
``DATABASE_URL=sqlite:///…`` run lost ``transaction_mode: IMMEDIATE`` (``mcp_tools.W005``: two
processes could both start one ``ctx.once`` effect), the busy timeout and the WAL pragmas.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def demo(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "demo_site.settings", "DATABASE_URL": f"sqlite:///{tmp_path / 'other.sqlite3'}"}
    env.pop("REDIS_URL", None)
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def test_another_sqlite_file_keeps_the_demos_options(tmp_path: Path) -> None:
    shown = demo(tmp_path, "-c", "import json; from demo_site import settings; print(json.dumps(settings.DATABASES['default'], default=str))")
    assert shown.returncode == 0, shown.stderr
    database = json.loads(shown.stdout)
    assert database["NAME"] == str(tmp_path / "other.sqlite3")
    assert database["OPTIONS"]["transaction_mode"] == "IMMEDIATE"
    assert database["OPTIONS"]["timeout"] == 20
    assert "journal_mode=WAL" in database["OPTIONS"]["init_command"]


def test_another_sqlite_file_passes_the_checks(tmp_path: Path) -> None:
    checked = demo(tmp_path, "manage.py", "check")
    assert checked.returncode == 0, checked.stderr
    assert "W005" not in checked.stdout + checked.stderr


def test_a_mysql_url_is_mariadb_with_its_index_warning_silenced(tmp_path: Path) -> None:
    """``mysql://`` (MariaDB, the ``mysql`` extra): Django's MySQL backend with the demo's connection
    settings, none of SQLite's options, and ``models.W037`` (no partial indexes) silenced."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "demo_site.settings", "DATABASE_URL": "mysql://mcp:secret@127.0.0.1:3306/mcp_demo"}
    env.pop("REDIS_URL", None)
    shown = subprocess.run([sys.executable, "-c", "import json; from demo_site import settings; print(json.dumps("
                            "[settings.DATABASES['default'], settings.SILENCED_SYSTEM_CHECKS], default=str))"],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    database, silenced = json.loads(shown.stdout)
    assert (database["ENGINE"], database["NAME"], database["HOST"], database["PORT"]) == ("django.db.backends.mysql", "mcp_demo", "127.0.0.1", 3306)
    assert database["CONN_MAX_AGE"] == 60 and "transaction_mode" not in database.get("OPTIONS", {})
    assert silenced == ["models.W037"]
