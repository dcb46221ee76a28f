"""Log levels of ``logging/setLevel`` and ``notifications/message`` (RFC 5424 severities, lowest first)."""

from __future__ import annotations

LOG_LEVELS: tuple[str, ...] = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


def at_least(level: str, threshold: str) -> bool:
    """Whether a message at ``level`` passes a client's ``threshold`` (both known levels)."""
    return LOG_LEVELS.index(level) >= LOG_LEVELS.index(threshold)
