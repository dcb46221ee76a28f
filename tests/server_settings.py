"""Settings of the server processes that live tests start: the tests' own database."""

from tests.settings import *  # noqa: F401,F403
from tests.settings import DATABASES, TEST_DB_NAME

DATABASES["default"]["NAME"] = TEST_DB_NAME
