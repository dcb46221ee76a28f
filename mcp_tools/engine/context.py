"""``ToolContext``: what a handler uses to ask the client, run side effects once,
report progress and log. Each step is journaled; see :mod:`mcp_tools.engine.runner`."""

from __future__ import annotations

import asyncio
import contextlib
import decimal
import functools
import hashlib
import inspect
import math
import numbers
import typing
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import orjson
from asgiref.sync import async_to_sync
from django.utils.functional import Promise
from pydantic import BaseModel, ValidationError
from pydantic.json_schema import GenerateJsonSchema

from ..protocol.answers import ANSWER_SCHEMA
from ..protocol.errors import MISSING_CLIENT_CAPABILITY, McpError
from ..protocol.levels import LOG_LEVELS
from ..protocol.versions import is_modern
from .errors import (
    Defer,
    ElicitationCancelled,
    ElicitationDeclined,
    NonDeterministicHandler,
    StepFailed,
    Suspend,
    UnstorableOnceValue,
    once_exception,
)
from .journal import (
    Journal, Step, canonical_json, check_step_key, derived_step_key, digest, digest_of_text, failed_once_key, plainly_storable,
    unstorable_part,
)
from .wrapped import call_async, wraps_a_coroutine_function

if TYPE_CHECKING:
    from ..server.auth import Principal
    from .runner import Invocation

T = TypeVar("T")



@dataclass
class SamplingResult:
    """The client model's final answer (a ``CreateMessageResult``)."""

    raw: dict[str, Any]
    tool_calls: int = 0

    @property
    def text(self) -> str:
        content = self.raw.get("content")
        blocks = content if isinstance(content, list) else [content]
        return "".join(block.get("text", "") for block in blocks if isinstance(block, dict) and block.get("type") == "text")

    @property
    def model(self) -> str | None:
        return self.raw.get("model")

    @property
    def stop_reason(self) -> str | None:
        return self.raw.get("stopReason")


class StepRequest(typing.Generic[T]):
    """A request to the client that the handler awaits (alone or with :meth:`ToolContext.gather`)."""

    def __init__(
        self,
        ctx: ToolContext,
        kind: str,
        method: str,
        params: dict[str, Any],
        key: str | None,
        convert: Callable[[Any], T],
        fresh_id: str | None = None,
        answer_schema: dict[str, Any] | None = None,
        journaled_only: str | None = None,
        earlier_params: Sequence[dict[str, Any]] = (),
        asked_params: dict[str, Any] | None = None,
        unsendable: Exception | None = None,
    ) -> None:
        self.ctx = ctx
        self.kind = kind
        self.method = method
        self.params = params
        self.key = key
        self.convert = convert
        #: A parameter given a new unique value when the step is first asked, kept in the journal
        #: (and out of the digest that replays compare).
        self.fresh_id = fresh_id
        #: What the answer must fit beyond what the wire's request says, journaled with the step
        #: (under :data:`~mcp_tools.protocol.answers.ANSWER_SCHEMA`) and never sent.
        self.answer_schema = answer_schema
        #: A parameter sent only if the journal entry at this request's own step already holds it
        #: (a deprecated value an earlier release journaled): decided in :meth:`ToolContext._resolve`,
        #: where the step number is known. When built, a request of a :meth:`ToolContext.gather`
        #: does not know it yet: every request of the gather is built before the first is resolved.
        self.journaled_only = journaled_only
        #: The params earlier releases sent (and journaled) for this same request, where they sent
        #: them otherwise: a step journaled with any of them is this step on replay (a call in
        #: flight across the upgrade), and keeps what it journaled.
        self.earlier_params = earlier_params
        #: What the handler asked, when the wire's ``params`` leave part of it out for this caller
        #: (sampling's tools the caller may not use): the step's digest is taken of it, so a replay
        #: is the same step whatever the caller's permissions are by then.
        self.asked_params = asked_params
        #: Why this request can no longer be sent (an elicitation whose model no form field expresses):
        #: raised where it would be sent, but a step an earlier release sent and journaled in one of
        #: the ``earlier_params`` forms still replays (a call in flight across the upgrade).
        self.unsendable = unsendable

    def is_earlier_form(self, step_digest: str) -> bool:
        """Whether ``step_digest`` is a digest an earlier release journaled for this request."""
        return any(step_digest == digest([self.kind, {"method": self.method, "params": params}]) for params in self.earlier_params)

    def __await__(self) -> typing.Generator[Any, None, T]:
        return self._single().__await__()

    async def _single(self) -> T:
        values = await self.ctx._resolve([self])
        return typing.cast(T, values[0])


def _flat_elicitation_schema(schema: type[BaseModel] | dict[str, Any]) -> dict[str, Any]:
    """The ``requestedSchema`` of an elicitation: a flat object of primitives, refs inlined."""
    if isinstance(schema, dict):
        return _dict_elicitation_schema(schema)
    return _model_elicitation_schema(schema)


def _dict_elicitation_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A schema given as a dict, as it is sent: as given, unless it has ``$defs`` (a model's
    ``model_json_schema()``): then its properties' refs are inlined, ``Optional`` unwrapped (its
    ``"default": null`` left out) and ``$defs`` left out. A client renders each form field, and the
    server checks each field of an answer, from the field's own schema: a ``$ref`` there points to
    nothing."""
    if "$defs" not in schema:
        return schema
    properties = {
        name: {k: v for k, v in prop.items() if k != "default" or v is not None}
        for name, prop in _inlined_properties(schema).items()
    }
    return {**{k: v for k, v in schema.items() if k != "$defs"}, "properties": properties}


def _earlier_elicitation_schemas(schema: type[BaseModel] | dict[str, Any]) -> tuple[dict[str, Any], ...]:
    """The ``requestedSchema``s earlier releases sent for ``schema`` where they differ from
    :func:`_flat_elicitation_schema`'s: with them, a step they journaled still replays."""
    if isinstance(schema, dict):
        return (schema,) if "$defs" in schema else ()  # sent as given, $defs and refs included
    return _earlier_model_elicitation_schemas(schema)


#: What a field of ``requestedSchema`` says (the spec's restricted schema, and what clients take of JSON Schema).
_WIRE_KEYWORDS = frozenset({
    "type", "title", "description", "enum", "default", "minimum", "maximum", "minLength", "maxLength", "format",
    "enumNames", "oneOf", "items", "minItems", "maxItems",
})
#: Keywords that assert nothing about an answer.
_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly", "$comment"})
#: Keywords whose values are data, not schemas: no ``$ref`` in them is one.
_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples"})


#: The ``type``s of the spec's form fields (``PrimitiveSchemaDefinition``): a field with none of them
#: is one no client renders, and the TypeScript SDK refuses the whole elicitation for it.
_FORM_TYPES = frozenset({"string", "number", "integer", "boolean", "array"})


class _FormJsonSchema(GenerateJsonSchema):
    """pydantic's JSON schema, with a ``Decimal`` the number a form asks for: pydantic writes it as a
    number or a numeric string (``anyOf``), which is no form field's ``type``. The model reads the
    number the client sends into a ``Decimal``; the answer is still checked against the model's own
    schema (:func:`_model_answer_schema`), which takes a number too."""

    def decimal_schema(self, schema: Any) -> dict[str, Any]:
        json_schema = super().decimal_schema(schema)
        return next((branch for branch in json_schema.get("anyOf", ()) if branch.get("type") == "number"), json_schema)


@functools.lru_cache(maxsize=256)
def _model_elicitation_schema(schema: type[BaseModel]) -> dict[str, Any]:
    """``requestedSchema`` for a model; a ``TypeError`` naming the field when a field is none of
    the spec's form fields (a union such as ``int | str``, a nested model): a programming error that
    the tool's first run shows, where the wire form would be one no client can render."""
    return _model_form(schema, single_choices=True)


def _model_form(schema: type[BaseModel], *, single_choices: bool) -> dict[str, Any]:
    """:func:`_model_elicitation_schema`; ``single_choices=False``: as releases before the author review
    sent it, a field of one allowed value (``Literal["yes"]``, pydantic's ``const``) as free text (its
    ``const`` dropped: every other answer was refused), for :func:`_earlier_model_elicitation_schemas`."""
    # Cached: handlers replay every answered step on every round, and generating a
    # model's JSON schema dominated replay time (docs/performance-durable.md).
    # An ``X | None = None`` field's "default": null goes: the spec's primitive schemas take a
    # default of their own type only (StringSchema.default?: string...), and clients that check
    # requests against them (the TypeScript SDK) refuse the whole elicitation for it. Not being
    # required already says the field may be left out.
    raw = _json_schema(schema, _FormJsonSchema)
    result = _wire_schema(raw, keep_null_defaults=False)
    inlined = _inlined_properties(raw) if single_choices else {}
    for name, prop in result["properties"].items():
        const = inlined.get(name, {}).get("const")
        if isinstance(const, str) and "enum" not in prop:
            prop = {**prop, "enum": [const]}  # the one-option choice it is
        enums = [prop.get("enum"), (prop.get("items") or {}).get("enum") if isinstance(prop.get("items"), dict) else None]
        if prop.get("type") not in _FORM_TYPES or any(e is not None and not all(isinstance(v, str) for v in e) for e in enums) or (
                prop.get("type") == "array" and not _multi_select_items(prop.get("items"))):
            raise TypeError(
                f"{schema.__name__} cannot be asked in an elicitation form: its field {name!r} is "
                f"{raw['properties'][name]}, which is no form field of the spec's (a string, number, integer, "
                f"boolean or enum of strings, or a list of enum values; X | None for an optional one)")
        result["properties"][name] = _spec_field(prop)
    return result


def _json_schema(model: type[BaseModel], generator: type[GenerateJsonSchema] = GenerateJsonSchema) -> dict[str, Any]:
    """``model``'s JSON schema with every value JSON can write: a title or description given as a lazy
    translation (``Field(title=gettext_lazy(...))``, which pydantic leaves as it is) as its text. The
    proxy failed the call with -32603, the journal unable to write it (found by the author review)."""
    return typing.cast(dict[str, Any], _json_values(model.model_json_schema(schema_generator=generator)))


def _json_values(node: Any) -> Any:
    if isinstance(node, dict):
        return {key: _json_values(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_json_values(item) for item in node]
    return node if node is None or isinstance(node, (str, int, float, bool)) else str(node)


def _multi_select_items(items: Any) -> bool:
    """Whether an array field's ``items`` are the spec's multi-select enum (``items.enum`` of strings, or
    ``items.anyOf`` of ``const``s): a list of free text or numbers (``list[str]``) is no form field, and
    the TypeScript SDK refused the whole elicitation for it (found by a review)."""
    if not isinstance(items, dict):
        return False
    if isinstance(items.get("enum"), list):
        return True
    branches = items.get("anyOf")
    return isinstance(branches, list) and bool(branches) and all(isinstance(b, dict) and isinstance(b.get("const"), str) for b in branches)


#: The ``format``s of the spec's string form fields (``StringSchema.format``): clients that check a
#: request against the schema (the TypeScript SDK) refuse the whole elicitation for any other.
_FORM_FORMATS = frozenset({"email", "uri", "date", "date-time"})


def _spec_field(prop: dict[str, Any]) -> dict[str, Any]:
    """A model's form field as the spec's schema says it: without a ``format`` the spec has not (a
    ``UUID``'s, a ``time``'s, a ``bytes``' ``binary``: the answer is still checked against the model,
    :func:`_model_answer_schema`), and a number's default a number (pydantic writes a ``Decimal``'s as
    text, where ``NumberSchema.default`` is a number)."""
    field = dict(prop)
    if "format" in field and field["format"] not in _FORM_FORMATS:
        del field["format"]
    if field.get("type") in ("number", "integer") and isinstance(field.get("default"), str):
        try:
            number = float(field["default"])
            field["default"] = int(number) if field["type"] == "integer" and number.is_integer() else number
        except ValueError:
            del field["default"]
    return field


@functools.lru_cache(maxsize=256)
def _earlier_model_elicitation_schemas(schema: type[BaseModel]) -> tuple[dict[str, Any], ...]:
    """The ``requestedSchema``s earlier releases sent for ``schema`` where they differ from
    :func:`_model_elicitation_schema`'s. They inlined a property's own ``$ref`` alone (an enum in
    a list's items or in an ``Optional`` kept its ref into ``$defs``, which was not sent), and the
    first of them kept an optional field's ``"default": null`` too."""
    raw = _json_schema(schema)
    try:
        current: dict[str, Any] | None = _model_elicitation_schema(schema)
    except TypeError:  # no form now: each form it was sent in before is an earlier one
        current = None
    forms: list[dict[str, Any]] = []
    # The form as sent until a field of one value became a one-option enum, the form as sent until the
    # spec's formats and number defaults were kept to (formats such as "uuid" and a Decimal's default as
    # text included), then the older ones.
    candidates: list[dict[str, Any]] = []
    if current is not None:
        candidates.append(_model_form(schema, single_choices=False))
    candidates += [_wire_schema(_json_schema(schema, _FormJsonSchema), keep_null_defaults=False)]
    candidates += [_wire_schema(raw, keep_null_defaults=keep_null_defaults, nested_refs=False) for keep_null_defaults in (False, True)]
    for form in candidates:
        if form != current and form not in forms:
            forms.append(form)
    return tuple(forms)


def _wire_schema(raw: dict[str, Any], *, keep_null_defaults: bool, nested_refs: bool = True) -> dict[str, Any]:
    properties = {
        name: {k: v for k, v in prop.items() if k in _WIRE_KEYWORDS and (keep_null_defaults or k != "default" or v is not None)}
        for name, prop in _inlined_properties(raw, nested_refs=nested_refs).items()
    }
    result: dict[str, Any] = {"type": "object", "properties": properties}
    if raw.get("required"):
        result["required"] = raw["required"]
    return result


@functools.lru_cache(maxsize=256)
def _model_answer_schema(schema: type[BaseModel]) -> dict[str, Any] | None:
    """The model's whole JSON schema when its fields assert more than ``requestedSchema`` can carry
    (``pattern``, ``exclusiveMinimum``, ``multipleOf``...), else None: an answer is checked against
    it when it arrives, so one that the model would refuse on replay is refused then instead."""
    raw = _json_schema(schema)
    said = _WIRE_KEYWORDS | _ANNOTATIONS
    return raw if any(not said.issuperset(prop) or prop.get("format", "email") not in _FORM_FORMATS
                      for prop in _inlined_properties(raw).values()) else None


def _inlined_properties(raw: dict[str, Any], *, nested_refs: bool = True) -> dict[str, Any]:
    """A model JSON schema's properties, each with its refs inlined and ``Optional`` unwrapped.

    Every ``$ref`` into ``$defs`` is inlined, at any depth (an enum in a list's ``items``, in an
    ``Optional``'s branch): ``requestedSchema`` goes without ``$defs``. ``nested_refs=False`` inlines
    a property's own ``$ref`` alone, as earlier releases did (:func:`_earlier_model_elicitation_schemas`).
    """
    defs = raw.get("$defs", {})
    properties: dict[str, Any] = {}
    for name, prop in raw.get("properties", {}).items():
        prop = _inlined(prop, defs) if nested_refs else _resolved(prop, defs)
        if "allOf" in prop and len(prop["allOf"]) == 1 and (nested_refs or "$ref" in prop["allOf"][0]):
            prop = {**_resolved(prop["allOf"][0], defs), **{k: v for k, v in prop.items() if k != "allOf"}}
        if "anyOf" in prop:  # Optional[X]: the nullable branch is expressed by "not required"
            branches = [b for b in prop["anyOf"] if b.get("type") != "null"]
            if len(branches) == 1:
                prop = {**branches[0], **{k: v for k, v in prop.items() if k != "anyOf"}}
        properties[name] = prop
    return properties


def _resolved(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """``node`` with its own ``$ref`` into ``defs`` replaced by the definition (the keywords beside
    the ref win over the definition's: a field's title and description are its own)."""
    ref = node.get("$ref")
    if not isinstance(ref, str) or not ref.startswith("#/$defs/") or ref[len("#/$defs/"):] not in defs:
        return node
    return {**defs[ref[len("#/$defs/"):]], **{k: v for k, v in node.items() if k != "$ref"}}


def _inlined(node: Any, defs: dict[str, Any], expanding: frozenset[str] = frozenset()) -> Any:
    """``node`` with every ``$ref`` into ``defs`` inlined, at any depth, but one inside its own
    definition (a recursive model, which no form field is: it stays a ref)."""
    if isinstance(node, list):
        return [_inlined(item, defs, expanding) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref not in expanding and (resolved := _resolved(node, defs)) is not node:
        return _inlined(resolved, defs, expanding | {ref})
    return {k: v if k in _DATA_KEYWORDS else _inlined(v, defs, expanding) for k, v in node.items()}


def _text(value: Any) -> Any:
    """A text a handler gives for a request to the client, as a ``str``, also inside the dicts and lists
    it gives (a dict ``requestedSchema``, sampling messages): Django's lazy translations
    (``gettext_lazy``, a model field's ``verbose_name``) are no ``str``, and the journal keeps the request
    as JSON (a lazy message or title failed the call with -32603, a lazy prompt was read as a list of
    messages). What holds none is returned as it is."""
    if isinstance(value, Promise):
        return str(value)
    if isinstance(value, (dict, list)):
        try:
            # orjson refuses what is no JSON value, a lazy text among them, in C: a structure it takes
            # holds none, and is not walked in Python (the walk cost a dict form ~5 us a step, replays too).
            orjson.dumps(value)
            return value
        except TypeError:
            return _texts(value)
    return value


def _texts(value: Any) -> Any:
    """:func:`_text`'s walk, for a structure that holds something no JSON value (a lazy text, maybe)."""
    if isinstance(value, Promise):
        return str(value)
    if isinstance(value, dict):
        texts = {key: _texts(item) for key, item in value.items()}
        return texts if any(texts[key] is not item for key, item in value.items()) else value
    if isinstance(value, list):
        items = [_texts(item) for item in value]
        return items if any(new is not old for new, old in zip(items, value)) else value
    return value


def _as_messages(messages: str | Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Sampling messages from a plain prompt (one user message) or a list of message dicts."""
    messages = _text(messages)
    if isinstance(messages, str):
        return [{"role": "user", "content": _text_block(messages)}]
    return [_as_message(message) for message in messages]


def _text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _as_message(message: Any) -> dict[str, Any]:
    """One sampling message as the spec's ``SamplingMessage``: a message's content written as a prompt's may
    be (plain text, a text block of it; a block, or the message, an ``mcp_types`` model, its JSON). Text
    and models went out as they were, which the official client refused (found by the author review)."""
    if isinstance(message, BaseModel):
        return message.model_dump(by_alias=True, exclude_none=True, mode="json")
    message = dict(message)
    content = message.get("content")
    if isinstance(content, list):
        message["content"] = [_as_block(block) for block in content]
    elif content is not None:
        message["content"] = _as_block(content)
    return message


def _as_block(block: Any) -> Any:
    if isinstance(block, str):
        return _text_block(block)
    if isinstance(block, BaseModel):
        return block.model_dump(by_alias=True, exclude_none=True, mode="json")
    return block


class ToolContext:
    """The context of one call, passed to handlers that declare a parameter of this type.

    Every ``await ctx.<step>()`` is journaled: on a later round it returns the
    recorded answer instead of asking again, so a handler reads like ordinary
    sequential code while the call survives requests, processes and restarts.
    Handlers must ask for the same steps in the same order on every run.
    """

    def __init__(self, invocation: Invocation) -> None:
        self._inv = invocation
        self._cursor = 0
        self._auto_keys: dict[str, int] = {}
        #: One past the last step journaled before this run: until the handler gets there, it
        #: replays what an earlier run did (see :attr:`replaying`).
        self._replay_end = max((step.seq for step in invocation.journal.steps), default=-1) + 1

    # -- what the handler can read -------------------------------------
    @property
    def principal(self) -> Principal:
        return self._inv.principal

    @property
    def user(self) -> Any:
        """The Django user making the call (``AnonymousUser`` when anonymous)."""
        return self._inv.principal.user

    @property
    def call_id(self) -> str | None:
        """The ``ToolCall`` row's id, once the call has one."""
        return self._inv.call_id

    @property
    def protocol_version(self) -> str:
        return self._inv.protocol_version

    @property
    def client_capabilities(self) -> dict[str, Any]:
        return self._inv.client_capabilities

    @property
    def progress_token(self) -> Any:
        """The request's ``_meta.progressToken`` (None when the client asked for no progress)."""
        return self._inv.progress_token

    @property
    def journal(self) -> Journal:
        return self._inv.journal

    @property
    def replaying(self) -> bool:
        """Whether the handler is still replaying steps an earlier run journaled (it has not yet
        passed the last of them). What it reports meanwhile (progress, log messages) the earlier
        run reported when it got there: the runtime does not send it again."""
        return self._cursor < self._replay_end

    # -- steps ---------------------------------------------------------
    def _key(self, kind: str, key: str | None) -> str:
        if key is not None:
            return check_step_key(key)
        number = self._auto_keys.get(kind, 0)
        self._auto_keys[kind] = number + 1
        return f"{kind}-{number}"

    def _require(self, capability: dict[str, Any], present: bool) -> None:
        if not present:
            raise McpError(
                MISSING_CLIENT_CAPABILITY,
                f"This call needs a client capability the request did not declare: {capability}",
                {"requiredCapabilities": capability},
                http_status=400,
            )

    def elicit(
        self,
        message: str,
        schema: type[BaseModel] | dict[str, Any] | None = None,
        *,
        key: str | None = None,
    ) -> StepRequest[Any]:
        """Ask the user for structured input (form mode).

        Returns an instance of ``schema`` (a pydantic model) or the content
        dict (a JSON Schema dict). Raises :class:`ElicitationDeclined` or
        :class:`ElicitationCancelled` when the user does not accept.
        """
        if schema is not None and not isinstance(schema, dict) and not (isinstance(schema, type) and issubclass(schema, BaseModel)):
            # A dataclass or TypedDict (which tool parameters take) failed with AttributeError:
            # 'model_json_schema' (found by a review of the tool author's API).
            raise TypeError(f"ctx.elicit's schema is a pydantic model class or a JSON Schema dict, not {schema!r}: "
                            f"declare the form as a pydantic BaseModel")
        caps = self.client_capabilities.get("elicitation")
        # Form mode, when declared, or when no mode is: an empty object means form mode only (the
        # 2025-11-25 back-compatibility rule), as any object did before modes existed. A client that
        # declared URL mode alone is never sent a form (servers MUST NOT send an undeclared mode).
        self._require({"elicitation": {"form": {}}}, isinstance(caps, dict) and ("form" in caps or "url" not in caps))
        asked = _text(schema) or {"type": "object", "properties": {}}
        earlier = _earlier_elicitation_schemas(asked)
        unsendable: TypeError | None = None
        try:
            requested = _flat_elicitation_schema(asked)
        except TypeError as exc:
            # A model no form field expresses (int | str, a nested model), which earlier releases
            # sent all the same: a step they journaled replays; a new one raises (StepRequest.unsendable).
            if not earlier:
                raise
            requested, earlier, unsendable = earlier[0], earlier[1:], exc
        message = _text(message)
        params: dict[str, Any] = {"mode": "form", "message": message, "requestedSchema": requested}
        if self._inv.protocol_version < "2025-11-25":
            params.pop("mode")
        model = schema if isinstance(schema, type) and issubclass(schema, BaseModel) else None

        def convert(answer: dict[str, Any]) -> Any:
            if answer["action"] == "decline":
                raise ElicitationDeclined(message)
            if answer["action"] == "cancel":
                raise ElicitationCancelled(message)
            content = answer.get("content") or {}
            if model is None:
                return content
            try:
                return model.model_validate(content)
            except ValidationError as exc:
                raise StepFailed(f"The answer to {message!r} does not fit {model.__name__}: {exc.errors(include_url=False)}") from None

        # The answer was checked when it arrived (mcp_tools.protocol.answers) against requestedSchema
        # and, for what that cannot say, the model's own schema; validators of the model's own code
        # can still refuse it here.
        return StepRequest(self, "elicit", "elicitation/create", params, self._key("elicit", key), convert,
                           answer_schema=_model_answer_schema(model) if model is not None else None,
                           earlier_params=[{**params, "requestedSchema": form} for form in earlier], unsendable=unsendable)

    def elicit_url(self, message: str, url: str, *, elicitation_id: str | None = None, key: str | None = None) -> StepRequest[None]:
        """Send the user to ``url`` (URL mode); returns when they accept.

        Up to 2025-11-25 the request carries ``elicitationId`` (``elicitation_id``, else a new unique
        one); 2026-07-28 removed the field, and its requests go without it.
        """
        caps = self.client_capabilities.get("elicitation")
        self._require({"elicitation": {"url": {}}}, isinstance(caps, dict) and "url" in caps)
        step_key = self._key("elicit", key)
        message = _text(message)
        params = {"mode": "url", "message": message, "url": _text(url)}
        if elicitation_id is not None:
            params["elicitationId"] = elicitation_id

        def convert(answer: dict[str, Any]) -> None:
            if answer.get("action") == "decline":
                raise ElicitationDeclined(message)
            if answer.get("action") != "accept":
                raise ElicitationCancelled(message)

        if is_modern(self._inv.protocol_version):
            # 2026-07-28 removed elicitationId (changelog 11: the retry, not a notification, tells the
            # outcome): none is sent, the handler's only to a call whose journal holds it (an earlier release's).
            return StepRequest(self, "elicit", "elicitation/create", params, step_key, convert, journaled_only="elicitationId")
        # Without an id of the handler's, a new one per elicitation (the spec's "unique identifier").
        return StepRequest(self, "elicit", "elicitation/create", params, step_key, convert,
                           fresh_id=None if elicitation_id is not None else "elicitationId")

    def list_roots(self, *, key: str | None = None) -> StepRequest[list[dict[str, Any]]]:
        """The client's roots (``roots/list``)."""
        self._require({"roots": {}}, "roots" in self.client_capabilities)

        return StepRequest(self, "roots", "roots/list", {}, self._key("roots", key), lambda answer: list(answer["roots"]))

    def elicit_step(
        self,
        message: str,
        schema: type[BaseModel] | dict[str, Any] | None = None,
        *,
        key: str | None = None,
    ) -> StepRequest[Any]:
        """:meth:`elicit` as a step for :meth:`gather`, in any tool: a sync tool's ``ctx.elicit`` asks
        at once (it blocks until answered), so ``ctx.gather(ctx.elicit_step(...), ctx.sample_step(...))``
        is how it asks for a form in the same round as other requests."""
        return ToolContext.elicit(self, message, schema, key=key)

    def elicit_url_step(self, message: str, url: str, *, elicitation_id: str | None = None, key: str | None = None) -> StepRequest[None]:
        """:meth:`elicit_url` as a step for :meth:`gather` (see :meth:`elicit_step`)."""
        return ToolContext.elicit_url(self, message, url, elicitation_id=elicitation_id, key=key)

    def list_roots_step(self, *, key: str | None = None) -> StepRequest[list[dict[str, Any]]]:
        """:meth:`list_roots` as a step for :meth:`gather` (see :meth:`elicit_step`)."""
        return ToolContext.list_roots(self, key=key)

    def sample_step(
        self,
        messages: str | Sequence[dict[str, Any]],
        *,
        max_tokens: int = 1000,
        key: str | None = None,
        **params: Any,
    ) -> StepRequest[dict[str, Any]]:
        """One plain sampling request (no tools) as a step for :meth:`gather`.

        Awaited, it returns the raw ``CreateMessageResult`` dict. Extra keyword
        arguments are sent as request parameters (``systemPrompt=...``).
        """
        sampling_caps = self.client_capabilities.get("sampling")
        self._require({"sampling": {}}, isinstance(sampling_caps, dict))
        conversation = _as_messages(messages)
        params = {"messages": conversation, "maxTokens": max_tokens, **_text(params)}
        return self._sampling_request(params, self._key("sample", key))

    def _may_include_context(self, value: Any) -> bool:
        """Whether this client may be sent ``includeContext: value`` in a new sampling request.

        ``"thisServer"`` and ``"allServers"`` are deprecated since 2025-11-25: servers SHOULD NOT send
        them unless the client declares ``sampling.context`` (client/sampling, Capabilities). Without
        it the parameter is left out, as the spec suggests: it defaults to ``"none"``, and a client
        MAY ignore it anyway, so the handler's request means what it can mean to that client. Older
        protocol versions have no such capability and take any value. A step journaled with the value
        by an earlier release keeps it on replay (its digest holds it): see :meth:`_sampling_request`.
        """
        if value not in ("thisServer", "allServers") or self._inv.protocol_version < "2025-11-25":
            return True
        sampling_caps = self.client_capabilities.get("sampling")
        return isinstance(sampling_caps, dict) and "context" in sampling_caps

    def _sampling_request(self, params: dict[str, Any], key: str, asked: dict[str, Any] | None = None,
                          earlier: Sequence[dict[str, Any]] = ()) -> StepRequest[dict[str, Any]]:
        """A ``sampling/createMessage`` step; an ``includeContext`` this client may not be sent stays
        only where its own journal entry holds it (:attr:`StepRequest.journaled_only`). ``asked``: what
        the handler asked, when ``params`` offer fewer tools (:attr:`StepRequest.asked_params`);
        ``earlier``: what earlier releases asked instead (:attr:`StepRequest.earlier_params`)."""
        journaled_only = None if self._may_include_context(params.get("includeContext")) else "includeContext"
        return StepRequest(self, "sample", "sampling/createMessage", params, key, lambda answer: answer,
                           journaled_only=journaled_only, asked_params=asked, earlier_params=earlier)

    async def sample(
        self,
        messages: str | Sequence[dict[str, Any]],
        *,
        max_tokens: int = 1000,
        system_prompt: str | None = None,
        temperature: float | None = None,
        stop_sequences: list[str] | None = None,
        model_preferences: dict[str, Any] | None = None,
        include_context: Literal["none", "thisServer", "allServers"] | None = None,
        tools: Sequence[Any] | None = None,
        tool_choice: dict[str, Any] | None = None,
        max_tool_calls: int | None = None,
        key: str | None = None,
    ) -> SamplingResult:
        """Borrow the client's model (``sampling/createMessage``).

        With ``tools`` (registered tool names, :class:`~mcp_tools.registry.Tool`
        objects or plain functions), runs the agent loop on the server: each
        ``tool_use`` the model asks for is validated, permission-checked and
        run here, its result sent back, until the model ends its turn.

        ``tool_choice`` ``{"mode": "required"}`` ("the model MUST use at least one tool before
        completing") is sent with the first turn only: the loop goes on only after the model used a
        tool, so the later turns are sent ``{"mode": "auto"}`` and the model can give its answer.
        ``"auto"`` and ``"none"`` are sent with every turn.

        ``include_context`` ``"thisServer"`` or ``"allServers"`` (deprecated by the spec) is sent
        only to a client that declares ``sampling.context`` (or speaks a version older than
        2025-11-25); to others the request goes without it, which they read as ``"none"``.
        """
        from .sampling import repeated_tool_use, run_tool_use, tools_the_caller_may_use

        sampling_caps = self.client_capabilities.get("sampling")
        self._require({"sampling": {}}, isinstance(sampling_caps, dict))
        runtime = self._inv.runtime
        max_tools, default_max_calls = runtime.sampling_limits()
        tool_objects = runtime.resolve_tools(tools or [])
        if tool_objects:
            self._require({"sampling": {"tools": {}}}, isinstance(sampling_caps, dict) and "tools" in sampling_caps)
            if len(tool_objects) > max_tools:
                raise ValueError(f"ctx.sample() got {len(tool_objects)} tools; the limit is {max_tools} (SAMPLING_MAX_TOOLS)")
        offered = await tools_the_caller_may_use(self, tool_objects) if tool_objects else []

        def described(chosen: list[Any], choice: dict[str, Any] | None) -> dict[str, Any]:
            tools_params = {"tools": [{"name": t.name, "description": t.description, "inputSchema": t.input.schema} for t in chosen]}
            return {**tools_params, "toolChoice": choice} if choice is not None else tools_params

        # "required" is met once the model used a tool, which every turn after the first follows:
        # sent again, a model that obeys it could never answer (the loop ran to its call budget).
        later_choice = {**tool_choice, "mode": "auto"} if tool_choice is not None and tool_choice.get("mode") == "required" else tool_choice
        call_budget = max_tool_calls if max_tool_calls is not None else default_max_calls
        conversation = _as_messages(messages)
        base_key = self._key("sample", key)
        tool_calls = 0
        turn = 0
        while True:
            params: dict[str, Any] = {"messages": conversation, "maxTokens": max_tokens}
            for name, value in (
                ("systemPrompt", _text(system_prompt)),
                ("temperature", temperature),
                ("stopSequences", stop_sequences),
                ("modelPreferences", model_preferences),
                ("includeContext", include_context),
            ):
                if value is not None:
                    params[name] = value
            # The step is what the handler asked (its digest); the model is shown only the tools its caller
            # may use, none at all (no tools, no toolChoice) when that is none of them.
            choice = tool_choice if turn == 0 else later_choice
            asked = {**params, **described(tool_objects, choice)} if tool_objects and len(offered) != len(tool_objects) else None
            params.update(described(offered, choice) if offered else {})
            # A later turn journaled by an earlier release, which sent "required" with every turn (a call
            # in flight across the upgrade), is this step on replay and keeps what it journaled.
            digested = asked if asked is not None else params
            earlier = [{**digested, "toolChoice": tool_choice}] if choice is not tool_choice and "toolChoice" in digested else []
            answer = await self._sampling_request(params, base_key if turn == 0 else derived_step_key(base_key, turn), asked, earlier)
            content = answer.get("content")
            blocks = content if isinstance(content, list) else [content]
            uses = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"]
            if not tool_objects or not uses:
                return SamplingResult(answer, tool_calls)
            if tool_calls + len(uses) > call_budget:
                raise StepFailed(f"The model asked for more than {call_budget} tool calls (SAMPLING_MAX_TOOL_CALLS)")
            conversation.append({"role": "assistant", "content": blocks})
            tool_results: list[dict[str, Any]] = []
            use_ids: set[str] = set()
            for use in uses:
                tool_calls += 1
                use_id = str(use.get("id", tool_calls))
                if use_id in use_ids:
                    # The model repeated an id (or gave the number of a use without one): a second
                    # step under one key is refused by the journal, so this use is an error the model
                    # reads, not a failed call. Decided from the journaled answer alone: the same on
                    # every replay, and the uses that are unique keep their keys.
                    tool_results.append(repeated_tool_use(use))
                    continue
                use_ids.add(use_id)
                run_key = self._tool_use_key(base_key, turn, use_id)
                # ToolContext.once: the step itself, awaitable; a sync tool's ctx.once blocks (its
                # async_to_sync, on this event loop, raised RuntimeError for every tool use).
                tool_results.append(await ToolContext.once(self, run_key, run_tool_use, self, offered, use))
            conversation.append({"role": "user", "content": tool_results})
            turn += 1

    def _tool_use_key(self, base_key: str, turn: int, use_id: str) -> str:
        """The step key of the run of the tool use ``use_id`` in turn ``turn`` of sampling ``base_key``.

        The id is the client's model's: any text. Put in the key as it is (``<key>.<turn>.<id>``), it
        let the model name a step the handler keys itself (``ctx.once("draft.0.save")`` after a
        sampling keyed ``draft``, whose model answers with the id ``save``), one of another sampling
        (``<key>.0`` turn 1 is ``<key>.0.1``, the id ``1``'s), or a failed step's (``#failed:``):
        a second step under one key, which failed the call. So the key holds a digest of the id
        (``<key>.<turn>.tool_use.<32 hex digits>``), which only a key chosen to match could equal.

        A run journaled under the former key (a call in flight across the upgrade: its turn is
        replayed from the journal) keeps it, so the call replays instead of turning non-deterministic.
        """
        former = derived_step_key(base_key, turn, use_id)
        journaled = self._inv.journal.at(self._cursor)
        if journaled is not None and journaled.kind == "once" and journaled.key in (former, failed_once_key(former, journaled.seq)):
            return former
        hashed = hashlib.sha256(use_id.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        return derived_step_key(base_key, turn, "tool_use", hashed)

    async def gather(self, *requests: StepRequest[Any]) -> list[Any]:
        """Ask several things in one round (several ``inputRequests`` / saga steps).

        Returns once every one has its answer. A step the client failed (an error, an answer that
        did not fit) raises :class:`StepFailed` then, not before: the first failed one in the
        order given, the others' answers journaled but not returned.
        """
        return await self._resolve(_gatherable(requests))

    async def _resolve(self, requests: list[StepRequest[Any]]) -> list[Any]:
        journal = self._inv.journal
        waiting = False
        steps: list[Step] = []
        for request in requests:
            seq = self._cursor
            self._cursor += 1
            step = journal.at(seq)
            params = request.params
            asked = params if request.asked_params is None else request.asked_params
            if request.journaled_only is not None and request.journaled_only in params and not (
                    step is not None and step.kind == request.kind
                    and request.journaled_only in ((step.request or {}).get("params") or {})):
                params = {name: value for name, value in params.items() if name != request.journaled_only}
                asked = {name: value for name, value in asked.items() if name != request.journaled_only}
            wire = {"method": request.method, "params": params}
            canonical = canonical_json([request.kind, {"method": request.method, "params": asked}])
            step_digest = digest_of_text(canonical)
            if step is None:
                if request.unsendable is not None:
                    raise request.unsendable
                # The digest's text shows most requests storable at once; only one it cannot clear is walked.
                problem = None if asked is params and plainly_storable(canonical) else unstorable_part(params, "params")
                if problem is not None:
                    # The step is journaled (and its round's answer stored) before it is sent: the store
                    # would refuse it there, in whichever process wrote the round, and the call would
                    # fail without saying why (a worker's call stayed live and ran again). The handler's
                    # own failure instead, raised where it asks, as a ctx.once value's is.
                    raise ValueError(f"The {request.method} request of step {request.key or f'step-{seq}'!r} cannot be "
                                     f"journaled: {problem}; ask without it")
                if request.fresh_id is not None:
                    wire = {"method": request.method, "params": {**params, request.fresh_id: uuid.uuid4().hex}}
                if request.answer_schema is not None:
                    wire = {**wire, ANSWER_SCHEMA: request.answer_schema}
                step = Step(seq=seq, kind=request.kind, key=request.key or f"step-{seq}", digest=step_digest, request=wire)
                journal.check_new_key(step.key)
                journal.steps.append(step)
            elif step.kind != request.kind or step.key != request.key or (
                    step.digest != step_digest and not request.is_earlier_form(step.digest)):
                raise NonDeterministicHandler(
                    f"Step {seq} of this call was {step.kind} {step.key!r} but the handler now asks for "
                    f"{request.kind} {request.key!r}{' with a different request' if step.key == request.key else ''}",
                    seq=seq, journaled=(step.kind, step.key), asked=(request.kind, request.key or f"step-{seq}"),
                )
            if not step.answered:
                waiting = True
            steps.append(step)
        if waiting:
            raise Suspend()
        values = []
        for request, step in zip(requests, steps):
            if step.status == "failed":
                err = step.error or {}
                raise StepFailed(f"The client could not complete {step.kind} step {step.key!r}: {err.get('message', 'error')}", err)
            values.append(request.convert(step.response))
        return values

    async def once(self, key: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run a side effect exactly once per call and journal its (JSON) result.

        A sync ``fn`` runs in the same database transaction that journals it,
        so its database writes and the journal entry commit together.

        ``key`` names the step in the journal: 1 to
        :data:`~mcp_tools.engine.journal.STEP_KEY_MAX_LENGTH` (128) characters,
        else ``ValueError`` before anything runs.
        """
        check_step_key(key)
        journal = self._inv.journal
        seq = self._cursor
        self._cursor += 1
        step_digest = digest(["once", key])
        step = journal.at(seq)
        if step is not None:
            failed = step.status == "failed"
            if step.kind != "once" or step.key != (failed_once_key(key, seq) if failed else key):
                raise NonDeterministicHandler(
                    f"Step {seq} of this call was {step.kind} {step.key!r} but the handler now runs once({key!r})",
                    seq=seq, journaled=(step.kind, step.key), asked=("once", key),
                )
            if failed:
                # It failed when it ran (and its writes rolled back): it fails again, the same way,
                # so a handler that caught it takes the same path on every replay.
                raise once_exception(step.error)
            return step.response
        journal.check_new_key(key)  # before the effect runs
        step = Step(seq=seq, kind="once", key=key, digest=step_digest)
        try:
            value = await self._inv.runtime.run_once(self._inv, step, _storable_result(key, fn), args, kwargs)
        finally:
            if step.persisted:  # done, or failed and journaled as such
                journal.steps.append(step)
        return value

    @property
    def cursor(self) -> Any:
        """Where a ``paginate=True`` tool goes on from: the ``next_cursor`` of its previous page, or None."""
        return self._inv.cursor

    @property
    def in_worker(self) -> bool:
        """Whether a background worker runs this call (see :meth:`defer`)."""
        return self._inv.in_worker

    async def defer(self) -> None:
        """Move the rest of this handler's work to a background worker.

        The request that started the call answers according to what the client
        supports (a task, a resume token, or an SSE stream that carries progress
        and the result), and a Celery worker runs the handler again from the top:
        every step before ``defer()`` replays from the journal, so put side effects
        before it inside ``ctx.once``. On the worker, ``defer()`` returns at once.
        """
        if not self._inv.in_worker:
            raise Defer()

    # -- notifications -------------------------------------------------
    async def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Send ``notifications/progress`` (when the client asked for progress) and record it.

        Not again on replay (:attr:`replaying`), and only a value above the last one sent
        for the request: the spec's progress increases with each notification. ``progress`` and
        ``total`` are finite numbers (``ValueError`` otherwise: JSON has no infinity or NaN, and they
        went out as null, which the spec's number refuses; found by a review of the admin console).
        """
        numbers_given: list[Any] = []
        for name, value in (("progress", progress), ("total", total)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, (numbers.Real, decimal.Decimal))
                                      or not math.isfinite(float(value))):
                raise ValueError(f"ctx.report_progress: {name} must be a finite number, not {value!r}")
            # A Decimal (or numpy's numbers) goes out as a JSON number: it went out as its text.
            numbers_given.append(value if value is None or type(value) in (int, float) else float(value))
        progress, total = numbers_given
        await self._inv.runtime.progress(self._inv, progress, total, _text(message), replaying=self.replaying)

    async def log(self, level: str, data: Any, logger: str | None = None) -> None:
        """Send ``notifications/message`` if ``level`` passes the client's log level (not again on replay)."""
        if level not in LOG_LEVELS:
            raise ValueError(f"Unknown log level {level!r}; use one of {', '.join(LOG_LEVELS)}")
        await self._inv.runtime.log(self._inv, level, data, logger, replaying=self.replaying)

    async def info(self, data: Any) -> None:
        await self.log("info", data)


def _storable_result(key: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn``, sync or async as it is, raising :class:`UnstorableOnceValue` for a value its journal
    entry cannot hold (:func:`~mcp_tools.engine.journal.unstorable_part`).

    Raised from inside the effect, it is the effect's failure: a sync effect's writes roll back with
    its transaction, and the step is journaled as failed, so a replay raises it again instead of
    running the effect again. Found by the store instead, it was an internal error that named
    neither the step nor the value, and journaled nothing: a handler that caught it and went on
    ran an async effect again on its next round.
    """

    def check(value: Any) -> Any:
        problem = None if inspect.isawaitable(value) else unstorable_part(value)  # an awaitable: the store says why
        if problem is not None:
            raise UnstorableOnceValue(
                f"ctx.once({key!r}, ...) returned a value its journal cannot store: {problem}; return one without it")
        return value

    # The runtime's own test of an async effect (server.core.Runtime._run_once): the wrapper is what it tests.
    # A sync decorator (functools.wraps) around an async function is that async function: it returned
    # the coroutine in the store's thread, refused there ("returns an awaitable"), as a tool's was taken for sync.
    if asyncio.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None)) or wraps_a_coroutine_function(fn):

        async def checked_async(*args: Any, **kwargs: Any) -> Any:
            return check(await call_async(fn, *args, **kwargs))

        return checked_async

    def checked(*args: Any, **kwargs: Any) -> Any:
        return check(fn(*args, **kwargs))

    return checked


def _gatherable(requests: tuple[Any, ...]) -> list[StepRequest[Any]]:
    """``requests`` if each is a question for the client, else a ``TypeError`` saying what is: a
    ``ctx.once(...)`` (a coroutine) failed deep in the engine with an AttributeError."""
    for request in requests:
        if not isinstance(request, StepRequest):
            if inspect.iscoroutine(request):
                request.close()  # never awaited: no RuntimeWarning on top of the TypeError
            raise TypeError(f"ctx.gather takes the requests of ctx.elicit_step, ctx.elicit_url_step, ctx.sample_step and "
                            f"ctx.list_roots_step (or, in an async tool, of ctx.elicit, ctx.elicit_url and ctx.list_roots, "
                            f"not awaited), not {type(request).__name__}: in a sync tool ctx.elicit, ctx.elicit_url "
                            f"and ctx.list_roots ask at once and return the answer")
    return list(requests)


#: What a sync handler's run is inside of where it may make no ``ctx`` step (``Invocation.state``):
#: a ``ctx.once`` function, a model action's method (:meth:`SyncToolContext._refusing_steps`).
_STEPS_REFUSED = "mcp_tools.steps_refused"
#: The ``ctx.log`` lines a sync ``ctx.once`` function made, sent once it returns (``Invocation.state``).
_LOGS_HELD = "mcp_tools.logs_held"


class SyncToolContext(ToolContext):
    """The context given to sync handlers: the same steps, as blocking calls.

    A stopped run (:attr:`Invocation.stopped`) cannot interrupt the handler's thread: each step
    raises ``asyncio.CancelledError`` instead, so the handler stops at its next ``ctx`` step.
    """

    def _go_on(self, step: str = "") -> None:
        if self._inv.stopped:
            raise asyncio.CancelledError("the call was stopped")
        refused = self._inv.state.get(_STEPS_REFUSED)
        if refused is None:
            return
        inside, once_only = refused
        if not once_only:
            # From inside a ``ctx.once`` function, which runs in the store's thread, in the transaction
            # that journals it: this step's store work would queue behind that function, waiting on
            # itself, and every durable call of the process behind both (a confirmed model action's
            # method that took ``ctx`` and made a step hung the server).
            raise RuntimeError(f"{inside} cannot make ctx steps (once, elicit, sample, progress): it runs in "
                               "the store's thread, inside the transaction that journals it. Make them before or after.")
        if step == "once":
            # From code that holds a database transaction of its own (a model action's method): the
            # effect runs in the store's thread, on another connection, and would wait on that
            # transaction's locks (SQLite's write lock, a row lock) while the transaction waits for it.
            raise RuntimeError(f"{inside} cannot call ctx.once: it runs inside a database transaction, which the "
                               "effect would wait on. Call it before or after.")

    @contextlib.contextmanager
    def _refusing_steps(self, inside: str, *, once_only: bool = False) -> Iterator[None]:
        """While in the block (code that runs inside a database transaction: ``inside`` names it), a ``ctx``
        step raises ``RuntimeError`` instead of waiting on the store, or on the transaction's locks:
        every step, or with ``once_only`` only ``ctx.once`` (the others need the store only for a call
        with a row, and do not wait on the caller's own transaction). An outer refusal of every step stays."""
        state = self._inv.state
        outer = state.get(_STEPS_REFUSED)
        if outer is None or outer[1]:
            state[_STEPS_REFUSED] = (inside, once_only)
        try:
            yield
        finally:
            if outer is None:
                state.pop(_STEPS_REFUSED, None)
            else:
                state[_STEPS_REFUSED] = outer

    def elicit(self, *args: Any, **kwargs: Any) -> Any:
        self._go_on()
        request = super().elicit(*args, **kwargs)
        return async_to_sync(self._resolve)([request])[0]

    def elicit_url(self, *args: Any, **kwargs: Any) -> Any:
        self._go_on()
        request = super().elicit_url(*args, **kwargs)
        return async_to_sync(self._resolve)([request])[0]

    def list_roots(self, *args: Any, **kwargs: Any) -> Any:
        self._go_on()
        request = super().list_roots(*args, **kwargs)
        return async_to_sync(self._resolve)([request])[0]

    def sample(self, *args: Any, **kwargs: Any) -> Any:
        self._go_on()
        return async_to_sync(super().sample)(*args, **kwargs)

    def gather(self, *requests: StepRequest[Any]) -> list[Any]:  # type: ignore[override]
        """:meth:`ToolContext.gather`, blocking: in a sync tool the requests come from ``ctx.elicit_step``,
        ``ctx.elicit_url_step``, ``ctx.sample_step`` and ``ctx.list_roots_step`` (``ctx.elicit`` and
        ``ctx.list_roots`` ask at once here). It returned
        the coroutine, never awaited: nothing was asked and the tool went on."""
        self._go_on()
        return async_to_sync(self._resolve)(_gatherable(requests))

    def once(self, key: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        self._go_on("once")
        held: list[tuple[str, Any, str | None]] = []
        outer_held = self._inv.state.get(_LOGS_HELD)
        if outer_held is None:
            self._inv.state[_LOGS_HELD] = held
        try:
            with self._refusing_steps(f"The function of ctx.once({key!r}, ...)"):  # a step made by ``fn`` is refused
                return async_to_sync(super().once)(key, fn, *args, **kwargs)
        finally:
            if outer_held is None:
                self._inv.state.pop(_LOGS_HELD, None)
                # Its log lines, held while it ran (they went out before steps there were refused; found by
                # the revB review), go out now, whether it returned or raised.
                for level, data, logger in held:
                    async_to_sync(super().log)(level, data, logger)

    def report_progress(self, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        self._go_on()
        async_to_sync(super().report_progress)(*args, **kwargs)

    def defer(self) -> None:  # type: ignore[override]
        if not self._inv.in_worker:
            raise Defer()

    def log(self, level: str, data: Any, logger: str | None = None) -> None:  # type: ignore[override]
        held = self._inv.state.get(_LOGS_HELD)
        refused = self._inv.state.get(_STEPS_REFUSED)
        if held is not None and refused is not None and not refused[1] and not self._inv.stopped:
            # From a ctx.once function: sent when it returns (sending it from the store's thread could wait
            # on that thread); a log line is no journaled step, so the function may make one.
            if level not in LOG_LEVELS:
                raise ValueError(f"Unknown log level {level!r}; use one of {', '.join(LOG_LEVELS)}")
            held.append((level, data, logger))
            return
        self._go_on()
        async_to_sync(super().log)(level, data, logger)

    def info(self, data: Any) -> None:  # type: ignore[override]
        self.log("info", data)
