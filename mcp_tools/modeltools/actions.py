"""Model actions: a model method as a tool, like an ``@admin.action`` for MCP clients.

::

    class Order(models.Model):
        @mcp_tools.model_action(confirm="Cancel order {obj}?", permissions=["shop.change_order"])
        def cancel(self, reason: str = "") -> None:
            ...

    # or, for a model you do not own:
    mcp_tools.register_model_action(Order, "cancel", confirm=True)

The tool takes the object's lookup plus the method's parameters, fetches the
object through the action's queryset, checks model and object permissions,
asks for confirmation if told to, runs the method in ``transaction.atomic``
and returns the method's return value when it is annotated (shaped as a plain
tool's), else the object through ``output_serializer=``, the serializer of the
model's toolset, or a ``ModelSerializer`` of every field.
"""

from __future__ import annotations

import inspect
import logging
import typing
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from django.core import checks
from django.core.exceptions import FieldDoesNotExist
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import DataError, IntegrityError, models, transaction
from django.db.models.signals import class_prepared
from rest_framework.exceptions import ValidationError as DRFValidationError

from ..engine.context import ToolContext
from ..engine.journal import derived_step_key
from ..registry import AlreadyRegistered, registry
from ..registry.registry import is_context_hint
from ..registry.results import ToolError, ToolResult
from ..registry.schemas import InputSpec, OutputSpec, input_from_signature, output_from_annotation, parse_param_docs
from . import base
from .databases import current_row, for_writing, write_alias

logger = logging.getLogger("mcp_tools.modeltools")

F = TypeVar("F", bound=Callable[..., Any])

QuerysetOption = models.QuerySet[Any] | Callable[[ToolContext], models.QuerySet[Any]] | None

_MARK = "_mcp_model_action"


class ModelAction(base.Declaration):
    """One model method exposed as a tool (see :func:`model_action`)."""

    def __init__(
        self,
        model: type[models.Model],
        method: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        permissions: Sequence[str] | None = None,
        queryset: QuerysetOption = None,
        lookup_field: str = "pk",
        lookup_arg: str | None = None,
        serializer: type | None = None,
        output_serializer: type | None = None,
        confirm: bool | str = False,
        read_only: bool = False,
        destructive: bool | None = None,
        idempotent: bool = False,
        object_permissions: bool | None = None,
    ) -> None:
        self.model = model
        self.method = method
        self.name = name or f"{base.default_prefix(model)}.{method}"
        self.title = title
        self.description = description
        self.permissions = tuple(permissions) if permissions is not None else (base.model_perm(model, "change"),)
        self.queryset = queryset
        self.lookup_field = lookup_field
        self.lookup_arg = lookup_arg or ("id" if lookup_field == "pk" else lookup_field)
        self.serializer = serializer
        self.output_serializer = output_serializer
        self.confirm = confirm
        self.read_only = read_only
        self.destructive = destructive
        self.idempotent = idempotent
        self.object_permissions = object_permissions
        self.tool: base.ModelTool | None = None

    # -- what the tool is made of -------------------------------------------------------
    def function(self) -> Callable[..., Any] | None:
        fn = getattr(self.model, self.method, None)
        return fn if callable(fn) else None

    def _method_parameters(self, fn: Callable[..., Any]) -> tuple[list[inspect.Parameter], dict[str, Any], str | None]:
        hints = typing.get_type_hints(fn, include_extras=True)
        params = list(inspect.signature(fn).parameters.values())[1:]  # drop self
        context = None
        kept = []
        for param in params:
            annotation = hints.get(param.name)
            if is_context_hint(annotation):  # also ToolContext | None = None, as for a tool
                context = param.name
            elif param.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
                kept.append(param)
        return kept, hints, context

    def annotations(self) -> dict[str, Any]:
        destructive = self.destructive if self.destructive is not None else bool(self.confirm)
        hints: dict[str, Any] = {"title": self._title(), "readOnlyHint": self.read_only}
        if not self.read_only:
            hints["destructiveHint"] = destructive
            hints["idempotentHint"] = self.idempotent
        return hints

    def _title(self) -> str:
        return self.title or f"{base.humanize(self.method)} {base.verbose(self.model)}"

    def build(self) -> base.ModelTool:
        fn = self.function()
        doc = fn.__doc__ if fn is not None else None
        summary, _ = parse_param_docs(doc)
        description = self.description or summary or f"{self._title()}."
        handler = self._handler()
        handler.__module__ = self.model.__module__
        handler.__qualname__ = f"{self.model.__name__}.{self.method}"
        self.tool = base.build_tool(
            self.name, handler, self._schemas, title=self._title(), description=description,
            annotations=self.annotations(), permissions=self.permissions,
        )
        return self.tool

    def _schemas(self) -> tuple[InputSpec, OutputSpec]:
        fn = self.function()
        if fn is None:
            raise AttributeError(f"{self.model.__name__} has no method {self.method!r}")
        field = base.lookup_field(self.model, self.lookup_field)
        lookup_type = base.field_python_type(field)
        _, param_docs = parse_param_docs(fn.__doc__)
        lookup_doc = f"The {'id' if self.lookup_field == 'pk' else self.lookup_field} of the {base.verbose(self.model)}."
        if self.serializer is not None:
            input_spec = self._serializer_input(lookup_type, lookup_doc)
        else:
            params, hints, _ = self._method_parameters(fn)
            if any(p.name == self.lookup_arg for p in params):
                raise TypeError(f"{self.model.__name__}.{self.method} has a parameter named like its lookup {self.lookup_arg!r}")
            lookup = inspect.Parameter(self.lookup_arg, inspect.Parameter.KEYWORD_ONLY)
            input_spec = input_from_signature(
                self.name, [lookup, *params], {**hints, self.lookup_arg: lookup_type}, {**param_docs, self.lookup_arg: lookup_doc}
            )
        return input_spec, self._output_spec(fn)

    def _serializer_input(self, lookup_type: Any, lookup_doc: str) -> InputSpec:
        assert self.serializer is not None
        schema = base.serializer_schema(self.serializer(), writable=True)
        if self.lookup_arg in schema["properties"]:
            # As for a parameter (_schemas): the lookup takes the argument, the serializer never gets it,
            # and every call was "This field is required." under a schema requiring it twice.
            raise TypeError(f"{self.model.__name__}.{self.method}'s serializer has a field named like its lookup {self.lookup_arg!r}")
        schema["properties"] = {self.lookup_arg: {**base.type_schema(lookup_type), "description": lookup_doc}, **schema["properties"]}
        schema["required"] = [self.lookup_arg, *schema.get("required", [])]
        validate = base.typed_validator(self.name, {self.lookup_arg: (lookup_type, inspect.Parameter.empty)})
        return InputSpec(schema=schema, validate=validate)

    @staticmethod
    def _returns(fn: Callable[..., Any]) -> Any:
        """The method's return annotation; ``inspect.Signature.empty`` for none or ``-> None`` (it answers the object)."""
        returns = typing.get_type_hints(fn).get("return", inspect.Signature.empty)
        return inspect.Signature.empty if returns in (None, type(None)) else returns

    def _output_spec(self, fn: Callable[..., Any]) -> OutputSpec:
        returns = self._returns(fn)
        if returns is not inspect.Signature.empty:
            # Whatever it is (a text type, ToolResult, a model), as a plain @tool with it.
            return output_from_annotation(returns)
        return OutputSpec("object", base.serializer_schema(self.object_serializer()(), writable=False), None)

    def object_serializer(self) -> type:
        """The serializer of the object that a method without a return annotation answers.

        ``output_serializer=``; else that of the toolset that serves the model, so the action shows
        no field its toolset hides (of several toolsets with different serializers, the first
        registered one's, narrowed to the fields each of them shows); else one of every field.
        """
        if self.output_serializer is not None:
            return self.output_serializer
        found: list[type] = []  # distinct, in registration order
        for declaration in base.declarations:
            serializer = declaration.serializer_of(self.model)
            if serializer is not None and all(serializer is not other for other in found):
                found.append(serializer)
        if not found:
            return default_serializer(self.model)
        return found[0] if len(found) == 1 else narrowed_serializer(tuple(found))

    # -- running -----------------------------------------------------------------------
    def get_queryset(self, ctx: ToolContext) -> models.QuerySet[Any]:
        if self.queryset is None:
            return self.model._default_manager.all()
        if isinstance(self.queryset, models.QuerySet):
            return self.queryset.all()
        return self.queryset(ctx)

    def _handler(self) -> Callable[..., Any]:
        action = self

        def handler(ctx: Any, **arguments: Any) -> ToolResult:
            return action.run(ctx, arguments)

        return handler

    def run(self, ctx: Any, arguments: dict[str, Any]) -> ToolResult:
        lookup = arguments.pop(self.lookup_arg)
        queryset = self.get_queryset(ctx)
        # The row to change (and to confirm about) as it is where it is written, not on a replica.
        obj = base.get_object(queryset if self.read_only else for_writing(queryset), self.lookup_field, lookup)
        base.check_object(ctx.user, self.permissions, obj, base.object_permissions_enabled(self.object_permissions),
                          self.method.replace("_", " "), (self.lookup_field, lookup))
        if self.serializer is not None:
            serializer = self.serializer(data=arguments, context=self._context(ctx, obj))
            # Strict as the schema says, as a toolset's create and update: DRF would convert "5" to 5.
            refused = base.serializer_input_errors(serializer, arguments)
            if refused:
                return base.validation_error_result(refused)
            if not serializer.is_valid():
                return base.validation_error_result(base.drf_errors(serializer.errors))
            arguments = dict(serializer.validated_data)
        changed = base.changed_since_asked(self.model, self.lookup_field, lookup)
        if self.confirm:
            message = self._question(obj, arguments)
            base.confirm(ctx, message, f"Not confirmed: {base.verbose(self.model)} {obj} was left unchanged.", changed)
            # The answer came in a later round: journal the change so a repeated round
            # cannot apply it twice. A tool name may take the key's whole length: fitted to it.
            # A refusal at its commit (a deferred foreign key) comes past _apply's savepoint: the same tool error.
            data = base.refused_at_commit(f"{self._title()} {obj}", lambda: ctx.once(
                derived_step_key(self.name, "apply"), self._apply, obj, arguments, ctx, message))
            if isinstance(data, ToolResult):
                return data
        else:
            data = self._apply(obj, arguments, ctx, lookup=lookup)
        if isinstance(data, dict) and "__changed__" in data:
            raise ToolError(changed)
        if isinstance(data, dict) and "__error__" in data:
            return base.validation_error_result(data["__error__"])
        if isinstance(data, dict) and "__result__" in data:
            return _unpacked_result(data["__result__"])
        return base.structured(data)

    def _refusal(self, ctx: Any, obj: models.Model) -> ToolError | None:
        """Why the caller may not run the action on ``obj`` (its object permissions, as :meth:`run` asks them), or None."""
        return base.object_refusal(ctx.user, self.permissions, obj, base.object_permissions_enabled(self.object_permissions),
                                   self.method.replace("_", " "), (self.lookup_field, None))

    def _question(self, obj: models.Model, arguments: dict[str, Any]) -> str:
        """What the user is asked to confirm (it shows the row: ``{obj}``)."""
        # The row is "obj" in the template, even where the method has an argument of that name. An
        # argument the caller left out reads as the method's default (what it runs with), as the
        # type-hinted path fills it in; a serializer= path's validated data has only what was sent.
        fn = self.function()
        defaults = {name: p.default for name, p in inspect.signature(fn).parameters.items()
                    if p.default is not inspect.Parameter.empty} if fn is not None else {}
        return base.confirm_message(self.confirm, f"{self._title()} {obj}?", **{**defaults, **arguments, "obj": obj})

    def _apply(self, obj: models.Model, arguments: dict[str, Any], ctx: Any, asked: str | None = None,
               lookup: Any = None) -> dict[str, Any]:
        """Run the method in a transaction; with ``asked`` (the question the user said yes to), on
        the row as it is now, locked, unless it is gone or the question would now read otherwise.
        Without (no confirmation), an action that writes runs on its row as it is now, read again through
        the queryset and locked, and asked its object permissions again: refused as :meth:`run` refuses
        (``lookup`` is the value it was asked by), not found if the row left the queryset meanwhile."""
        fn = self.function()
        assert fn is not None
        _, _, context_param = self._method_parameters(fn)
        call_arguments = {**arguments, context_param: ctx} if context_param is not None else arguments
        model, alias = type(obj), write_alias(type(obj), obj)
        try:
            with transaction.atomic(using=alias):
                if asked is not None:
                    obj = current_row(self.get_queryset(ctx), obj)
                    # Gone, out of the queryset, read otherwise, or no longer the caller's to act on
                    # (an object permission that depends on the row): not what the user said yes to.
                    if obj is None or self._question(obj, arguments) != asked or self._refusal(ctx, obj) is not None:
                        return {"__changed__": True}  # journaled: a replay answers the same
                elif not self.read_only:
                    # run asked the object's permissions of the row before this transaction: a
                    # permission gone by now (a rule that reads the row, one revoked) refuses the action.
                    # The row read again through the queryset, as a confirmed action's (not refreshed
                    # through the base manager, which dropped the queryset's prefetches: a Prefetch of
                    # what the caller may see was every row); one gone from it meanwhile is not found.
                    obj = current_row(self.get_queryset(ctx), obj)
                    if obj is None:
                        raise base.not_found(model, self.lookup_field, lookup)
                    base.check_object(ctx.user, self.permissions, obj, base.object_permissions_enabled(self.object_permissions),
                                      self.method.replace("_", " "), (self.lookup_field, lookup))
                # In its transaction (and, confirmed, in the store's thread): a ctx.once there would wait on
                # its locks, or on itself, and hold the store's thread for every call (refused: RuntimeError).
                with base.refusing_once(ctx, f"The method {self.model.__name__}.{self.method} of the model action {self.name!r}"):
                    value = getattr(obj, self.method)(**call_arguments)
                # In the same transaction: a result that cannot be built (a value its annotation
                # refuses, a failing output serializer) rolls the writes back, so the client told
                # the call failed may call again without the change happening twice.
                return self._result(fn, obj, value, ctx)
        except DjangoValidationError as exc:
            return {"__error__": base.django_validation_errors(exc)}
        except DRFValidationError as exc:
            return {"__error__": base.drf_errors(exc.detail)}
        except IntegrityError as exc:  # journaled as the step's value: a replay answers the same
            return {"__error__": base.database_refusal(exc, f"{self._title()} {obj}")}
        except (DataError, OverflowError) as exc:
            # A value its column cannot hold (PostgreSQL's integer or numeric range, a DataError; past
            # SQLite's 64-bit integers, the driver's OverflowError): refused as the write it is, rolled
            # back, as a toolset's create or update refuses it, not an internal error. An OverflowError
            # of the method's own arithmetic is its bug: raised (logged, an internal error), not blamed
            # on the caller's values (a review of the fix).
            if isinstance(exc, OverflowError) and not base.raised_in_the_database(exc):
                raise
            return {"__error__": {"non_field_errors": [
                f"{self._title()} {obj} refused by the database: a value is outside what its column holds."]}}

    def _result(self, fn: Callable[..., Any], obj: models.Model, value: Any, ctx: Any) -> dict[str, Any]:
        """The result, as JSON (a confirmed change journals it): the method's return value when its
        return is annotated, shaped as a plain tool's with that annotation (``{"__result__": ...}``,
        see :func:`_packed_result`), else the object through :meth:`object_serializer`."""
        if self._returns(fn) is not inspect.Signature.empty:
            assert self.tool is not None  # only its handler runs the method
            return {"__result__": _packed_result(value if isinstance(value, ToolResult) else self.tool.shape_result(value))}
        return base.jsonable(self.object_serializer()(obj, context=self._object_context(ctx, obj)).data)

    def _object_context(self, ctx: Any, obj: models.Model) -> dict[str, Any]:
        """The context of :meth:`object_serializer`: a toolset's serializer gets what the toolset gives
        it when its ``retrieve`` shows a row (``toolset``, a ``GET`` request: code written for it may
        read them), with the action's ``object``; ``output_serializer=`` gets the action's own."""
        if self.output_serializer is None:
            for declaration in base.declarations:
                context = declaration.serializer_context_of(self.model, ctx)
                if context is not None:
                    return {**context, "object": obj}
        return self._context(ctx, obj)

    @staticmethod
    def _context(ctx: Any, obj: models.Model) -> dict[str, Any]:
        """The serializers' context: ``request`` as a DRF view gives it (``CurrentUserDefault`` reads its user)."""
        return {"request": base.drf_request(ctx.user), "object": obj, "user": ctx.user}

    # -- checks ------------------------------------------------------------------------
    def tool_names(self) -> list[str]:
        return [self.name]

    def check(self, known_perms: set[str]) -> list[checks.CheckMessage]:
        where = f"Model action {self.name!r}"
        problems: list[checks.CheckMessage] = []
        if self.function() is None:
            problems.append(checks.Error(f"{where}: {self.model.__name__} has no method {self.method!r}.",
                                         obj=self.model, id="mcp_tools.E031"))
        try:
            found = base.lookup_field(self.model, self.lookup_field)
        except FieldDoesNotExist:
            problems.append(checks.Error(f"{where}: lookup field {self.lookup_field!r} is not a field of {self.model.__name__}.",
                                         obj=self.model, id="mcp_tools.E030"))
        else:
            if base.is_composite_key(found):
                problems.append(checks.Error(
                    f"{where}: {self.model.__name__} has a composite primary key, which a lookup argument cannot name.",
                    hint="Register the action with lookup_field set to a unique field of the model.", obj=self.model, id="mcp_tools.E030"))
        problems += base.check_permissions(self.permissions, known_perms, where, self.model)
        if not problems and self.tool is not None:
            try:
                self.tool.input  # noqa: B018 - builds the schemas, which is what can fail
            except Exception as exc:  # a schema that cannot be built is reported, not raised
                problems.append(checks.Error(f"{where}: cannot build its schema: {exc}", obj=self.model, id="mcp_tools.E034"))
        return problems


def _packed_result(result: ToolResult | dict[str, Any]) -> dict[str, Any]:
    """A method's result as JSON, which a confirmed change journals: a ``CallToolResult`` dict
    (:meth:`Tool.shape_result` of its value), or its ``ToolResult`` with the ``next_tool`` hint kept
    apart, so the server still checks that the caller may make that call before sending it."""
    if isinstance(result, dict):
        return {**result, "nextTool": None}
    wire = ToolResult(content=result.content, structured_content=result.structured_content,
                      is_error=result.is_error, meta=result.meta).to_wire()
    return {**wire, "nextTool": list(result.next_tool) if result.next_tool is not None else None}


def _unpacked_result(packed: dict[str, Any]) -> ToolResult:
    hint = packed.get("nextTool")
    return ToolResult(content=list(packed.get("content", [])), structured_content=packed.get("structuredContent"),
                      is_error=bool(packed.get("isError")), meta=packed.get("_meta"),
                      next_tool=(hint[0], hint[1]) if hint else None)


def default_serializer(model: type[models.Model]) -> type:
    """A ``ModelSerializer`` of every field of ``model`` (cached per model)."""
    cached = _serializers.get(model)
    if cached is None:
        from rest_framework import serializers

        meta = type("Meta", (), {"model": model, "fields": "__all__"})
        cached = type(f"{model.__name__}ToolSerializer", (serializers.ModelSerializer,), {"Meta": meta})
        _serializers[model] = cached
    return cached


_serializers: dict[type[models.Model], type] = {}


def narrowed_serializer(serializer_classes: tuple[type, ...]) -> type:
    """The first of ``serializer_classes`` showing only the fields that every one of them shows
    (cached per tuple): what no toolset of the model hides."""
    cached = _narrowed.get(serializer_classes)
    if cached is None:
        first = serializer_classes[0]
        shown = set.intersection(*({name for name, field in cls().fields.items() if not field.write_only}
                                   for cls in serializer_classes))

        def get_fields(self: Any) -> dict[str, Any]:
            fields: dict[str, Any] = first.get_fields(self)  # type: ignore[attr-defined]
            return {name: field for name, field in fields.items() if name in shown}

        cached = type(first.__name__, (first,), {"get_fields": get_fields, "__module__": first.__module__})
        _narrowed[serializer_classes] = cached
    return cached


_narrowed: dict[tuple[type, ...], type] = {}

#: Model actions declared in class bodies whose registration failed (reported by ``manage.py check``).
registration_problems: list[checks.CheckMessage] = []


def register_model_action(model: type[models.Model], method: str, **options: Any) -> ModelAction:
    """Expose ``model.method`` as a tool (for models you do not own). Raises ``AlreadyRegistered`` on a name clash.

    Options are those of :func:`model_action`.
    """
    action = ModelAction(model, method, **options)
    base.register_all([action.build()])
    base.declarations.append(action)
    return action


def unregister_model_action(action: ModelAction) -> None:
    base.unregister_all([action.name])
    if action in base.declarations:
        base.declarations.remove(action)


def model_action(fn: F | None = None, /, **options: Any) -> Any:
    """Expose a model method as a tool: ``@mcp_tools.model_action`` or ``@mcp_tools.model_action(...)``.

    Options:
        name: the tool name (default ``<app_label>.<verbose_name_plural>.<method>``, e.g. ``shop.orders.cancel``).
        title, description: shown to clients (default: "<Method> <verbose name>", the docstring).
        permissions: needed on the model and on the object (default ``<app>.change_<model>``).
        queryset: a QuerySet, or ``fn(ctx) -> QuerySet`` of the rows the caller may reach.
        lookup_field / lookup_arg: which field finds the object (default ``pk``, argument ``id``).
        serializer: a DRF serializer for the method's arguments (default: its type hints).
        output_serializer: the serializer of the object that a method without a return annotation (or
            ``-> None``) answers (default: that of the model's toolset, else every field).
        confirm: ``True`` or a message (``{obj}`` and the arguments are filled in) to ask the user first.
        read_only, destructive, idempotent: the tool's annotations.
        object_permissions: ask ``user.has_perm(perm, obj)`` (default: when a non-model backend is configured).

    The tool is registered when the model class is ready; a name clash is
    reported by ``manage.py check`` (``mcp_tools.E032``) rather than raised
    while models load.
    """

    def decorate(func: F) -> F:
        setattr(func, _MARK, options)
        return func

    return decorate(fn) if fn is not None else decorate


def _declared_actions(model: type[models.Model]) -> list[tuple[str, dict[str, Any]]]:
    found: dict[str, dict[str, Any]] = {}
    for klass in reversed(model.__mro__):
        if klass is not model and not getattr(getattr(klass, "_meta", None), "abstract", False):
            continue
        for attr, value in vars(klass).items():
            options = getattr(value, _MARK, None)
            if isinstance(options, dict):
                found[attr] = options
    return list(found.items())


def _register_declared(sender: type[models.Model], **kwargs: Any) -> None:
    if sender._meta.abstract or sender._meta.swapped:
        return
    for method, options in _declared_actions(sender):
        action = ModelAction(sender, method, **options)
        try:
            base.register_all([action.build()])
        except (AlreadyRegistered, ValueError) as exc:
            # Raising here would make the models module unimportable, and with it
            # `manage.py check`; the check reports it instead.
            logger.error("Model action %s.%s not registered: %s", sender.__name__, method, exc)
            registration_problems.append(checks.Error(f"Model action {action.name!r} not registered: {exc}",
                                                      obj=sender, id="mcp_tools.E032"))
            continue
        base.declarations.append(action)


class_prepared.connect(_register_declared, dispatch_uid="mcp_tools.modeltools.model_action")
