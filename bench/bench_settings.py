"""Settings of the benchmark servers: the demo project on a throw-away SQLite file, quiet, DEBUG off.

``BENCH_DB`` is the SQLite path (``bench/run.py`` makes one in a temp dir and migrates it). With
``DATABASE_URL`` pointing at another database (PostgreSQL), the demo settings have already parsed
it (``CONN_MAX_AGE = 60``, health checks on) and it is used as is: ``BENCH_DB`` only names SQLite files.
"""

import os

from demo_site.settings import *  # noqa: F401,F403
from demo_site.settings import DATABASES, MCP_TOOLS

if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    DATABASES["default"]["NAME"] = os.environ.get("BENCH_DB", "/tmp/mcp-tools-bench.sqlite3")
DEBUG = False
ALLOWED_HOSTS = ["localhost", "127.0.0.1", "[::1]"]
MCP_TOOLS = {**MCP_TOOLS, "ALLOW_ANONYMOUS": True}
if os.environ.get("BENCH_NO_LANE"):  # bench/engine.py --no-lane: what the store's thread alone costs
    MCP_TOOLS["STORE_SQLITE_LANE"] = False
ROOT_URLCONF = "bench.ref_urls"  # the demo URLs plus /mcp -> a plain async view (used only by ref_apps.django_app)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": "ERROR"},
    "loggers": {
        "mcp_tools": {"handlers": ["console"], "level": "ERROR", "propagate": False},
        "django": {"handlers": ["console"], "level": "ERROR", "propagate": False},
    },
}
