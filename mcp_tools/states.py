"""The vocabulary of call state: statuses of calls and steps, step kinds, wire flavors.

Shared by the models, their managers, the admin and the server layer; it
imports nothing of mcp_tools, so any of them may import it.
"""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _


class CallStatus(models.TextChoices):
    WORKING = "working", _("Working")
    INPUT_REQUIRED = "input_required", _("Input required")
    COMPLETED = "completed", _("Completed")
    FAILED = "failed", _("Failed")
    CANCELLED = "cancelled", _("Cancelled")
    EXPIRED = "expired", _("Expired")


TERMINAL_STATUSES = frozenset({CallStatus.COMPLETED, CallStatus.FAILED, CallStatus.CANCELLED, CallStatus.EXPIRED})
#: A call in one of these may still change; every status change moves only such a row.
LIVE_STATUSES = (CallStatus.WORKING, CallStatus.INPUT_REQUIRED)
#: The ``status_message`` an operator's cancel or expire (the staff console) leaves on a call. The call's
#: client reads it (a task's ``statusMessage``, a relayed progress message): it says that an operator ended
#: the call, never who (a login may be an email address). Who did it is in the call's History (``LogEntry``).
OPERATOR_END_MESSAGES: dict[str, str] = {
    CallStatus.CANCELLED: "Cancelled by an operator.",
    CallStatus.EXPIRED: "Expired by an operator.",
}


class WireFlavor(models.TextChoices):
    SESSION = "session", _("2025-11-25 session (SSE)")
    MRTR = "mrtr", _("2026-07-28 multi-round-trip")
    SAGA = "saga", _("Saga (tools/callSaga)")
    TASK = "task", _("Task")
    DIRECT = "direct", _("Direct (completed in one request)")
    STDIO = "stdio", _("stdio")


class StepKind(models.TextChoices):
    ELICIT = "elicit", _("Elicitation")
    SAMPLE = "sample", _("Sampling")
    ROOTS = "roots", _("List roots")
    ONCE = "once", _("Side effect (once)")


class StepStatus(models.TextChoices):
    PENDING = "pending", _("Waiting for the client")
    DONE = "done", _("Done")
    FAILED = "failed", _("Failed")
