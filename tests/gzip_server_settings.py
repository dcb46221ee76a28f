"""Settings of live servers whose project compresses its answers: Django's ``GZipMiddleware``
first in ``MIDDLEWARE``, as its documentation places it (tests/test_url_include.py)."""

from tests.server_settings import *  # noqa: F401,F403
from tests.server_settings import MIDDLEWARE

MIDDLEWARE = ["django.middleware.gzip.GZipMiddleware", *MIDDLEWARE]
