"""A registered ``ModelAdmin``'s ``@admin.action`` functions as tools (``ModelToolset.admin_actions``).

The action runs as it does in the admin, ``action(modeladmin, request, queryset)``,
on the rows the caller names that the toolset's queryset lets them reach. The
request is a minimal one carrying the user; ``message_user`` texts become the
tool's answer. An action that answers with a page (an intermediate form) is
refused: there is no browser to show it in.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

from django.core import checks
from django.db import transaction
from django.http import HttpRequest, HttpResponseBase

from ..protocol.errors import INVALID_PARAMS, McpError
from ..registry.results import ToolError, ToolResult
from ..registry.schemas import InputSpec, OutputSpec
from . import base
from .databases import for_writing

if TYPE_CHECKING:
    from .toolsets import ModelToolset

#: Admin actions that only work through their confirmation page.
PAGE_ONLY_ACTIONS = {"delete_selected"}


class _Messages:
    """Collects ``message_user`` / ``messages.add_message`` calls (``request._messages``)."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def add(self, level: int, message: Any, extra_tags: str = "") -> None:
        self.texts.append(str(message))


def _site(toolset: type[ModelToolset]) -> Any:
    if toolset.admin_site is not None:
        return toolset.admin_site
    from django.contrib import admin

    return admin.site


def _model_admin(toolset: type[ModelToolset]) -> Any:
    return _site(toolset)._registry.get(toolset.get_model())


STANDARD_PERMISSIONS = ("add", "change", "delete", "view")


def _allowed(func: Any) -> tuple[str, ...]:
    """The permission names the action asks for (``@admin.action(permissions=...)``; "change" if none)."""
    return tuple(getattr(func, "allowed_permissions", None) or ("change",))


def _permissions(model_admin: Any, func: Any) -> tuple[str, ...]:
    """The model permissions the tool asks for up front (what tools/list goes by).

    The standard names map to the model's permissions. An action that names only custom
    ones (``permissions=["publish"]``, checked by ``has_publish_permission``) still needs the
    model's view permission, as the admin needs it to show the changelist the action is on;
    the ``has_<name>_permission`` methods themselves run on each call (see :func:`_refused`).
    """
    model = model_admin.model
    standard = tuple(base.model_perm(model, name) for name in _allowed(func) if name in STANDARD_PERMISSIONS)
    return standard or (base.model_perm(model, "view"),)


def _refused(model_admin: Any, func: Any, action: str, request: HttpRequest) -> str | None:
    """Why the admin would not offer the action ``action`` to ``request``'s user, or None when it would:
    the first permission its ``has_<name>_permission(request)`` refuses (as the admin filters its
    actions), or ``get_actions`` when the ``ModelAdmin``'s ``get_actions(request)`` leaves out an action
    the changelist offers (Django's documented way to offer an action to some users only)."""
    for name in _allowed(func):
        check = getattr(model_admin, f"has_{name}_permission", None)
        if check is None or not check(request):
            return name
    # Only an action the changelist would offer someone (in the ModelAdmin's actions or the site's) is
    # withheld by get_actions: one the toolset names beyond them (not listed in actions, or actions = None)
    # was never in it, for anyone, and runs as the toolset exposes it (a review of the fix).
    offered = {name for _func, name, _description in model_admin._get_base_actions()}
    if action in offered and action not in model_admin.get_actions(request):
        return "get_actions"
    return None


def admin_action_tools(toolset: type[ModelToolset], prefix: str) -> list[base.ModelTool]:
    if not toolset.admin_actions:
        return []
    model_admin = _model_admin(toolset)
    if model_admin is None:
        return []  # reported by `manage.py check` (mcp_tools.E031) rather than raised at import
    tools = []
    for name in toolset.admin_actions:
        found = model_admin.get_action(name) if name not in PAGE_ONLY_ACTIONS else None
        if found is None:
            continue  # likewise reported by the check
        func, action_name, description = found
        tools.append(_tool(toolset, model_admin, func, action_name, str(description), prefix))
    return tools


def _tool(toolset: type[ModelToolset], model_admin: Any, func: Any, name: str, description: str, prefix: str) -> base.ModelTool:
    model = toolset.get_model()
    lookup_arg = toolset.get_lookup_arg() + "s"
    title = description.replace("%(verbose_name_plural)s", base.verbose(model, plural=True))
    permissions = _permissions(model_admin, func)

    def resolve() -> tuple[InputSpec, OutputSpec]:
        lookup_type, lookup_schema = toolset._lookup()
        schema = {"type": "object", "properties": {lookup_arg: {
            "type": "array", "items": {key: value for key, value in lookup_schema.items() if key != "description"},
            "minItems": 1, "maxItems": toolset.max_page_size, "description": f"The {base.verbose(model, True)} to act on.",
        }}, "required": [lookup_arg], "additionalProperties": False}
        validate = base.typed_validator(f"{prefix}.{name}", {lookup_arg: (list[lookup_type], inspect.Parameter.empty)},  # type: ignore[valid-type]
                                       closed=True)
        output = OutputSpec("object", {"type": "object", "properties": {
            "count": {"type": "integer"}, "messages": {"type": "array", "items": {"type": "string"}},
        }, "required": ["count", "messages"]}, None)
        return InputSpec(schema, validate), output

    def handler(ctx: Any, **arguments: Any) -> ToolResult:
        lookups = list(dict.fromkeys(arguments[lookup_arg]))
        if not lookups or len(lookups) > toolset.max_page_size:
            raise ToolError(f"Name between 1 and {toolset.max_page_size} {base.verbose(model, True)}.")
        request = base.tool_request(ctx.user)
        if _refused(model_admin, func, name, request) is not None:
            # As for any tool the caller may not use: indistinguishable from one that does not exist.
            raise McpError(INVALID_PARAMS, f"Unknown tool: {prefix}.{name}")
        instance = toolset(ctx, name)
        queryset = for_writing(instance.get_queryset()).filter(**{f"{toolset.lookup_field}__in": lookups})
        field = "pk" if toolset.lookup_field == "pk" else toolset.lookup_field
        found = {str(value) for value in queryset.values_list(field, flat=True)}
        missing = [value for value in lookups if str(value) not in found]
        if missing:  # like a missing row, whether it does not exist or lies outside the queryset
            raise base.not_found(model, field, missing[0])
        enabled = base.object_permissions_enabled(toolset.object_permissions)
        checked: dict[Any, Any] = {}  # the primary key of each row asked, and its lookup value
        for obj in queryset:
            checked[obj.pk] = base.value_at(obj, field)
            base.check_object(ctx.user, permissions, obj, enabled, name.replace("_", " "), (field, checked[obj.pk]))
        messages = _Messages()
        request._messages = messages  # type: ignore[attr-defined]
        using = queryset.db  # where the action's writes go (the routers' write alias)

        def act() -> None:
            with transaction.atomic(using=using):
                # The rows were asked their object permissions before this transaction: locked until the
                # action commits and asked again, a permission gone by now (a rule that reads the row, one
                # revoked) refuses the action as above, nothing written.
                list(model._base_manager.db_manager(using).select_for_update().filter(pk__in=checked).values_list("pk", flat=True))
                current = {obj.pk: obj for obj in queryset.all()}
                for pk, value in checked.items():
                    if pk not in current:  # gone, or out of the queryset, meanwhile
                        raise base.not_found(model, field, value)
                    base.check_object(ctx.user, permissions, current[pk], enabled, name.replace("_", " "), (field, value))
                answer = func(model_admin, request, queryset)
                if isinstance(answer, HttpResponseBase):
                    transaction.set_rollback(True, using=using)
                    raise ToolError(f"The admin action {name!r} needs a web page; run it in the admin.")

        # A write the database refuses (a unique value, a reference; at once or at the commit) is a tool
        # error, rolled back, as a model action's is.
        refused = base.refused_at_commit(title, act)
        if isinstance(refused, ToolResult):
            return refused
        data = {"count": len(lookups), "messages": messages.texts}
        return ToolResult(content=[{"type": "text", "text": " ".join(messages.texts) or f"{title}: done for {len(lookups)}."}],
                          structured_content=data)

    handler.__module__ = toolset.__module__
    handler.__qualname__ = f"{toolset.__qualname__}.{name}"
    annotations = {"title": title, "readOnlyHint": False, "destructiveHint": True, "idempotentHint": False}
    return base.build_tool(f"{prefix}.{name}", handler, resolve, title=title, description=title + ".",
                           annotations=annotations, permissions=permissions)


def unbuilt_admin_actions(toolset: type[ModelToolset], names: list[str], where: str) -> list[checks.CheckMessage]:
    """The ``admin_actions`` of a registered toolset (its tools ``names``) that the ``ModelAdmin`` has now
    but that got no tool: the toolset was registered before the ``ModelAdmin`` (``mcp_tools`` before
    ``django.contrib.admin`` in ``INSTALLED_APPS``, or admin modules imported later), and its admin
    actions were silently missing while the check, run once the admin is loaded, found them."""
    model_admin = _model_admin(toolset)
    if model_admin is None:
        return []  # check_admin_actions reports it
    problems: list[checks.CheckMessage] = []
    for name in toolset.admin_actions:
        found = model_admin.get_action(name) if name not in PAGE_ONLY_ACTIONS else None
        if found is not None and f"{toolset.get_basename()}.{found[1]}" not in names:
            problems.append(checks.Error(
                f"{where}.admin_actions: {name!r} has no tool: the toolset was registered before the ModelAdmin.",
                hint="Put 'django.contrib.admin' before 'mcp_tools' in INSTALLED_APPS, or register the toolset "
                     "after the ModelAdmin.", obj=toolset, id="mcp_tools.E031"))
    return problems


def check_admin_actions(toolset: type[ModelToolset], where: str) -> list[checks.CheckMessage]:
    if not toolset.admin_actions:
        return []
    model_admin = _model_admin(toolset)
    if model_admin is None:
        return [checks.Error(f"{where}.admin_actions: {toolset.get_model().__name__} is not registered in the admin site.",
                             obj=toolset, id="mcp_tools.E031")]
    problems: list[checks.CheckMessage] = []
    for name in toolset.admin_actions:
        if name in PAGE_ONLY_ACTIONS:
            problems.append(checks.Error(f"{where}.admin_actions: {name!r} works only through its confirmation page.",
                                         hint="Offer the toolset's 'delete' action instead.", obj=toolset, id="mcp_tools.E031"))
        elif model_admin.get_action(name) is None:
            problems.append(checks.Error(f"{where}.admin_actions: {type(model_admin).__name__} has no action {name!r}.",
                                         obj=toolset, id="mcp_tools.E031"))
    return problems
