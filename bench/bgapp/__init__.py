"""Bench-only Django app of ``bench/background.py``: a background tool, its inline twin, timing probes."""
