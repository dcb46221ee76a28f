"""Settings of ``bench/background.py``: the bench settings plus the bench-only tools and probes.

``BENCH_DB`` is the SQLite file; with ``DATABASE_URL`` set, PostgreSQL instead (the bench
settings would otherwise point that database's NAME at the SQLite path). ``REDIS_URL``
switches the broker, cache and channel layer to Redis, ``MCP_TOOLS_BROKER_DIR`` is the
embedded broker's folder (both read by ``demo_site/settings.py``).
"""

import os

from bench.bench_settings import *  # noqa: F401,F403
from bench.bench_settings import CELERY_BROKER_TRANSPORT_OPTIONS, DATABASES, INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "bench.bgapp.apps.BenchBackgroundConfig"]
ROOT_URLCONF = "demo_site.urls"

if os.environ.get("DATABASE_URL"):
    import dj_database_url

    DATABASES["default"] = dj_database_url.parse(os.environ["DATABASE_URL"], conn_max_age=60, conn_health_checks=True)

# What-if for the embedded broker: BENCH_BROKER_POLL=0.01 polls the folder every 10 ms instead of
# the demo's 50 ms (bench/background.py --broker-poll).
if os.environ.get("BENCH_BROKER_POLL") and "polling_interval" in CELERY_BROKER_TRANSPORT_OPTIONS:
    CELERY_BROKER_TRANSPORT_OPTIONS = {**CELERY_BROKER_TRANSPORT_OPTIONS, "polling_interval": float(os.environ["BENCH_BROKER_POLL"])}
