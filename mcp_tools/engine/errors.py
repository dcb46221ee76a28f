"""Exceptions a tool author sees from ``ToolContext`` steps."""

from __future__ import annotations

from typing import Any


class StepFailed(Exception):
    """The client answered a step with an error (or an answer that failed validation)."""

    def __init__(self, message: str, error: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.error = error or {}


class ElicitationDeclined(Exception):
    """The user explicitly declined to answer an elicitation."""


class ElicitationCancelled(Exception):
    """The user dismissed an elicitation without choosing."""


class NonDeterministicHandler(Exception):
    """On replay the handler asked for a different step than the journal holds.

    Handlers must ask for the same steps in the same order on every run; put
    anything that varies (time, randomness, I/O) inside ``ctx.once``.
    """


class Suspend(BaseException):
    """Unwinds a handler that waits for input. Not an ``Exception``, so a broad
    ``except Exception`` in a tool cannot swallow it."""


class Defer(BaseException):
    """Unwinds a handler that moves the rest of its work to a worker (``await ctx.defer()``)."""
