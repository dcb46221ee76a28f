"""ORM tables: calls and their journals, 2025-11-25 sessions, and the SSE event log."""

from __future__ import annotations

import functools
import json
import uuid
from typing import Any

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from .managers import CallStepManager, PrimaryManager, StreamEventManager, ToolCallManager
from .states import TERMINAL_STATUSES, CallStatus, StepKind, StepStatus, WireFlavor

__all__ = [
    "TERMINAL_STATUSES", "CallStatus", "CallStep", "ExactJSONField", "McpSession", "ResourceSubscription", "StepKind", "StepStatus",
    "StreamEvent", "ToolCall", "WireFlavor",
]


#: The longest name a call row keeps (a tool or prompt name, or a resource URI, cut to it).
CALL_NAME_MAX_LENGTH = 256
#: The longest URI a resource subscription holds (``resources/subscribe`` refuses longer ones).
SUBSCRIPTION_URI_MAX_LENGTH = 2048


@functools.cache
def _json_parameter() -> Any:
    """The PostgreSQL driver's ``json`` parameter wrapper (psycopg 3, else psycopg2)."""
    try:
        from psycopg.types.json import Json
    except ImportError:
        from psycopg2.extras import Json  # type: ignore[no-redef]
    return Json


class _AsJsonb(models.Func):
    """A ``json`` column read as ``jsonb`` on PostgreSQL, for lookups (``json`` has no ``=``, ``?``
    or ``@>``); the column as it is elsewhere."""

    def __init__(self, expression: Any) -> None:
        super().__init__(expression, output_field=models.JSONField())

    def as_sql(self, compiler: Any, connection: Any, function: Any = None, template: Any = None, arg_joiner: Any = None,
               **extra_context: Any) -> Any:
        return compiler.compile(self.get_source_expressions()[0])

    def as_postgresql(self, compiler: Any, connection: Any, **extra_context: Any) -> Any:
        sql, params = compiler.compile(self.get_source_expressions()[0])
        return f"({sql})::jsonb", params


@functools.cache
def _lookup_on_jsonb(lookup: type[Any]) -> type[Any]:
    """``lookup`` applied to the column read as jsonb (:class:`_AsJsonb`)."""
    return type(lookup.__name__, (lookup,), {"__init__": lambda self, lhs, rhs: lookup.__init__(self, _AsJsonb(lhs), rhs)})


class ExactJSONField(models.JSONField):
    """A ``JSONField`` whose values read back exactly as they were written, on every database.

    PostgreSQL's ``jsonb`` (Django's type for ``JSONField``) rewrites what it stores: object keys
    in its own order (shorter first), ``1e20`` read back as the integer ``100000000000000000000``,
    ``-0.0`` as ``0.0``. A durable call's handler must see on replay exactly what it saw when it
    ran (a ``ctx.once`` dict it iterates, a number it formats into its next question), and an
    identical retry must get the same answer; SQLite's text JSON keeps the text as written, and
    so does PostgreSQL's ``json``, which these columns are there. The store never compares them
    in SQL; the ORM's lookups and key transforms (``arguments__order=5``, ``__has_key``,
    ``__contains``) read the column as ``jsonb`` on PostgreSQL, so they work as on any JSONField.
    """

    def get_lookup(self, lookup_name: str) -> Any:
        lookup = super().get_lookup(lookup_name)
        if lookup is None or lookup_name == "isnull":  # IS NULL works on json as it is
            return lookup
        return _lookup_on_jsonb(lookup)  # type: ignore[arg-type]  # classes hash by identity

    def get_transform(self, lookup_name: str) -> Any:
        transform = super().get_transform(lookup_name)
        if transform is None:
            return None
        return lambda lhs, *args, **kwargs: transform(_AsJsonb(lhs), *args, **kwargs)

    def db_type(self, connection: Any) -> str | None:
        if connection.vendor == "postgresql":
            return "json"
        return super().db_type(connection)

    def get_db_prep_value(self, value: Any, connection: Any, prepared: bool = False) -> Any:
        if connection.vendor != "postgresql":
            return super().get_db_prep_value(value, connection, prepared)
        if not prepared:
            value = self.get_prep_value(value)
        # A parameter typed json, not Django's Jsonb: a jsonb parameter would be parsed (and
        # rewritten) as jsonb before its cast to the column's type.
        return _json_parameter()(value, dumps=functools.partial(json.dumps, cls=self.encoder))

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        if connection.vendor == "postgresql":
            return value  # the driver's json loader has read it (json.loads: the text as written)
        return super().from_db_value(value, expression, connection)


class ToolCall(models.Model):
    """One logical call (of a tool, prompt or resource) from its first request to its end.

    Written only for calls that suspend, defer, run long, use ``ctx.once``, or
    when ``RECORD_ALL_CALLS`` is on: a fast call costs no database write.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    method = models.CharField(_("method"), max_length=64, default="tools/call", help_text=_("tools/call, prompts/get or resources/read."))
    tool_name = models.CharField(_("tool"), max_length=CALL_NAME_MAX_LENGTH, help_text=_("Tool or prompt name, or resource URI."))
    arguments = ExactJSONField(_("arguments"), default=dict, help_text=_("Arguments as sent by the client."))
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, verbose_name=_("user"), null=True, blank=True, on_delete=models.SET_NULL,
        related_name="mcp_tool_calls", help_text=_("The authenticated caller (empty for anonymous calls)."),
        db_index=False,  # a partial index below: anonymous calls pay no entry
    )
    principal = models.CharField(_("principal"), max_length=128, help_text=_("Identity tokens of this call are bound to."))
    protocol_version = models.CharField(_("protocol version"), max_length=32, blank=True)
    flavor = models.CharField(_("wire flavor"), max_length=16, choices=WireFlavor.choices)
    status = models.CharField(_("status"), max_length=16, choices=CallStatus.choices, default=CallStatus.WORKING)
    round = models.PositiveIntegerField(_("round"), default=0, help_text=_("Advances once per answered round (optimistic concurrency)."))
    params_digest = models.CharField(_("parameters digest"), max_length=64, help_text=_("SHA-256 of the original request parameters."))
    client_capabilities = ExactJSONField(_("client capabilities"), default=dict, blank=True)
    session_id = models.CharField(_("session"), max_length=64, blank=True)
    #: The JSON-RPC id of the request that started the call, as JSON ("" for none): ``"7"`` and ``7`` differ.
    request_id = models.TextField(_("request id"), blank=True)
    #: The scopes of the OAuth token that made the call (null: not scope-limited): a worker that
    #: runs it later checks tool permissions with the same scopes.
    scopes = ExactJSONField(_("token scopes"), null=True, blank=True)
    retried_as = models.UUIDField(_("retried as"), null=True, blank=True,
                                  help_text=_("The new call an operator started to retry this failed one (once)."))
    stream_id = models.CharField(_("SSE stream"), max_length=64, blank=True, help_text=_("The 2025-11-25 response stream that carries this call."))
    #: The ``progressToken`` of the request that started the call (null: none): a resumed stream, a
    #: task's ``tasks/result`` and a run that takes the call over report progress under it.
    progress_token = ExactJSONField(_("progress token"), null=True, blank=True)
    progress = models.FloatField(_("progress"), null=True, blank=True)
    progress_total = models.FloatField(_("progress total"), null=True, blank=True)
    #: The highest progress value a task's ``tasks/result`` streams sent under ``progress_token``: the
    #: next ``tasks/result`` goes on from above it (the spec: each value of a token increases).
    progress_relayed = models.FloatField(_("progress relayed"), null=True, blank=True)
    status_message = models.TextField(_("status message"), blank=True)
    result = ExactJSONField(_("result"), null=True, blank=True, help_text=_("The final result (CallToolResult etc.)."))
    error = ExactJSONField(_("error"), null=True, blank=True, help_text=_("The JSON-RPC error, if the call failed with one."))
    last_outcome = ExactJSONField(_("last outcome"), null=True, blank=True, help_text=_("Wire answer of the latest round, repeated to identical retries."))
    last_answers_digest = models.CharField(_("last answers digest"), max_length=64, blank=True)
    celery_task_id = models.CharField(_("Celery task id"), max_length=255, blank=True)
    background = models.BooleanField(
        _("background"), default=False, help_text=_("Run by a Celery worker instead of the request that started it."),
    )
    #: Created as a task: only these are what the tasks methods list and reach (a background call held on
    #: its stream, or followed with resume tokens, is not one). Not a flavor: a 2026-07-28 task is served
    #: as every 2026 call is ("mrtr").
    is_task = models.BooleanField(
        _("task"), default=False, db_default=False,
        help_text=_("Created as an MCP task (2025-11-25 task-augmented tools/call, or the 2026-07-28 tasks extension): its id is the task id."),
    )
    worker = models.CharField(_("worker"), max_length=255, blank=True, help_text=_("The worker (host and process) running the call now, if any."))
    lease_expires_at = models.DateTimeField(
        _("lease expires"), null=True, blank=True,
        help_text=_("A worker renews this while it runs the call; past it, the call is taken over by another worker."),
    )
    queued_until = models.DateTimeField(
        _("queued until"), null=True, blank=True,
        help_text=_("A queued call that no worker took by then is queued again (its broker message may have been lost)."),
    )
    # A default in the database too (db_default): the processes of a release before these columns
    # insert calls without them while a rolling deploy runs both.
    lost_workers = models.PositiveIntegerField(
        _("lost workers"), default=0, db_default=0,
        help_text=_("How many times a worker running the call was lost (its lease ran out): past the tool's bound, the call fails."),
    )
    requeues = models.PositiveIntegerField(
        _("queued again"), default=0, db_default=0, help_text=_("How many times the sweep queued the call again (its worker or its message was lost)."),
    )
    #: The attempt count of ``retry_on`` on the row, not in the message: a second message for the call (the
    #: sweep's re-queue of a slow queue, a redelivery) starts Celery's own count at 0 again.
    retries = models.PositiveIntegerField(
        _("retries"), default=0, db_default=0,
        help_text=_("How many times the tool's retry_on exceptions had the call run again (at most its max_retries)."),
    )
    poll_interval_ms = models.PositiveIntegerField(_("poll interval (ms)"), null=True, blank=True, help_text=_("Suggested to task clients."))
    created_at = models.DateTimeField(_("created"), auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(_("updated"), auto_now=True)
    expires_at = models.DateTimeField(_("expires"), null=True, blank=True)
    finished_at = models.DateTimeField(_("finished"), null=True, blank=True)

    objects = ToolCallManager()

    class Meta:
        verbose_name = _("tool call")
        verbose_name_plural = _("tool calls")
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["status", "-updated_at"], name="mcp_call_status_updated"),
            models.Index(fields=["expires_at"], name="mcp_call_expires"),
            # Only background calls are listed as tasks or swept for dead workers: the other calls,
            # most of them, pay no entry in these two (every index costs each round's commit).
            models.Index(fields=["principal", "-created_at"], name="mcp_call_bg_principal", condition=models.Q(background=True)),
            models.Index(fields=["status", "lease_expires_at"], name="mcp_call_bg_lease", condition=models.Q(background=True)),
            # The admin console: calls in flight newest first, a tool's calls, last activity overall.
            models.Index(fields=["status", "-created_at"], name="mcp_call_status_created"),
            models.Index(fields=["tool_name", "-created_at"], name="mcp_call_tool_created"),  # also serves tool_name alone
            models.Index(fields=["-updated_at"], name="mcp_call_updated"),
            # Partial: only the calls that have a user / a 2025-11-25 session get an entry.
            models.Index(fields=["user"], name="mcp_call_user", condition=models.Q(user__isnull=False)),
            models.Index(fields=["session_id"], name="mcp_call_session", condition=models.Q(session_id__gt="")),
        ]

    def __str__(self) -> str:
        return f"{self.tool_name} ({self.status})"

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES


class CallStep(models.Model):
    """One journal entry of a call: a request to the client or a side effect, and its outcome."""

    # No index of its own: the unique (call, seq) index serves every lookup by call.
    call = models.ForeignKey(ToolCall, verbose_name=_("call"), on_delete=models.CASCADE, related_name="steps", db_index=False)
    seq = models.PositiveIntegerField(_("sequence"), help_text=_("Order in which the handler asked for the step."))
    kind = models.CharField(_("kind"), max_length=16, choices=StepKind.choices)
    key = models.CharField(_("key"), max_length=128, help_text=_("Name of the step; the inputRequests key / saga stepId."))
    digest = models.CharField(_("digest"), max_length=64, help_text=_("SHA-256 of the request, checked on replay."))
    request = ExactJSONField(_("request"), null=True, blank=True)
    response = ExactJSONField(_("response"), null=True, blank=True)
    error = ExactJSONField(_("error"), null=True, blank=True)
    status = models.CharField(_("status"), max_length=16, choices=StepStatus.choices, default=StepStatus.PENDING)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    answered_at = models.DateTimeField(_("answered"), null=True, blank=True)

    objects = CallStepManager()

    class Meta:
        verbose_name = _("call step")
        verbose_name_plural = _("call steps")
        ordering = ["call", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["call", "seq"], name="mcp_step_unique_seq"),
            models.UniqueConstraint(fields=["call", "key"], name="mcp_step_unique_key"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.key} ({self.status})"


class McpSession(models.Model):
    """A 2025-11-25 (handshake era) session, shared by every server process."""

    objects = PrimaryManager["McpSession"]()

    id = models.CharField(_("session id"), max_length=64, primary_key=True)
    protocol_version = models.CharField(_("protocol version"), max_length=32)
    client_info = ExactJSONField(_("client info"), default=dict, blank=True)
    client_capabilities = ExactJSONField(_("client capabilities"), default=dict, blank=True)
    principal = models.CharField(_("principal"), max_length=128)
    log_level = models.CharField(_("log level"), max_length=16, default="info")
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    last_seen_at = models.DateTimeField(_("last seen"), auto_now=True, db_index=True)

    class Meta:
        verbose_name = _("MCP session")
        verbose_name_plural = _("MCP sessions")

    def __str__(self) -> str:
        return self.id


class ResourceSubscription(models.Model):
    """A 2025-11-25 session's ``resources/subscribe`` to one URI."""

    objects = PrimaryManager["ResourceSubscription"]()

    session = models.ForeignKey(McpSession, verbose_name=_("session"), on_delete=models.CASCADE, related_name="subscriptions")
    uri = models.CharField(_("URI"), max_length=SUBSCRIPTION_URI_MAX_LENGTH)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    #: When the resource was last said to have changed (``notify_resource_updated``): a standalone stream
    #: resumed with ``Last-Event-ID`` tells of each change made after the last event its client had,
    #: which no stream was open to carry (the client was reconnecting).
    updated_at = models.DateTimeField(_("last updated"), null=True, blank=True)

    class Meta:
        verbose_name = _("resource subscription")
        verbose_name_plural = _("resource subscriptions")
        constraints = [models.UniqueConstraint(fields=["session", "uri"], name="mcp_subscription_unique")]
        indexes = [models.Index(fields=["uri"], name="mcp_subscription_uri")]

    def __str__(self) -> str:
        return f"{self.session_id} → {self.uri}"


class StreamEvent(models.Model):
    """An SSE event kept for ``Last-Event-ID`` replay (bounded per stream)."""

    id = models.BigAutoField(primary_key=True)
    session_id = models.CharField(_("session"), max_length=64)
    stream_id = models.CharField(_("stream"), max_length=64)
    payload = models.TextField(_("payload"), help_text=_("The JSON-RPC message as sent."))
    created_at = models.DateTimeField(_("created"), auto_now_add=True)

    objects = StreamEventManager()

    class Meta:
        verbose_name = _("stream event")
        verbose_name_plural = _("stream events")
        indexes = [models.Index(fields=["stream_id", "id"], name="mcp_event_stream")]
