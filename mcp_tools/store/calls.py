"""Calls and their journals in the ORM (sync; coroutines use the async forms in :mod:`mcp_tools.store`)."""

from __future__ import annotations

import json
from datetime import timedelta
from collections.abc import Callable
from typing import Any

from django.utils import timezone

from ..conf import mcp_settings
from ..engine.journal import Journal, Step
from ..states import LIVE_STATUSES, CallStatus
from . import sql

def _db() -> str:
    from ..models import ToolCall

    return ToolCall.objects.db


def load_call(call_id: Any) -> tuple[Any, Journal] | None:
    """The call row and its journal: two precompiled SELECTs, no model instance per step."""
    from django.core.exceptions import ValidationError

    try:
        loaded = sql.load_call(call_id, _db())
    except (ValidationError, ValueError):
        return None
    if loaded is None:
        return None
    call, rows = loaded
    return call, Journal([
        Step(seq=seq, kind=kind, key=key, digest=digest, request=request, response=response, error=error, status=status,
             persisted=True)
        for seq, kind, key, digest, request, response, error, status in rows
    ])


def create_call(steps: list[Step], **fields: Any) -> str:
    from django.db import transaction
    from django.db.models.signals import post_save, pre_save

    from ..models import ToolCall

    now = timezone.now()
    fields.setdefault("expires_at", now + timedelta(seconds=mcp_settings.CALL_TTL))
    if pre_save.has_listeners(ToolCall) or post_save.has_listeners(ToolCall):
        # Someone listens for saves: go through Model.save so they hear this one.
        return str(ToolCall.objects.create_with_steps(steps, **fields).id)
    using = _db()
    with transaction.atomic(using=using):
        call_id = sql.insert_call(using, fields, now)
        sql.insert_steps(call_id, using, steps, now)
    for step in steps:
        step.persisted = True
    return call_id


def save_round(call_id: Any, round_number: int, new_steps: list[Step], **fields: Any) -> bool:
    """New steps and state of a live call at ``round_number``; False if the call ended or moved on.

    :meth:`ToolCallManager.save_round <mcp_tools.managers.ToolCallManager.save_round>` in precompiled SQL.
    """
    from django.db import transaction

    using, now = _db(), timezone.now()
    with transaction.atomic(using=using):
        if not sql.update_call(call_id, using, {"round": round_number, "status__in": LIVE_STATUSES}, {"updated_at": now, **fields}):
            return False
        sql.insert_steps(call_id, using, new_steps, now)
    for step in new_steps:
        step.persisted = True
    return True


def commit_round(
    call_id: Any, expected_round: int, answers: dict[int, tuple[str, Any, Any]], answers_digest: str,
    new_steps: list[Step], **fields: Any,
) -> bool:
    """Answers, new steps and outcome of a round that ran no effect, in one transaction (CAS on the round).

    :meth:`ToolCallManager.commit_round <mcp_tools.managers.ToolCallManager.commit_round>` in precompiled SQL.
    """
    from django.db import transaction

    using, now = _db(), timezone.now()
    with transaction.atomic(using=using):
        moved = sql.update_call(
            call_id, using, {"round": expected_round, "status": CallStatus.INPUT_REQUIRED},
            {"round": expected_round + 1, "last_answers_digest": answers_digest, "updated_at": now, **fields},
        )
        if not moved:
            return False
        sql.answer_steps(call_id, using, answers, now)
        sql.insert_steps(call_id, using, new_steps, now)
    for step in new_steps:
        step.persisted = True
    return True


def advance(call_id: Any, expected_round: int, answers: dict[int, tuple[str, Any, Any]], answers_digest: str) -> bool:
    from ..models import ToolCall

    return ToolCall.objects.advance(call_id, expected_round, answers, answers_digest)


def claim_round(call_id: Any, expected_round: int) -> bool:
    from ..models import ToolCall

    return ToolCall.objects.claim_round(call_id, expected_round)


def answer_step(call_id: Any, seq: int, status: str, response: Any, error: Any) -> bool:
    from ..models import ToolCall

    return ToolCall.objects.answer_step(call_id, seq, status, response, error)


def run_once(call_id: Any, step: Step, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[bool, Any]:
    """Run ``fn`` and journal its (JSON) result in one transaction; ``(ran, value)``.

    :meth:`CallStepManager.run_once <mcp_tools.managers.CallStepManager.run_once>` in
    precompiled SQL, checks inside the transaction: a call that ended stops the
    effect (:class:`CallNotLive`), and when another run journaled the step first,
    ``fn``'s writes roll back and the recorded value is returned.
    """
    from django.db import IntegrityError, transaction

    from ..managers import CallNotLive

    using = _db()
    try:
        with transaction.atomic(using=using):
            existing = sql.step_response(call_id, step.seq, using)
            if existing is not None:
                return False, existing[0]
            if sql.call_status(call_id, using) not in LIVE_STATUSES:
                raise CallNotLive(call_id)
            value = json.loads(json.dumps(fn(*args, **kwargs), default=str))
            sql.insert_steps(call_id, using, [Step(seq=step.seq, kind=step.kind, key=step.key, digest=step.digest,
                                                   response=value, status="done")], timezone.now())
    except IntegrityError:
        existing = sql.step_response(call_id, step.seq, using)
        if existing is None:
            raise
        return False, existing[0]
    return True, value


def record_once(call_id: Any, step: Step, value: Any) -> tuple[bool, Any]:
    from ..models import CallStep

    return CallStep.objects.record_done(call_id, step, json.loads(json.dumps(value, default=str)))


def end_call(call_id: Any, status: str, message: str = "") -> bool:
    """Cancel or expire a live call (compare-and-set); False if it had ended already."""
    from ..models import ToolCall

    return ToolCall.objects.end(call_id, status, message)


def record_progress(call_id: Any, progress: float, total: float | None, message: str) -> bool:
    from ..models import ToolCall

    return ToolCall.objects.record_progress(call_id, progress, total, message)


def set_stream(call_id: Any, stream_id: str) -> bool:
    from ..models import ToolCall

    return ToolCall.objects.set_stream(call_id, stream_id)


def call_status(call_id: Any) -> tuple[str, int, Any, str] | None:
    """``(status, round, last_outcome, last_answers_digest)`` of a call, or None."""
    from ..models import ToolCall

    return ToolCall.objects.filter(id=call_id).values_list("status", "round", "last_outcome", "last_answers_digest").first()


def call_request_id(call_id: Any) -> str | None:
    from ..models import ToolCall

    return ToolCall.objects.filter(id=call_id).values_list("request_id", flat=True).first()


def call_for_stream(stream_id: str) -> str | None:
    from ..models import ToolCall

    value = ToolCall.objects.filter(stream_id=stream_id).values_list("id", flat=True).first()
    return str(value) if value else None


# -- background work ------------------------------------------------------------


def after_commit(fn: Callable[[], Any]) -> None:
    """Run ``fn`` once the current transaction commits (at once in autocommit)."""
    from django.db import transaction

    transaction.on_commit(fn)


def claim_for_worker(call_id: Any, worker: str, lease_seconds: float) -> bool:
    from ..models import ToolCall

    return ToolCall.objects.claim_for_worker(call_id, worker, lease_seconds)


def renew_lease(call_id: Any, worker: str, lease_seconds: float) -> bool:
    from ..models import ToolCall

    return ToolCall.objects.renew_lease(call_id, worker, lease_seconds)


def orphaned_background_calls() -> list[str]:
    from ..models import ToolCall

    return ToolCall.objects.orphaned_background_calls()


def expire_overdue() -> int:
    from ..models import ToolCall

    return ToolCall.objects.expire_overdue()


def set_task_id(call_id: Any, task_id: str) -> bool:
    """The Celery task that will run a live background call next."""
    from ..models import ToolCall

    return bool(ToolCall.objects.filter(id=call_id, status__in=("working", "input_required")).update(celery_task_id=task_id))


def tasks_of(principal: str, offset: int, limit: int) -> list[Any]:
    """A caller's tasks (its background calls), newest first."""
    from ..models import ToolCall

    return list(ToolCall.objects.filter(principal=principal, background=True).order_by("-created_at", "-id")[offset:offset + limit])


def call_task_id(call_id: Any) -> str:
    """The Celery task id of a background call ("" for others)."""
    from ..models import ToolCall

    return ToolCall.objects.filter(id=call_id).values_list("celery_task_id", flat=True).first() or ""


def copy_failed_background_call(call_id: Any, task_id: str) -> tuple[str, str, str] | None:
    """A new working row for a failed background call, keeping its journal's ``once`` steps out.

    Returns ``(new call id, tool name, task id)``, or None if ``call_id`` is not a failed
    background call.
    """
    from ..models import ToolCall

    try:
        old = ToolCall.objects.filter(id=call_id, background=True, status="failed").first()
    except (ValueError, TypeError):
        return None
    if old is None:
        return None
    fields = {
        name: getattr(old, name)
        for name in ("method", "tool_name", "arguments", "user_id", "principal", "protocol_version", "flavor",
                     "params_digest", "client_capabilities", "session_id", "poll_interval_ms")
    }
    new = ToolCall.objects.create(
        **fields, background=True, status="working", celery_task_id=task_id, status_message=f"Retry of {old.id}",
        expires_at=timezone.now() + timedelta(seconds=mcp_settings.CALL_TTL),
    )
    return str(new.id), old.tool_name, task_id


def touch_live(call_id: Any) -> bool:
    """Mark a live call as still being run by its (living) owner; False when it has ended."""
    from ..models import ToolCall

    return bool(ToolCall.objects.filter(id=call_id, status__in=("working", "input_required")).update(updated_at=timezone.now()))


def take_over_round(call_id: Any, round_number: int, answers_digest: str, stale_seconds: float) -> bool:
    """Claim a round whose owner died after advancing it (compare-and-set; one claimant wins).

    The round was advanced with these answers, has no outcome, and nobody touched
    the row for ``stale_seconds``: a living owner touches it every
    ``CANCEL_POLL_SECONDS`` (see :class:`~mcp_tools.interprocess.cancellation.CallWatch`).
    Background calls are taken over by the lease sweep instead.
    """
    from ..models import ToolCall

    now = timezone.now()
    return bool(
        ToolCall.objects.filter(
            id=call_id, status="working", round=round_number, last_answers_digest=answers_digest,
            last_outcome__isnull=True, background=False, updated_at__lt=now - timedelta(seconds=stale_seconds),
        ).update(updated_at=now)
    )
