"""Exceptions a tool author sees from ``ToolContext`` steps."""

from __future__ import annotations

from typing import Any


class StepFailed(Exception):
    """The client answered a step with an error (or an answer that failed validation)."""

    def __init__(self, message: str, error: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.error = error or {}


class OnceFailed(RuntimeError):
    """On replay, a ``ctx.once`` effect that failed when it ran, whose exception class cannot be
    made again (not imported here, or it needs other arguments). Its message is the original's."""


def error_of_once(exc: BaseException) -> dict[str, Any]:
    """How a failed ``ctx.once`` effect is journaled: its exception's class and message."""
    return {"type": f"{type(exc).__module__}.{type(exc).__qualname__}", "message": str(exc)}


def once_exception(error: dict[str, Any] | None) -> Exception:
    """The exception a journaled failed ``ctx.once`` raises again on replay: its own class when that
    is an ``Exception`` already imported that takes the message alone, else :class:`OnceFailed`."""
    import sys

    error = error or {}
    message = str(error.get("message", ""))
    module, _, name = str(error.get("type", "")).rpartition(".")
    found: Any = sys.modules.get(module)  # no import: replaying must not run a module's code
    for part in name.split("."):
        found = getattr(found, part, None)
    if isinstance(found, type) and issubclass(found, Exception):
        try:
            return found(message)
        except Exception:
            pass
    return OnceFailed(message)


class UnstorableOnceValue(ValueError):
    """A ``ctx.once`` effect returned a value its journal entry cannot hold: a float NaN or infinity
    (JSON has no number for them) or a string holding U+0000 or a lone surrogate (no database column
    here keeps one). Its message names the step key and where in the value the problem is.

    Raised as the effect's own failure: a sync effect's database writes roll back, the step is
    journaled as failed, and every replay raises this again instead of running the effect again."""


class ElicitationDeclined(Exception):
    """The user explicitly declined to answer an elicitation."""


class ElicitationCancelled(Exception):
    """The user dismissed an elicitation without choosing."""


class NonDeterministicHandler(Exception):
    """On replay the handler asked for a different step than the journal holds.

    Handlers must ask for the same steps in the same order on every run; put
    anything that varies (time, randomness, I/O) inside ``ctx.once``.

    Raised by a ``ToolContext`` step, it says which: :attr:`seq` is the step's place in the journal,
    :attr:`journaled_kind` / :attr:`journaled_key` what the journal holds there, :attr:`kind` /
    :attr:`key` what the handler asked for (``"elicit"``, ``"sample"``, ``"roots"``, ``"once"``).
    All are None when the raiser did not know them (another run's entry, found by the store).
    """

    def __init__(
        self,
        message: str,
        *,
        seq: int | None = None,
        journaled: tuple[str, str] | None = None,
        asked: tuple[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.seq = seq
        self.journaled_kind: str | None = journaled[0] if journaled else None
        self.journaled_key: str | None = journaled[1] if journaled else None
        self.kind: str | None = asked[0] if asked else None
        self.key: str | None = asked[1] if asked else None

    @property
    def request_changed(self) -> bool:
        """Whether the handler asked for the very step the journal holds at that place (its kind and
        key), with another request: the handler took the same path, and what it asks about changed
        (an elicitation's message built from data edited between the rounds)."""
        return self.kind is not None and (self.kind, self.key) == (self.journaled_kind, self.journaled_key)


class Suspend(BaseException):
    """Unwinds a handler that waits for input. Not an ``Exception``, so a broad
    ``except Exception`` in a tool cannot swallow it."""


class Defer(BaseException):
    """Unwinds a handler that moves the rest of its work to a worker (``await ctx.defer()``)."""
