"""The in-memory view of a call's journal (the ordered ``CallStep`` rows)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from ..protocol.answers import ANSWER_SCHEMA
from ..protocol.jsonrpc import compact_json

_canonical_json = compact_json(sort_keys=True)


def digest(value: Any) -> str:
    """SHA-256 of a canonical JSON rendering (stable across processes and releases: stored digests are compared).

    The same bytes as ``json.dumps(value, sort_keys=True, separators=(",", ":"),
    ensure_ascii=False, default=str)``.
    """
    canonical = _canonical_json(value)
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass
class Step:
    """One journal entry. ``request`` is ``{"method", "params"}`` for client requests (and, for an
    elicitation whose model asserts more than its ``requestedSchema`` says, :data:`ANSWER_SCHEMA`)."""

    seq: int
    kind: str
    key: str
    digest: str
    request: dict[str, Any] | None = None
    response: Any = None
    error: dict[str, Any] | None = None
    status: str = "pending"
    persisted: bool = False

    @property
    def answered(self) -> bool:
        return self.status != "pending"

    @property
    def wire_request(self) -> dict[str, Any] | None:
        """The request as the client is sent it: without what the server keeps for itself (:data:`ANSWER_SCHEMA`)."""
        request = self.request
        if request is None or ANSWER_SCHEMA not in request:
            return request
        return {key: value for key, value in request.items() if key != ANSWER_SCHEMA}


def failed_once_key(key: str, seq: int) -> str:
    """The key a failed ``ctx.once`` step is journaled under: keys are unique in a call, and a handler
    that tries the effect again under the same key journals the retry as ``key`` itself."""
    return f"{key[:100]}#failed:{seq}"


@dataclass
class Journal:
    steps: list[Step] = field(default_factory=list)

    def at(self, seq: int) -> Step | None:
        """The step numbered ``seq``, if journaled. Usually the one at that position; not always: a
        ``ctx.once`` whose effect failed took its number and left no step, and concurrent steps
        (``asyncio.gather``) are appended as they finish."""
        steps = self.steps
        if seq < len(steps) and steps[seq].seq == seq:
            return steps[seq]
        for step in steps:
            if step.seq == seq:
                return step
        return None

    def by_key(self, key: str) -> Step | None:
        for step in self.steps:
            if step.key == key:
                return step
        return None

    @property
    def pending(self) -> list[Step]:
        return [step for step in self.steps if step.status == "pending"]
