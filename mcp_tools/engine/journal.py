"""The in-memory view of a call's journal (the ordered ``CallStep`` rows)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

_canonical_json = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
# The C encoder ``_canonical_json`` uses, built once and without its circular-reference
# guard (a dict insert and delete per container; nothing is kept between calls).
_make_encoder: Any = getattr(json.encoder, "c_make_encoder", None)
_unguarded: Any = None if _make_encoder is None else _make_encoder(
    None, str, json.encoder.encode_basestring, None, ":", ",", True, False, True)


def digest(value: Any) -> str:
    """SHA-256 of a canonical JSON rendering (stable across processes and releases: stored digests are compared).

    The same bytes as ``json.dumps(value, sort_keys=True, separators=(",", ":"),
    ensure_ascii=False, default=str)``. A value that overflows the stack without the
    guard (a cycle, or nesting too deep) is encoded again with it, which raises what
    ``json.dumps`` raises.
    """
    if _unguarded is None:
        canonical = _canonical_json.encode(value)
    else:
        try:
            canonical = "".join(_unguarded(value, 0))
        except RecursionError:
            canonical = _canonical_json.encode(value)
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass
class Step:
    """One journal entry. ``request`` is ``{"method", "params"}`` for client requests."""

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


@dataclass
class Journal:
    steps: list[Step] = field(default_factory=list)

    def at(self, seq: int) -> Step | None:
        return self.steps[seq] if seq < len(self.steps) else None

    def by_key(self, key: str) -> Step | None:
        for step in self.steps:
            if step.key == key:
                return step
        return None

    @property
    def pending(self) -> list[Step]:
        return [step for step in self.steps if step.status == "pending"]
