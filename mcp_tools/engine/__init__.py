"""The engine: runs a handler against its call's journal and says how the run ended."""

from .context import ToolContext
from .errors import ElicitationCancelled, ElicitationDeclined, NonDeterministicHandler, StepFailed, UnstorableOnceValue
from .runner import Completed, Deferred, Invocation, NeedsInput, Outcome, run

__all__ = [
    "Completed",
    "ElicitationCancelled",
    "ElicitationDeclined",
    "Invocation",
    "NeedsInput",
    "NonDeterministicHandler",
    "Outcome",
    "StepFailed",
    "ToolContext",
    "UnstorableOnceValue",
    "run",
]
