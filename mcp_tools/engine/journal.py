"""The in-memory view of a call's journal (the ordered ``CallStep`` rows)."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any

from ..protocol.answers import ANSWER_SCHEMA
from ..protocol.jsonrpc import UNSTORABLE_CHARACTER, compact_json, unstorable_string

_canonical_json = compact_json(sort_keys=True)
_compact_json = compact_json()

#: The longest step key the journal holds (``CallStep.key`` is a ``varchar(128)``): a longer key given
#: by a handler is refused where it is given (:func:`check_step_key`), and one the engine builds is
#: fitted to it (:func:`derived_step_key`). PostgreSQL refuses (or once cut) a longer value and SQLite
#: keeps it whole: unchecked, a call replayed on one and failed on the other.
STEP_KEY_MAX_LENGTH = 128


def digest(value: Any) -> str:
    """SHA-256 of a canonical JSON rendering (stable across processes and releases: stored digests are compared).

    The same bytes as ``json.dumps(value, sort_keys=True, separators=(",", ":"),
    ensure_ascii=False, default=str)``.
    """
    return digest_of_text(_canonical_json(value))


def canonical_json(value: Any) -> str:
    """The canonical JSON rendering :func:`digest` hashes."""
    return _canonical_json(value)


def digest_of_text(canonical: str) -> str:
    """:func:`digest` of the value whose :func:`canonical_json` is ``canonical``.

    A lone surrogate is hashed as its UTF-8-like bytes (``surrogatepass``) instead of failing the
    handler with a ``UnicodeEncodeError`` that names neither the step nor the value: the step that
    holds one is then refused with its place (:func:`unstorable_part`). Every other text hashes as
    it always did (no stored digest can hold one: hashing it raised)."""
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def plainly_storable(canonical: str) -> bool:
    """True when ``canonical`` (a value's :func:`canonical_json`) shows the value holds nothing
    :func:`unstorable_part` would find; False when it may, and only the walk can say.

    The encoder writes U+0000 as the escape ``\\u0000``, a lone surrogate as itself, a float NaN or
    infinity as ``NaN`` / ``Infinity``, and what it cannot write as ``str()`` of it (which the
    walk checks the same way). Text that only looks like one (a string ``"NaN"``) costs the walk.
    One C-level scan instead of a Python walk of every item: a step's request is rendered for
    its digest anyway.
    """
    return ("\\u0000" not in canonical and "NaN" not in canonical and "Infinity" not in canonical
            and (canonical.isascii() or UNSTORABLE_CHARACTER.search(canonical) is None))


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


def check_step_key(key: object) -> str:
    """``key`` if it can name a journal step: a string of 1 to :data:`STEP_KEY_MAX_LENGTH` characters.

    Raises ``TypeError`` / ``ValueError`` otherwise, when the handler gives the key (``ctx.once``, the
    ``key=`` of a request), on every database and every round alike. An empty request key was
    journaled under another name (``step-<seq>``) than the handler asks for: the next replay failed.
    """
    if not isinstance(key, str):
        raise TypeError(f"A step key must be a string, not {type(key).__name__}")
    if not key or len(key) > STEP_KEY_MAX_LENGTH:
        shown = key if len(key) <= 60 else key[:60] + "..."
        raise ValueError(f"A step key must be 1 to {STEP_KEY_MAX_LENGTH} characters; {shown!r} has {len(key)}")
    return key


def derived_step_key(*parts: object) -> str:
    """A step key the engine builds from ``parts`` (joined with ``.``), at most :data:`STEP_KEY_MAX_LENGTH`
    characters whatever the parts' lengths: a longer one keeps its beginning and ends with ``~`` and
    32 hex digits of the SHA-256 of the whole, so distinct parts keep distinct keys, and the same
    parts give the same key on every replay. A key that fits is the plain join, as it always was.

    Parts may come from the client (a sampling answer's ``tool_use`` id) or be as long as a name
    (a model action's tool name): they must not fail the call.
    """
    key = ".".join(str(part) for part in parts)
    if len(key) <= STEP_KEY_MAX_LENGTH:
        return key
    tag = "~" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return key[:STEP_KEY_MAX_LENGTH - len(tag)] + tag


def unstorable_part(value: Any, root: str = "value") -> str | None:
    """Where and why a journal entry cannot hold ``value`` (a ``ctx.once`` result, a step's request), else None.

    The store writes a value as ``json.dumps(value, default=str)`` would: a float NaN or infinity has
    no JSON number (SQLite's ``JSON_VALID`` check and PostgreSQL's ``json`` refuse the ``NaN`` it
    writes), and no column here holds a string with U+0000 or a lone surrogate
    (:class:`~mcp_tools.store.sql.UnstorableValue`), nor a value made of one by ``str()``. Said
    as ``value['a'][0] is a float NaN`` (``root`` names the value), for the tool author to find it.
    """
    if type(value) in (str, int, bool) or value is None:  # most results: no walk
        return _unstorable_leaf(value, root)
    try:
        if plainly_storable(_compact_json(value)):  # most containers: one C-level rendering and scan
            return None
    except (TypeError, ValueError, RecursionError):
        pass  # keys json cannot write, a cycle, nesting too deep: the walk says what it finds
    return _walk_unstorable(value, root)


def _walk_unstorable(value: Any, root: str) -> str | None:
    """:func:`unstorable_part` item by item: the first unstorable item found, and its place."""
    # Each item's place is kept as a link to its container's ((container's place, key, is an index)),
    # written out as text only for the item found unstorable: most values have none, and writing
    # every place (a repr and an f-string per item) cost more than the walk itself.
    pending: list[tuple[Any, _Place]] = [(value, root)]
    seen: set[int] = set()  # a cycle stops here (the store's json.dumps says what it is)
    while pending:
        item, where = pending.pop()
        if isinstance(item, dict):
            if id(item) in seen:
                continue
            seen.add(id(item))
            for name, child in item.items():
                if isinstance(name, str) and unstorable_string(name) is not None:
                    return f"a key of {_place_text(where)}, {name!r}, holds {_bad_characters(name)}, which no database column here keeps"
                pending.append((child, (where, name, False)))
        elif isinstance(item, (list, tuple)):
            if id(item) in seen:
                continue
            seen.add(id(item))
            pending.extend((child, (where, index, True)) for index, child in enumerate(item))
        else:
            problem = _unstorable_leaf(item, where)
            if problem is not None:
                return problem
    return None


#: Where an item is in the value :func:`unstorable_part` walks: the root's name, or its container's
#: place with the item's key (a ``repr`` in brackets) or index (in brackets).
_Place = str | tuple[Any, Any, bool]


def _place_text(where: _Place) -> str:
    """A place as ``root['a'][0]``."""
    parts: list[str] = []
    while type(where) is tuple:
        where, key, is_index = where
        parts.append(f"[{key}]" if is_index else f"[{key!r}]")
    assert isinstance(where, str)
    return where + "".join(reversed(parts))


def _unstorable_leaf(item: Any, where: _Place) -> str | None:
    if isinstance(item, float):
        if math.isfinite(item):
            return None
        return f"{_place_text(where)} is the float {'NaN' if math.isnan(item) else 'infinity' if item > 0 else '-infinity'}, which JSON has no number for"
    if item is None or isinstance(item, (int, bool)):
        return None
    text = item if isinstance(item, str) else str(item)  # what default=str stores for other objects
    if unstorable_string(text) is None:
        return None
    return f"{_place_text(where)} holds {_bad_characters(text)}, which no database column here keeps"


def _bad_characters(text: str) -> str:
    return "U+0000" if "\x00" in text else "a lone surrogate"


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

    def check_new_key(self, key: str) -> None:
        """``ValueError`` if a step of this call has ``key`` already: keys name steps, once per call
        (the journal's table holds each once; a second step under one was an internal error)."""
        if self.by_key(key) is not None:
            raise ValueError(f"The step key {key!r} is used twice in this call: give each step its own key")

    @property
    def pending(self) -> list[Step]:
        return [step for step in self.steps if step.status == "pending"]
