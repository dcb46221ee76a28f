"""Tool arguments mirrored in ``Mcp-Param-*`` headers: the ``x-mcp-header`` schema annotation.

The 2026-07-28 spec (tools, x-mcp-header; transports/streamable-http, Custom Headers from Tool
Parameters) lets a property of a tool's ``inputSchema`` say ``"x-mcp-header": "Region"``: a client
then sends the argument in an ``Mcp-Param-Region`` header too, and the server checks that they agree.
The annotation is valid only on a property reached from the root through ``properties`` alone, whose
``type`` is ``"string"``, ``"integer"`` or ``"boolean"``, named by an RFC 9110 token that no other
annotation of the tool has (case-insensitively). Clients MUST drop a tool that breaks any of these
from ``tools/list`` (the official SDKs do, silently), so a tool is checked when it is built.

pydantic writes ``Optional[str]`` as ``{"anyOf": [{"type": "string"}, {"type": "null"}]}`` and an
enum or a model as a ``$ref`` into ``$defs``: no ``type`` at the property, or a property off the
``properties`` chain. :func:`mirrored_schema` rewrites those into what clients accept; the rest is refused.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from typing import Any

from django.core.exceptions import ImproperlyConfigured

ANNOTATION = "x-mcp-header"
#: The JSON types a mirrored property may have (``number`` is excluded by the spec).
HEADER_TYPES = ("string", "integer", "boolean")
#: RFC 9110 5.6.2 ``token`` (``1*tchar``): what a header name is made of.
TOKEN_RE = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")

# JSON Schema 2020-12 keywords whose subschemas are off the ``properties`` chain: an annotation under
# one of them is invalid (the official clients walk the same keywords).
_OFF_CHAIN_ONE = frozenset({"items", "additionalProperties", "unevaluatedProperties", "unevaluatedItems", "propertyNames",
                            "contains", "contentSchema", "not", "if", "then", "else"})
_OFF_CHAIN_LIST = frozenset({"oneOf", "anyOf", "allOf", "prefixItems"})
_OFF_CHAIN_MAP = frozenset({"$defs", "definitions", "patternProperties", "dependentSchemas"})
_DEFS_PREFIX = "#/$defs/"


def _mentions(node: Any) -> bool:
    """Whether ``node`` holds an ``x-mcp-header`` key anywhere."""
    if isinstance(node, dict):
        return ANNOTATION in node or any(_mentions(value) for value in node.values())
    if isinstance(node, list):
        return any(_mentions(item) for item in node)
    return False


def _target(node: dict[str, Any], defs: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The ``$defs`` entry (name, schema) a ``{"$ref": "#/$defs/Name", ...}`` schema points at."""
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith(_DEFS_PREFIX):
        name = ref[len(_DEFS_PREFIX):]
        found = defs.get(name)
        if isinstance(found, dict):
            return name, found
    return None


def _inlined(node: dict[str, Any], defs: dict[str, Any], seen: frozenset[str]) -> dict[str, Any]:
    """``node`` with the ``$ref`` it is replaced by its target (its own keywords kept beside), unless the
    target is on the way here already (a recursive model: its annotation stays off the chain)."""
    target = _target(node, defs)
    if target is None or target[0] in seen:
        return node
    rest = {key: value for key, value in node.items() if key != "$ref"}
    # Without the definition's title (the class name), as pydantic's titles are dropped elsewhere.
    inlined = {key: value for key, value in copy.deepcopy(target[1]).items() if key != "title"}
    return {**inlined, **rest}


def _unwrapped_optional(prop: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """An annotated ``T | None`` property (T a header type) as ``type: T``.

    No JSON Schema has ``type: "string"`` and admits null, and the clients read the ``type`` keyword
    only. The argument stays optional (it is not required) and the tool's validation still takes
    null, which the spec treats as absent (no header); the schema just no longer offers null.
    """
    kind = prop.get("type")
    if isinstance(kind, list) and "null" in kind:  # DRF's nullable fields: ["string", "null"]
        others = [item for item in kind if item != "null"]
        if len(others) == 1 and others[0] in HEADER_TYPES:
            prop = {**prop, "type": others[0]}
            if isinstance(prop.get("enum"), list):
                prop["enum"] = [item for item in prop["enum"] if item is not None]
            if prop.get("default", ...) is None:
                del prop["default"]
        return prop
    branches = prop.get("anyOf")
    if kind is not None or not isinstance(branches, list) or len(branches) != 2 or {"type": "null"} not in branches:
        return prop
    other = branches[0] if branches[1] == {"type": "null"} else branches[1]
    if not isinstance(other, dict):
        return prop
    other = _inlined(other, defs, frozenset())
    if other.get("type") not in HEADER_TYPES or _target(other, defs) is not None:
        return prop
    rest = {key: value for key, value in prop.items() if key != "anyOf" and not (key == "default" and value is None)}
    return {**other, **rest}


def _rewritten(node: dict[str, Any], defs: dict[str, Any], seen: frozenset[str]) -> dict[str, Any]:
    """``node`` (on the ``properties`` chain) with the properties that lead to an annotation inlined and
    its annotated ``T | None`` properties unwrapped."""
    properties = node.get("properties")
    if not isinstance(properties, dict):
        return node
    rewritten: dict[str, Any] = {}
    for name, prop in properties.items():
        if isinstance(prop, dict):
            target = _target(prop, defs)
            if target is not None and (ANNOTATION in prop or _mentions(target[1])):
                prop = _rewritten(_inlined(prop, defs, seen), defs, seen | {target[0]})
            elif _mentions(prop):
                prop = _rewritten(prop, defs, seen)
            if ANNOTATION in prop:
                prop = _unwrapped_optional(prop, defs)
        rewritten[name] = prop
    return {**node, "properties": rewritten}


def _refs(node: Any) -> Iterator[str]:
    """The ``$defs`` names that ``node``'s ``$ref`` keywords point at."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str) and value.startswith(_DEFS_PREFIX):
                yield value[len(_DEFS_PREFIX):]
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)


def _without_unused_defs(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` without the ``$defs`` entries nothing refers to any more (inlined ones would
    otherwise keep their annotation off the chain, and make the tool invalid)."""
    defs = schema.get("$defs")
    if not isinstance(defs, dict):
        return schema
    used: set[str] = set()
    pending = list(_refs({key: value for key, value in schema.items() if key != "$defs"}))
    while pending:
        name = pending.pop()
        if name not in used and name in defs:
            used.add(name)
            pending.extend(_refs(defs[name]))
    kept = {name: sub for name, sub in defs.items() if name in used}
    rest = {key: value for key, value in schema.items() if key != "$defs"}
    return {**rest, "$defs": kept} if kept else rest


def _positions(schema: Any) -> Iterator[tuple[tuple[str, ...] | None, str, dict[str, Any]]]:
    """Every subschema of ``schema``, in document order, with its chain of ``properties`` names from
    the root (None once the way there crosses another keyword; the root's is ``()``) and its JSON pointer."""
    stack: list[tuple[tuple[str, ...] | None, str, Any]] = [((), "", schema)]
    while stack:
        path, pointer, node = stack.pop()
        if not isinstance(node, dict):
            continue
        yield path, pointer, node
        children: list[tuple[tuple[str, ...] | None, str, Any]] = []
        for key, value in node.items():
            at = f"{pointer}/{key}"
            if key == "properties" and isinstance(value, dict):
                children.extend(((*path, name) if path is not None else None, f"{at}/{name}", sub) for name, sub in value.items())
            elif key in _OFF_CHAIN_ONE:
                children.append((None, at, value))
            elif key in _OFF_CHAIN_LIST and isinstance(value, list):
                children.extend((None, f"{at}/{index}", sub) for index, sub in enumerate(value))
            elif key in _OFF_CHAIN_MAP and isinstance(value, dict):
                children.extend((None, f"{at}/{name}", sub) for name, sub in value.items())
        stack.extend(reversed(children))


def annotation_errors(schema: Any) -> list[str]:
    """Why the ``x-mcp-header`` annotations of ``schema`` (a tool's ``inputSchema``) break the spec's
    rules, one line each, in schema order; empty when they are all valid (or there are none)."""
    errors: list[str] = []
    seen: dict[str, str] = {}
    for path, pointer, node in _positions(schema):
        if ANNOTATION not in node:
            continue
        header = node[ANNOTATION]
        if not path:
            errors.append(f"{ANNOTATION} {header!r} at {pointer or '/'!r}: only a property reached through 'properties' "
                          "alone may carry one (not the root, nor a schema under anyOf/oneOf/allOf, items, "
                          "additionalProperties or $defs: where an Optional model, a list or a recursive model puts it)")
            continue
        where = f"property {'.'.join(path)!r}"
        if not isinstance(header, str) or not TOKEN_RE.fullmatch(header):
            errors.append(f"{ANNOTATION} {header!r} on {where}: the header name must be an RFC 9110 token "
                          "(letters, digits and !#$%&'*+-.^_`|~; no spaces)")
            continue
        kind = node.get("type")
        if kind not in HEADER_TYPES:
            why = ("'number' (a float), which the spec excludes" if kind == "number"
                   else "missing (a union: of unions only T | None is taken, T one of the three)" if kind is None
                   else repr(kind))
            errors.append(f"{ANNOTATION} {header!r} on {where}: only a string, integer or boolean property may be "
                          f"mirrored in a header, and its type is {why}")
            continue
        other = seen.setdefault(header.lower(), where)
        if other != where:
            errors.append(f"{ANNOTATION} {header!r} on {where}: {other} has the same header name (case-insensitively)")
    return errors


def mirrored_schema(tool_name: str, schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` (a tool's ``inputSchema``) with its ``x-mcp-header`` properties as clients accept them.

    An annotated ``T | None`` property (T: str, int, bool) becomes ``type: T``, and a ``$ref`` on the
    way to an annotation is inlined (an enum, a nested model), so pydantic's forms of an ordinary
    signature pass. Raises :class:`~django.core.exceptions.ImproperlyConfigured`, naming the tool,
    the property and the reason, for annotations still invalid: the official clients would drop the
    tool from ``tools/list`` without a word. A schema without annotations is returned as it is.
    """
    if not _mentions(schema):
        return schema
    defs = schema.get("$defs")
    schema = _without_unused_defs(_rewritten(schema, defs if isinstance(defs, dict) else {}, frozenset()))
    errors = annotation_errors(schema)
    if errors:
        raise ImproperlyConfigured(f"Tool {tool_name!r} cannot be listed to 2026-07-28 clients: " + "; ".join(errors))
    return schema


def header_properties(schema: dict[str, Any]) -> tuple[tuple[tuple[str, ...], str], ...]:
    """``(path, header name)`` of each property that ``schema`` mirrors in an ``Mcp-Param-*`` header,
    ``path`` being the chain of ``properties`` names from the root (one name for a top-level argument),
    in schema order."""
    found: list[tuple[tuple[str, ...], str]] = []

    def walk(node: dict[str, Any], path: tuple[str, ...]) -> None:
        properties = node.get("properties")
        if not isinstance(properties, dict):
            return
        for name, prop in properties.items():
            if isinstance(prop, dict):
                header = prop.get(ANNOTATION)
                if isinstance(header, str) and header:
                    found.append(((*path, name), header))
                walk(prop, (*path, name))

    walk(schema, ())
    return tuple(found)
