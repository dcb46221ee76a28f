"""The demo's Celery app, as Celery's Django guide sets it up.

``celery -A demo_site worker`` runs background tools: ``mcp_tools/tasks.py``
holds the shared tasks, found by ``autodiscover_tasks()``. The broker is Redis
when ``REDIS_URL`` is set, otherwise a folder on disk (see settings.py).
"""

from __future__ import annotations

import os

from celery import Celery

import mcp_tools.interprocess.filebroker  # noqa: F401  (registers the mcpfs:// broker of the embedded default)

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "demo_site.settings")

app = Celery("demo_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
