"""The registry of tools, resources and prompts, and the decorators that fill it.

Like ``django.contrib.admin.site``: one default :data:`registry`, filled at
import time by decorators and by autodiscovery of each app's ``mcp_tools.py``.
Registering a name twice raises :class:`AlreadyRegistered` before anything
changes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import functools
import inspect
import json
import re
import types
import typing
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any, overload
from urllib.parse import unquote

from django.core.exceptions import ImproperlyConfigured
from django.utils.functional import Promise
import pydantic
from pydantic import BaseModel, TypeAdapter

from ..engine.context import ToolContext
from ..engine.wrapped import call_async, wraps_a_coroutine_function
from ..protocol.errors import invalid_params
from . import results
from .param_headers import header_properties
from .schemas import (
    InputSpec, OutputSpec, _pydantic_compatible, input_from_serializer, input_from_signature, output_from_annotation, parse_param_docs,
)

NAME_RE = re.compile(r"^[A-Za-z0-9_.\-/]{1,128}$")
#: What a resource template's ``{name}`` and ``{+name}`` variables match in a URI.
_VARIABLE = r"[^/\x00-\x20\x7f]+"
_RESERVED_VARIABLE = r"[^\x00-\x20\x7f]+"


class AlreadyRegistered(Exception):
    """A tool, resource or prompt with this name is registered already."""


class NotRegistered(Exception):
    """No tool, resource or prompt with this name is registered."""


def _context_param(fn: Callable[..., Any], hints: dict[str, Any]) -> str | None:
    for param in _parameters(fn):
        if is_context_hint(hints.get(param.name)):
            return param.name
    return None


def is_context_hint(annotation: Any) -> bool:
    """Whether a parameter annotated so receives the call's context: ``ToolContext`` (or a subclass), also
    as ``ToolContext | None`` (a function its author also calls directly) or inside ``Annotated``. Those
    were taken for an argument, and the tool could not be registered (pydantic has no schema for it)."""
    if typing.get_origin(annotation) is typing.Annotated:
        return is_context_hint(typing.get_args(annotation)[0])
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        others = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        return len(others) == 1 and is_context_hint(others[0])
    return inspect.isclass(annotation) and issubclass(annotation, ToolContext)


def _result_type(annotation: Any) -> Any:
    """The type a tool's results are shaped as: ``T`` of ``Page[T]``, and ``T`` of ``T | Pending``."""
    if typing.get_origin(annotation) is results.Page:
        return typing.get_args(annotation)[0]
    args = typing.get_args(annotation)
    if args and results.Pending in args and typing.get_origin(annotation) in (typing.Union, types.UnionType):
        rest = [arg for arg in args if arg is not results.Pending]
        return rest[0] if len(rest) == 1 else typing.Union[tuple(rest)]  # noqa: UP007
    return annotation


def _hints(fn: Callable[..., Any]) -> dict[str, Any]:
    try:
        return typing.get_type_hints(_described(fn), include_extras=True)
    except Exception as exc:  # a hint that does not resolve is a programming error: say which
        raise TypeError(f"Cannot resolve the type hints of {_qualified(fn)}: {exc}") from exc


# A tool, prompt or resource may be a callable object (an instance of a class with ``__call__``) or a
# ``functools.partial``, not only a function: each failed at registration with an AttributeError
# (``__qualname__``, ``__name__``), raised while the registry built its own message (found by the
# author review). Its hints, docstring and name are read from what it runs.
def _unwrapped(fn: Any) -> Any:
    """``fn``, or the callable a ``functools.partial`` (nested too) calls, or a ``staticmethod``'s function
    (``@tool`` above ``@staticmethod`` in a class body: an async one was taken for sync, and its coroutine,
    never awaited, was the tool's result)."""
    while isinstance(fn, (functools.partial, staticmethod)):
        fn = fn.func if isinstance(fn, functools.partial) else fn.__func__
    return fn


def _is_callable_object(fn: Any) -> bool:
    return callable(fn) and not inspect.isroutine(fn) and not inspect.isclass(fn)


def _described(fn: Any) -> Any:
    """What holds ``fn``'s type hints: a function or method itself, a callable object's ``__call__``, unless
    the object wraps a function (``functools.update_wrapper``, as a decorator written as a class does): it
    has that function's hints, as ``inspect.signature`` has its parameters (read from ``__call__``'s
    ``*args, **kwargs``, such a tool lost its argument types and output schema; found by the revB review)."""
    target = _unwrapped(fn)
    return type(target).__call__ if _is_callable_object(target) and not hasattr(target, "__wrapped__") else target


def _callable_name(fn: Any) -> str:
    """The name ``fn`` is registered by when none is given: its function's, or a callable object's class's."""
    target = _unwrapped(fn)
    return str(getattr(target, "__name__", None) or type(target).__name__)


def _callable_doc(fn: Any) -> str | None:
    """``fn``'s docstring: its function's (not ``functools.partial``'s own), a callable object's class's or ``__call__``'s."""
    target = _unwrapped(fn)
    return getattr(target, "__doc__", None) or (getattr(_described(fn), "__doc__", None) if _is_callable_object(target) else None)


def _qualified(fn: Any) -> str:
    """``module.qualname`` of ``fn`` (of its function, or its class) for messages."""
    target = _unwrapped(fn)
    owner = type(target) if _is_callable_object(target) else target
    return f"{getattr(owner, '__module__', '?')}.{getattr(owner, '__qualname__', owner)}"


def _is_async(fn: Any) -> bool:
    target = _unwrapped(fn)
    return (inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(_described(fn))
            or (_is_callable_object(target) and inspect.iscoroutinefunction(type(target).__call__))
            # A sync wrapper (functools.wraps) of an async def: taken for sync, it ran in a thread and
            # answered "<coroutine object ...>"; it runs as the async function it wraps (engine.wrapped).
            or wraps_a_coroutine_function(target))


def _parameters(fn: Any) -> list[inspect.Parameter]:
    """``fn``'s parameters, without those a ``functools.partial`` gives by keyword: the author's values,
    which its signature still lists (keyword parameters with a default) and a client must not replace."""
    given = fn.keywords if isinstance(fn, functools.partial) else {}
    return [param for param in inspect.signature(fn).parameters.values() if param.name not in given]


#: How a tool's OAuth scope appears among its permissions (checked by ``Principal.has_perms``).
SCOPE_PERMISSION_PREFIX = "oauth-scope:"


@dataclasses.dataclass(eq=False)
class Tool:
    """A registered tool: its wire description and how to run it."""

    name: str
    fn: Callable[..., Any]
    title: str | None
    description: str
    input: InputSpec
    output: OutputSpec
    annotations: dict[str, Any] | None
    permissions: tuple[str, ...]
    context_param: str | None
    is_async: bool
    background: bool = False
    #: OAuth scopes a bearer token must carry to see and call the tool (docs/oauth.md). They
    #: are also in ``permissions`` as ``oauth-scope:<scope>`` entries, so every permission
    #: gate (tools/list, tools/call, nextTool, sampling) enforces them.
    scopes: tuple[str, ...] = ()
    task_support: str = "forbidden"
    #: Background work: the Celery queue, a time limit in seconds, and a retry policy
    #: (exceptions that retry the call, how often, and the first delay, doubled each time).
    #: The time limit also bounds a run by the sampling loop (``ctx.sample(tools=...)``).
    queue: str | None = None
    time_limit: float | None = None
    retry_on: tuple[type[BaseException], ...] = ()
    max_retries: int = 0
    retry_backoff: float = 1.0
    #: A paginated tool returns a ``Page``; each answer carries the token of the next one.
    paginate: bool = False
    meta: dict[str, Any] | None = None
    icons: list[dict[str, Any]] | None = None
    thread_sensitive: bool = True
    _wire: dict[str, Any] | None = dataclasses.field(default=None, repr=False)
    _param_headers: tuple[tuple[tuple[str, ...], str], ...] | None = dataclasses.field(default=None, repr=False)

    @property
    def param_headers(self) -> tuple[tuple[tuple[str, ...], str], ...]:
        """``(path, header name)`` of the arguments the schema mirrors in ``Mcp-Param-*`` headers
        (``x-mcp-header``), ``path`` being the chain of property names (nested ones too), in schema
        order; read from the schema once, like :meth:`to_wire`."""
        if self._param_headers is None:
            self._param_headers = header_properties(self.input.schema)
        return self._param_headers

    def to_wire(self) -> dict[str, Any]:
        """The ``Tool`` object of ``tools/list`` (built once)."""
        if self._wire is None:
            wire: dict[str, Any] = {"name": self.name, "description": self.description, "inputSchema": self.input.schema}
            if self.title:
                wire["title"] = self.title
            if self.output.schema is not None:
                wire["outputSchema"] = self.output.schema
            if self.annotations:
                wire["annotations"] = self.annotations
            if self.task_support != "forbidden":
                wire["execution"] = {"taskSupport": self.task_support}
            if self.icons:
                wire["icons"] = self.icons
            if self.meta:
                wire["_meta"] = self.meta
            self._wire = wire
        return self._wire

    def validate_arguments(self, arguments: Any, context: dict[str, Any] | None = None) -> dict[str, Any]:
        """The handler's keyword arguments from a call's ``arguments`` (None is ``{}``). A ``threaded``
        input (a serializer's) is validated with ``context``, in a thread: ``server.core.tool_arguments``.

        Raises :class:`~mcp_tools.protocol.errors.InvalidArguments` where they fail the tool's
        validation, and a plain -32602 :class:`~mcp_tools.protocol.errors.McpError` where they are
        no object (a request the ``CallToolRequest`` schema refuses).
        """
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise invalid_params(f"Invalid arguments for tool {self.name!r}: arguments must be an object")
        return self.input.validate(arguments, context) if self.input.threaded else self.input.validate(arguments)

    def shape_result(self, value: Any) -> dict[str, Any]:
        """Turn a handler's return value into a ``CallToolResult`` dict."""
        value = results.lazy_text(value)
        if isinstance(value, results.ToolResult):
            # Hand-built results (every model tool's) carry no NaN or infinity, which no outputSchema's
            # number admits. Not checked against the whole schema: a model tool's schema says what its
            # fields declare (a max_length), which rows need not keep (SQLite stores longer text).
            if value.structured_content is not None and self.output.schema is not None:
                self.output.check_finite(value.structured_content)
            return value.to_wire()
        if self.output.mode == "text" or self.output.adapter is None:
            if isinstance(value, str):
                return {"content": [{"type": "text", "text": value}]}
            if value is None:
                return {"content": []}
            # Content the author built: a whole CallToolResult dict, blocks, or one block. Only what
            # is one (a row with a "type" column, a dict with a "content" list, is a JSON value).
            whole = results.call_tool_result(value)
            if whole is not None:
                return whole
            blocks = results.content_blocks(value)
            if blocks is None and isinstance(value, BaseModel):
                block = results.content_block(value)
                blocks = None if block is None else [block]
            if blocks is not None:
                return {"content": blocks}
            return {"content": [{"type": "text", "text": results.json_text(value)}]}
        dumped = self.output.dump(value)
        structured = dumped if self.output.mode == "object" else {"result": dumped}
        return {"content": [{"type": "text", "text": results.json_text(dumped)}], "structuredContent": structured}


@dataclasses.dataclass(eq=False)
class Resource:
    """A registered resource (fixed ``uri``) or resource template (``uri_template``)."""

    uri: str | None
    uri_template: str | None
    name: str
    title: str | None
    description: str | None
    mime_type: str | None
    fn: Callable[..., Any]
    is_async: bool
    permissions: tuple[str, ...]
    completions: dict[str, Callable[..., Any]]
    annotations: dict[str, Any] | None = None
    #: ``ttlMs`` of its 2026-07-28 ``resources/read`` results: how long a client may reuse one.
    cache_ttl_ms: int = 0
    #: The parameter annotated :class:`~mcp_tools.ToolContext`, if any (a resource that asks, as prompts may).
    context_param: str | None = None
    #: How a template variable's text becomes the value its parameter's hint names (as a prompt's
    #: arguments, :attr:`Prompt.converters`); variables of ``str`` (or no) hint are not here.
    converters: dict[str, TypeAdapter[Any]] = dataclasses.field(default_factory=dict)
    _pattern: re.Pattern[str] | None = None

    def __post_init__(self) -> None:
        if self.uri_template:
            pattern = ""
            for part in re.split(r"(\{[^}]+\})", self.uri_template):
                if part.startswith("{") and part.endswith("}"):
                    var = part[2:-1] if part.startswith("{+") else part[1:-1]
                    # {?q}, {/path}, {a,b}: RFC 6570 levels 3 and 4; {#frag} (level 2) too, whose
                    # expansion adds a "#" that a {name} pattern would neither require nor strip.
                    if not var.isidentifier():
                        raise ImproperlyConfigured(
                            f"Resource template {self.uri_template!r}: {part} is not supported; use {{name}} or {{+name}} variables"
                        )
                    if f"(?P<{var}>" in pattern:  # else re's "redefinition of group name", naming no resource
                        raise ImproperlyConfigured(f"Resource template {self.uri_template!r}: the variable {var!r} appears twice")
                    # A URI has no spaces or control characters (RFC 3986): an expansion never gives one,
                    # so a variable does not match one; {name} also stops at "/", which it would encode.
                    pattern += f"(?P<{var}>{_VARIABLE if not part.startswith('{+') else _RESERVED_VARIABLE})"
                else:
                    pattern += re.escape(part)
            # Matched with fullmatch: "$" would also match before a final newline.
            self._pattern = re.compile(pattern)

    def match(self, uri: str) -> dict[str, Any] | None:
        if self._pattern is None:
            return None
        found = self._pattern.fullmatch(uri)
        if found is None:
            return None
        # A client expands a variable percent-encoded (RFC 6570): the handler gets the value itself.
        values = {name: unquote(value) for name, value in found.groupdict().items()}
        if any("\x00" in value for value in values.values()):
            # "%00": no resource has it (no column can store it; PostgreSQL refused the handler's
            # query with an internal error, SQLite the value when the call was kept; found by a review).
            return None
        return self._converted(values)

    def _converted(self, values: dict[str, str]) -> dict[str, Any] | None:
        """The variables read as their parameters' hints say (``{pk}`` of ``pk: int`` is an int: it
        was the string, found by the author review); None when a hint refuses its value, which then
        names no resource of this template (a later one may serve it, as with Django's path converters)."""
        converted: dict[str, Any] = dict(values)
        for name, adapter in self.converters.items():
            if name in values:
                try:
                    converted[name] = adapter.validate_python(values[name])
                except pydantic.ValidationError:
                    return None
                if _date_read_from_number(values[name], converted[name]):
                    return None
        return converted

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {"name": self.name}
        if self.uri is not None:
            wire["uri"] = self.uri
        else:
            wire["uriTemplate"] = self.uri_template
        if self.title:
            wire["title"] = self.title
        if self.description:
            wire["description"] = self.description
        if self.mime_type:
            wire["mimeType"] = self.mime_type
        if self.annotations:
            wire["annotations"] = self.annotations
        return wire


@dataclasses.dataclass(eq=False)
class Prompt:
    name: str
    title: str | None
    description: str | None
    fn: Callable[..., Any]
    is_async: bool
    arguments: list[dict[str, Any]]
    permissions: tuple[str, ...]
    completions: dict[str, Callable[..., Any]]
    context_param: str | None = None
    #: How the string an argument is sent as becomes the value its parameter's hint names (an
    #: ``int``, a ``bool``, a ``Literal``...): arguments of ``str`` (or no) hint are not here.
    converters: dict[str, TypeAdapter[Any]] = dataclasses.field(default_factory=dict)

    def convert_arguments(self, arguments: dict[str, str]) -> dict[str, Any]:
        """The prompt's keyword arguments from the strings ``prompts/get`` sent, each read as its
        parameter's hint says (lax, as a form's text: ``"5"`` is 5, ``"true"`` True); a value that is
        none is ``-32602`` naming the argument. A prompt's arguments are strings on the wire: its
        ``n: int`` got ``"5"``, and ``"abc"`` reached it too."""
        if not self.converters:
            return arguments
        converted: dict[str, Any] = dict(arguments)
        errors: list[dict[str, Any]] = []
        for name, value in arguments.items():
            adapter = self.converters.get(name)
            if adapter is None:
                continue
            try:
                converted[name] = adapter.validate_python(value)
                if _date_read_from_number(value, converted[name]):
                    # pydantic read "1700000000" (or "0") as a Unix timestamp; a prompt's date is ISO text
                    # (docs/protocol.md), as a tool's is (found by a review). Only when a date is what it became:
                    # an int | date argument's "5" is the int.
                    del converted[name]
                    errors.append({"field": name, "message": "Input should be an ISO 8601 date or time, not a number", "type": "iso_required"})
                    continue
            except pydantic.ValidationError as exc:
                if isinstance(value, str) and not value.strip() and _takes_none(adapter):
                    # A form's field the user left blank (the Inspector sends ""): the optional argument's
                    # None, not "Input should be a valid integer" (found by a review).
                    converted[name] = None
                    continue
                errors += [{"field": ".".join([name, *(str(part) for part in err["loc"])]), "message": err["msg"], "type": err["type"]}
                           for err in exc.errors(include_url=False, include_context=False, include_input=False)]
        if errors:
            raise invalid_params(
                f"Invalid arguments for prompt {self.name!r}: " + "; ".join(f"{error['field']}: {error['message']}" for error in errors),
                {"errors": errors})
        return converted

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {"name": self.name, "arguments": self.arguments}
        if self.title:
            wire["title"] = self.title
        if self.description:
            wire["description"] = self.description
        return wire


class Registry:
    """Tools, resources and prompts by name. Use the module-level :data:`registry`."""

    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}
        self._resources: dict[str, Resource] = {}
        self._templates: dict[str, Resource] = {}
        self._prompts: dict[str, Prompt] = {}
        self._listeners: list[Callable[[str], None]] = []

    # -- tools ---------------------------------------------------------
    def register_tool(self, tool: Tool) -> Tool:
        if not NAME_RE.match(tool.name):
            raise ValueError(f"Invalid tool name {tool.name!r}: use 1-128 letters, digits, '_', '-', '.' or '/'")
        if tool.name in self._tools:
            existing = self._tools[tool.name].fn
            raise AlreadyRegistered(
                f"A tool named {tool.name!r} is registered already (by {_qualified(existing)})"
            )
        self._tools[tool.name] = tool
        self._changed("tools")
        return tool

    def unregister_tool(self, name: str) -> None:
        if self._tools.pop(name, None) is None:
            raise NotRegistered(f"No tool named {name!r}")
        self._changed("tools")

    def get_tool(self, name: str) -> Tool | None:
        return self._tools.get(name)

    @property
    def tools(self) -> list[Tool]:
        return list(self._tools.values())

    def registered_for(self, fn: Callable[..., Any]) -> Tool | None:
        """The registered tool whose function is ``fn`` (what ``@tool`` left in its module), if any: equal
        to it (a bound method is a new object at each access, equal to the one registered), or what
        ``fn`` wraps (a decorator applied after ``@tool``). A function registered under several names
        is ambiguous: ``ValueError``, name the tool instead."""
        wrapped = getattr(fn, "__wrapped__", None)
        found = [tool for tool in self._tools.values() if tool.fn == fn or (wrapped is not None and tool.fn == wrapped)]
        if len(found) > 1:
            raise ValueError(f"{getattr(fn, '__qualname__', fn)!r} is registered as several tools "
                             f"({', '.join(sorted(tool.name for tool in found))}): name the one to offer")
        return found[0] if found else None

    def resolve_tools(self, items: Sequence[Any]) -> list[Tool]:
        """Registered tool names, :class:`Tool` objects or plain functions, as :class:`Tool` objects.

        What ``ctx.sample(tools=...)`` accepts; an unknown name is a programming error. A function
        registered as a tool (``@tool`` returns the function itself) is that tool, with its name,
        permissions, scopes and options: made a tool of anew, it was offered to a caller its
        permissions refuse, ran inline though ``background=True``, and went by its function's name.
        """
        resolved: list[Tool] = []
        for item in items:
            if isinstance(item, Tool):
                resolved.append(item)
            elif isinstance(item, str):
                found = self.get_tool(item)
                if found is None:
                    raise ValueError(f"ctx.sample(tools=...) names unknown tool {item!r}")
                resolved.append(found)
            elif callable(item):
                resolved.append(self.registered_for(item) or make_tool(item))
            else:
                raise TypeError(f"ctx.sample(tools=...) cannot use {item!r}")
        return resolved

    # -- resources -----------------------------------------------------
    def register_resource(self, resource: Resource) -> Resource:
        table = self._resources if resource.uri is not None else self._templates
        key = resource.uri or resource.uri_template or ""
        if key in table:
            raise AlreadyRegistered(f"A resource {key!r} is registered already")
        table[key] = resource
        self._changed("resources")
        return resource

    def unregister_resource(self, uri_or_template: str) -> None:
        if self._resources.pop(uri_or_template, None) is None and self._templates.pop(uri_or_template, None) is None:
            raise NotRegistered(f"No resource {uri_or_template!r}")
        self._changed("resources")

    @property
    def resources(self) -> list[Resource]:
        return list(self._resources.values())

    @property
    def resource_templates(self) -> list[Resource]:
        return list(self._templates.values())

    def get_resource(self, uri: str) -> Resource | None:
        """The resource registered at the fixed ``uri`` (not a template's match: :meth:`find_resource`)."""
        return self._resources.get(uri)

    def find_resource(self, uri: str) -> tuple[Resource, dict[str, Any]] | None:
        resource = self._resources.get(uri)
        if resource is not None:
            return resource, {}
        for template in self._templates.values():
            params = template.match(uri)
            if params is not None:
                return template, params
        return None

    def get_template(self, uri_template: str) -> Resource | None:
        return self._templates.get(uri_template)

    # -- prompts -------------------------------------------------------
    def register_prompt(self, prompt: Prompt) -> Prompt:
        if prompt.name in self._prompts:
            raise AlreadyRegistered(f"A prompt named {prompt.name!r} is registered already")
        self._prompts[prompt.name] = prompt
        self._changed("prompts")
        return prompt

    def unregister_prompt(self, name: str) -> None:
        if self._prompts.pop(name, None) is None:
            raise NotRegistered(f"No prompt named {name!r}")
        self._changed("prompts")

    def get_prompt(self, name: str) -> Prompt | None:
        return self._prompts.get(name)

    @property
    def prompts(self) -> list[Prompt]:
        return list(self._prompts.values())

    # -- change notifications -------------------------------------------
    def add_listener(self, listener: Callable[[str], None]) -> None:
        self._listeners.append(listener)

    def remove_listener(self, listener: Callable[[str], None]) -> None:
        with contextlib.suppress(ValueError):
            self._listeners.remove(listener)

    def _changed(self, kind: str) -> None:
        for listener in list(self._listeners):
            listener(kind)

    @contextlib.contextmanager
    def registered_temporarily(self, *items: Tool | Resource | Prompt) -> Iterator[None]:
        """Register items for the duration of a ``with`` block (for tests)."""
        done: list[Tool | Resource | Prompt] = []
        try:
            for item in items:
                if isinstance(item, Tool):
                    self.register_tool(item)
                elif isinstance(item, Resource):
                    self.register_resource(item)
                else:
                    self.register_prompt(item)
                done.append(item)
            yield
        finally:
            for item in reversed(done):
                if isinstance(item, Tool):
                    self.unregister_tool(item.name)
                elif isinstance(item, Resource):
                    self.unregister_resource(item.uri or item.uri_template or "")
                else:
                    self.unregister_prompt(item.name)


registry = Registry()


def make_tool(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    title: str | None = None,
    description: str | None = None,
    annotations: dict[str, Any] | None = None,
    permissions: typing.Iterable[str] = (),
    serializer: type | None = None,
    background: bool = False,
    task_support: str | None = None,
    queue: str | None = None,
    time_limit: float | None = None,
    retry_on: typing.Iterable[type[BaseException]] = (),
    max_retries: int = 0,
    retry_backoff: float = 1.0,
    paginate: bool = False,
    meta: dict[str, Any] | None = None,
    icons: list[dict[str, Any]] | None = None,
    thread_sensitive: bool = True,
    scopes: typing.Iterable[str] = (),
) -> Tool:
    """Build a :class:`Tool` from a function without registering it."""
    tool_name = name if name is not None else _callable_name(fn)
    hints = _hints(fn)
    summary, param_docs = parse_param_docs(_callable_doc(fn))
    context_param = _context_param(fn, hints)
    parameters = [
        p
        for p in _parameters(fn)
        if p.name != context_param and p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    ]
    # Read once (a generator given for them was used up by a check and the tool made with none: open to
    # everyone), and one string given for the list refused.
    where = f"Tool {tool_name!r} ({_qualified(fn)})"
    permissions, scopes = _names(where, "permissions", permissions), _names(where, "scopes", scopes)
    # One exception class is taken as a tuple of one, as Celery's autoretry_for reads it.
    retry_kinds: tuple[Any, ...] = (retry_on,) if isinstance(retry_on, type) else (retry_on,) if isinstance(retry_on, str) else tuple(retry_on)
    annotations, icons = _wire_annotations(annotations), _wire_icons(icons)
    _check_tool_options(
        where, fn, parameters, title=title, description=description, annotations=annotations,
        time_limit=time_limit, retry_on=retry_kinds, max_retries=max_retries, retry_backoff=retry_backoff, meta=meta, icons=icons)
    try:
        input_spec = input_from_serializer(tool_name, serializer) if serializer is not None else input_from_signature(tool_name, parameters, hints, param_docs)
    except (pydantic.PydanticUserError, pydantic.PydanticSchemaGenerationError, NameError, TypeError, ValueError) as exc:
        # pydantic's own words name neither the tool nor its function (a parameter "_private" or
        # "model_config" cannot be a model field): the project would not start, and not say where.
        raise ImproperlyConfigured(f"{where}: its arguments cannot make an input schema: {exc}") from exc
    if serializer is not None:
        _check_serializer_parameters(where, fn, parameters, serializer)
    output_spec = output_from_annotation(_result_type(hints.get("return", inspect.Signature.empty)))
    if task_support is None:
        task_support = "optional" if background else "forbidden"
    if task_support not in ("forbidden", "optional", "required"):
        raise ValueError(f"task_support must be 'forbidden', 'optional' or 'required', not {task_support!r}")
    return Tool(
        name=tool_name,
        fn=fn,
        title=title,
        description=description if description is not None else summary,
        input=input_spec,
        output=output_spec,
        annotations=annotations,
        permissions=tuple(permissions) + tuple(SCOPE_PERMISSION_PREFIX + scope for scope in scopes),
        scopes=tuple(scopes),
        context_param=context_param,
        is_async=_is_async(fn),
        background=background,
        task_support=task_support,
        queue=queue,
        time_limit=time_limit,
        retry_on=retry_kinds,
        max_retries=max_retries,
        retry_backoff=retry_backoff,
        paginate=paginate,
        meta=meta,
        icons=icons,
        thread_sensitive=thread_sensitive,
    )


def _check_serializer_parameters(where: str, fn: Callable[..., Any], parameters: list[inspect.Parameter], serializer: type) -> None:
    """Refuse a function that cannot take what ``serializer`` validates (its ``validated_data`` are the
    keyword arguments): a writable field it has no parameter for (unless it takes ``**kwargs``), or a
    parameter without a default that no field gives. Each registered, then failed its calls (those that
    sent the optional field, or all of them) with "Internal error" (found by the author review)."""
    if _reshapes_validated_data(serializer):
        # Its validate() (or to_internal_value) returns what it likes: a "password2" it pops, a "slug" it
        # adds. Such a tool, valid before this check, stopped the project (found by the revB review).
        return
    try:
        fields = list(serializer().fields.values())
    except Exception:  # noqa: BLE001 - a serializer that cannot be made without arguments: not checked here
        return
    keys: set[str] = set()
    for field in fields:
        if field.read_only:
            continue
        if field.source == "*":  # its data is merged into the whole: keys this check cannot name
            return
        keys.add(str(field.source or field.field_name).split(".")[0])
    names = {parameter.name for parameter in parameters}
    takes_any = any(parameter.kind is inspect.Parameter.VAR_KEYWORD for parameter in _parameters(fn))
    unknown = [] if takes_any else sorted(keys - names)
    if unknown:
        raise ImproperlyConfigured(f"{where}: its function has no parameter for {', '.join(map(repr, unknown))} of "
                                   f"{serializer.__name__}'s validated data; add one (or **kwargs)")
    missing = [parameter.name for parameter in parameters if parameter.default is inspect.Parameter.empty and parameter.name not in keys]
    if missing:
        raise ImproperlyConfigured(f"{where}: its parameter {', '.join(map(repr, missing))} has no default, and no field of "
                                   f"{serializer.__name__} gives it")


def _reshapes_validated_data(serializer: type) -> bool:
    """Whether ``serializer`` overrides what makes its ``validated_data`` out of its fields' values
    (``validate``, ``to_internal_value``, ``run_validation``): its keys are then not its fields'."""
    from rest_framework import serializers

    return any(getattr(serializer, method, None) is not getattr(serializers.Serializer, method)
               for method in ("validate", "to_internal_value", "run_validation"))


def _wire_annotations(annotations: Any) -> Any:
    """Annotations as they go out: an ``mcp_types.ToolAnnotations`` as its JSON object (it went out as its
    text, and the official client refused every ``tools/list``), and a hint given as None left out (the
    spec's hints are optional booleans; TypeScript clients refuse a null)."""
    if isinstance(annotations, pydantic.BaseModel):
        annotations = annotations.model_dump(by_alias=True, exclude_none=True, mode="json")
    if isinstance(annotations, dict):
        annotations = {key: value for key, value in annotations.items() if not (key in _HINTS and value is None)}
    return annotations


def _wire_icons(icons: Any) -> Any:
    """Icons as they go out: each ``mcp_types.Icon`` as its JSON object (as for annotations), a tuple as a list."""
    if not isinstance(icons, (list, tuple)):
        return icons
    return [icon.model_dump(by_alias=True, exclude_none=True, mode="json") if isinstance(icon, pydantic.BaseModel) else icon for icon in icons]


#: The boolean hints of a tool's annotations (2025-11-25 ``ToolAnnotations``).
_HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")


def _names(where: str, option: str, value: typing.Iterable[str]) -> tuple[str, ...]:
    """``permissions`` / ``scopes`` as a tuple of strings, read once; one string given for the list (its
    characters taken for names: the item hidden from all but superusers) is ``ImproperlyConfigured``."""
    names = value if isinstance(value, str) else tuple(value)
    if isinstance(names, str) or not all(isinstance(name, str) for name in names):
        raise ImproperlyConfigured(f"{where}: {option} must be a list of strings, not {value!r}")
    return names


def _check_tool_options(where: str, fn: Callable[..., Any], parameters: list[inspect.Parameter], *, title: Any, description: Any,
                        annotations: Any, time_limit: Any, retry_on: Any, max_retries: Any,
                        retry_backoff: Any, meta: Any, icons: Any) -> None:
    """Refuse, when the tool is made, what would only fail when it is listed or called: a list given as one
    string (its characters taken for names), numbers of the wrong type for a background tool's policy (its
    worker failed, the call stayed working and its handler ran again at each takeover), metadata the
    official client refuses (one bad tool failed every ``tools/list``, so every call), a generator function,
    and a positional-only parameter (tools are called with keyword arguments)."""
    def refuse(why: str) -> typing.NoReturn:
        raise ImproperlyConfigured(f"{where}: {why}")

    _check_callable_and_texts(refuse, fn, parameters, "a generator function is no tool: return a value, or a Page for a "
                              "tool that answers page by page (paginate=True)", "tools are", title=title, description=description)
    if meta is not None and not isinstance(meta, dict):
        refuse(f"meta must be a dict, not {type(meta).__name__}")
    if isinstance(annotations, dict):
        # The hints are booleans (the official client coerced "yes"; the spec and the TypeScript SDK do not).
        wrong = sorted(key for key in _HINTS if key in annotations and not isinstance(annotations[key], bool))
        if wrong:
            refuse(f"its annotations {', '.join(wrong)} must be true or false")
        if annotations.get("title") is not None and not isinstance(annotations["title"], (str, Promise)):
            refuse("its annotations' title must be a string")
    elif annotations is not None:
        refuse(f"annotations must be a dict or an mcp_types.ToolAnnotations, not {type(annotations).__name__}")
    if icons is not None:
        if not isinstance(icons, (list, tuple)):
            refuse(f"icons must be a list of dicts, not {type(icons).__name__}")
        import mcp_types  # the wire model: what the official clients check a tool's icons against

        try:
            for icon in icons:
                mcp_types.Icon.model_validate(icon, strict=True)
        except pydantic.ValidationError as exc:
            refuse(f"its icons are not what clients read: {exc}")
    if not all(isinstance(kind, type) and issubclass(kind, BaseException) for kind in retry_on):
        refuse(f"retry_on must be exception classes (a tuple of them), not {retry_on!r}")
    if time_limit is not None and (isinstance(time_limit, bool) or not isinstance(time_limit, (int, float)) or not time_limit > 0):
        refuse(f"time_limit must be a number of seconds above 0, or None, not {time_limit!r}")
    if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
        refuse(f"max_retries must be an integer >= 0, not {max_retries!r}")
    if not isinstance(retry_backoff, (int, float)) or not retry_backoff >= 0:  # (True: 1 s, as Celery's idiom reads here)
        refuse(f"retry_backoff must be a number of seconds >= 0, not {retry_backoff!r}")


def _check_callable_and_texts(refuse: Callable[[str], typing.NoReturn], fn: Callable[..., Any], parameters: list[inspect.Parameter],
                              generator_refusal: str, called: str, **texts: Any) -> None:
    """What a tool, a prompt and a resource each refuse alike: a generator function (``generator_refusal``
    says what to do instead), a positional-only parameter (each is called with keyword arguments: ``called``
    says who is), and metadata given as no string (a lazy translation is text too)."""
    if any(inspect.isgeneratorfunction(f) or inspect.isasyncgenfunction(f) for f in (fn, _described(fn))):
        refuse(generator_refusal)
    for parameter in parameters:
        if parameter.kind is inspect.Parameter.POSITIONAL_ONLY:
            refuse(f"its parameter {parameter.name!r} is positional-only; {called} called with keyword arguments")
    for option, value in texts.items():
        if value is not None and not isinstance(value, (str, Promise)):
            refuse(f"{option} must be a string, not {type(value).__name__}")


def _check_listed_options(where: str, fn: Callable[..., Any], *, what: str, title: Any, description: Any,
                          mime_type: Any = None, annotations: Any = None, name: Any = None) -> None:
    """For a prompt or a resource, what ``_check_tool_options`` refuses for a tool: metadata the official
    client refuses (one bad prompt or resource failed every ``prompts/list`` / ``resources/list`` page it
    was on), a generator function, a positional-only parameter (it is called with keyword arguments;
    every ``prompts/get`` was -32603). Found by a review of prompts and resources."""
    def refuse(why: str) -> typing.NoReturn:
        raise ImproperlyConfigured(f"{where}: {why}")

    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        parameters = []
    _check_callable_and_texts(refuse, fn, parameters, f"a generator function is no {what}: return its value", f"a {what} is",
                              name=name, title=title, description=description, mime_type=mime_type)
    if annotations is not None:
        import mcp_types  # the wire model: what the official clients check a resource's annotations against

        if not isinstance(annotations, dict):
            refuse(f"annotations must be a dict, not {type(annotations).__name__}")
        try:
            # As they go out, JSON (a tuple is a list there), strictly: a client reads that ("high" is no priority).
            mcp_types.Annotations.model_validate_json(json.dumps(annotations, default=str), strict=True)
        except (pydantic.ValidationError, TypeError, ValueError) as exc:
            refuse(f"its annotations are not what clients read: {exc}")


F = typing.TypeVar("F", bound=Callable[..., Any])


@overload
def tool(fn: F, /) -> F: ...
@overload
def tool(
    *,
    name: str | None = ...,
    title: str | None = ...,
    description: str | None = ...,
    annotations: dict[str, Any] | None = ...,
    permissions: typing.Iterable[str] = ...,
    serializer: type | None = ...,
    background: bool = ...,
    task_support: str | None = ...,
    queue: str | None = ...,
    time_limit: float | None = ...,
    retry_on: typing.Iterable[type[BaseException]] = ...,
    max_retries: int = ...,
    retry_backoff: float = ...,
    paginate: bool = ...,
    meta: dict[str, Any] | None = ...,
    icons: list[dict[str, Any]] | None = ...,
    thread_sensitive: bool = ...,
    scopes: typing.Iterable[str] = ...,
) -> Callable[[F], F]: ...
def tool(fn: Callable[..., Any] | None = None, /, **options: Any) -> Any:
    """Register a function as an MCP tool: ``@tool`` or ``@tool(name=..., permissions=[...])``.
    A callable object (its class names it) or a ``functools.partial`` (its keyword arguments
    are fixed, not arguments a client sends) is taken as a function is, here and by
    :func:`prompt` and :func:`resource`.

    The input schema comes from the parameters' type hints (or ``serializer``,
    a DRF ``Serializer`` class), descriptions from the docstring, and the
    output schema from the return annotation. A parameter annotated
    :class:`~mcp_tools.ToolContext` receives the call's context (also written
    ``ctx: ToolContext | None = None``, for a function called directly too). Sync
    functions run in a worker thread, so they may use the ORM.

    ``background=True`` runs the tool on a Celery worker (``queue``,
    ``time_limit``, ``retry_on``/``max_retries``/``retry_backoff`` tune it);
    ``task_support`` ("optional" or "required") says whether clients may or
    must call it as an MCP task. ``paginate=True`` makes a tool that returns a
    ``Page`` answer page by page with resume tokens. ``scopes`` lists the OAuth scopes a
    bearer token needs to see and call the tool (docs/oauth.md). Arguments annotated
    ``x-mcp-header`` that clients could not mirror in a header raise ``ImproperlyConfigured``
    (docs/protocol.md, "Arguments mirrored in headers").
    """

    def decorate(func: F) -> F:
        registry.register_tool(make_tool(func, **options))
        return func

    return decorate(fn) if fn is not None else decorate


def resource(
    uri: str,
    *,
    name: str | None = None,
    title: str | None = None,
    description: str | None = None,
    mime_type: str | None = None,
    permissions: typing.Iterable[str] = (),
    completions: dict[str, Callable[..., Any]] | None = None,
    annotations: dict[str, Any] | None = None,
    cache_ttl_ms: int = 0,
) -> Callable[[F], F]:
    """Register a resource. A ``uri`` with ``{placeholders}`` registers a template;
    the function then receives the placeholders as keyword arguments, each read as its
    parameter's hint says, as a prompt's arguments are (``{pk}`` of ``pk: int`` is an int; a
    value the hint refuses names no resource of the template). A parameter annotated
    :class:`~mcp_tools.ToolContext` receives the read's context (to ask the user, as a tool does).

    ``cache_ttl_ms`` is the ``ttlMs`` of its 2026-07-28 ``resources/read`` results: how long
    a client may serve a read from its cache. ``0`` (the default) says a read is stale at
    once, right for content that changes (most of a Django site's); give a resource that
    changes rarely a longer one.

    The function returns ``str`` (text), ``bytes`` (blob), ready ``contents``
    (dicts with a ``uri`` and a ``text`` or ``blob``, or ``mcp_types`` resource contents
    models, alone or in a non-empty list), or any other value as JSON text (pydantic
    models as their JSON, dataclasses, dates, sets... as pydantic writes them; rows with a
    ``uri`` field, and ``[]``, too).
    Variables are ``{name}`` (one path segment) or ``{+name}`` (the rest); other
    RFC 6570 operators raise ``ImproperlyConfigured``. ``completions`` maps a variable to its
    completer, as for :func:`prompt`.
    """

    def decorate(func: F) -> F:
        summary, _ = parse_param_docs(_callable_doc(func))
        _check_listed_options(f"Resource {uri!r} ({_qualified(func)})", func, what="resource",
                              title=title, description=description, mime_type=mime_type, annotations=annotations, name=name)
        is_template = "{" in uri
        context_param = _resource_context_param(func, uri)
        converters: dict[str, TypeAdapter[Any]] = {}
        if is_template:
            _template_variables(uri, func, context_param)
            converters = _variable_converters(uri, func)
        registry.register_resource(
            Resource(
                uri=None if is_template else uri,
                uri_template=uri if is_template else None,
                name=name or _callable_name(func),
                title=title,
                description=description if description is not None else (summary or None),
                mime_type=mime_type,
                fn=func,
                is_async=_is_async(func),
                permissions=_names(f"Resource {uri!r}", "permissions", permissions),
                completions=_completers(f"Resource {uri!r}", completions),
                annotations=annotations,
                cache_ttl_ms=_cache_ttl_ms(cache_ttl_ms),
                context_param=context_param,
                converters=converters,
            )
        )
        return func

    return decorate


#: The parameter a completer names to be given the caller (:class:`~mcp_tools.server.auth.Principal`: its
#: ``user``, ``scopes``), as a tool names one for its ``ctx``: optional, by keyword.
COMPLETER_CALLER_PARAM = "principal"


def _completers(where: str, given: dict[str, Callable[..., Any]] | None) -> dict[str, Callable[..., Any]]:
    """Each completer as it is called, ``fn(value, arguments)``: one written with the value alone is
    called with it alone (it failed every completion with a TypeError, -32603); one that takes
    neither form is refused here, naming it. One with a ``principal`` parameter is given the caller
    by that keyword (:func:`takes_caller`): to leave out what the caller may not see."""
    completers: dict[str, Callable[..., Any]] = {}
    for argument, fn in (given or {}).items():
        if wraps_a_coroutine_function(fn):  # a sync decorator around an async completer: awaited
            fn = _awaited(fn)
        try:
            signature = inspect.signature(fn)
        except (TypeError, ValueError):  # a builtin without one: taken as given
            completers[argument] = fn
            continue
        caller = signature.parameters.get(COMPLETER_CALLER_PARAM)
        extra = {COMPLETER_CALLER_PARAM: None} if caller is not None and caller.kind in (
            inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY) else {}
        try:
            signature.bind("", {}, **extra)
            completers[argument] = _given_the_caller(fn) if extra else fn
            continue
        except TypeError:
            pass
        try:
            signature.bind("", **extra)
        except TypeError:
            raise ImproperlyConfigured(
                f"{where}: the completer of {argument!r} must take (value, arguments) or (value), not {signature}") from None
        completers[argument] = _given_the_caller(fn, value_only=True) if extra else _value_only(fn)
    return completers


def _awaited(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn``, a sync wrapper of an async function, as the async function it is (its signature kept)."""
    @functools.wraps(fn)
    async def awaited(*args: Any, **kwargs: Any) -> Any:
        return await call_async(fn, *args, **kwargs)  # the wrapper in a thread, its coroutine awaited

    return awaited


def takes_caller(completer: Callable[..., Any]) -> bool:
    """Whether a completer (as :func:`_completers` keeps it) is called with the caller: ``fn(value, arguments, principal)``."""
    return bool(getattr(completer, "_mcp_takes_caller", False))


def _given_the_caller(fn: Callable[..., Any], value_only: bool = False) -> Callable[..., Any]:
    """``fn(value, arguments, principal=...)`` (``fn(value, principal=...)``: ``value_only``) as
    ``(value, arguments, principal)``; async if ``fn`` is."""
    def given(value: str, arguments: dict[str, Any]) -> tuple[Any, ...]:
        return (value,) if value_only else (value, arguments)

    complete: Any
    if inspect.iscoroutinefunction(fn):
        async def complete(value: str, arguments: dict[str, Any], principal: Any) -> Any:
            return await fn(*given(value, arguments), **{COMPLETER_CALLER_PARAM: principal})
    else:
        def complete(value: str, arguments: dict[str, Any], principal: Any) -> Any:
            return fn(*given(value, arguments), **{COMPLETER_CALLER_PARAM: principal})
    complete._mcp_takes_caller = True
    return typing.cast(Callable[..., Any], complete)


def _value_only(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn(value)`` as a completer, ``(value, arguments)``; async if ``fn`` is."""
    if inspect.iscoroutinefunction(fn):
        async def complete_async(value: str, arguments: dict[str, Any]) -> Any:
            return await fn(value)

        return complete_async

    def complete(value: str, arguments: dict[str, Any]) -> Any:
        return fn(value)

    return complete


def _template_variables(uri: str, func: Callable[..., Any], context_param: str | None) -> None:
    """Refuse a URI template variable its function has no parameter for (every read was a TypeError,
    -32603): unless the function takes ``**kwargs``."""
    parameters = {param.name: param for param in _parameters(func)}
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return
    for variable in re.findall(r"\{\+?(\w+)\}", uri):
        if variable not in parameters or variable == context_param or parameters[variable].kind is inspect.Parameter.POSITIONAL_ONLY:
            raise ImproperlyConfigured(f"Resource {uri!r}: its function has no parameter {variable!r} for the URI's variable")


def _variable_converters(uri: str, func: Callable[..., Any]) -> dict[str, TypeAdapter[Any]]:
    """What reads each of a template's variables as its parameter's hint says (``_prompt_converter``: a
    hint no string can be read as is ``ImproperlyConfigured``). Hints that do not resolve convert nothing:
    the variables stay strings, as they were (see :func:`_resource_context_param`)."""
    try:
        hints = _hints(func)
    except TypeError:
        return {}
    converters: dict[str, TypeAdapter[Any]] = {}
    for variable in re.findall(r"\{\+?(\w+)\}", uri):
        if _no_schema_for(hints.get(variable)):
            # A class pydantic cannot read (a str subclass, class Slug(str)): the variable stays the string it
            # always was. Refused, a template that served its reads stopped the project (found by the revB review).
            continue
        converter = _prompt_converter(f"Resource {uri!r} ({_qualified(func)})", variable, hints.get(variable), "a URI variable")
        if converter is not None:
            converters[variable] = converter
    return converters


def _no_schema_for(annotation: Any) -> bool:
    """Whether pydantic has no schema for ``annotation`` (a class of the project's own, not a hint it reads)."""
    if annotation is None:
        return False
    try:
        TypeAdapter(_pydantic_compatible(annotation))
    except pydantic.PydanticSchemaGenerationError:
        return True
    except Exception:  # noqa: BLE001 - any other refusal is _prompt_converter's to report
        return False
    return False


def _resource_context_param(func: Callable[..., Any], uri: str) -> str | None:
    """A resource function's context parameter. Its other hints serve nothing (no schema is built of
    them), so hints that cannot be resolved (a return type local to a function) are no error, unless a
    parameter may be the context: that one must resolve. One named as a variable of the URI template
    is refused: the context would take the variable's place."""
    try:
        hints = _hints(func)
    except TypeError:
        if any("ToolContext" in str(param.annotation) for param in inspect.signature(func).parameters.values()):
            raise
        return None
    name = _context_param(func, hints)
    if name is not None and re.search(r"\{\+?" + re.escape(name) + r"\}", uri):
        raise ImproperlyConfigured(f"Resource {uri!r}: its ToolContext parameter {name!r} is also a variable of the URI; rename one")
    return name


def _cache_ttl_ms(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ImproperlyConfigured(f"cache_ttl_ms must be a non-negative integer (milliseconds), not {value!r}")
    return value


@overload
def prompt(fn: F, /) -> F: ...
@overload
def prompt(
    *,
    name: str | None = ...,
    title: str | None = ...,
    description: str | None = ...,
    permissions: typing.Iterable[str] = ...,
    completions: dict[str, Callable[..., Any]] | None = ...,
) -> Callable[[F], F]: ...
def prompt(fn: Callable[..., Any] | None = None, /, **options: Any) -> Any:
    """Register a prompt. Parameters become its arguments (required unless defaulted), which clients send
    as strings: each is read as its parameter's hint says (``int``, ``float``, ``bool``, a date, a
    ``Literal`` or ``Enum`` of strings, ``| None``; ``str`` and no hint keep the string), a value it
    refuses answered ``-32602`` naming the argument; a hint no string can be read as (a list, a model)
    raises ``ImproperlyConfigured``.
    ``completions`` maps an argument name to ``fn(value, arguments)``, sync or async, returning
    every match as a list of strings, or :class:`~mcp_tools.Completions` when it lists only some;
    a ``principal`` parameter, if it names one, is given the caller (``principal.user``).

    The function returns a message or a list of messages: a string (a user
    message), a ``{"role": ..., "content": ...}`` dict or a ``(role, content)``
    pair, the role "user" or "assistant" and the content a string or a content
    block (a dict or an ``mcp_types`` model).
    """

    def decorate(func: F) -> F:
        hints = _hints(func)
        context_param = _context_param(func, hints)
        summary, param_docs = parse_param_docs(_callable_doc(func))
        prompt_name = options.get("name") or _callable_name(func)
        _check_listed_options(f"Prompt {prompt_name!r} ({_qualified(func)})", func, what="prompt",
                              title=options.get("title"), description=options.get("description"))
        arguments = []
        converters: dict[str, TypeAdapter[Any]] = {}
        for param in _parameters(func):
            if param.name == context_param or param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
                continue  # *args / **kwargs name no argument a client could send
            argument: dict[str, Any] = {"name": param.name, "required": param.default is inspect.Parameter.empty}
            if param.name in param_docs:
                argument["description"] = param_docs[param.name]
            arguments.append(argument)
            converter = _prompt_converter(f"Prompt {prompt_name!r} ({_qualified(func)})", param.name, hints.get(param.name))
            if converter is not None:
                converters[param.name] = converter
        registry.register_prompt(
            Prompt(
                name=prompt_name,
                title=options.get("title"),
                description=options.get("description") if options.get("description") is not None else (summary or None),
                fn=func,
                is_async=_is_async(func),
                arguments=arguments,
                permissions=_names(f"Prompt {prompt_name!r}", "permissions", options.get("permissions", ())),
                completions=_completers(f"Prompt {prompt_name!r}", options.get("completions")),
                context_param=context_param,
                converters=converters,
            )
        )
        return func

    return decorate(fn) if fn is not None else decorate


#: A number written as text (what pydantic would read as a Unix timestamp for a date).
_NUMBER_TEXT = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def _date_read_from_number(text: Any, value: Any) -> bool:
    """Whether pydantic read ``text``, a number, as a date or time (a Unix timestamp): a prompt's
    argument or a URI's variable is a date in ISO text only, as a tool's is (docs/protocol.md)."""
    return isinstance(text, str) and isinstance(value, (datetime.date, datetime.time)) and bool(_NUMBER_TEXT.fullmatch(text.strip()))


def _takes_none(adapter: TypeAdapter[Any]) -> bool:
    try:
        adapter.validate_python(None)
    except pydantic.ValidationError:
        return False
    return True


#: The JSON types a string can be read as (lax): text, numbers, booleans, and null (of an ``Optional``).
_TEXT_READABLE = frozenset({"string", "integer", "number", "boolean", "null"})


def _prompt_converter(where: str, name: str, annotation: Any, what: str = "a prompt argument") -> TypeAdapter[Any] | None:
    """What reads a prompt argument's string as ``annotation`` says, None where it stays the string
    (``str``, ``Any``, no hint). A hint no string can be read as (a list, a model, ``Literal[1, 2]``,
    whose ``"1"`` is no 1) is ``ImproperlyConfigured``: it would only fail, or lie, on each call."""
    if annotation is None or annotation in (str, Any, object):
        return None
    annotation = _pydantic_compatible(annotation)
    refusal = (f"{where}: its parameter {name!r} ({annotation!r}) cannot be read from the string {what} is; "
               "annotate it str, int, float, bool, a date, a Literal or Enum of strings, or one of them | None")
    try:
        adapter: TypeAdapter[Any] = TypeAdapter(annotation)
        schema = adapter.json_schema()
    except (pydantic.PydanticSchemaGenerationError, pydantic.PydanticUserError, TypeError, ValueError) as exc:
        raise ImproperlyConfigured(f"{refusal} ({exc})") from exc
    constants = _text_readable(schema, schema.get("$defs", {}))
    if constants is None:
        raise ImproperlyConfigured(refusal)
    for constant in (constant for constant in constants if constant is not None):  # an IntEnum reads "1"; a Literal[1] or a bool's Literal reads no string
        try:
            adapter.validate_python(constant if isinstance(constant, str) else json.dumps(constant))
        except pydantic.ValidationError:
            raise ImproperlyConfigured(refusal) from None
    return adapter


def _text_readable(schema: Any, defs: dict[str, Any]) -> list[Any] | None:
    """The constants (``enum``, ``const``) of ``schema``, None unless every value of it is of a type a
    string can be read as: scalars, and unions of them (references into ``defs`` followed)."""
    if not isinstance(schema, dict):
        return None
    ref = schema.get("$ref")
    if isinstance(ref, str):
        target = defs.get(ref.rpartition("/")[2])
        return None if target is None or target is schema else _text_readable(target, defs)
    constants: list[Any] = [*schema.get("enum", ()), *([schema["const"]] if "const" in schema else [])]
    branches = [*schema.get("anyOf", ()), *schema.get("oneOf", ())]
    for branch in branches:
        found = _text_readable(branch, defs)
        if found is None:
            return None
        constants += found
    kinds = schema.get("type")
    if kinds is None:
        return constants if branches or constants else None
    kinds = [kinds] if isinstance(kinds, str) else kinds
    return constants if set(kinds) <= _TEXT_READABLE else None


Handler = Callable[..., Awaitable[Any]]
