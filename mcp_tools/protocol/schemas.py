"""Tool arguments checked against an advertised ``inputSchema`` (JSON Schema, with ``jsonschema``).

What a client that follows ``_meta.nextTool`` checks before the hop (seed 001), so
the server, which must send only hints that pass, and the bundled chain client
(:mod:`mcp_tools.client`) check it the same way.
"""

from __future__ import annotations

from typing import Any


class InvalidSchema(ValueError):
    """The schema itself is no valid JSON Schema (or names a type or ``$ref`` that cannot be resolved)."""


def compile_schema(schema: Any) -> Any:
    """A ``jsonschema`` validator for ``schema``: the draft its ``$schema`` names, else 2020-12.

    Raises :class:`InvalidSchema` when ``schema`` breaks its draft's meta-schema (an
    unknown ``type`` such as ``"int"``, a ``required`` that is no list), so a broken
    schema is reported as one and never surfaces as a ``jsonschema`` exception.
    """
    from jsonschema import validators
    from jsonschema.exceptions import SchemaError

    if not isinstance(schema, dict):
        raise InvalidSchema(f"a schema must be a JSON object, not {type(schema).__name__}")
    validator_class = validators.validator_for(schema, default=validators.Draft202012Validator)
    try:
        validator_class.check_schema(schema)
    except SchemaError as exc:
        raise InvalidSchema(exc.message) from None
    return validator_class(schema)


def schema_errors(validator: Any, arguments: Any, root: str = "(arguments)") -> list[str]:
    """Why ``arguments`` break the schema of ``validator`` (:func:`compile_schema`), one line per error,
    each led by the path to the value (``root`` for the value itself: a result is no arguments); empty
    when they fit. A ``$ref`` that cannot be resolved raises :class:`InvalidSchema`."""
    from jsonschema.exceptions import UnknownType
    from referencing.exceptions import Unresolvable

    try:
        errors = sorted(validator.iter_errors(arguments), key=lambda e: list(map(str, e.absolute_path)))
    except (UnknownType, Unresolvable) as exc:  # found only while validating: the meta-schema allows both
        raise InvalidSchema(str(exc).splitlines()[0]) from None
    return [f"{'.'.join(str(part) for part in error.absolute_path) or root}: {error.message}" for error in errors]
