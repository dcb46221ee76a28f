"""What model actions and toolsets share: lazy tools, lookups, permissions, confirmation, results.

Model tools are declared while models are still loading (``@model_action`` in a
model's class body), so their schemas, which need DRF serializers and therefore
every related model, are built on first use rather than at declaration.
"""

from __future__ import annotations

import contextlib
import datetime
import decimal
import heapq
import inspect
import json
import os
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Annotated, Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core import checks
from django.core.exceptions import FieldDoesNotExist, ObjectDoesNotExist
from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.serializers.json import DjangoJSONEncoder
from django.db import IntegrityError, models
from django.http import HttpRequest
from django.utils.dateparse import parse_duration
from django.utils import timezone
from django.utils.text import capfirst, slugify
from pydantic import AfterValidator, BeforeValidator, Field, TypeAdapter, ValidationError

from ..engine.context import ToolContext
from ..engine.errors import ElicitationCancelled, ElicitationDeclined, NonDeterministicHandler
from ..protocol.errors import MAX_ARGUMENT_ERRORS, InvalidArguments
from ..registry import Tool, registry
from ..registry.results import ToolError, ToolResult
from ..registry.schemas import SCHEMA_MAP_KEYWORDS, InputSpec, OutputSpec, argument_type_errors, format_validation_errors, openapi_to_json_schema, serializer_mapper, typed_by_drf

MODEL_BACKEND = "django.contrib.auth.backends.ModelBackend"


class ModelTool(Tool):
    """A registry :class:`Tool` whose schemas are built when first needed.

    ``resolve`` returns ``(input, output)``; it runs on the first read of
    either, once every model is loaded.
    """

    resolve: Callable[[], tuple[InputSpec, OutputSpec]] | None = None
    _input: InputSpec | None = None
    _output: OutputSpec | None = None

    def _resolved(self) -> None:
        resolve = self.resolve
        if resolve is not None:
            # Cleared only once the schemas are built: a build that fails (a serializer field no
            # schema fits) fails again at each use, never leaving the placeholder schema, which
            # would let calls reach the handler unvalidated.
            self._input, self._output = resolve()
            self.resolve = None

    def rebuild(self, resolve: Callable[[], tuple[InputSpec, OutputSpec]]) -> None:
        """Build the schemas again on next use (what they are made of changed), and the ``tools/list`` entry."""
        self.resolve = resolve
        self._wire = None

    @property
    def input(self) -> InputSpec:
        self._resolved()
        assert self._input is not None
        return self._input

    @input.setter
    def input(self, value: InputSpec) -> None:
        self._input = value

    @property
    def output(self) -> OutputSpec:
        self._resolved()
        assert self._output is not None
        return self._output

    @output.setter
    def output(self, value: OutputSpec) -> None:
        self._output = value


PLACEHOLDER_INPUT = InputSpec(schema={"type": "object"}, validate=lambda arguments: arguments)
PLACEHOLDER_OUTPUT = OutputSpec("text", None, None)


def build_tool(
    name: str,
    handler: Callable[..., Any],
    resolve: Callable[[], tuple[InputSpec, OutputSpec]],
    *,
    title: str,
    description: str,
    annotations: dict[str, Any],
    permissions: Sequence[str],
) -> ModelTool:
    tool = ModelTool(
        name=name,
        fn=handler,
        title=title,
        description=description,
        input=PLACEHOLDER_INPUT,
        output=PLACEHOLDER_OUTPUT,
        annotations=annotations,
        permissions=tuple(permissions),
        context_param="ctx",
        is_async=False,
    )
    tool.resolve = resolve
    return tool


# -- names and titles -----------------------------------------------------------------------

def default_prefix(model: type[models.Model]) -> str:
    """``shop.orders`` for ``shop.Order``: the app label and the plural verbose name."""
    plural = slugify(str(model._meta.verbose_name_plural)).replace("-", "_") or model._meta.model_name
    return f"{model._meta.app_label}.{plural}"


def verbose(model: type[models.Model], plural: bool = False) -> str:
    return str(model._meta.verbose_name_plural if plural else model._meta.verbose_name)


def with_article(noun: str) -> str:
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


def humanize(name: str) -> str:
    return capfirst(name.replace("_", " ").strip()) or name


def model_perm(model: type[models.Model], action: str) -> str:
    """``app_label.<action>_<model>``, the default permission names Django creates."""
    return f"{model._meta.app_label}.{action}_{model._meta.model_name}"


def known_permissions(model_or_none: type[models.Model] | None = None) -> set[str]:
    """Every ``app_label.codename`` the installed models declare (defaults and ``Meta.permissions``).

    Read from the models, not the database, so ``manage.py check`` works before ``migrate``.
    """
    from django.apps import apps

    found: set[str] = set()
    for model in apps.get_models():
        opts = model._meta
        for action in opts.default_permissions:
            found.add(f"{opts.app_label}.{action}_{opts.model_name}")
        for codename, _ in opts.permissions:
            found.add(f"{opts.app_label}.{codename}")
    return found


# -- lookups --------------------------------------------------------------------------------

#: An integer column's value: a JSON integer (strict: not "11", not true) of at most 64 bits, which
#: every database takes (a larger one is a -32602 error, not an overflow inside the database driver).
DbInt = Annotated[int, Field(strict=True, ge=-(2**63), le=2**63 - 1)]


def _django_duration(value: Any) -> Any:
    """A duration as Django writes it (``"1 00:00:00"``, how a row's duration is listed) or ISO 8601;
    anything else is left to pydantic (seconds, or its refusal)."""
    if not isinstance(value, str):
        return value
    try:
        return parse_duration(value) or value
    except OverflowError:  # past timedelta's range ("P9999999999D"): a refusal, not an internal error
        raise ValueError(_DURATION_RANGE) from None


#: The widest duration every database's column holds: SQLite keeps one as a 64-bit count of microseconds.
_DURATION_MICROSECONDS = 2**63 - 1
_DURATION_RANGE = f"a duration of at most {_DURATION_MICROSECONDS // 86_400_000_000:,} days either way"


def _db_duration(value: datetime.timedelta) -> datetime.timedelta:
    """``value`` if every database can compare a column with it (SQLite: a 64-bit count of microseconds;
    past it the driver raised OverflowError, an internal error); else a refusal."""
    if abs((value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds) > _DURATION_MICROSECONDS:
        raise ValueError(_DURATION_RANGE)
    return value


def _no_offset(value: datetime.time) -> datetime.time:
    if value.tzinfo is not None:
        raise ValueError("a time of day without a UTC offset: the column holds a time in no time zone")
    return value


def _utc_in_range(value: datetime.datetime) -> datetime.datetime:
    """``value`` if the database can be given it: with ``USE_TZ`` a datetime is sent in UTC, and one in
    year 1 or 9999 whose UTC time falls outside them (``0001-01-01T00:00:00+01:00``) made the driver's
    conversion an ``OverflowError``, an internal error."""
    if settings.USE_TZ:
        try:
            (timezone.make_aware(value) if timezone.is_naive(value) else value).astimezone(datetime.timezone.utc)
        except OverflowError:
            raise ValueError("a date and time whose UTC time falls in the years 1 to 9999") from None
    return value


def _iso_text(value: Any) -> Any:
    """A date or datetime argument as text (ISO 8601), not a number: pydantic would read ``0`` as
    the Unix epoch, which no client sending a date means."""
    if isinstance(value, (int, float)):
        raise ValueError("a date or date and time as ISO 8601 text, not a number")
    return value


_LOOKUP_TYPES: dict[str, Any] = {
    "AutoField": DbInt, "BigAutoField": DbInt, "SmallAutoField": DbInt, "IntegerField": DbInt, "BigIntegerField": DbInt,
    "SmallIntegerField": DbInt, "PositiveIntegerField": DbInt, "PositiveBigIntegerField": DbInt,
    "PositiveSmallIntegerField": DbInt, "UUIDField": uuid.UUID,
    # Strictly what the column holds, as integers are: no 1 or "yes" for true, no true or "nan" for a
    # number, no number for a date (pydantic's lax mode takes each).
    "DateField": Annotated[datetime.date, BeforeValidator(_iso_text)],
    "DateTimeField": Annotated[datetime.datetime, BeforeValidator(_iso_text), AfterValidator(_utc_in_range)], "DecimalField": decimal.Decimal,
    "FloatField": Annotated[float, Field(strict=True, allow_inf_nan=False)], "BooleanField": Annotated[bool, Field(strict=True)],
    # Not text: QuerySet.filter takes no text for a duration, and text that is no time is a
    # ValidationError at the query (an internal error); so is an aware time on most databases.
    "DurationField": Annotated[datetime.timedelta, BeforeValidator(_django_duration), AfterValidator(_db_duration)],
    "TimeField": Annotated[datetime.time, AfterValidator(_no_offset)],
}


def compared_field(field: Any) -> Any:
    """The field whose values a lookup on ``field`` compares: for a relation of any kind (a foreign
    key, a one-to-one, a many-to-many, a reverse one) the key of the row it reaches, followed until it
    is no relation (a multi-table child's key is a one-to-one to its parent's)."""
    for _ in range(16):  # a chain of parent links is short; bounded all the same
        if not field.is_relation:
            return field
        target = getattr(field, "target_field", None)
        if target is None or target is field:
            return field
        field = target
    return field


def field_python_type(field: models.Field[Any, Any]) -> Any:
    """The Python type an argument that names this field's value validates as (``str`` by default).

    A decimal is one its column can hold, of at most ``max_digits`` digits, ``decimal_places`` of
    them after the point: PostgreSQL refuses to compare a column with one past its ``numeric``
    range (``1e999999``, ``1e-999999``: "value overflows numeric format", an internal error), and
    a value the column cannot hold is equal to no row.
    """
    target = compared_field(field)
    kind = target.get_internal_type()
    max_digits, places = getattr(target, "max_digits", None), getattr(target, "decimal_places", None)
    if kind == "DecimalField" and max_digits is not None and places is not None:
        return Annotated[decimal.Decimal, Field(max_digits=max_digits, decimal_places=places)]
    return _LOOKUP_TYPES.get(kind, str)


def lookup_field(model: type[models.Model], name: str) -> models.Field[Any, Any]:
    if name == "pk":
        assert model._meta.pk is not None
        return model._meta.pk
    field = model._meta.get_field(name)
    if not isinstance(field, models.Field):
        raise FieldDoesNotExist(f"{model.__name__}.{name} is a relation, not a field")
    return field


def value_at(obj: Any, path: str) -> Any:
    """The value a field path names on a row, across forward relations (``customer__name``).

    A path ending in a relation (``customer``) names the related row's key (``customer_id``), as
    the database compares and orders it: the related object itself is no JSON value, no cursor.
    A missing reverse one-to-one row is None.
    """
    parts = path.split("__")
    for index, part in enumerate(parts):
        if obj is None:
            return None
        if index == len(parts) - 1 and isinstance(obj, models.Model):
            try:
                field = obj._meta.get_field(part)
            except FieldDoesNotExist:  # "pk", a property
                field = None
            if field is not None and field.is_relation and field.concrete:
                return getattr(obj, field.attname)
        try:
            obj = getattr(obj, part)
        except ObjectDoesNotExist:  # a reverse one-to-one with no row
            return None
    return obj.pk if isinstance(obj, models.Model) else obj


def get_object(queryset: models.QuerySet[Any], field: str, value: Any) -> Any:
    """The row of ``queryset`` whose ``field`` is ``value``.

    A row that exists outside the queryset answers exactly like one that does
    not exist, so a caller cannot probe for rows they may not see.
    """
    model = queryset.model
    try:
        return queryset.get(**{field: value})
    except (ObjectDoesNotExist, ValueError, TypeError, DjangoValidationError):
        pass
    except model.MultipleObjectsReturned:
        pass
    raise not_found(model, field, value)


def by_lookup(field: str, value: Any) -> str:
    """How answers name a row: by what the caller asked for (``with id 7``), never by its ``__str__``."""
    return f"with {'id' if field == 'pk' else field} {json_dumps(value)}"


def not_found(model: type[models.Model], field: str, value: Any) -> ToolError:
    """The one answer for a row the caller may not reach: missing, outside the queryset, or not
    theirs to view (:func:`check_object`), so the answers cannot tell these apart."""
    return ToolError(f"No {verbose(model)} {by_lookup(field, value)}.")


# -- the request ----------------------------------------------------------------------------

class ToolRequest(HttpRequest):
    """The request :func:`tool_request` makes: served on ``origin`` (``scheme://host[:port]``), so that
    ``build_absolute_uri`` (DRF's ``FileField``, hyperlinked fields) writes absolute URLs on it."""

    def __init__(self, origin: str) -> None:
        super().__init__()
        parts = urlsplit(origin)
        self._origin_scheme = parts.scheme or "http"
        self._origin_host = parts.netloc or "localhost"
        default_port = "443" if self._origin_scheme == "https" else "80"
        self.META["SERVER_NAME"] = parts.hostname or "localhost"
        self.META["SERVER_PORT"] = str(parts.port) if parts.port else default_port
        self.META["HTTP_HOST"] = self._origin_host

    def _get_scheme(self) -> str:
        return self._origin_scheme

    def get_host(self) -> str:
        # The site's own origin (default_origin), not a header a client sent: nothing to check
        # against ALLOWED_HOSTS (an OAUTH RESOURCE host need not be listed there).
        return self._origin_host


def default_origin() -> str:
    """The origin the absolute URLs of a tool's answer are built on. A tool's handler is given no HTTP
    request (over stdio, on a worker, in a later round there is none), so it is the site's: the origin
    of ``MCP_TOOLS["OAUTH"]["RESOURCE"]`` when set (the URL clients call), else the first host of
    ``ALLOWED_HOSTS`` that names one (not ``*``; ``.example.com`` as ``example.com``), over ``https``
    when ``SECURE_SSL_REDIRECT`` is on, else ``http://localhost``."""
    from ..conf import mcp_settings

    oauth = mcp_settings.OAUTH
    resource = oauth.get("RESOURCE") if isinstance(oauth, dict) else None
    if isinstance(resource, str):
        parts = urlsplit(resource)
        if parts.scheme in ("http", "https") and parts.netloc:
            return f"{parts.scheme}://{parts.netloc}"
    scheme = "https" if getattr(settings, "SECURE_SSL_REDIRECT", False) else "http"
    for host in getattr(settings, "ALLOWED_HOSTS", None) or ():
        host = str(host).lstrip(".")
        if host and "*" not in host:
            return f"{scheme}://{host}"
    return f"{scheme}://localhost"


def is_composite_key(field: Any) -> bool:
    """Whether ``field`` is Django 5.2's ``CompositePrimaryKey``, whose value (a tuple) no lookup argument names."""
    return isinstance(field, models.CompositePrimaryKey)


def raised_in_the_database(exc: BaseException) -> bool:
    """Whether ``exc`` was raised while Django's database layer ran (a driver refusing a value as it
    binds it, SQLite's ``OverflowError`` past 64 bits), not by the project's own code."""
    marker = f"{os.sep}django{os.sep}db{os.sep}"
    tb = exc.__traceback__
    while tb is not None:
        if marker in tb.tb_frame.f_code.co_filename:
            return True
        tb = tb.tb_next
    return False


def tool_request(user: Any, method: str = "POST") -> HttpRequest:
    """A minimal Django request for code written for DRF views and the admin: ``user`` is the
    caller, ``method`` what the action would be over HTTP. DRF's ``CurrentUserDefault`` (a
    ``HiddenField`` stamping the owner) reads ``serializer.context["request"].user``; admin
    actions and ``has_<name>_permission`` read ``request.user``. No headers but its host, no body:
    an MCP call has no HTTP request of its own to give (its transport may be stdio). Its host is
    :func:`default_origin`'s, so ``build_absolute_uri`` (a ``FileField`` holding a file, a
    hyperlinked field) writes absolute URLs on the site's origin: without one it was a KeyError."""
    request = ToolRequest(default_origin())
    request.method = method
    request.user = user
    return request


def drf_request(user: Any, method: str = "POST") -> Any:
    """:func:`tool_request` as DRF's ``Request`` around it, what code written for a DRF view reads:
    ``request.query_params`` (none), ``request.data`` (empty), ``request.user`` (the caller). A toolset's
    ``self.request`` and the serializers' context have it; admin actions keep the Django request (the
    admin's messages want one)."""
    from rest_framework.request import Request

    request = Request(tool_request(user, method))
    # Authenticated already, by no authenticator of DRF's: its lazy authentication would run on the first
    # read of ``auth`` or ``successful_authenticator`` and put an anonymous user in the caller's place.
    request._authenticator = None
    request.auth = None
    request.user = user
    return request


# -- permissions ----------------------------------------------------------------------------

def object_permissions_enabled(option: bool | None) -> bool:
    """Whether to ask ``user.has_perm(perm, obj)``; ``None`` means "when a backend can answer".

    Django's ``ModelBackend`` says no to every object-level question, so the
    check is only meaningful when ``AUTHENTICATION_BACKENDS`` lists another
    backend (django-guardian, django-rules, your own).
    """
    if option is not None:
        return option
    backends = getattr(settings, "AUTHENTICATION_BACKENDS", [MODEL_BACKEND])
    return any(path != MODEL_BACKEND for path in backends)


def check_object(user: Any, perms: Iterable[str], obj: Any, enabled: bool, what: str, lookup: tuple[str, Any]) -> None:
    """Refuse with a tool error unless ``user`` holds every permission on ``obj``.

    As DRF's ``DjangoObjectPermissions``: a caller who may not even view the row is answered as
    for a row that does not exist (:func:`not_found`, ``lookup`` is the field and value it was
    asked by); one who may view it is refused by that lookup, never by the row's ``__str__``.
    """
    refusal = object_refusal(user, perms, obj, enabled, what, lookup)
    if refusal is not None:
        raise refusal


def object_refusal(user: Any, perms: Iterable[str], obj: Any, enabled: bool, what: str, lookup: tuple[str, Any]) -> ToolError | None:
    """The tool error :func:`check_object` raises, or None when ``user`` holds every permission on ``obj``;
    also asked of the row a confirmed change acts on, as it is after the yes."""
    if not enabled:
        return None
    perms = list(perms)
    missing = [perm for perm in perms if not user.has_perm(perm, obj)]
    if not missing:
        return None
    model = type(obj)
    view = model_perm(model, "view")
    if view in missing or (view not in perms and not user.has_perm(view, obj)):
        return not_found(model, *lookup)
    return ToolError(f"You may not {what} the {verbose(model)} {by_lookup(*lookup)}: "
                     f"permission {', '.join(missing)} refused for this object.")


def refusing_once(ctx: Any, inside: str) -> contextlib.AbstractContextManager[None]:
    """A block of a write's transaction (``inside`` names the code: a model action's method, a toolset's
    ``perform_*``) where ``ctx.once`` raises ``RuntimeError``: its effect, in the store's thread on
    another connection, would wait on the transaction's locks while the transaction waits for it."""
    refusing = getattr(ctx, "_refusing_steps", None)  # a sync handler's context (SyncToolContext)
    return refusing(inside, once_only=True) if refusing is not None else contextlib.nullcontext()


# -- confirmation ---------------------------------------------------------------------------

CONFIRM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean", "title": "Confirm", "description": "Go ahead?"}},
    "required": ["confirm"],
}


def confirm(ctx: ToolContext, message: str, refused: str, changed: str) -> None:
    """Ask the user yes/no (``ctx.elicit``) before anything changes; a no ends the call with ``refused``.

    Works in both protocol eras: on 2025-11-25 the question goes over the
    session's stream, on 2026-07-28 as an ``input_required`` round. There the answer comes in a
    later round, which asks again to read it: if ``message`` is no longer the one the user was
    asked (it shows the row, and the row was edited in between), the yes was to another
    question, and the call ends with ``changed`` (a tool error, nothing done).
    """
    try:
        answer = ctx.elicit(message, CONFIRM_SCHEMA, key="confirm")
    except NonDeterministicHandler as exc:
        if exc.request_changed:
            # The same question in other words: the data it shows changed, the handler did not.
            raise ToolError(changed) from None
        raise
    except (ElicitationDeclined, ElicitationCancelled):
        raise ToolError(refused) from None
    if not (isinstance(answer, dict) and answer.get("confirm") is True):
        raise ToolError(refused)


def changed_since_asked(model: type[models.Model], field: str, value: Any) -> str:
    """What :func:`confirm` answers when the row changed between the question and the answer."""
    return f"The {verbose(model)} {by_lookup(field, value)} changed since you were asked to confirm; nothing was done, call again."


class _Empty:
    """What a template shows for a value nobody gave: nothing, whatever the template does with it
    (``{discount:.2f}``, ``{discount.normalize}``, ``{items[0]}``)."""

    def __format__(self, spec: str) -> str:
        return ""

    def __str__(self) -> str:
        return ""

    def __repr__(self) -> str:  # ``{note!r}``: as the empty text it stands for
        return "''"

    def __getattr__(self, name: str) -> _Empty:
        return self

    def __getitem__(self, key: Any) -> _Empty:
        return self


class _Blank(dict[str, Any]):
    """A template's values where one not given reads as empty: an optional field of a ``serializer=``
    the caller left out whose method has no default for it either."""

    def __missing__(self, key: str) -> _Empty:
        return _Empty()


def confirm_message(template: bool | str, default: str, /, **values: Any) -> str:
    # Positional-only: a method's parameter named ``default`` or ``template`` is one of ``values``
    # (it was "got multiple values for argument", an internal error before the user was asked).
    if isinstance(template, str):
        # format_map: a field the caller left out is empty (it was a KeyError, an internal error).
        return template.format_map(_Blank(values))
    return default


# -- results --------------------------------------------------------------------------------

def json_dumps(value: Any) -> str:
    return json.dumps(value, cls=DjangoJSONEncoder, ensure_ascii=False)


def jsonable(value: Any) -> Any:
    """Serializer output (Decimals, dates, UUIDs, ReturnDicts) as plain JSON values."""
    return json.loads(json_dumps(value))


def structured(data: dict[str, Any]) -> ToolResult:
    return ToolResult(content=[{"type": "text", "text": json_dumps(data)}], structured_content=data)


def drf_errors(detail: Any) -> dict[str, list[str]]:
    """DRF's ``serializer.errors`` flattened to ``{field: [messages]}`` (nested fields dotted)."""
    flat: dict[str, list[str]] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for key, inner in value.items():
                walk(f"{prefix}.{key}" if prefix else str(key), inner)
        elif isinstance(value, list) and value and all(isinstance(item, (dict, list)) for item in value):
            for index, inner in enumerate(value):
                walk(f"{prefix}.{index}", inner)
        else:
            messages = value if isinstance(value, list) else [value]
            flat.setdefault(prefix or "non_field_errors", []).extend(str(message) for message in messages)

    walk("", detail)
    return flat


def validation_error_result(errors: dict[str, list[str]]) -> ToolResult:
    """A tool error naming each field and its messages, as DRF's 400 body would."""
    lines = [f"{field}: {' '.join(messages)}" for field, messages in errors.items()]
    return ToolResult(
        content=[{"type": "text", "text": "Invalid input. " + " ".join(lines)}],
        structured_content={"errors": errors},
        is_error=True,
    )


def database_refusal(exc: IntegrityError, what: str) -> dict[str, list[str]]:
    """The errors of a write the database refused (a protected or restricted reference, a unique or
    foreign-key rule no validator saw), for :func:`validation_error_result`: what, not the database's text."""
    if isinstance(exc, (models.ProtectedError, models.RestrictedError)):
        referring = sorted({verbose(type(row), plural=True) for row in getattr(exc, "protected_objects", None)
                            or getattr(exc, "restricted_objects", None) or ()})
        message = f"{what} refused: {', '.join(referring) or 'other rows'} still refer to it."
    else:
        message = f"{what} refused by the database: it conflicts with existing data (a unique value, or a reference)."
    return {"non_field_errors": [message]}


def refused_at_commit(what: str, write: Callable[[], Any]) -> Any:
    """``write()``, or the tool error of a write the database refused as its transaction committed.

    Django makes foreign keys ``DEFERRABLE INITIALLY DEFERRED`` (PostgreSQL, SQLite): a row still
    referred to by a ``DO_NOTHING`` key, or a key to a row that does not exist, is refused at
    ``COMMIT``. A write whose refusals are caught inside a savepoint (a confirmed change journaled
    by ``ctx.once`` in its transaction, an update inside the transaction that locked its row) sees
    that refusal only here, where nothing was written (or journaled: a replay runs it again).
    """
    try:
        return write()
    except IntegrityError as exc:
        return validation_error_result(database_refusal(exc, what))


def django_validation_errors(exc: DjangoValidationError) -> dict[str, list[str]]:
    if hasattr(exc, "error_dict"):
        return {field: [str(m) for m in messages] for field, messages in exc.message_dict.items()}
    return {"non_field_errors": [str(m) for m in exc.messages]}


# -- schemas --------------------------------------------------------------------------------

def field_schemas(serializer: Any, names: Iterable[str]) -> dict[str, Any]:
    """The JSON Schema of the serializer's fields ``names`` alone, as :func:`serializer_schema`
    advertises them (a call checks the fields it was given, not the whole serializer's schema:
    mapping every field costs a create or update ~100 µs)."""
    mapper = serializer_mapper()
    fields = serializer.fields
    schemas: dict[str, Any] = {}
    for name in names:
        field = fields.get(name)
        if field is None:
            continue
        mapped = mapper.map_field(field)
        if getattr(field, "allow_null", False):  # what map_serializer adds to map_field's schema
            mapped["nullable"] = True
        schemas[name] = openapi_to_json_schema(mapped)
    return schemas


def serializer_input_errors(serializer: Any, data: dict[str, Any]) -> dict[str, list[str]]:
    """What a serializer's input ``data`` is refused for before the serializer's own validation,
    which would take it: a field the advertised schema (:func:`serializer_schema`) does not list,
    unknown, read-only or hidden (a ``HiddenField`` takes its value from its default, never from
    the caller, who was not shown it), then a value of another JSON type than the schema says
    (:func:`argument_type_errors`, which DRF would convert)."""
    from rest_framework import serializers

    shown = {name for name, field in serializer.fields.items() if not field.read_only and not isinstance(field, serializers.HiddenField)}
    unknown = sorted(set(data) - shown)
    if unknown:
        return {name: ["Unknown or read-only field."] for name in unknown}
    return argument_type_errors(field_schemas(serializer, data), data)


def _output_may_be_null(serializer: Any, field: Any) -> bool:
    """Whether a field may write null though its schema says nothing of it: a file field with no file,
    and read-only fields: DRF writes null
    for any attribute that is None (a property, a reverse one-to-one that does not exist) or for its
    ``default=None``, whatever ``allow_null`` says; only a column of the serializer's model that is
    not nullable, or a method field (its method's annotation says), never holds one."""
    from rest_framework import serializers

    if isinstance(field, serializers.FileField) and not getattr(field, "allow_null", False):
        # DRF writes null for a FileField / ImageField with no file (blank=True: ""), writable or not;
        # the official client refused every row without one (a review).
        return True
    if not field.read_only or getattr(field, "allow_null", False) or isinstance(field, serializers.SerializerMethodField):
        return False
    attrs = getattr(field, "source_attrs", None)
    if not attrs:  # source="*": the object itself
        return False
    model = getattr(getattr(serializer, "Meta", None), "model", None)
    if model is not None and len(attrs) == 1 and field.default is not None:
        try:
            column = model._meta.get_field(attrs[0])
        except Exception:  # not a model field (a property, an annotation)
            return True
        return bool(getattr(column, "null", True)) or not getattr(column, "concrete", False)
    return True


#: Keywords of DRF's mapping that say what a serializer takes, not what a row holds: a choice since
#: removed or a blank one (``blank=True`` is no choice), a value from before a validator or a shorter
#: ``max_length``, one written by SQL or a migration. Left out of output schemas, whose values every
#: client may check (the official one does: it refused valid rows); their types stay.
INPUT_ONLY_KEYWORDS = frozenset({"enum", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
                                 "pattern", "minLength", "maxLength", "minItems", "maxItems"})
#: The formats an output schema keeps: what DRF writes for the field's type whatever the row holds.
#: Others are checks of input (``email``, ``uri``, ``ipv4``) or not what is written (``binary``: a URL).
OUTPUT_FORMATS = frozenset({"date", "date-time", "time", "uuid", "decimal", "int32", "int64"})
#: Keywords whose value is a JSON value, not a schema: kept as they are.
_VALUE_KEYWORDS = frozenset({"const", "default", "examples"})


def read_schema(schema: Any) -> Any:
    """An output (read) schema: ``schema`` without the keywords that constrain its values
    (:data:`INPUT_ONLY_KEYWORDS`, formats but :data:`OUTPUT_FORMATS`) at any depth."""
    if isinstance(schema, list):
        return [read_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    read: dict[str, Any] = {}
    for key, value in schema.items():
        if key in INPUT_ONLY_KEYWORDS or (key == "format" and value not in OUTPUT_FORMATS):
            continue
        if key in _VALUE_KEYWORDS:
            read[key] = value
        elif key in SCHEMA_MAP_KEYWORDS and isinstance(value, dict):  # names (a property named "enum"), then schemas
            read[key] = {name: read_schema(sub) for name, sub in value.items()}
        else:
            read[key] = read_schema(value)
    return read


def serializer_schema(serializer: Any, *, writable: bool, partial: bool = False) -> dict[str, Any]:
    """The JSON Schema of a serializer's input (``writable``) or output fields (a row as the database
    may hold it: types, without the input's constraints, :func:`read_schema`)."""
    mapped = serializer_mapper().map_serializer(serializer)
    properties: dict[str, Any] = {}
    fields = serializer.fields
    for name, prop in mapped.get("properties", {}).items():
        if not writable and name in fields and not typed_by_drf(type(fields[name])):
            prop = {}  # a writable field of the project's own class: what it writes is its own
        elif not writable and name in fields and _output_may_be_null(serializer, fields[name]):
            prop = {**prop, "nullable": True}
        prop = openapi_to_json_schema(prop)
        if writable and prop.pop("readOnly", False):
            continue
        if not writable and prop.pop("writeOnly", False):
            continue
        prop.pop("readOnly", None)
        prop.pop("writeOnly", None)
        properties[name] = prop if writable else read_schema(prop)
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if writable:
        required = [name for name in mapped.get("required", []) if name in properties]
        if required and not partial:
            schema["required"] = required
        schema["additionalProperties"] = False
    return schema


def typed_validator(name: str, fields: dict[str, tuple[Any, Any]], *, closed: bool = False) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Validate some arguments with pydantic (types, required); the rest pass through untouched,
    or, ``closed``, are refused (the schema's ``"additionalProperties": false``) as any tool refuses them.

    Errors name the field, like the registry's own validation (:class:`~mcp_tools.protocol.errors.InvalidArguments`).
    """
    adapters = {field: TypeAdapter(annotation) for field, (annotation, _) in fields.items()}

    def validate(arguments: dict[str, Any]) -> dict[str, Any]:
        unknown = set(arguments) - set(fields) if closed else set()
        if unknown:
            # In order, the listed ones only: not an error dict for each of thousands of keys.
            raise InvalidArguments.unknown(name, heapq.nsmallest(MAX_ARGUMENT_ERRORS, unknown), len(unknown))
        values = dict(arguments)
        errors: list[dict[str, Any]] = []
        more = 0  # errors counted past those listed (format_validation_errors)
        for field, (_, default) in fields.items():
            if field not in values:
                if default is inspect.Parameter.empty:
                    errors.append({"field": field, "message": "Field required", "type": "missing"})
                else:
                    values[field] = default
                continue
            try:
                values[field] = adapters[field].validate_python(values[field])
            except ValidationError as exc:
                listed, omitted = format_validation_errors(exc)
                errors.extend({**err, "field": field} for err in listed)
                more += omitted
        if errors:
            raise InvalidArguments(name, errors, more=more)
        return values

    return validate


def type_schema(annotation: Any) -> dict[str, Any]:
    schema = TypeAdapter(annotation).json_schema()
    schema.pop("title", None)
    return schema


# -- registration and checks ----------------------------------------------------------------

class Declaration:
    """Something that registered model tools; ``manage.py check`` asks each for its problems."""

    def check(self, known_perms: set[str]) -> list[checks.CheckMessage]:
        raise NotImplementedError

    def tool_names(self) -> list[str]:
        """The names of the tools it registered (their permissions are its ``check``'s, E033)."""
        raise NotImplementedError

    def serializer_of(self, model: type[models.Model]) -> type | None:
        """The serializer its tools show ``model``'s rows through (a toolset's), or None."""
        return None

    def serializer_context_of(self, model: type[models.Model], ctx: Any) -> dict[str, Any] | None:
        """The context :meth:`serializer_of`'s serializer gets when its tools show a row of ``model`` to
        the caller of ``ctx`` (a toolset's ``retrieve``), or None."""
        return None


#: Every model action and toolset declared in this process (read by ``mcp_tools.checks``).
declarations: list[Declaration] = []


def register_all(tools: Sequence[Tool]) -> None:
    """Register tools all or none: a clash raises ``AlreadyRegistered`` before anything changes."""
    names = [tool.name for tool in tools]
    for name in names:
        if names.count(name) > 1:
            from ..registry import AlreadyRegistered

            raise AlreadyRegistered(f"Two model tools would be named {name!r}")
    done: list[Tool] = []
    try:
        for tool in tools:
            registry.register_tool(tool)
            done.append(tool)
    except Exception:
        for tool in done:
            registry.unregister_tool(tool.name)
        raise


def unregister_all(names: Iterable[str]) -> None:
    for name in names:
        if registry.get_tool(name) is not None:
            registry.unregister_tool(name)


def check_permissions(perms: Iterable[str], known: set[str], where: str, obj: Any) -> list[checks.CheckMessage]:
    return [
        checks.Error(f"{where} requires unknown permission {perm!r}.", hint="Use 'app_label.codename' of an installed model.",
                     obj=obj, id="mcp_tools.E033")
        for perm in perms
        if perm not in known
    ]
