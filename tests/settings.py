"""Settings for the test suite: the demo project plus the conformance fixtures.

The test database is a file (SQLite) or ``test_mcp_tools_<run>`` (PostgreSQL or MySQL/MariaDB,
when ``DATABASE_URL`` is set), so live server processes started by the tests can
open the very same database (see ``tests/server_settings.py``).
"""

import os
from pathlib import Path

os.environ.setdefault("MCP_CONFORMANCE", "1")
# One test database and one broker folder per test run (several runs may share a machine),
# named in the environment so the live servers and workers the run starts find them.
os.environ.setdefault("MCP_TOOLS_TEST_RUN", str(os.getpid()))
_RUN = os.environ["MCP_TOOLS_TEST_RUN"]
os.environ.setdefault("MCP_TOOLS_BROKER_DIR", str(Path(__file__).resolve().parent / f".broker-{_RUN}"))

from demo_site.settings import *  # noqa: E402,F401,F403
from demo_site.settings import DATABASES, INSTALLED_APPS, MCP_TOOLS  # noqa: E402

TESTS_DIR = Path(__file__).resolve().parent
TEST_DB_NAME = os.environ.get("MCP_TOOLS_TEST_DB") or (
    str(TESTS_DIR / f".test-db-{_RUN}.sqlite3") if DATABASES["default"]["ENGINE"].endswith("sqlite3") else f"test_mcp_tools_{_RUN}"
)
DATABASES["default"]["TEST"] = {"NAME": TEST_DB_NAME}
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # Django's, with a cheaper flush after each transactional test (tests/postgresql/base.py).
    DATABASES["default"]["ENGINE"] = "tests.postgresql"

if "demo_site.conformance" not in INSTALLED_APPS:
    INSTALLED_APPS.append("demo_site.conformance")

SECRET_KEY = "tests-" + "x" * 60
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# A short worker lease, so a killed worker's call is taken over within seconds.
MCP_TOOLS = {**MCP_TOOLS, "ALLOW_ANONYMOUS": True, "WORKER_LEASE_SECONDS": 3.0}
DEBUG = False
ALLOWED_HOSTS = ["localhost", "127.0.0.1", "[::1]", "testserver"]

# OAuth (on in demo_site/settings.py when django-oauth-toolkit is installed) only where a test
# asks for it: live servers of tests/test_oauth.py start with MCP_TESTS_OAUTH=1.
if not os.environ.get("MCP_TESTS_OAUTH"):
    MCP_TOOLS.pop("OAUTH", None)

# Live auth tests start a server process with MCP_TESTS_NO_ANON=1: credentials are required there.
if os.environ.get("MCP_TESTS_NO_ANON"):
    MCP_TOOLS["ALLOW_ANONYMOUS"] = False
