"""App config of the background benchmark's probes (installed only by ``bench.background_settings``)."""

from __future__ import annotations

from django.apps import AppConfig


class BenchBackgroundConfig(AppConfig):
    name = "bench.bgapp"
    label = "bench_bgapp"
    verbose_name = "Background benchmark probes"

    def ready(self) -> None:
        from . import probes

        probes.connect_celery_signals()
