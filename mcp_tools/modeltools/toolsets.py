"""``ModelToolset``: list, retrieve, create, update and delete tools for a model, declared like a DRF ``ModelViewSet``.

::

    @mcp_tools.register_toolset
    class OrderTools(mcp_tools.ModelToolset):
        queryset = Order.objects.select_related("customer")
        serializer_class = OrderSerializer
        actions = ["list", "retrieve", "update", "delete"]
        filterset_fields = ["status", "store"]
        search_fields = ["number", "customer__name"]
        ordering_fields = ["created_at", "total"]
        admin_actions = ["mark_shipped"]

registers ``shop.orders.list``, ``shop.orders.retrieve``, ``shop.orders.update``,
``shop.orders.delete`` and ``shop.orders.mark_shipped``. A new instance serves
each call, with ``self.ctx``, ``self.user``, ``self.request`` (a minimal request for code written
for DRF views) and ``self.action`` set, so ``get_queryset`` can narrow the rows to what the caller
may see.
"""

from __future__ import annotations

import builtins
import datetime
import decimal
import functools
import inspect
import operator
import re
import uuid
from collections.abc import Callable, Sequence
from typing import Annotated, Any, ClassVar, Literal

from django.conf import settings
from django.core import checks
from django.core.exceptions import FieldDoesNotExist
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import DataError, IntegrityError, OperationalError, connections, models, router, transaction
from django.db.models import Q
from django.utils import timezone
from pydantic import AfterValidator, BeforeValidator, Field, JsonValue, WithJsonSchema
from rest_framework.exceptions import ValidationError as DRFValidationError

from ..conf import mcp_settings
from ..protocol.errors import invalid_params
from ..registry.results import ToolError, ToolResult
from ..server import tokens
from ..registry.schemas import InputSpec, OutputSpec
from . import base
from .databases import current_row, for_writing, write_alias

ACTIONS = ("list", "retrieve", "create", "update", "delete")

#: The Django permission each action needs by default (``app_label.<perm>_<model>``), as DRF's
#: ``DjangoModelPermissions`` with ``view`` for reads.
DEFAULT_PERMISSIONS = {"list": "view", "retrieve": "view", "create": "add", "update": "change", "delete": "delete"}

#: The HTTP method each action would be in a DRF view (``self.request.method``); admin actions are POSTs.
HTTP_METHODS = {"list": "GET", "retrieve": "GET", "create": "POST", "update": "PATCH", "delete": "DELETE"}
#: The actions that find one row by the lookup argument.
_ONE_ROW_ACTIONS = frozenset({"retrieve", "update", "delete"})

#: The sealed-token purpose of a list's ``nextCursor`` (signed with ``SIGNING_KEYS``, valid ``TOKEN_TTL`` seconds).
CURSOR_PURPOSE = "modeltools-cursor"
#: A list's ``search``: at most this many words (each is a filter), in at most this many characters.
MAX_SEARCH_TERMS = 10
MAX_SEARCH_LENGTH = 200

#: Filter lookups whose value is one value of the field's type (``total__gte``).
SCALAR_LOOKUPS = ("exact", "iexact", "gt", "gte", "lt", "lte")
#: Filter lookups whose value is text whatever the field's type (the database compares it as text).
TEXT_LOOKUPS = ("contains", "icontains", "startswith", "istartswith", "endswith", "iendswith", "regex", "iregex")
#: Text lookups whose value is a regular expression, in the syntax of the database's engine
#: (Python's ``re`` on SQLite, which has none of its own; see :meth:`ModelToolset.regex_pattern`).
REGEX_LOOKUPS = ("regex", "iregex")
#: MariaDB's and MySQL's error number for a regular expression its engine cannot compile (``ER_REGEXP_ERROR``).
MYSQL_REGEXP_ERROR = 1139


def _is_regexp_error(exc: OperationalError) -> bool:
    """Whether ``exc`` is MariaDB's or MySQL's refusal of a regular expression (mysqlclient raises it
    as an OperationalError, with the server's error number first)."""
    return bool(exc.args) and exc.args[0] == MYSQL_REGEXP_ERROR


#: Filter lookups whose value is a list: ``in`` (at most ``max_page_size`` values), ``range`` (two).
LIST_LOOKUPS = ("in", "range")
#: Transforms of date and time fields to an integer (``created_at__year``), and to a date.
INTEGER_TRANSFORMS = ("year", "iso_year", "quarter", "month", "week", "day", "week_day", "iso_week_day", "hour", "minute", "second")
DATE_TRANSFORMS = ("date",)
#: A year, as ``year`` and ``iso_year`` compare it: Django turns ``created_at__year__gte=N`` into
#: bounds that are dates of year N, which Python has only from 1 to 9999 (past them, a ValueError).
YEAR = Annotated[int, Field(strict=True, ge=datetime.MINYEAR, le=datetime.MAXYEAR)]
#: What may follow such a transform (``created_at__year__gte``); nothing means ``exact``.
AFTER_TRANSFORM = ("exact", "gt", "gte", "lt", "lte", "in", "range")
TYPED_LOOKUPS = (*SCALAR_LOOKUPS, *TEXT_LOOKUPS, *LIST_LOOKUPS, "isnull")
#: Lookups of PostgreSQL's array and hstore fields and of JSON fields whose value is no text: a list
#: (``tags__contains``, ``overlap``), an object (``attributes__contains``), any JSON value, or keys.
CONTAINER_LOOKUPS = ("contains", "contained_by", "overlap", "has_key", "has_keys", "has_any_keys")
#: The lookups of a JSON field that Django runs only where ``supports_json_field_contains``
#: (PostgreSQL, MySQL, MariaDB; not SQLite or Oracle, where each query raises ``NotSupportedError``).
JSON_CONTAINMENT_LOOKUPS = ("contains", "contained_by")
#: The lookups of a JSON field whose value is a JSON value (``in``: a list of them), compared as JSON.
JSON_VALUE_LOOKUPS = ("exact", "in")
#: Any JSON value, with the schema ``{}``: pydantic's own for ``JsonValue`` in a list is a ``$ref`` to
#: ``#/$defs/JsonValue``, which in one property of a tool's ``inputSchema`` points at nothing.
ANY_JSON: Any = Annotated[JsonValue, WithJsonSchema({})]

try:  # django-filter is optional: with it, filterset_fields go through a FilterSet
    import django_filters
except ImportError:  # pragma: no cover - depends on the environment
    django_filters = None


def aware(value: Any) -> Any:
    """A filter's value with each datetime without a UTC offset (in a list too) read in the current
    time zone, as a form reads it: ``QuerySet.filter`` would read it in the default one, warning."""
    if isinstance(value, builtins.list):
        return [aware(item) for item in value]
    if isinstance(value, datetime.datetime) and settings.USE_TZ and timezone.is_naive(value):
        return timezone.make_aware(value)
    return value


def _not_a_bool(value: Any) -> Any:
    """A choice argument that is no boolean (``true`` is not the choice ``1``)."""
    if isinstance(value, bool):
        raise ValueError("one of the choices, not a boolean")
    return value


def _exact(value: Any) -> Any:
    """A value as text or JSON, exactly: a cursor's, and a filter's as a ``FilterSet`` reads it.
    JSON would cut datetimes and times to milliseconds: rows created in the same millisecond would
    be skipped or served again, and a filter on a row's own ``created_at`` would miss it."""
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, (decimal.Decimal, uuid.UUID)):
        return str(value)
    return base.jsonable(value)


class ModelToolset:
    """Tools for one model, in the style of DRF's ``ModelViewSet``.

    Class attributes:
        queryset: the rows the tools work on (or override :meth:`get_queryset`).
        serializer_class: a DRF ``ModelSerializer`` (default: every field).
        actions: which of ``list``, ``retrieve``, ``create``, ``update`` (partial), ``delete`` to offer.
        basename: the tool name prefix (default ``<app_label>.<verbose_name_plural>``, e.g. ``shop.orders``).
        permissions: ``{action: [perm, ...]}`` overriding the Django defaults (view/add/change/delete).
        object_permissions: ask ``user.has_perm(perm, obj)`` too, for one row's actions, not ``list``
            (default: when a non-model backend is configured).
        lookup_field / lookup_arg: which field finds one row (default ``pk``, argument ``id``).
        filterset_fields: a list of fields (exact match) or ``{field: [lookups]}``.
        search_fields: fields searched (``icontains``) by the ``search`` argument.
        ordering_fields / ordering: what ``ordering`` may name, and the default order.
        page_size / max_page_size: rows per page by default, and the ``limit`` cap.
        confirm_delete: ``True`` or a message (``{obj}`` filled in) to ask before a delete.
        admin_actions: names of the registered ``ModelAdmin``'s actions to expose as tools.
    """

    queryset: ClassVar[models.QuerySet[Any] | None] = None
    serializer_class: ClassVar[type | None] = None
    actions: ClassVar[Sequence[str]] = ("list", "retrieve")
    basename: ClassVar[str | None] = None
    permissions: ClassVar[dict[str, Sequence[str]]] = {}
    object_permissions: ClassVar[bool | None] = None
    lookup_field: ClassVar[str] = "pk"
    lookup_arg: ClassVar[str | None] = None
    filterset_fields: ClassVar[Sequence[str] | dict[str, Sequence[str]]] = ()
    search_fields: ClassVar[Sequence[str]] = ()
    ordering_fields: ClassVar[Sequence[str]] = ()
    ordering: ClassVar[str | None] = None
    page_size: ClassVar[int] = 50
    max_page_size: ClassVar[int] = 200
    confirm_delete: ClassVar[bool | str] = True
    admin_actions: ClassVar[Sequence[str]] = ()
    admin_site: ClassVar[Any] = None

    def __init__(self, ctx: Any, action: str) -> None:
        self.ctx = ctx
        self.action = action
        self.user = ctx.user
        self.principal = ctx.principal
        #: What a DRF view's ``self.request`` would give code written for one: ``.user`` and ``.method``.
        self.request = base.drf_request(ctx.user, HTTP_METHODS.get(action, "POST"))

    # -- hooks, as in a DRF view ------------------------------------------------------------
    def get_queryset(self) -> models.QuerySet[Any]:
        """The rows this caller may reach; rows outside answer like rows that do not exist."""
        assert self.queryset is not None, f"{type(self).__name__} needs a queryset or get_queryset()"
        return self.queryset.all()

    @classmethod
    def get_serializer_class(cls) -> type:
        if cls.serializer_class is not None:
            return cls.serializer_class
        from .actions import default_serializer

        return default_serializer(cls.get_model())

    def get_serializer(self, *args: Any, **kwargs: Any) -> Any:
        # "request" as a DRF view gives it: CurrentUserDefault / HiddenField read its user.
        kwargs.setdefault("context", {"request": self.request, "user": self.user, "toolset": self})
        return self.get_serializer_class()(*args, **kwargs)

    def get_object(self, lookup: Any) -> Any:
        queryset = self.get_queryset()
        if self.action != "retrieve":  # the row to change (or to confirm about): as it is where it is written
            queryset = for_writing(queryset)
        obj = base.get_object(queryset, self.lookup_field, lookup)
        base.check_object(self.user, self.action_permissions(self.action), obj,
                          base.object_permissions_enabled(self.object_permissions), self.action, (self.lookup_field, lookup))
        return obj

    def _refusal(self, obj: Any) -> ToolError | None:
        """Why the caller may not run this action on ``obj`` (its object permissions, as :meth:`get_object` asks them), or None."""
        return base.object_refusal(self.user, self.action_permissions(self.action), obj,
                                   base.object_permissions_enabled(self.object_permissions), self.action, (self.lookup_field, None))

    def perform_create(self, serializer: Any) -> None:
        serializer.save()

    def perform_update(self, serializer: Any) -> None:
        serializer.save()

    def perform_destroy(self, instance: Any) -> None:
        instance.delete()

    # -- the actions ------------------------------------------------------------------------
    def list(self, arguments: dict[str, Any]) -> ToolResult:
        queryset = self.filter_queryset(self.get_queryset(), arguments)
        ordering = arguments.get("ordering") or self.default_ordering()
        field = ordering.lstrip("-")
        descending = ordering.startswith("-")
        order = [models.F(field).desc(nulls_last=True) if descending else models.F(field).asc(nulls_last=True)]
        if field != "pk":
            order.append(models.F("pk").desc() if descending else models.F("pk").asc())
        queryset = queryset.order_by(*order)
        cursor = arguments.get("cursor")
        if cursor:
            queryset = queryset.filter(self._after(cursor, ordering))
        limit = arguments.get("limit") or self.page_size
        try:
            rows = list(queryset[: limit + 1])
        except (DataError, OperationalError) as exc:
            # A value of the caller's the database would not compare (a regular expression its
            # engine cannot compile): a tool error naming the filters, not an internal error.
            # MariaDB says so with an OperationalError, which otherwise means the connection, a
            # lock or a timeout: only its regular expression error is the caller's.
            if isinstance(exc, OperationalError) and not _is_regexp_error(exc):
                raise
            given = [name for name in (*self.filter_arguments(), "search") if arguments.get(name) is not None]
            raise ToolError(f"The database refused a value of the filters {', '.join(given)} "
                            "(for instance a regular expression it cannot compile). Change them and call again.") from None
        more = len(rows) > limit
        rows = rows[:limit]
        data: dict[str, Any] = {"results": base.jsonable(self.get_serializer(rows, many=True).data)}
        if more:
            last = rows[-1]
            value = base.value_at(last, field) if field != "pk" else last.pk
            data["nextCursor"] = tokens.seal(CURSOR_PURPOSE, {"t": self._list_tool(), "o": ordering, "v": _exact(value),
                                                             "pk": _exact(last.pk)})
        return base.structured(data)

    def retrieve(self, arguments: dict[str, Any]) -> ToolResult:
        obj = self.get_object(arguments[self.get_lookup_arg()])
        return base.structured(base.jsonable(self.get_serializer(obj).data))

    def create(self, arguments: dict[str, Any]) -> ToolResult:
        serializer = self.get_serializer(data=arguments)
        return self._save(serializer, self.perform_create)

    def update(self, arguments: dict[str, Any]) -> ToolResult:
        lookup = arguments.pop(self.get_lookup_arg())
        obj = self.get_object(lookup)
        # A refusal at the commit (a deferred foreign key) comes past _save's savepoint: the same tool error.
        return base.refused_at_commit(f"Saving the {base.verbose(self.get_model())}", lambda: self._update_locked(obj, lookup, arguments))

    def _update_locked(self, obj: Any, lookup: Any, arguments: dict[str, Any]) -> ToolResult:
        model, alias = type(obj), write_alias(type(obj), obj)
        with transaction.atomic(using=alias):
            # The row as it is now, locked until the write commits, is what the serializer validates
            # and saves: DRF saves every field of its instance, so one read before this transaction
            # wrote back over a change another request committed meanwhile (a status it set), and
            # inserted again a row deleted meanwhile (Django's save() of a row that updates nothing).
            # The instance get_object gave (an override's, with what it set on it) is refreshed in
            # place, not replaced by another read of the queryset.
            if not model._base_manager.db_manager(alias).select_for_update().filter(pk=obj.pk).exists():
                raise base.not_found(model, self.lookup_field, lookup)
            obj.refresh_from_db(using=alias)
            # get_object asked the object's permissions of the row before this transaction: asked
            # again of the locked row, a permission it no longer gives (a rule that reads the row,
            # one revoked meanwhile) refuses the update as get_object would, nothing written.
            base.check_object(self.user, self.action_permissions(self.action), obj,
                              base.object_permissions_enabled(self.object_permissions), self.action, (self.lookup_field, lookup))
            serializer = self.get_serializer(obj, data=arguments, partial=True)
            return self._save(serializer, self.perform_update)

    def delete(self, arguments: dict[str, Any]) -> ToolResult:
        obj = self.get_object(arguments[self.get_lookup_arg()])
        label = f"{base.verbose(type(obj))} {obj}"
        lookup = {self.get_lookup_arg(): arguments[self.get_lookup_arg()]}
        changed = base.changed_since_asked(type(obj), self.lookup_field, arguments[self.get_lookup_arg()])
        if self.confirm_delete:
            message = self._delete_question(obj)
            base.confirm(self.ctx, message, f"Not confirmed: {label} was not deleted.", changed)
            # A refusal at its commit (a deferred foreign key) comes past _destroy's savepoint: the same tool error.
            done = base.refused_at_commit(f"Deleting {label}", lambda: self.ctx.once("delete", self._destroy, obj, message))
            if isinstance(done, ToolResult):
                return done
        else:
            done = self._destroy(obj, lookup=arguments[self.get_lookup_arg()])
        if done is False:  # the row changed or went after the user said yes (journaled: a replay answers the same)
            raise ToolError(changed)
        if isinstance(done, dict):  # the database refused (journaled as such: a replay answers the same)
            return base.validation_error_result(done)
        return base.structured({"deleted": True, **base.jsonable(lookup)})

    def _delete_question(self, obj: Any) -> str:
        """What the user is asked before ``obj`` is deleted (it shows the row)."""
        return base.confirm_message(self.confirm_delete, f"Delete {base.verbose(type(obj))} {obj}? This cannot be undone.", obj=obj)

    def _destroy(self, obj: Any, asked: str | None = None, lookup: Any = None) -> bool | dict[str, builtins.list[str]]:
        """Delete ``obj``: True, or the errors of a delete the database refused (rows still refer to it).
        With ``asked`` (the question the user said yes to), the row as it is now, locked: False if it
        is gone or the question would now read otherwise. Without (no confirmation), the row locked
        and asked its object permissions again, as an update's is: refused as :meth:`get_object`
        refuses (``lookup`` is the value it was asked by), nothing deleted."""
        model, alias = type(obj), write_alias(type(obj), obj)
        try:
            with transaction.atomic(using=alias):
                if asked is not None:
                    obj = current_row(self.get_queryset(), obj)
                    # Gone, out of the queryset, read otherwise, or no longer the caller's to delete.
                    if obj is None or self._delete_question(obj) != asked or self._refusal(obj) is not None:
                        return False
                else:
                    # get_object asked the object's permissions of the row before this transaction: a
                    # permission gone by now (a rule that reads the row, one revoked) refuses the delete.
                    if not model._base_manager.db_manager(alias).select_for_update().filter(pk=obj.pk).exists():
                        raise base.not_found(model, self.lookup_field, lookup)
                    obj.refresh_from_db(using=alias)
                    base.check_object(self.user, self.action_permissions(self.action), obj,
                                      base.object_permissions_enabled(self.object_permissions), self.action, (self.lookup_field, lookup))
                with base.refusing_once(self.ctx, f"{type(self).__qualname__}.perform_destroy"):  # in the transaction
                    self.perform_destroy(obj)
        except IntegrityError as exc:  # ProtectedError and RestrictedError are IntegrityErrors
            return base.database_refusal(exc, f"Deleting {base.verbose(type(obj))} {obj}")
        return True

    def _save(self, serializer: Any, perform: Callable[[Any], None]) -> ToolResult:
        refused = base.serializer_input_errors(serializer, serializer.initial_data)
        if refused:
            return base.validation_error_result(refused)
        if not serializer.is_valid():
            return base.validation_error_result(base.drf_errors(serializer.errors))
        moved = self._moved_primary_key(serializer)
        if moved is not None:
            return base.validation_error_result({moved: [
                f"The primary key of {base.with_article(base.verbose(self.get_model()))} cannot be changed by an update."]})
        try:
            with transaction.atomic(using=write_alias(self.get_model(), serializer.instance)):
                with base.refusing_once(self.ctx, f"{type(self).__qualname__}.{perform.__name__}"):  # in the transaction
                    perform(serializer)
                # In the same transaction: a representation that fails (a method field, a
                # related row) rolls the write back, so the client told the call failed may
                # call again without creating the row twice.
                data = base.jsonable(serializer.data)
        except DjangoValidationError as exc:
            return base.validation_error_result(base.django_validation_errors(exc))
        except DRFValidationError as exc:  # raised by perform_create / perform_update, as in DRF
            return base.validation_error_result(base.drf_errors(exc.detail))
        except IntegrityError as exc:  # a unique or reference rule only the database knew of
            return base.validation_error_result(base.database_refusal(exc, f"Saving the {base.verbose(self.get_model())}"))
        except (DataError, OverflowError):
            # A value the serializer took that its column cannot hold (a duration past SQLite's 64-bit
            # microseconds is the driver's OverflowError, PostgreSQL's interval or numeric range a
            # DataError): refused as the write it is, rolled back, not an internal error.
            return base.validation_error_result({"non_field_errors": [
                f"Saving the {base.verbose(self.get_model())} refused by the database: a value is outside what its column holds."]})
        return base.structured(data)

    def _moved_primary_key(self, serializer: Any) -> str | None:
        """The serializer field of an update's valid data that gives the row another primary key (a
        ``CharField(primary_key=True)``, a one-to-one key), or None. Django's ``save()`` of a row whose
        key changed updates no row and inserts another: the update answered the row renamed, and the
        table held it unchanged and a copy."""
        instance, pk = serializer.instance, self.get_model()._meta.pk
        if instance is None or pk is None:
            return None
        for name, field in serializer.fields.items():
            source = getattr(field, "source", None)
            if source in (pk.name, pk.attname) and source in serializer.validated_data:
                value = serializer.validated_data[source]
                if getattr(value, "pk", value) != instance.pk:
                    return str(name)
        return None

    # -- list helpers -----------------------------------------------------------------------
    @classmethod
    def default_ordering(cls) -> str:
        return cls.ordering or (cls.ordering_fields[0] if cls.ordering_fields else "pk")

    def filter_queryset(self, queryset: models.QuerySet[Any], arguments: dict[str, Any]) -> models.QuerySet[Any]:
        offered = self.filter_arguments()
        # The fields of the filters given (only those: a lookup the check refused is no argument).
        given = {name: (self.filter_field(offered[name][0]), offered[name][1]) for name in offered if name in arguments}
        # Null is no filter, for every argument: a model may send null for each optional one (a JSON
        # field's JSON null is ``in: [null]``).
        filters = {name: aware(arguments[name]) for name in given if arguments[name] is not None}
        # Refused before any query, as a tool error the model can act on: JSON containment on a
        # database without it (a site developing on SQLite, deploying on PostgreSQL) would be a
        # NotSupportedError at the query, an internal error.
        for name in filters:
            why = self.unsupported_lookup(*given[name], queryset.db)
            if why is not None:
                raise ToolError(f"The filter {name} cannot be used here: {why}. Call the tool without it.")
        lists = {name: value for name, value in filters.items() if self.applied_as_given(*given[name], value)}
        if lists:
            # One filter() call, as before: through a relation to many rows, its conditions are of one related row.
            condition = Q()
            for name, value in lists.items():
                if self.json_value_lookup(*given[name]) and given[name][1] == "in":
                    # One JSON exact per item, not Django's IN: that drops None, and de-duplicates
                    # hashable values, for which Python has 1 == True and 0 == False.
                    field = offered[name][0]
                    condition &= functools.reduce(operator.or_, (Q(**{field: item}) for item in value), Q(pk__in=[]))
                else:
                    condition &= Q(**{name: value})
            queryset = queryset.filter(condition)
            filters = {name: value for name, value in filters.items() if name not in lists}
        if filters:
            if django_filters is not None:
                # The lookups given, not every declared one: a lookup the check refused (E030) is
                # no argument, and would make the FilterSet itself fail.
                spec: dict[str, builtins.list[str]] = {}
                for name in filters:
                    field, lookup = offered[name]
                    spec.setdefault(field, []).append(lookup)
                filterset = django_filters.filterset.filterset_factory(queryset.model, fields=spec)(
                    data={k: _exact(v) for k, v in filters.items()}, queryset=queryset
                )
                if not filterset.is_valid():
                    raise ToolError("Invalid filters. " + " ".join(
                        f"{field}: {' '.join(messages)}" for field, messages in base.drf_errors(filterset.errors).items()))
                queryset = filterset.qs
            else:
                queryset = queryset.filter(**filters)
        search = (arguments.get("search") or "").strip()
        searched = self.searched_fields()
        if search and searched:
            terms = search.split()
            if len(terms) > MAX_SEARCH_TERMS:
                # Each word is a filter (an OR over search_fields): the query grows with them.
                raise ToolError(f"Search for at most {MAX_SEARCH_TERMS} words at a time.")
            for term in terms:
                term_q = Q()
                for field in searched:
                    term_q |= Q(**{f"{field}__icontains": term})
                queryset = queryset.filter(term_q)
            if any("__" in field for field in searched):
                queryset = queryset.distinct()
        if any(self.crosses_to_many(offered[name][0]) for name in given if arguments[name] is not None):
            # A filter through a relation to many rows joins them: a row matched by two of its
            # related rows came twice (and a page's limit counted it twice).
            queryset = queryset.distinct()
        return queryset

    def _list_tool(self) -> str:
        return f"{self.get_basename()}.list"

    def _after(self, cursor: str, ordering: str) -> Q:
        """Where the page after ``cursor`` starts; a -32602 error for a cursor this list did not give
        (forged, tampered with, of another list) or older than ``TOKEN_TTL``: the arguments are wrong."""
        try:
            # It carries the last row's ordering value, which may be a long text (a TextField): the
            # token cap of ids and digests would refuse it, so its bound is a request's, MAX_BODY_BYTES.
            position = tokens.unseal(CURSOR_PURPOSE, cursor, max_chars=int(mcp_settings.MAX_BODY_BYTES))
        except tokens.InvalidToken:
            raise invalid_params("Invalid cursor: pass the nextCursor of a previous page unchanged, within "
                                 f"{mcp_settings.TOKEN_TTL} seconds, or list again without a cursor.") from None
        if position.get("t") != self._list_tool() or not {"o", "v", "pk"} <= position.keys():
            raise invalid_params(f"Invalid cursor: it is not a cursor of {self._list_tool()}.")
        if position["o"] != ordering:
            raise invalid_params("This cursor belongs to another ordering: keep the ordering while paging.")
        field = ordering.lstrip("-")
        value, pk = position["v"], position["pk"]
        after = "lt" if ordering.startswith("-") else "gt"
        if field == "pk":
            return Q(**{f"pk__{after}": pk})
        if value is None:  # in the trailing nulls: only later rows of the same (null) value
            return Q(**{f"{field}__isnull": True, f"pk__{after}": pk})
        return (Q(**{f"{field}__{after}": value}) | Q(**{field: value, f"pk__{after}": pk})
                | Q(**{f"{field}__isnull": True}))

    @classmethod
    def _filterset_spec(cls) -> dict[str, builtins.list[str]]:
        if isinstance(cls.filterset_fields, dict):
            return {field: list(lookups) for field, lookups in cls.filterset_fields.items()}
        return {field: ["exact"] for field in cls.filterset_fields}

    @classmethod
    def filter_field(cls, path: str) -> Any:
        """The field a ``filterset_fields`` entry names, across relations (``customer__email``)."""
        model: Any = cls.get_model()
        field: Any = None
        for part in path.split("__"):
            if model is None:
                raise FieldDoesNotExist(f"{path!r} goes on past a field that is no relation")
            field = model._meta.pk if part == "pk" else model._meta.get_field(part)
            model = field.related_model if field.is_relation else None
        return field

    @classmethod
    def searchable(cls, path: str) -> bool:
        """Whether ``search_fields`` may name ``path``: a field of the row, or of a row it reaches, that
        Django searches with ``icontains``; not a relation (a foreign key, a reverse one, a many-to-many),
        for which the query fails ("Unsupported lookup 'icontains' for ForeignKey")."""
        try:
            field = cls.filter_field(path)
        except FieldDoesNotExist:
            return False
        return not field.is_relation and field.get_lookup("icontains") is not None

    @classmethod
    def searched_fields(cls) -> builtins.list[str]:
        """The ``search_fields`` a search goes through: those :meth:`searchable`; the others are reported
        by manage.py check (E030) and left out until fixed, as a filter the check refused is."""
        return [field for field in cls.search_fields if cls.searchable(field)]

    @classmethod
    def _search_hint(cls, path: str) -> str | None:
        """A field to search instead of the relation ``path`` names: a text field of the rows it reaches."""
        try:
            related = cls.filter_field(path).related_model
        except FieldDoesNotExist:
            return None
        text = ("CharField", "TextField", "SlugField", "EmailField")
        for field in getattr(getattr(related, "_meta", None), "concrete_fields", ()):
            if field.get_internal_type() in text:
                return f"Search a text field of the rows it reaches, such as {path}__{field.name!s}."
        return "Search a text field of the rows it reaches (<relation>__<field>)."

    @classmethod
    def crosses_to_many(cls, path: str) -> bool:
        """Whether a ``filterset_fields`` entry goes through a relation to many rows (``orders__total``)."""
        model: Any = cls.get_model()
        for part in path.split("__"):  # the last part too: ``orders`` itself (``orders__in``, ``tags__isnull``)
            if model is None or part == "pk":
                return False
            field = model._meta.get_field(part)
            if field.one_to_many or field.many_to_many:
                return True
            model = field.related_model if field.is_relation else None
        return False

    @classmethod
    def filter_type(cls, field: Any, lookup: str) -> Any:
        """What a filter argument ``<field>__<lookup>`` validates as, strictly; ``ValueError`` saying
        why for a lookup Django does not know for ``field`` or these tools cannot type."""
        kind = getattr(field, "get_internal_type", lambda: type(field).__name__)()
        first, _, rest = lookup.partition("__")
        value_type: Any = base.field_python_type(field)
        choices: builtins.list[Any] = [value for value, _ in field.flatchoices] if getattr(field, "choices", None) else []
        if choices and getattr(field, "blank", False) and all(isinstance(choice, str) for choice in choices) and "" not in choices:
            choices.append("")  # a text field's blank=True: "" is no choice, but rows hold it (and a form takes it)
        container = cls.container_type(field, lookup)
        if container is not None:
            return container
        if first in INTEGER_TRANSFORMS or first in DATE_TRANSFORMS:
            if field.get_transform(first) is None:
                raise ValueError(f"a {kind} has no {first!r}")
            value_type = (YEAR if first in ("year", "iso_year") else base.DbInt) if first in INTEGER_TRANSFORMS else datetime.date
            choices = []
            lookup = rest or "exact"
            if lookup not in AFTER_TRANSFORM:
                raise ValueError(f"after {first!r} use one of {', '.join(AFTER_TRANSFORM)}")
        elif "__" in lookup or lookup not in TYPED_LOOKUPS:
            known = field.get_lookup(first) is not None or field.get_transform(first) is not None
            raise ValueError(
                (f"model tools cannot type its value; use one of {', '.join(TYPED_LOOKUPS)}" if known else
                 f"Django knows no lookup {first!r} for a {kind}")
                + (f", or on a date or time field {', '.join((*INTEGER_TRANSFORMS, *DATE_TRANSFORMS))}" if known else ""))
        elif field.get_lookup(lookup) is None:
            raise ValueError(f"Django knows no lookup {lookup!r} for a {kind}")
        if cls.json_value_lookup(field, lookup):
            # Any JSON value, compared as JSON (Django's JSONField exact): 5 is not "5", true is not 1,
            # null is a JSON null. Typed as text, a client could send none but strings.
            value_type = ANY_JSON
        elif choices and lookup in ("exact", "in"):
            value_type = Literal[tuple(choices)]  # enforced, not only advertised: a value no row can have is -32602
            if not any(isinstance(choice, bool) for choice in choices):
                # Python has True == 1: a Literal of 1 and 2 took true for 1.
                value_type = Annotated[value_type, BeforeValidator(_not_a_bool)]
        if lookup == "isnull":
            return Annotated[bool, Field(strict=True)]
        if lookup in REGEX_LOOKUPS:
            return Annotated[str, AfterValidator(functools.partial(cls.regex_pattern, lookup))]
        if lookup in TEXT_LOOKUPS:
            return str
        if lookup == "in":
            return Annotated[builtins.list[value_type], Field(min_length=1, max_length=cls.max_page_size)]
        if lookup == "range":
            return Annotated[builtins.list[value_type], Field(min_length=2, max_length=2)]
        return value_type

    @classmethod
    def regex_pattern(cls, lookup: str, pattern: str) -> str:
        """A ``regex`` or ``iregex`` filter's ``pattern``; ValueError where the model's database
        runs it with Python's ``re`` (SQLite, as Django's ``REGEXP`` function) and ``re`` cannot
        compile it: the query would fail with an OperationalError, an internal error. Another
        database's engine has its own syntax (PostgreSQL's ``\\m``, ``\\y`` are no ``re``
        escapes): a pattern it refuses is the list's tool error (:meth:`list`)."""
        if connections[router.db_for_read(cls.get_model())].vendor == "sqlite":
            try:
                re.compile(("(?i)" if lookup == "iregex" else "") + pattern)  # Django's iregex on SQLite
            except (re.error, OverflowError, RecursionError) as exc:  # a{99999999999}, nesting too deep
                raise ValueError(f"not a regular expression Python's re module can compile ({exc})") from None
        return pattern

    @classmethod
    def container_type(cls, field: Any, lookup: str) -> Any:
        """What a lookup of an array, hstore or JSON field compares (``tags__contains``: a list of the
        array's items), or None for another field or lookup (``contains`` of a text field is text,
        and so is ``icontains`` of these, which the database compares with the column as text).
        ``ValueError`` for a value these tools cannot type. Whether the database can run it is
        :meth:`unsupported_lookup`'s question, asked by the check (W030) and at each call."""
        if lookup not in CONTAINER_LOOKUPS or not hasattr(field, "get_lookup") or field.get_lookup(lookup) is None:
            return None
        kind = field.get_internal_type()
        keys = Annotated[builtins.list[str], Field(min_length=1, max_length=cls.max_page_size)]
        if lookup == "has_key":
            return str
        if lookup in ("has_keys", "has_any_keys"):
            return keys
        if isinstance(field, models.JSONField):
            # An object, an array or a scalar: jsonb's @> and <@ take any. Typed so on every
            # database, those that cannot run it too (unsupported_lookup): the tool's schema is the
            # same where a site develops (SQLite) and where it deploys (PostgreSQL).
            return JsonValue
        if kind == "HStoreField":
            return dict[str, str | None]
        if kind == "ArrayField":
            item = field.base_field
            if not hasattr(item, "get_internal_type") or item.get_internal_type() in ("ArrayField", "HStoreField", "JSONField"):
                raise ValueError(f"model tools cannot type a list of {type(item).__name__} values")
            item_type: Any = base.field_python_type(item)
            if getattr(item, "choices", None):
                item_type = Literal[tuple(value for value, _ in item.flatchoices)]
            return Annotated[builtins.list[item_type], Field(max_length=cls.max_page_size)]
        return None

    @staticmethod
    def applied_as_given(field: Any, lookup: str, value: Any) -> bool:
        """Whether the filter ``<field>__<lookup>`` with ``value`` (validated by the tool's schema)
        goes to ``QuerySet.filter`` as it is, not through django-filter's ``FilterSet`` where that
        is installed: where the FilterSet would answer otherwise than ``QuerySet.filter``."""
        if isinstance(value, builtins.list):
            # ``in`` and ``range`` come as JSON arrays, validated item by item: a FilterSet would
            # want them as comma-separated text (and split a value with a comma in it).
            return True
        if isinstance(value, str):
            # Text is compared as given: a FilterSet's form fields strip it, and take "" for no
            # filter. A text lookup (``contains``...) takes text whatever the field, compared with
            # the column as text: a FilterSet reads it as a value of the field, and refuses part
            # of a UUID or a number.
            return True
        if isinstance(value, (float, decimal.Decimal)):
            # A FilterSet reads it as a decimal, and refuses one past 1e50.
            return True
        if getattr(field, "is_relation", False):
            # A related row's key, compared as the column holds it: a FilterSet looks the row up
            # in the related model's whole table and refuses a key no row has ("Select a valid
            # choice"), which tells the caller which rows exist there, visible to it or not.
            return True
        # django-filter has no filter for array, hstore and JSON fields, whatever the lookup: its
        # FilterSet fails to build (an AssertionError) for their isnull, icontains, has_key...
        return isinstance(field, models.JSONField) or getattr(field, "get_internal_type", str)() in ("ArrayField", "HStoreField")

    @staticmethod
    def json_value_lookup(field: Any, lookup: str) -> bool:
        """Whether the filter ``<field>__<lookup>`` takes a JSON value (``in``: a list of them), of a JSON field."""
        return isinstance(field, models.JSONField) and lookup in JSON_VALUE_LOOKUPS

    @classmethod
    def unsupported_lookup(cls, field: Any, lookup: str, using: str) -> str | None:
        """Why the database ``using`` cannot run the filter ``<field>__<lookup>`` (JSON ``contains``
        and ``contained_by`` on SQLite and Oracle, as Django's ``NotSupportedError`` says), or None."""
        if (isinstance(field, models.JSONField) and lookup in JSON_CONTAINMENT_LOOKUPS
                and not connections[using].features.supports_json_field_contains):
            return f"{lookup} lookup is not supported on this database backend ({connections[using].vendor}, database {using!r})"
        return None

    @classmethod
    def filter_arguments(cls) -> dict[str, tuple[str, str]]:
        """``{argument name: (field, lookup)}``: ``status`` for exact, ``total__gte`` for others."""
        return {
            (field if lookup == "exact" else f"{field}__{lookup}"): (field, lookup)
            for field, lookups in cls._filterset_spec().items()
            for lookup in lookups
        }

    # -- building tools ---------------------------------------------------------------------
    @classmethod
    def get_model(cls) -> type[models.Model]:
        assert cls.queryset is not None, f"{cls.__name__} needs a queryset (the model comes from it)"
        return cls.queryset.model

    @classmethod
    def get_basename(cls) -> str:
        return cls.basename or base.default_prefix(cls.get_model())

    @classmethod
    def get_lookup_arg(cls) -> str:
        return cls.lookup_arg or ("id" if cls.lookup_field == "pk" else cls.lookup_field)

    @classmethod
    def action_permissions(cls, action: str) -> tuple[str, ...]:
        if action in cls.permissions:
            return tuple(cls.permissions[action])
        if action in DEFAULT_PERMISSIONS:
            return (base.model_perm(cls.get_model(), DEFAULT_PERMISSIONS[action]),)
        return ()

    @classmethod
    def build_tools(cls) -> builtins.list[base.ModelTool]:
        model = cls.get_model()
        prefix = cls.get_basename()
        tools = []
        for action in cls.actions:
            if action not in ACTIONS:
                raise ValueError(f"{cls.__name__}.actions: unknown action {action!r}; use {', '.join(ACTIONS)}")
            title, description, annotations = cls._describe(action, model)
            tools.append(base.build_tool(
                f"{prefix}.{action}", cls._handler(action), cls._schemas_for(action),
                title=title, description=description, annotations=annotations, permissions=cls.action_permissions(action),
            ))
        from .admin_actions import admin_action_tools

        tools.extend(admin_action_tools(cls, prefix))
        return tools

    @classmethod
    def _handler(cls, action: str) -> Callable[..., ToolResult]:
        toolset = cls

        def handler(ctx: Any, **arguments: Any) -> ToolResult:
            instance = toolset(ctx, action)
            return getattr(instance, action)(arguments)

        handler.__module__ = cls.__module__
        handler.__qualname__ = f"{cls.__qualname__}.{action}"
        return handler

    @classmethod
    def _describe(cls, action: str, model: type[models.Model]) -> tuple[str, str, dict[str, Any]]:
        one, many = base.verbose(model), base.verbose(model, plural=True)
        title = {"list": f"List {many}", "retrieve": f"Show {one}", "create": f"Create {one}",
                 "update": f"Update {one}", "delete": f"Delete {one}"}[action]
        lookup = cls.get_lookup_arg()
        description = {
            "list": f"List {many}, a page at a time (pass nextCursor as cursor for the next page).",
            "retrieve": f"One {one}, by {lookup}.",
            "create": f"Create {base.with_article(one)}. Invalid fields come back as an error naming each field.",
            "update": f"Change some fields of {base.with_article(one)}, by {lookup}; fields left out keep their value.",
            "delete": f"Delete {base.with_article(one)}, by {lookup}." + (" Asks the user to confirm first." if cls.confirm_delete else ""),
        }[action]
        annotations: dict[str, Any] = {"title": title, "readOnlyHint": action in ("list", "retrieve")}
        if action not in ("list", "retrieve"):
            annotations["destructiveHint"] = action in ("update", "delete")
            annotations["idempotentHint"] = action in ("update", "delete")
        return title, description, annotations

    @classmethod
    def _schemas_for(cls, action: str) -> Callable[[], tuple[InputSpec, OutputSpec]]:
        def resolve() -> tuple[InputSpec, OutputSpec]:
            return cls.input_spec(action), cls.output_spec(action)

        return resolve

    @classmethod
    def _lookup(cls) -> tuple[Any, dict[str, Any]]:
        model = cls.get_model()
        lookup_type = base.field_python_type(base.lookup_field(model, cls.lookup_field))
        name = "id" if cls.lookup_field == "pk" else cls.lookup_field
        return lookup_type, {**base.type_schema(lookup_type), "description": f"The {name} of the {base.verbose(model)}."}

    @classmethod
    def input_spec(cls, action: str) -> InputSpec:
        model = cls.get_model()
        name = f"{cls.get_basename()}.{action}"
        lookup_arg = cls.get_lookup_arg()
        if action == "list":
            return cls._list_input(name, model)
        lookup_type, lookup_schema = cls._lookup()
        if action in ("retrieve", "delete"):
            one_row: dict[str, Any] = {"type": "object", "properties": {lookup_arg: lookup_schema}, "required": [lookup_arg],
                                       "additionalProperties": False}
            return InputSpec(one_row, base.typed_validator(name, {lookup_arg: (lookup_type, inspect.Parameter.empty)}, closed=True))
        serializer = cls.get_serializer_class()()
        schema = base.serializer_schema(serializer, writable=True, partial=action == "update")
        if action == "create":
            return InputSpec(schema, lambda arguments: dict(arguments))
        # The lookup argument is the lookup only (update takes it out before the serializer sees the
        # rest): a field of the serializer of that name (lookup_field = "slug") is not advertised over it.
        fields = {name: prop for name, prop in schema["properties"].items() if name != lookup_arg}
        schema["properties"] = {lookup_arg: lookup_schema, **fields}
        schema["required"] = [lookup_arg]
        return InputSpec(schema, base.typed_validator(name, {lookup_arg: (lookup_type, inspect.Parameter.empty)}))

    @classmethod
    def _list_input(cls, name: str, model: type[models.Model]) -> InputSpec:
        properties: dict[str, Any] = {}
        fields: dict[str, tuple[Any, Any]] = {}
        many = base.verbose(model, True)
        for argument, (field_name, lookup) in cls.filter_arguments().items():
            try:
                kind: Any = cls.filter_type(cls.filter_field(field_name), lookup)
            except (ValueError, FieldDoesNotExist):
                # Reported by manage.py check (E030); left out here, so the tool's other arguments
                # still work and this one is refused as unknown, not failed on in the database.
                continue
            schema = base.type_schema(kind)
            last = lookup.split("__")[-1]
            if last == "in":
                description = f"Only {many} whose {field_name.replace('__', ' ')} is one of these values."
            elif last == "range":
                description = f"Only {many} whose {field_name.replace('__', ' ')} is between these two values (both included)."
            else:
                description = f"Only {many} whose {field_name} {lookup.replace('__', ' ')} this value."
            properties[argument] = {**schema, "description": description}
            fields[argument] = (kind | None, None)  # null: no filter, or a JSON field's null (filter_queryset)
        searched = cls.searched_fields()
        if searched:
            properties["search"] = {"type": "string", "maxLength": MAX_SEARCH_LENGTH,
                                    "description": f"Up to {MAX_SEARCH_TERMS} words to look for in {', '.join(searched)}."}
            fields["search"] = (Annotated[str, Field(max_length=MAX_SEARCH_LENGTH)] | None, None)
        orderings = [f"{sign}{field}" for field in (cls.ordering_fields or ["pk"]) for sign in ("", "-")]
        properties["ordering"] = {"type": "string", "enum": orderings, "description": f"Sort order (default {cls.default_ordering()})."}
        properties["limit"] = {"type": "integer", "minimum": 1, "maximum": cls.max_page_size,
                               "description": f"Rows per page (default {cls.page_size}, at most {cls.max_page_size})."}
        properties["cursor"] = {"type": "string", "description": "The nextCursor of the previous page."}
        fields["ordering"] = (Literal[tuple(orderings)] | None, None)
        fields["limit"] = (Annotated[int, Field(ge=1, le=cls.max_page_size, strict=True)] | None, None)  # not true, not "5"
        fields["cursor"] = (str | None, None)
        typed = base.typed_validator(name, fields, closed=True)  # fields has every property

        def validate(arguments: dict[str, Any]) -> dict[str, Any]:
            # The arguments given only, not the None that stands for one left out: a JSON field's
            # exact null is a filter (JSON null), and left out it is none.
            return {key: value for key, value in typed(arguments).items() if key in arguments}

        return InputSpec({"type": "object", "properties": properties, "additionalProperties": False}, validate)

    @classmethod
    def output_spec(cls, action: str) -> OutputSpec:
        if action == "delete":
            lookup_arg = cls.get_lookup_arg()
            _, lookup_schema = cls._lookup()
            return OutputSpec("object", {"type": "object", "properties": {"deleted": {"type": "boolean"}, lookup_arg: lookup_schema},
                                         "required": ["deleted", lookup_arg]}, None)
        row = base.serializer_schema(cls.get_serializer_class()(), writable=False)
        if action == "list":
            return OutputSpec("object", {"type": "object", "properties": {
                "results": {"type": "array", "items": row},
                "nextCursor": {"type": "string", "description": "Pass as cursor to get the next page."},
            }, "required": ["results"]}, None)
        return OutputSpec("object", row, None)

    # -- checks -----------------------------------------------------------------------------
    @classmethod
    def check_declaration(cls, known_perms: set[str]) -> builtins.list[checks.CheckMessage]:
        where = f"Toolset {cls.__module__}.{cls.__qualname__}"
        problems: builtins.list[checks.CheckMessage] = []
        warnings: builtins.list[checks.CheckMessage] = []  # not problems: the schemas are still built
        model = cls.get_model()

        def field_error(attribute: str, path: str) -> None:
            problems.append(checks.Error(f"{where}.{attribute} names {path!r}, which is not a field of {model.__name__}.",
                                         obj=cls, id="mcp_tools.E030"))

        def resolves(path: str, *, one_row: bool = False) -> bool:
            """Whether ``path`` names a field; with ``one_row``, through relations to one row only."""
            current: Any = model
            for part in path.split("__"):
                if part == "pk" and current is not None:
                    return True
                try:
                    field = current._meta.get_field(part)
                except (FieldDoesNotExist, AttributeError):
                    return False
                if one_row and (field.one_to_many or field.many_to_many):
                    return False
                current = field.related_model if field.is_relation else None
            return True

        if cls.lookup_field != "pk" and not resolves(cls.lookup_field):
            field_error("lookup_field", cls.lookup_field)
        if cls.lookup_field == "pk" and base.is_composite_key(model._meta.pk) and (set(cls.actions) & _ONE_ROW_ACTIONS or cls.admin_actions):
            # Django 5.2's composite primary key: its value is a tuple, which the string lookup argument never
            # matched (every retrieve, update and delete answered "No ... with id"; found by a review).
            problems.append(checks.Error(
                f"{where}: {model.__name__} has a composite primary key, which a lookup argument cannot name.",
                hint="Set lookup_field to a unique field of the model, or leave retrieve, update, delete and admin_actions out.",
                obj=cls, id="mcp_tools.E030"))
        for field, lookups in cls._filterset_spec().items():
            if not resolves(field):
                field_error("filterset_fields", field)
                continue
            for lookup in lookups:
                try:
                    cls.filter_type(cls.filter_field(field), lookup)
                except (ValueError, FieldDoesNotExist) as exc:
                    problems.append(checks.Error(f"{where}.filterset_fields names lookup {lookup!r} of {field!r}: {exc}.",
                                                 obj=cls, id="mcp_tools.E030"))
                    continue
                # A Warning, not an Error: valid for the database the site deploys on, it must not
                # block runserver, migrate and test on the one it develops on; a call is refused.
                why = cls.unsupported_lookup(cls.filter_field(field), lookup, router.db_for_read(model))
                if why is not None:
                    warnings.append(checks.Warning(
                        f"{where}.filterset_fields names lookup {lookup!r} of {field!r}, which the model's database cannot "
                        f"run: {why}; a call that uses it is a tool error here.", obj=cls, id="mcp_tools.W030"))
        for field in cls.search_fields:
            if not resolves(field):
                field_error("search_fields", field)
            elif not cls.searchable(field):
                problems.append(checks.Error(
                    f"{where}.search_fields names {field!r}, which is a relation or a field Django cannot search "
                    "with icontains.", hint=cls._search_hint(field), obj=cls, id="mcp_tools.E030"))
        for field in [*cls.ordering_fields, *([cls.ordering.lstrip("-")] if cls.ordering else [])]:
            if field != "pk" and not resolves(field):
                field_error("ordering_fields", field)
            elif field != "pk" and not resolves(field, one_row=True):
                # Each row would be listed once per related row, and no single value marks a page's end.
                problems.append(checks.Error(
                    f"{where}.ordering_fields names {field!r}, which goes through a relation to many rows: "
                    "order by a field of the row, or of a row it refers to.", obj=cls, id="mcp_tools.E030"))
        for action in cls.actions:
            if action not in ACTIONS:
                problems.append(checks.Error(f"{where}.actions names unknown action {action!r}.", obj=cls, id="mcp_tools.E031"))
            else:
                problems += base.check_permissions(cls.action_permissions(action), known_perms, where, cls)
        from .admin_actions import check_admin_actions

        problems += check_admin_actions(cls, where)
        if not problems:
            for action in cls.actions:
                try:
                    cls.input_spec(action)
                    cls.output_spec(action)
                except Exception as exc:  # reported, not raised: the serializer may name a missing field
                    problems.append(checks.Error(f"{where}: the {action} tool's schema cannot be built: {exc}",
                                                 obj=cls, id="mcp_tools.E034"))
        return problems + warnings


class ToolsetDeclaration(base.Declaration):
    def __init__(self, toolset: type[ModelToolset], names: list[str]) -> None:
        self.toolset = toolset
        self.names = names

    def check(self, known_perms: set[str]) -> list[checks.CheckMessage]:
        from .admin_actions import unbuilt_admin_actions

        where = f"Toolset {self.toolset.__module__}.{self.toolset.__qualname__}"
        return self.toolset.check_declaration(known_perms) + unbuilt_admin_actions(self.toolset, self.names, where)

    def tool_names(self) -> list[str]:
        return list(self.names)

    def serializer_of(self, model: type[models.Model]) -> type | None:
        return self.toolset.get_serializer_class() if self.toolset.get_model() is model else None

    def serializer_context_of(self, model: type[models.Model], ctx: Any) -> dict[str, Any] | None:
        if self.toolset.get_model() is not model:
            return None
        return dict(self.toolset(ctx, "retrieve").get_serializer().context)  # as its retrieve shows a row


def register_toolset(toolset: type[ModelToolset]) -> type[ModelToolset]:
    """Register a toolset's tools (usable as a class decorator).

    All or nothing: a name that is taken raises ``AlreadyRegistered`` before any tool is added.
    """
    if any(isinstance(d, ToolsetDeclaration) and d.toolset is toolset for d in base.declarations):
        from ..registry import AlreadyRegistered

        raise AlreadyRegistered(f"The toolset {toolset.__qualname__} is registered already")
    tools = toolset.build_tools()
    base.register_all(tools)
    base.declarations.append(ToolsetDeclaration(toolset, [tool.name for tool in tools]))
    _serializers_changed(toolset)
    return toolset


def _serializers_changed(toolset: type[ModelToolset]) -> None:
    """The model's actions that answer the object do so through its toolset's serializer
    (:meth:`~mcp_tools.modeltools.actions.ModelAction.object_serializer`): their schemas are built again."""
    from .actions import ModelAction

    model = toolset.get_model()
    for declaration in base.declarations:
        if isinstance(declaration, ModelAction) and declaration.model is model and declaration.tool is not None:
            declaration.tool.rebuild(declaration._schemas)


def unregister_toolset(toolset: type[ModelToolset]) -> None:
    """Remove a toolset's tools (raises ``NotRegistered`` if it was not registered)."""
    for declaration in list(base.declarations):
        if isinstance(declaration, ToolsetDeclaration) and declaration.toolset is toolset:
            base.unregister_all(declaration.names)
            base.declarations.remove(declaration)
            _serializers_changed(toolset)
            return
    from ..registry import NotRegistered

    raise NotRegistered(f"The toolset {toolset.__qualname__} is not registered")
