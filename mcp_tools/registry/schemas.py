"""JSON Schema (2020-12) for tool inputs and outputs, from type hints or DRF serializers.

Type hints go through pydantic: one generated model per tool validates the
arguments (so the errors name the failing fields) and yields the schema.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import datetime
import decimal
import enum
import functools
import inspect
import json
import math
import re
import sys
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any, Callable

import orjson
import pydantic
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, create_model
from pydantic.fields import FieldInfo

from ..protocol.errors import MAX_ARGUMENT_ERRORS, InvalidArguments
from ..protocol.schemas import compile_schema, schema_errors
from .param_headers import mirrored_schema

JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


#: NumPy docstring sections after which no parameter is described (their headers have no colon);
#: "Other Parameters" goes on describing them.
_NUMPY_OTHER_SECTIONS = frozenset({
    "returns", "yields", "receives", "raises", "warns", "warnings", "see also", "notes", "references", "examples",
    "attributes", "methods",
})


def parse_param_docs(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a docstring into its summary text and per-parameter descriptions.

    Understands Google style (``Args:`` sections), Sphinx (``:param x:``) and
    NumPy (``Parameters`` + dashes) well enough for descriptions.
    """
    if not doc:
        return "", {}
    text = inspect.cleandoc(doc)
    params: dict[str, str] = {}
    for match in re.finditer(r"^\s*:param\s+(?:[\w\[\], ]+\s+)?(\w+):\s*(.+)$", text, re.M):
        params[match.group(1)] = match.group(2).strip()
    lines = text.splitlines()
    summary_lines: list[str] = []
    section: str | None = None
    current: str | None = None
    numpy = False  # a section underlined with dashes: "name : type", its description on the lines below
    for line in lines:
        stripped = line.strip()
        header = stripped.rstrip(":").lower()
        if header in {"args", "arguments", "parameters", "params", "other parameters"} and (
                stripped.endswith(":") or header in ("parameters", "other parameters")):
            section = "params"
            current = None
            continue
        if header in {"returns", "return", "raises", "yields", "examples", "example", "notes", "note"} and stripped.endswith(":"):
            section = "other"
            continue
        if numpy and stripped.lower() in _NUMPY_OTHER_SECTIONS:  # underlined, no colon: the parameters end here
            section = "other"
            continue
        if section is None:
            if stripped.startswith(":param") or stripped.startswith(":return"):
                section = "other"
                continue
            summary_lines.append(line)
            continue
        if section == "params":
            if set(stripped) <= {"-"} and stripped:
                numpy = True
                continue
            entry = re.match(r"^(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$", stripped)
            if numpy and entry and not line.startswith((" ", "\t")):
                current = entry.group(1)  # what follows the colon is the type, not the description
                continue
            if entry and (line.startswith("    ") or line.startswith("\t") or not line.startswith(" ")):
                current = entry.group(1)
                if entry.group(2):
                    params.setdefault(current, entry.group(2).strip())
                continue
            if current and stripped:
                params[current] = (params.get(current, "") + " " + stripped).strip()
    return "\n".join(summary_lines).strip(), params


#: Keywords whose value maps names (a property's, a definition's) to schemas: the names are no keywords.
SCHEMA_MAP_KEYWORDS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})


def map_subschemas(schema: dict[str, Any], convert: Callable[[Any], Any], skip: frozenset[str] = frozenset()) -> dict[str, Any]:
    """``schema``'s keywords (but ``skip``) with ``convert`` applied to each value that is or holds
    schemas: into each schema of a name-to-schema map, so a property named ``title`` or
    ``minimum`` is never read as that keyword."""
    return {
        key: {name: convert(sub) for name, sub in value.items()} if key in SCHEMA_MAP_KEYWORDS and isinstance(value, dict)
        else convert(value)
        for key, value in schema.items() if key not in skip
    }


def _strip_titles(schema: Any) -> Any:
    """Drop pydantic's generated ``title`` keys on properties: noise for models reading the schema."""
    if isinstance(schema, dict):
        cleaned = map_subschemas(schema, _strip_titles)
        props = cleaned.get("properties")
        if isinstance(props, dict):
            for prop in props.values():
                if isinstance(prop, dict):
                    prop.pop("title", None)
        return cleaned
    if isinstance(schema, list):
        return [_strip_titles(item) for item in schema]
    return schema


# -- every keyword with its JSON type ------------------------------------------------------------

#: Keywords whose value is a JSON number.
_NUMBER_KEYWORDS = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"})
#: Keywords whose value is a non-negative JSON integer.
_COUNT_KEYWORDS = frozenset({"minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties",
                             "minContains", "maxContains"})
#: Keywords whose value is a JSON instance (or, for enum/examples, a list of them), not a schema.
_INSTANCE_KEYWORDS = frozenset({"default", "const", "enum", "examples"})
#: Keywords whose value is a list of strings.
_STRING_LIST_KEYWORDS = frozenset({"required"})
#: Keywords whose value is a single string.
_STRING_KEYWORDS = frozenset({"pattern", "format", "title", "description", "$ref", "$id", "$schema", "$anchor",
                              "$comment", "contentMediaType", "contentEncoding"})


def _number(value: Any) -> int | float:
    """A JSON number from whatever a validator holds (``Decimal('0')``, a string, a callable limit)."""
    if callable(value):  # Django accepts callables as validator limits
        value = value()
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    return float(value)


def _instance(value: Any, as_string: bool) -> Any:
    """A JSON value for ``default``/``enum``/``const``/``examples``; ``as_string``: the schema's type is string-only."""
    if isinstance(value, dict):
        return {str(key): _instance(item, False) for key, item in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_instance(item, as_string) for item in value]
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, enum.Enum):
        return _instance(value.value, as_string)
    if isinstance(value, decimal.Decimal):
        # DRF writes decimals as strings unless told otherwise; the schema's type says which.
        return str(value) if as_string else _number(value)
    if isinstance(value, (int, float)):
        return str(value) if as_string and not isinstance(value, bool) else value
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)  # UUIDs, lazy translations, paths...


def _string_only(schema: dict[str, Any]) -> bool:
    kind = schema.get("type")
    return kind == "string" or (isinstance(kind, list) and "string" in kind and not {"number", "integer"} & set(kind))


def jsonable_schema(schema: Any) -> Any:
    """``schema`` with every keyword's value of its JSON type (idempotent, returns a new object).

    DRF's OpenAPI mapping copies validator limits as they are: a model's
    ``MinValueValidator(Decimal("0"))`` becomes ``minimum: Decimal('0')``, which
    the JSON encoder writes as the string ``"0"`` and a client's validator then
    refuses. Numbers become numbers, counts integers, callable limits are
    called, and instances (``default``, ``enum``...) take the JSON form the
    schema's own ``type`` expects.
    """
    if isinstance(schema, list):
        return [jsonable_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema if schema is None or isinstance(schema, (bool, int, float, str)) else _instance(schema, False)
    as_string = _string_only(schema)
    converted: dict[str, Any] = {}
    for key, value in schema.items():
        key = str(key)
        if key in SCHEMA_MAP_KEYWORDS and isinstance(value, dict):  # names, then schemas
            converted[key] = {str(name): jsonable_schema(sub) for name, sub in value.items()}
        elif key in _NUMBER_KEYWORDS and not isinstance(value, bool):
            converted[key] = _number(value)
        elif key in _COUNT_KEYWORDS:
            converted[key] = int(_number(value))
        elif key in _INSTANCE_KEYWORDS:
            converted[key] = _instance(value, as_string)
        elif key in _STRING_LIST_KEYWORDS and isinstance(value, (list, tuple, set, frozenset)):
            converted[key] = [str(item) for item in value]
        elif key in _STRING_KEYWORDS and value is not None and not isinstance(value, str):
            converted[key] = str(value)
        else:  # a schema, a map or list of schemas, or an annotation
            converted[key] = jsonable_schema(value)
    # OpenAPI 3.0 spells an exclusive bound as a boolean beside minimum/maximum; 2020-12 as the number itself.
    for exclusive, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        flag = converted.get(exclusive)
        if isinstance(flag, bool):
            del converted[exclusive]
            if flag and bound in converted:
                converted[exclusive] = converted.pop(bound)
    return converted


def openapi_to_json_schema(schema: Any) -> Any:
    """DRF's OpenAPI 3.0 schema objects as JSON Schema 2020-12 (``nullable`` becomes a ``null`` type)."""
    if isinstance(schema, list):
        return [openapi_to_json_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    converted = map_subschemas(schema, openapi_to_json_schema, skip=frozenset({"nullable"}))
    if converted.get("format") == "decimal" and converted.get("type") == "string":
        # DRF reads decimals from numbers or strings and writes strings; multipleOf on floats misleads.
        converted["type"] = ["string", "number"]
        converted.pop("multipleOf", None)
    if schema.get("nullable"):
        kind = converted.get("type")
        if isinstance(kind, str):
            converted["type"] = [kind, "null"]
        elif isinstance(kind, list) and "null" not in kind:
            converted["type"] = [*kind, "null"]
        if "enum" in converted and None not in converted["enum"]:
            converted["enum"] = [*converted["enum"], None]
    return jsonable_schema(converted)


class ArgumentsModel(BaseModel):
    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)


@dataclasses.dataclass(slots=True)
class InputSpec:
    """How a tool's arguments are validated and described."""

    schema: dict[str, Any]
    #: ``validate(arguments)``, or with ``threaded`` ``validate(arguments, context)``.
    validate: Callable[..., dict[str, Any]]
    #: Validation as a DRF view's (a serializer's): it may query the database (a relation's queryset,
    #: a ``UniqueValidator``), so it runs in a thread, and it reads the caller from ``context``
    #: (``context["request"].user``, as ``CurrentUserDefault`` does). It ran on the event loop without
    #: one: such a tool failed every call with -32603 (found by the author review).
    threaded: bool = False
    _schema_validator: Any = dataclasses.field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        # Every way of building a tool (hints, serializers, model toolsets) ends here.
        self.schema = jsonable_schema(self.schema)

    def schema_errors(self, arguments: Any) -> list[str]:
        """Why ``arguments`` (JSON values, as a client reads them) break the advertised ``schema``,
        checked as a client checks them (:mod:`mcp_tools.protocol.schemas`); empty when they fit.

        ``validate`` may check less (a model toolset's create leaves it to the serializer) or
        something else (a serializer's rules); this is what a client holds the arguments to.
        The compiled validator is kept. Raises
        :class:`~mcp_tools.protocol.schemas.InvalidSchema` if ``schema`` is no valid JSON Schema.
        """
        if self._schema_validator is None:
            self._schema_validator = compile_schema(self.schema)
        return schema_errors(self._schema_validator, arguments)


def format_validation_errors(exc: ValidationError) -> tuple[list[dict[str, Any]], int]:
    """The first :data:`MAX_ARGUMENT_ERRORS` errors of ``exc`` as argument errors
    (``[{field, message, type}]``), and how many more it has."""
    return [
        {"field": ".".join(str(part) for part in err["loc"]) or "(root)", "message": err["msg"], "type": err["type"]}
        for err in _first_errors(exc, MAX_ARGUMENT_ERRORS)
    ], max(exc.error_count() - MAX_ARGUMENT_ERRORS, 0)


def _first_errors(exc: ValidationError, limit: int) -> Sequence[Mapping[str, Any]]:
    """The first ``limit`` of pydantic's errors (as ``exc.errors()`` has them, without URL, context or input)."""
    if exc.error_count() <= limit:
        return exc.errors(include_url=False, include_context=False, include_input=False)
    # errors() has no limit: it would make a dict, a list and strings for each of thousands of
    # errors (a list of 900,000 wrong items: some 400 MB). Their JSON text is one string, of which
    # the first few are read.
    text = exc.json(include_url=False, include_context=False, include_input=False)
    decoder = json.JSONDecoder()
    first: list[dict[str, Any]] = []
    at = 1  # past the "["
    while len(first) < limit:
        error, at = decoder.raw_decode(text, at)
        first.append(error)
        at += 1  # past the ","
    return first


def _accepted_keys(model: type[BaseModel], schema: dict[str, Any]) -> frozenset[str]:
    """The argument names ``model`` takes: its properties (by alias where a field has one), its
    fields' names, and every name a field's ``validation_alias`` accepts (``AliasChoices``, the
    first key of an ``AliasPath``), so none of them counts as unknown before pydantic sees it."""
    keys = set(schema["properties"]) | set(model.model_fields)
    for field in model.model_fields.values():
        aliases = field.validation_alias
        for alias in aliases.choices if isinstance(aliases, pydantic.AliasChoices) else [aliases, field.alias]:
            first = alias.path[0] if isinstance(alias, pydantic.AliasPath) else alias
            if isinstance(first, str):
                keys.add(first)
    return frozenset(keys)


def _json_of(arguments: dict[str, Any]) -> bytes | None:
    """``arguments`` as JSON text for strict validation (what the client sent, or a caller's Python
    values: dates, UUIDs, decimals as their strings); None for a lone surrogate, which has no UTF-8."""
    try:
        return orjson.dumps(arguments)
    except (orjson.JSONEncodeError, TypeError):  # an integer past 64 bits, a value orjson does not know
        try:
            return json.dumps(arguments, ensure_ascii=False, default=str).encode()
        except (UnicodeEncodeError, ValueError, TypeError, RecursionError):
            return None


def _annotated_description(annotation: Any) -> bool:
    """Whether ``Annotated[T, Field(description=...)]`` gives the parameter a description of its own."""
    return typing.get_origin(annotation) is typing.Annotated and any(
        isinstance(meta, FieldInfo) and meta.description for meta in typing.get_args(annotation)[1:])


def input_from_signature(
    name: str,
    parameters: list[inspect.Parameter],
    hints: dict[str, Any],
    param_docs: dict[str, str],
) -> InputSpec:
    """Build a pydantic model from the handler's parameters (context excluded)."""
    fields: dict[str, Any] = {}
    for param in parameters:
        annotation = _pydantic_compatible(hints.get(param.name, Any))
        description = param_docs.get(param.name)
        if isinstance(param.default, FieldInfo):
            # ``limit: int = Field(10, ge=1)``: the field itself (its default and constraints), not a
            # default that is a FieldInfo; the docstring describes it where it does not.
            field = param.default
            if description and not field.description:
                field = FieldInfo.merge_field_infos(field, description=description)
            fields[param.name] = (annotation, field)
            continue
        default = ... if param.default is inspect.Parameter.empty else param.default
        # ``Annotated[T, Field(description=...)]`` describes itself: neither a docstring's text
        # nor an explicit ``description=None`` (which pydantic would merge over it) replaces it.
        if description and not _annotated_description(annotation):
            fields[param.name] = (annotation, Field(default, description=description))
        else:
            fields[param.name] = (annotation, Field(default))
    try:
        model = create_model(f"{_camel(name)}Arguments", __base__=ArgumentsModel, **fields)
    except (pydantic.PydanticUserError, NameError, TypeError, ValueError) as exc:
        reserved = _reserved_name(fields, exc)
        if reserved is None:
            raise
        # pydantic's own words named no way out ("model_config": "'FieldInfo' object is not iterable").
        raise ValueError(
            f"its parameter {reserved!r} has a name pydantic keeps for itself ({'a leading underscore' if reserved.startswith('_') else 'a model member'}): "
            f"rename the parameter; to keep the argument's name, annotate the renamed one "
            f"Annotated[T, Field(alias={reserved!r})]") from exc
    schema = _strip_titles(model.model_json_schema())
    schema.pop("title", None)
    schema.setdefault("properties", {})
    schema["additionalProperties"] = False
    schema = mirrored_schema(name, schema)
    field_names = list(fields)
    # A model's __dict__ holds its fields' values, in order: copied, it is the kwargs (0.2 µs
    # less than reading them one by one), unless a parameter did not become a field of
    # that name (a leading underscore makes a private attribute).
    as_dict = list(model.model_fields) == field_names

    accepted = _accepted_keys(model, schema)
    timestamps = timestamp_check(schema)
    by_name = False if _validates_by_alias(model) else None

    def validate(arguments: dict[str, Any]) -> dict[str, Any]:
        if len(arguments) > MAX_ARGUMENT_ERRORS:
            # Pydantic makes an error for each unknown key before any can be left out (some 350 B
            # each, and as many again for exc.errors()): refused here when they are more than are listed.
            unknown = [key for key in arguments if key not in accepted]
            if len(unknown) > MAX_ARGUMENT_ERRORS:
                raise InvalidArguments.unknown(name, unknown, len(unknown))
        # Strict, as JSON: a value is taken only in the JSON type the schema advertises ("5" is
        # not an integer, 1 not a boolean), and an ISO string is a date, a UUID, a Decimal, as
        # the schema's formats say. Lax validation would convert what the client got wrong.
        # By alias only (by_name=False): the schema advertises a field by its alias, and a model of the
        # project's with populate_by_name took its Python name too, past the advertised schema and
        # past an x-mcp-header on the alias (the value reached the tool with no header; a review).
        # Not for a model that validates by name only (validate_by_alias=False: its schema names
        # the field), which pydantic cannot validate so: then as its configuration says.
        text = _json_of(arguments)
        try:
            if text is not None:
                instance = model.__pydantic_validator__.validate_json(text, strict=True, by_name=by_name)
            else:  # a lone surrogate, which pydantic's JSON reader refuses: the values as they came,
                # strictly too (lax, another argument's "5" would pass as an integer; an ISO string is
                # then no date, a small price for a call that sends text with no UTF-8 form)
                instance = model.__pydantic_validator__.validate_python(arguments, strict=True, by_name=by_name)
        except ValidationError as exc:
            if text is None or not _too_deep_for_json(exc):
                errors, more = format_validation_errors(exc)
                raise InvalidArguments(name, errors, more=more) from None
            instance = _validate_deep(name, model, arguments, by_name)
        if timestamps is not None and (errors := timestamps(arguments, instance)):
            raise InvalidArguments(name, errors)
        if as_dict:
            return instance.__dict__.copy()
        return {field: getattr(instance, field) for field in field_names}

    return InputSpec(schema=schema, validate=validate)


def _validates_by_alias(model: type[BaseModel]) -> bool:
    """Whether ``model`` and every model its fields hold can be validated by alias (``by_name=False``):
    not one configured ``validate_by_alias=False``, which pydantic then refuses with a ValueError."""
    seen: set[type[BaseModel]] = set()
    pending: list[Any] = [model]
    while pending:
        current = pending.pop()
        if not isinstance(current, type) or not issubclass(current, BaseModel) or current in seen:
            for arg in typing.get_args(current):
                pending.append(arg)
            continue
        seen.add(current)
        if current.model_config.get("validate_by_alias") is False:
            return False
        pending.extend(field.annotation for field in current.model_fields.values())
    return True


def _reserved_name(fields: dict[str, Any], exc: Exception) -> str | None:
    """The parameter whose name made pydantic refuse the arguments' model: one with a leading
    underscore (never a field), ``model_config`` (the model's configuration), or a member of its
    protected ``model_`` namespace that pydantic names in ``exc`` (``model_dump``, ``model_validate``;
    ``model_fields`` and a few others it takes). None where the name is not why."""
    for field_name in fields:
        if field_name.startswith("_") or field_name == "model_config":
            return field_name
        if field_name.startswith("model_") and hasattr(BaseModel, field_name) and repr(field_name) in str(exc):
            return field_name
    return None


#: How deep pydantic's JSON reader reads (its fixed recursion limit): arguments nesting deeper
#: are validated as the Python values they were read into (:func:`_validate_deep`).
JSON_VALIDATION_DEPTH = 200
_DEEP_NOTE = (f"the arguments nest deeper than the {JSON_VALIDATION_DEPTH} levels they are validated at as JSON, so they were "
              "validated as plain values, where a string is no date, UUID, Decimal or enum member and a list no tuple or set")


def _too_deep_for_json(exc: ValidationError) -> bool:
    """Whether ``exc`` is pydantic's JSON reader stopping at its recursion limit (and nothing else):
    the transport takes arguments up to :data:`~mcp_tools.protocol.jsonrpc.MAX_DEPTH` levels, about
    50 more. Read only when validation failed: a call that passes pays nothing."""
    if exc.error_count() != 1:
        return False
    error = exc.errors(include_url=False, include_context=False, include_input=False)[0]
    return error["type"] == "json_invalid" and "recursion limit" in error["msg"]


def _validate_deep(name: str, model: type[BaseModel], arguments: dict[str, Any], by_name: bool | None) -> BaseModel:
    """``arguments`` too deep for pydantic's JSON reader validated as the values they were read into,
    strictly (as for a lone surrogate): "(root): Invalid JSON: recursion limit exceeded" refused
    arguments the transport takes. What a JSON string alone gives (a date, a UUID, an enum member, a
    tuple from a list) is then refused; the first error says why, before what pydantic found."""
    try:
        return model.__pydantic_validator__.validate_python(arguments, strict=True, by_name=by_name)
    except ValidationError as exc:
        errors, more = format_validation_errors(exc)
        raise InvalidArguments(name, [{"field": "(root)", "message": _DEEP_NOTE, "type": "json_depth"}, *errors], more=more) from None


#: The values pydantic also reads from a string of digits, strictly too ("1700000000" and "-1" as
#: seconds since the epoch for a datetime, "86400" for a date), and how it words a bad value of each.
_TIMESTAMP_ERRORS = {
    "datetime": ("datetime_parsing", "Input should be a valid datetime, an ISO 8601 string (YYYY-MM-DDTHH:MM:SS), not a timestamp"),
    "date": ("date_parsing", "Input should be a valid date in the format YYYY-MM-DD, not a timestamp"),
}
#: The schema formats of those values: a tool whose schema has neither has no check.
_TIMESTAMP_FORMATS = ("date-time", "date")
#: How an ISO 8601 (RFC 3339) date, and so a date-time, starts: what no number does.
_ISO_DATE_START = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def timestamp_check(schema: dict[str, Any]) -> Callable[[dict[str, Any], BaseModel], list[dict[str, Any]]] | None:
    """For a schema with a ``date-time`` or ``date`` anywhere: what finds, in the arguments sent and
    what pydantic made of them, each string it read as a Unix timestamp: a value it made a ``date``
    or ``datetime`` from a string that starts as no ISO date (``[{field, message, type}]``, as its
    own errors). None for any other schema: its tool pays nothing.

    JSON Schema's formats are RFC 3339's, as the schema advertises them: a client that sends
    "1700000000" for a date-time is mistaken, and is told so rather than given 2023-11-14. What
    pydantic made is compared, not the schema read: in a union it alone knows which alternative
    took the value (``str | datetime`` keeps "1700000000" as text, ``datetime | str`` reads a date).
    """
    if not _has_timestamp_format(schema):
        return None

    def check(arguments: dict[str, Any], instance: BaseModel) -> list[dict[str, Any]]:
        try:
            # The values by the names they were sent under (python mode keeps dates as dates).
            made = instance.model_dump(by_alias=True, warnings=False)
        except Exception:  # a type that cannot be dumped: pydantic's reading stands
            return []
        errors: list[dict[str, Any]] = []
        _find_timestamps(arguments, made, (), errors)
        return errors

    return check


def _has_timestamp_format(node: Any) -> bool:
    if isinstance(node, dict):
        found = node.get("format")
        return (isinstance(found, str) and found in _TIMESTAMP_FORMATS) or any(_has_timestamp_format(value) for value in node.values())
    if isinstance(node, list):
        return any(_has_timestamp_format(item) for item in node)
    return False


def _find_timestamps(sent: Any, made: Any, path: tuple[Any, ...], errors: list[dict[str, Any]]) -> None:
    """Add to ``errors`` each place where ``sent`` holds a string that is no ISO date and ``made`` (what
    pydantic made of it) a date or datetime. Objects are followed by key and lists by position;
    a key sent under another name than the one it is dumped by (a second alias choice, a field's
    own name beside its alias) is not followed: the check never refuses what it cannot pair."""
    if len(errors) >= MAX_ARGUMENT_ERRORS:
        return
    if isinstance(made, datetime.date):  # a datetime is a date too
        if isinstance(sent, str) and not _ISO_DATE_START.match(sent):
            error_type, message = _TIMESTAMP_ERRORS["datetime" if isinstance(made, datetime.datetime) else "date"]
            errors.append({"field": ".".join(str(part) for part in path) or "(root)", "message": message, "type": error_type})
    elif isinstance(sent, dict) and isinstance(made, dict):
        for key, item in sent.items():
            if key in made:
                _find_timestamps(item, made[key], (*path, key), errors)
    elif isinstance(sent, list) and isinstance(made, (list, tuple)) and len(sent) == len(made):
        for index, (item, made_item) in enumerate(zip(sent, made)):
            _find_timestamps(item, made_item, (*path, index), errors)


#: JSON Schema's types, as a JSON value of each is in Python (a bool is not an integer or number here).
_JSON_TYPE_CHECKS: dict[str, Callable[[Any], bool]] = {
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "string": lambda v: isinstance(v, str),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
    "null": lambda v: v is None,
}


def argument_type_errors(properties: dict[str, Any], arguments: dict[str, Any]) -> dict[str, list[str]]:
    """Arguments whose JSON type is not the one their property in ``properties`` advertises.

    DRF's fields convert what they are given (``1.5`` to the row id 1, ``"yes"`` to True, ``"5"``
    to 5); a client read the schema, so a value of another type is its mistake, not a value to
    guess at. The other rules (lengths, choices, formats) are the serializer's, with its messages.
    """
    errors: dict[str, list[str]] = {}
    for name, value in arguments.items():
        schema = properties.get(name)
        found = _json_type_error(schema, value, "") if isinstance(schema, dict) else None
        if found is not None:
            kinds, where = found
            errors[name] = [f"Expected {' or '.join(kinds)}{f' at {name}{where}' if where else ''}."]
    return errors


def _json_type_error(schema: dict[str, Any], value: Any, where: str) -> tuple[list[str], str] | None:
    """The first place in ``value`` whose JSON type is not the one ``schema`` advertises there (its
    ``type``, then an array's ``items`` and an object's ``properties``, as deep as they go): the types
    expected and the place (``[1]``, ``.name``), or None. Nested values too: a ``ListField(child=
    IntegerField())`` converted ``[1, "2"]`` to ``[1, 2]`` that the advertised schema refuses."""
    kinds = schema.get("type")
    if kinds is not None:
        kinds = [kinds] if isinstance(kinds, str) else list(kinds)
        if not any(_JSON_TYPE_CHECKS[kind](value) for kind in kinds if kind in _JSON_TYPE_CHECKS):
            return kinds, where
    items = schema.get("items")
    if isinstance(value, list) and isinstance(items, dict):
        for index, item in enumerate(value):
            found = _json_type_error(items, item, f"{where}[{index}]")
            if found is not None:
                return found
    nested = schema.get("properties")
    if isinstance(value, dict) and isinstance(nested, dict):
        for key, item in value.items():
            if isinstance(nested.get(key), dict):
                found = _json_type_error(nested[key], item, f"{where}.{key}")
                if found is not None:
                    return found
    return None



@functools.cache
def _mapper_class() -> type:
    from rest_framework import serializers
    from rest_framework.schemas.openapi import AutoSchema

    class FieldMapper(AutoSchema):
        """DRF's OpenAPI mapping, but a ``JSONField`` takes any JSON value (DRF says ``object``,
        and the strict type check would then refuse the lists, strings and numbers it reads), and
        the fields DRF cannot type are not called strings (DRF's fallback): a ``SerializerMethodField``
        is its method's return annotation (any JSON value without one), a ``ReadOnlyField`` (a
        model property) or a field class of the project's own is any JSON value. A client checks
        ``structuredContent`` against the schema: ``{"type": "string"}`` for a method returning an
        int made the official client refuse every result."""

        def map_field(self, field: Any) -> dict[str, Any]:
            if isinstance(field, serializers.JSONField):
                return {}
            if isinstance(field, serializers.SerializerMethodField):
                return _method_field_schema(field)
            if field.read_only and not typed_by_drf(type(field)):
                return {}  # (a writable one keeps DRF's string on input: what its to_internal_value reads)
            mapped: dict[str, Any] = super().map_field(field)
            # DRF maps a list's or a dict's child without its allow_null: [1, null] taken by the field was
            # advertised (and, checked strictly, refused) as a list of integers only.
            child = getattr(field, "child", None)
            if getattr(child, "allow_null", False):
                for key in ("items", "additionalProperties"):
                    if isinstance(mapped.get(key), dict):
                        mapped[key] = {**mapped[key], "nullable": True}
            return mapped

        def map_choicefield(self, field: Any) -> dict[str, Any]:
            mapped: dict[str, Any] = super().map_choicefield(field)
            # A text choice field with allow_blank (a model's blank=True) takes "" too, which DRF's enum
            # leaves out: the schema refused what the serializer takes.
            if getattr(field, "allow_blank", False) and mapped.get("type", "string") == "string" and "" not in mapped["enum"]:
                mapped["enum"] = [*mapped["enum"], ""]
            return mapped

    return FieldMapper


def typed_by_drf(field_class: type) -> bool:
    """Whether DRF's mapping knows what ``field_class`` writes: a DRF field class past the bare
    ``Field`` and ``ReadOnlyField`` (whose values are whatever the attribute holds), or one derived
    from such a class (a project's ``CharField`` subclass is still a string)."""
    from rest_framework import serializers

    untyped = (serializers.Field, serializers.ReadOnlyField)
    return any(klass.__module__.startswith("rest_framework.") and klass not in untyped
               for klass in field_class.__mro__ if issubclass(klass, serializers.Field))


def _method_field_schema(field: Any) -> dict[str, Any]:
    """A ``SerializerMethodField``'s schema: its method's return annotation as pydantic describes it,
    or any JSON value (no annotation, one that needs definitions, one pydantic cannot describe)."""
    method = getattr(field.parent, field.method_name, None) if getattr(field, "method_name", None) else None
    if method is None:
        return {}
    try:
        annotation = typing.get_type_hints(method).get("return")
        if annotation is None:
            return {}
        schema = TypeAdapter(annotation).json_schema(mode="serialization")
    except Exception:  # an annotation that does not resolve or describe: say nothing rather than guess
        return {}
    if "$defs" in schema or "$ref" in json.dumps(schema):
        return {}
    schema.pop("title", None)
    # The serializer's output is written by Django's JSON encoder, which writes a Decimal (what Sum() and
    # Avg() of a DecimalField give, and what "-> float" methods often return) as a string: a number
    # anywhere in the schema (an Optional's branch, a list's items) may be one.
    return dict(_numbers_also_text(schema))


def _numbers_also_text(schema: Any) -> Any:
    """``schema`` with each ``number`` / ``integer`` type, at any depth, also taking a string."""
    if isinstance(schema, list):
        return [_numbers_also_text(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    widened = {key: (value if key in ("enum", "const", "default", "examples") else _numbers_also_text(value)) for key, value in schema.items()}
    kind = widened.get("type")
    if kind in ("number", "integer"):
        widened["type"] = [kind, "string"]
    elif isinstance(kind, list) and any(k in ("number", "integer") for k in kind) and "string" not in kind:
        widened["type"] = [*kind, "string"]
    return widened


def serializer_mapper() -> Any:
    """A mapper of DRF serializers and fields to OpenAPI schemas (:func:`openapi_to_json_schema` turns
    them into JSON Schema), made lazily: DRF reads its settings on import."""
    return _mapper_class()()


def input_from_serializer(name: str, serializer_class: type) -> InputSpec:
    """Describe and validate arguments with a DRF ``Serializer`` class."""
    mapped = serializer_mapper().map_serializer(serializer_class())
    # Read-only fields are ignored on input: offering them would only mislead the model.
    properties = {
        name: {key: value for key, value in openapi_to_json_schema(prop).items() if key not in ("readOnly", "writeOnly")}
        for name, prop in mapped.get("properties", {}).items()
        if not prop.get("readOnly")
    }
    required = [name for name in mapped.get("required", []) if name in properties]
    schema = mirrored_schema(name, {"type": "object", "properties": properties, **({"required": required} if required else {})})

    def validate(arguments: dict[str, Any], context: dict[str, Any] | None = None) -> dict[str, Any]:
        mistyped = argument_type_errors(properties, arguments)
        if mistyped:  # strict as JSON, as for type-hinted tools: never converted
            errors = [{"field": field, "message": " ".join(messages), "type": "json_type"} for field, messages in mistyped.items()]
            raise InvalidArguments(name, errors)
        serializer = serializer_class(data=arguments, context=context or {})
        if not serializer.is_valid():
            errors = [
                {"field": field, "message": " ".join(str(m) for m in listed), "type": _error_code(listed)}
                for field, messages in serializer.errors.items()
                for listed in [messages if isinstance(messages, list) else [messages]]
            ]
            raise InvalidArguments(name, errors)
        return dict(serializer.validated_data)

    return InputSpec(schema=schema, validate=validate, threaded=True)


def _error_code(messages: list[Any]) -> str:
    """DRF's code of a field's first error (``invalid``, ``required``, ``max_length``...), as the
    ``type`` a pydantic error carries."""
    return str(getattr(messages[0], "code", None) or "invalid") if messages else "invalid"


@dataclasses.dataclass(slots=True)
class OutputSpec:
    """How a handler's return value becomes ``structuredContent``.

    ``mode`` is ``"text"`` (strings and unannotated values: content only),
    ``"object"`` (models, dataclasses, TypedDicts: the object itself) or
    ``"wrapped"`` (other JSON values, under a ``result`` key as the spec's
    object-typed outputSchema requires).
    """

    mode: str
    schema: dict[str, Any] | None
    adapter: TypeAdapter[Any] | None
    #: Whether a value of ``schema`` may hold a float anywhere (worked out on the first dump).
    _may_hold_float: bool | None = dataclasses.field(default=None, init=False, repr=False)
    _schema_validator: Any = dataclasses.field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.schema is not None:
            self.schema = jsonable_schema(self.schema)

    def dump(self, value: Any) -> Any:
        """``value`` as JSON for ``structuredContent``; raises where it does not match the schema, which
        ``structuredContent`` must conform to (pydantic would only warn, and send it)."""
        assert self.adapter is not None
        dumped = self.adapter.dump_python(value, mode="json", by_alias=True, warnings="error")
        try:
            self.adapter.validate_python(dumped)  # what the serializer lets through untyped (None for an int)
        except ValidationError:
            # The type's validation reads its serialized form differently from the advertised schema
            # (a serialization alias, a computed field, an excluded one): a valid result was answered as
            # an error. The advertised JSON Schema decides then (jsonschema: ~60 times pydantic's cost,
            # so not for every result).
            self.check_schema(dumped if self.mode == "object" else {"result": dumped})
        self.check_finite(dumped)
        return dumped

    def check_schema(self, structured: Any) -> None:
        """Raise ValueError unless ``structured`` (a ``structuredContent``) conforms to the advertised ``schema``."""
        assert self.schema is not None
        if self._schema_validator is None:
            self._schema_validator = compile_schema(self.schema)
        errors = schema_errors(self._schema_validator, structured, root="(result)")
        if errors:
            raise ValueError(f"the value does not match the output schema: {'; '.join(errors[:5])}")

    def check_finite(self, dumped: Any) -> None:
        """Raise ValueError where the JSON value ``dumped`` holds a float NaN or infinity.

        pydantic takes NaN and infinity for a float, as a DRF serializer does, and JSON has no
        number for them: the encoder writes null (or NaN, which no JSON reader takes), against a
        "number" in the schema. Only a schema with a number (or a place for any value) can hold
        one, so others skip the walk.
        """
        if self._may_hold_float is None:
            self._may_hold_float = self.schema is None or may_hold_float(self.schema, self.schema)
        if self._may_hold_float and not all_finite(dumped):
            raise ValueError("the value holds NaN or infinity, which is no JSON number")


def may_hold_float(schema: Any, root: dict[str, Any], seen: frozenset[str] = frozenset()) -> bool:
    """Whether a value of ``schema`` (a subschema of ``root``, whose ``$defs`` its references name) may
    hold a float anywhere in it: a ``number``, or a place for any value (no type, an object's
    ``additionalProperties: true``, an array's ``items: {}``). True when unsure (a reference elsewhere)."""
    if not isinstance(schema, dict):
        return schema is not False
    parts: list[Any] = [*schema.get("anyOf", ()), *schema.get("oneOf", ()), *schema.get("allOf", ())]
    ref = schema.get("$ref")
    if ref is not None:
        name = ref[len("#/$defs/"):] if isinstance(ref, str) and ref.startswith("#/$defs/") else None
        if name is None or name not in root.get("$defs", {}):
            return True
        if name not in seen:  # a recursive model is checked once along each path
            if may_hold_float(root["$defs"][name], root, seen | {name}):
                return True
    kinds = schema.get("type")
    if kinds is None:
        if parts or ref is not None:  # only combined or referenced schemas (the reference checked above)
            return any(may_hold_float(part, root, seen) for part in parts)
        return "enum" not in schema and "const" not in schema  # neither a type nor a constant: any value
    kinds = [kinds] if isinstance(kinds, str) else kinds
    if "number" in kinds:
        return True
    if "object" in kinds:
        properties = schema.get("properties", {})
        # pydantic leaves additionalProperties out for a model, whose dump has its fields only; an
        # object with no properties either is a dict of anything.
        parts += [*properties.values(), *schema.get("patternProperties", {}).values(),
                  schema.get("additionalProperties", "properties" not in schema)]
    if "array" in kinds:
        parts += [*schema.get("prefixItems", ()), schema.get("items", True)]
    return any(may_hold_float(part, root, seen) for part in parts)


def all_finite(value: Any) -> bool:
    """Whether every float in a JSON value (dicts, lists, scalars) is finite."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(all_finite(item) for item in value.values())
    if isinstance(value, list):
        return all(all_finite(item) for item in value)
    return True


_TEXT_TYPES = {str, type(None), inspect.Signature.empty, Any}


def _is_object_type(annotation: Any) -> bool:
    if inspect.isclass(annotation):
        if issubclass(annotation, BaseModel) or dataclasses.is_dataclass(annotation):
            return True
        if typing.is_typeddict(annotation):
            return True
    return False


def _pydantic_compatible(annotation: Any) -> Any:
    """Before Python 3.12 pydantic refuses ``typing.TypedDict``: ``annotation`` with each one in it
    rebuilt with typing_extensions, at any depth (``Addr | None``, ``list[Addr]``, a TypedDict's own
    fields). Only the top level was: ``a: list[Addr]`` was refused, and ``-> list[Addr]`` silently
    had no outputSchema. ``annotation`` itself where nothing in it needed rebuilding."""
    if sys.version_info >= (3, 12):
        return annotation
    return _rebuilt(annotation, ())


def _rebuilt(annotation: Any, seen: tuple[type, ...]) -> Any:
    """:func:`_pydantic_compatible` below 3.12; ``seen``: the TypedDicts being rebuilt around it (one
    that holds itself is left as it is, and pydantic then says what to do)."""
    if inspect.isclass(annotation):
        if not typing.is_typeddict(annotation) or annotation in seen:
            return annotation
        return _typed_dict(typing.cast(Any, annotation)) if not seen else _build_typed_dict(annotation, seen)
    args = typing.get_args(annotation)
    origin = typing.get_origin(annotation)
    if not args or origin is typing.Literal:
        return annotation
    if origin is typing.Annotated:
        base = _rebuilt(args[0], seen)
        return annotation if base is args[0] else typing.Annotated[(base, *annotation.__metadata__)]
    rebuilt = tuple(_rebuilt(arg, seen) for arg in args)
    if all(new is old for new, old in zip(rebuilt, args)):
        return annotation
    if origin in (typing.Union, types.UnionType):
        return typing.Union[rebuilt]  # noqa: UP007 - X | Y has no spelling from a tuple
    if isinstance(annotation, types.GenericAlias):  # list[X], dict[K, V], collections.abc.Sequence[X]
        return types.GenericAlias(origin, rebuilt)
    copy_with = getattr(annotation, "copy_with", None)  # typing.List[X], typing.Optional[X]...
    return copy_with(rebuilt) if copy_with is not None else annotation


@functools.cache
def _typed_dict(annotation: Any) -> Any:
    """A top-level use of ``annotation`` rebuilt once: each use is the same class, which pydantic
    would otherwise describe apart in ``$defs`` (``Addr``, ``Addr__1``...)."""
    return _build_typed_dict(annotation, ())


def _build_typed_dict(annotation: Any, seen: tuple[type, ...]) -> Any:
    import typing_extensions

    if isinstance(annotation, typing_extensions._TypedDictMeta):  # type: ignore[attr-defined]
        return annotation
    hints = typing.get_type_hints(annotation, include_extras=True)
    required: frozenset[str] = annotation.__required_keys__
    fields: dict[str, Any] = {}
    for key, hint in hints.items():
        # Which keys are required, spelled on each one: a total=False base's keys stay optional
        # under a total subclass (one ``total`` for all would make them required).
        if typing.get_origin(hint) in (typing_extensions.Required, typing_extensions.NotRequired):
            hint = typing.get_args(hint)[0]
        hint = _rebuilt(hint, (*seen, annotation))
        fields[key] = typing_extensions.Required[hint] if key in required else typing_extensions.NotRequired[hint]
    rebuilt = typing_extensions.TypedDict(annotation.__name__, fields)  # type: ignore[misc]
    rebuilt.__doc__ = annotation.__doc__
    rebuilt.__module__ = annotation.__module__
    return rebuilt


def output_from_annotation(annotation: Any) -> OutputSpec:
    annotation = _pydantic_compatible(annotation)
    if annotation in _TEXT_TYPES:
        return OutputSpec("text", None, None)
    # Results the author builds by hand (CallToolResult dicts, content lists) carry no schema.
    origin = typing.get_origin(annotation)
    try:
        from . import results

        if inspect.isclass(annotation) and issubclass(annotation, results.ToolResult) or _is_content_type(annotation):
            return OutputSpec("text", None, None)
    except ImportError:  # pragma: no cover
        pass
    try:
        adapter: TypeAdapter[Any] = TypeAdapter(annotation)
        schema = _strip_titles(adapter.json_schema(mode="serialization"))
    except (pydantic.PydanticSchemaGenerationError, pydantic.PydanticUserError, TypeError):
        return OutputSpec("text", None, None)
    if _is_object_type(annotation) or (origin is None and schema.get("type") == "object" and annotation is not dict):
        root = _object_root(schema)
        if root is not None:
            return OutputSpec("object", root, adapter)
        # A model whose JSON is no object (a RootModel of a list), or a recursive one whose schema was a
        # reference: under "result" as other values. A 2025-11-25 outputSchema must be "type": "object"
        # at its root, and the official client refused the whole tools/list over one that was not.
    defs = schema.pop("$defs", None)
    wrapped: dict[str, Any] = {"type": "object", "properties": {"result": schema}, "required": ["result"]}
    if defs:
        wrapped["$defs"] = defs
    return OutputSpec("wrapped", wrapped, adapter)


def _is_content_type(annotation: Any) -> bool:
    """Whether ``annotation`` is MCP content: an ``mcp_types`` content block or ``CallToolResult``, a union
    or a list of them. Such a tool returns its content, not a value to describe by an ``outputSchema``
    (with one, its image went out as JSON text)."""
    import mcp_types

    origin = typing.get_origin(annotation)
    if origin in (list, tuple, collections.abc.Sequence):
        return all(_is_content_type(arg) for arg in typing.get_args(annotation) if arg is not Ellipsis)
    if origin in (typing.Union, types.UnionType):
        # None and str are shaped as text mode shapes them (no content, a text block): content beside them.
        members = [arg for arg in typing.get_args(annotation) if arg not in (type(None), str)]
        return bool(members) and all(_is_content_type(arg) for arg in members)
    content = (mcp_types.TextContent, mcp_types.ImageContent, mcp_types.AudioContent, mcp_types.ResourceLink,
               mcp_types.EmbeddedResource, mcp_types.CallToolResult)
    return inspect.isclass(annotation) and issubclass(annotation, content)


def _object_root(schema: dict[str, Any]) -> dict[str, Any] | None:
    """``schema`` with ``"type": "object"`` at its root, or None. pydantic writes a recursive model as a
    reference to its own definition: that definition is inlined at the root (the references inside
    still reach it under ``$defs``)."""
    if schema.get("type") == "object":
        schema.pop("title", None)
        return schema
    ref, defs = schema.get("$ref"), schema.get("$defs")
    if set(schema) <= {"$ref", "$defs"} and isinstance(ref, str) and ref.startswith("#/$defs/") and isinstance(defs, dict):
        target = defs.get(ref[len("#/$defs/"):])
        if isinstance(target, dict) and target.get("type") == "object":
            root = {key: value for key, value in target.items() if key != "title"}
            return {**root, "$defs": defs}
    return None


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in re.split(r"[^0-9a-zA-Z]+", name) if part) or "Tool"
