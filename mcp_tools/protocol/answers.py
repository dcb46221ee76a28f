"""Checks on what a client sends back for a server request (elicitation, sampling, roots).

Answers are untrusted input: each is checked against the request it answers
before it reaches the journal, so a handler never replays garbage.
"""

from __future__ import annotations

import base64
import binascii
import functools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .formats import CHECKERS

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError

logger = logging.getLogger("mcp_tools.answers")

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
}


#: The key of a journaled step request that holds what the answer must fit beyond the request's
#: own params (a pydantic model's whole JSON schema): kept by the server, never sent.
ANSWER_SCHEMA = "answerSchema"


class InvalidAnswer(ValueError):
    """The answer does not fit the request it answers."""


def _check_value(name: str, value: Any, schema: dict[str, Any]) -> None:
    expected = schema.get("type")
    if isinstance(expected, str) and expected in _JSON_TYPES:
        ok = (isinstance(value, _JSON_TYPES[expected]) or (expected == "integer" and _whole_float(value))) and not (
            expected in ("integer", "number") and isinstance(value, bool))
        if not ok:
            raise InvalidAnswer(f"field {name!r} must be of type {expected}")
    allowed = schema.get("enum")
    if allowed is None and isinstance(schema.get("oneOf"), list):
        allowed = [item.get("const") for item in schema["oneOf"] if isinstance(item, dict) and "const" in item] or None
    if allowed is not None and expected != "array" and value not in allowed:
        raise InvalidAnswer(f"field {name!r} must be one of {allowed}")


def _whole_float(value: Any) -> bool:
    """A float with no fractional part: JSON Schema's ``integer`` (any number whose fractional part is
    zero), which clients written in languages with one number type send as ``5.0``."""
    return isinstance(value, float) and value.is_integer()


#: Keywords that assert nothing about a value (JSON Schema's annotations).
_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "$comment", "deprecated", "readOnly", "writeOnly"})
#: A field schema made of these (a scalar ``type``, ``enum``, annotations) says nothing
#: :func:`_check_value` did not check already: jsonschema would find what it found.
_CHECKED_BY_TYPE = _ANNOTATIONS | {"type", "enum"}
_SCALAR_TYPES = frozenset({"string", "integer", "number", "boolean"})
_format_checker: Any = None


def _formats() -> Any:
    """jsonschema's format checker, with the elicitation formats checked by :mod:`.formats`
    (jsonschema's own check ``uri`` and ``date-time`` only with optional packages)."""
    global _format_checker
    if _format_checker is None:  # stateless: one for the process
        from jsonschema import FormatChecker

        checker = FormatChecker()  # this instance's own copy of the known formats: registering here changes no other
        for name, check in CHECKERS.items():
            checker.checks(name)(functools.partial(_string_fits, check))
        _format_checker = checker
    return _format_checker


def _string_fits(check: Callable[[str], bool], value: Any) -> bool:
    return not isinstance(value, str) or check(value)  # a format says nothing about other types


def _check_constraints(name: str, value: Any, schema: dict[str, Any]) -> None:
    """The rest of what the field's schema says (lengths, ranges, formats, array items), by jsonschema."""
    if schema.get("type") in _SCALAR_TYPES and _CHECKED_BY_TYPE.issuperset(schema):
        return  # nothing left to check (a validator costs more than the rest of the answer's checks)
    error = _first_error(schema, value)
    if error is not None:
        raise InvalidAnswer(f"field {name!r}: {error.message}")


def _first_error(schema: dict[str, Any], value: Any) -> ValidationError | None:
    """jsonschema's first error for ``value``, or None; None too when ``schema`` cannot be read (not
    a schema, a ``$ref`` to nothing): it is the server's own, so that is not the client's fault, and
    the answer's types were checked without it."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError
    from referencing.exceptions import Unresolvable  # jsonschema's own dependency, its ref errors' base

    try:
        return next(Draft202012Validator(schema, format_checker=_formats()).iter_errors(value), None)
    except (SchemaError, Unresolvable) as exc:
        logger.warning("An answer was not checked against a schema the server cannot read: %s", exc)
        return None


def check_field(name: str, value: Any, schema: dict[str, Any]) -> None:
    """Raise :class:`InvalidAnswer` unless ``value`` fits the form field ``name`` of a ``requestedSchema``
    (its type, choices, lengths, ranges, formats): the check each field of an accepted form gets."""
    _check_value(name, value, schema)
    _check_constraints(name, value, schema)


#: What each kind of sampling content block must carry, and of which type (2025-11-25 schema).
_BLOCK_FIELDS: dict[str, dict[str, type]] = {
    "text": {"text": str},
    "image": {"data": str, "mimeType": str},
    "audio": {"data": str, "mimeType": str},
    "tool_use": {"id": str, "name": str, "input": dict},
    "tool_result": {"toolUseId": str, "content": list},
}


#: Blocks whose ``data`` is base64 (the schema's ``format: byte``).
_BINARY_BLOCKS = frozenset({"image", "audio"})


def _check_block(block: dict[str, Any]) -> None:
    """One content block of a sampling answer: a type the schema names for a model's message
    (``SamplingMessageContentBlock``, less ``tool_result``: results of tools are the user's turn, never
    the model's) with its fields, and base64 for an image's or audio's ``data``."""
    kind = block["type"]
    fields = _BLOCK_FIELDS.get(kind)
    if fields is None or kind == "tool_result":
        expected = ", ".join(sorted(k for k in _BLOCK_FIELDS if k != "tool_result"))
        raise InvalidAnswer(f"a sampling answer cannot hold a {kind!r} block (the model's blocks are: {expected})")
    for field, field_type in fields.items():
        if not isinstance(block.get(field), field_type):
            raise InvalidAnswer(f'a sampling "{kind}" block needs "{field}" of type {field_type.__name__}')
    if kind in _BINARY_BLOCKS:
        try:
            base64.b64decode(block["data"], validate=True)
        except (binascii.Error, ValueError):  # ValueError: a non-ASCII str
            raise InvalidAnswer(f'a sampling "{kind}" block\'s "data" must be base64') from None


def check_answer(method: str, params: dict[str, Any], answer: Any) -> None:
    """Raise :class:`InvalidAnswer` unless ``answer`` is a valid result for ``method``."""
    if not isinstance(answer, dict):
        raise InvalidAnswer("an answer must be a JSON object")
    if "_meta" in answer and not isinstance(answer["_meta"], dict):  # every result's (Result._meta)
        raise InvalidAnswer('"_meta" must be an object')
    if method == "elicitation/create":
        action = answer.get("action")
        if action not in ("accept", "decline", "cancel"):
            raise InvalidAnswer('an elicitation answer needs "action": accept, decline or cancel')
        if action == "accept" and params.get("mode", "form") == "form":
            content = answer.get("content", {})
            if not isinstance(content, dict):
                raise InvalidAnswer('"content" must be an object')
            schema = params.get("requestedSchema") or {}
            properties = schema.get("properties") or {}
            for required in schema.get("required") or []:
                if required not in content:
                    raise InvalidAnswer(f"required field {required!r} is missing")
            defs = schema.get("$defs")  # a dict schema an earlier release sent as given (see engine.context)
            for name, value in content.items():
                if name in properties:  # others are dropped by checked_answer, not refused
                    check_field(name, value, {**properties[name], "$defs": defs} if defs else properties[name])
        return
    if method == "sampling/createMessage":
        if answer.get("role") != "assistant":
            raise InvalidAnswer('a sampling answer needs "role": "assistant"')
        content = answer.get("content")
        blocks = content if isinstance(content, list) else [content]
        if not blocks or not all(isinstance(b, dict) and isinstance(b.get("type"), str) for b in blocks):
            raise InvalidAnswer('a sampling answer needs "content" blocks with a "type"')
        for block in blocks:
            _check_block(block)  # type: ignore[arg-type]  # each a dict with a "type" (checked above)
        if "model" in answer and not isinstance(answer["model"], str):
            raise InvalidAnswer('"model" must be a string')
        if answer.get("stopReason") is not None and not isinstance(answer["stopReason"], str):
            raise InvalidAnswer('"stopReason" must be a string')  # (null: a writer's way of leaving it out)
        return
    if method == "roots/list":
        roots = answer.get("roots")
        if not isinstance(roots, list) or not all(isinstance(r, dict) and isinstance(r.get("uri"), str) for r in roots):
            raise InvalidAnswer('a roots answer needs "roots": [{"uri": ...}]')
        if not all(r["uri"].startswith("file://") for r in roots):  # the spec: "MUST be a file:// URI"
            raise InvalidAnswer('each root\'s "uri" must be a file:// URI')
        # Root.name?: string, Root._meta?: object: handed to the handler as they are (ctx.list_roots).
        if not all(isinstance(r.get("name", ""), str) and isinstance(r.get("_meta", {}), dict) for r in roots):
            raise InvalidAnswer('a root\'s "name" must be a string and its "_meta" an object')
        return
    raise InvalidAnswer(f"no answer is expected for {method}")


def checked_answer(method: str, params: dict[str, Any], answer: Any) -> Any:
    """``answer`` checked (:func:`check_answer`), as it is journaled: a form answer without the fields
    its ``requestedSchema`` does not name. Clients send such fields (the conformance suite's does);
    a handler never sees them."""
    check_answer(method, params, answer)
    if method == "elicitation/create" and answer.get("action") == "accept" and params.get("mode", "form") == "form":
        properties = (params.get("requestedSchema") or {}).get("properties") or {}
        content = answer.get("content") or {}
        kept = {name: _as_declared(value, properties[name]) for name, value in content.items() if name in properties}
        if len(kept) != len(content) or any(kept[name] is not content[name] for name in kept):
            return {**answer, "content": kept}
    return answer


def _as_declared(value: Any, schema: Any) -> Any:
    """A form field's value as its schema's type reads it: ``5.0`` for an ``integer`` field is ``5``
    (the handler of ``age: int`` gets an int, whatever number form the client wrote). Past 64 bits too
    (``1e20``): ``int`` of a float is exact, and the journal, the tokens and the wire write any integer
    (orjson's refusal falls back to json). Kept a float, it passed this check and then failed the call
    on replay: pydantic refuses such a float for an ``int`` field (``int_parsing_size``), never the int."""
    if isinstance(schema, dict) and schema.get("type") == "integer" and _whole_float(value):
        return int(value)
    return value


def checked_step_answer(request: dict[str, Any], answer: Any) -> Any:
    """:func:`checked_answer` for a journaled step request; an accepted form answer must also fit the
    request's :data:`ANSWER_SCHEMA`, if it has one."""
    checked = checked_answer(request["method"], request.get("params", {}), answer)
    schema = request.get(ANSWER_SCHEMA)
    if schema is not None and checked.get("action") == "accept":
        error = _first_error(schema, checked.get("content") or {})
        if error is not None:
            where = "/".join(str(part) for part in error.absolute_path)
            raise InvalidAnswer(f"field {where!r}: {error.message}" if where else error.message)
    return checked


def step_type(method: str) -> str:
    """The saga step ``type`` for a client request method (seed 000)."""
    return {"elicitation/create": "elicitation", "sampling/createMessage": "sampling", "roots/list": "roots"}[method]
