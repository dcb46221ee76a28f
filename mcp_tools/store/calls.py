"""Calls and their journals in the ORM (sync; coroutines use the async forms in :mod:`mcp_tools.store`)."""

from __future__ import annotations

import json
from datetime import timedelta
from collections.abc import Callable
from typing import Any

from django.utils import timezone

from ..conf import mcp_settings
from ..engine.journal import Journal, Step

def load_call(call_id: Any) -> tuple[Any, Journal] | None:
    from django.core.exceptions import ValidationError

    from ..models import ToolCall

    try:
        call = ToolCall.objects.filter(id=call_id).first()
    except (ValidationError, ValueError):
        return None
    if call is None:
        return None
    steps = [
        Step(seq=s.seq, kind=s.kind, key=s.key, digest=s.digest, request=s.request, response=s.response,
             error=s.error, status=s.status, persisted=True)
        for s in call.steps.order_by("seq")
    ]
    return call, Journal(steps)


def create_call(steps: list[Step], **fields: Any) -> str:
    from ..models import ToolCall

    fields.setdefault("expires_at", timezone.now() + timedelta(seconds=mcp_settings.CALL_TTL))
    call = ToolCall.objects.create_with_steps(steps, **fields)
    return str(call.id)


def save_round(call_id: Any, round_number: int, new_steps: list[Step], **fields: Any) -> bool:
    """New steps and state of a live call at ``round_number``; False if the call ended or moved on."""
    from ..models import ToolCall

    return ToolCall.objects.save_round(call_id, round_number, new_steps, fields)


def commit_round(
    call_id: Any, expected_round: int, answers: dict[int, tuple[str, Any, Any]], answers_digest: str,
    new_steps: list[Step], **fields: Any,
) -> bool:
    """Answers, new steps and outcome of a round that ran no effect, in one transaction (CAS on the round)."""
    from ..models import ToolCall

    return ToolCall.objects.commit_round(call_id, expected_round, answers, answers_digest, new_steps, fields)


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
    from ..models import CallStep

    def journaled() -> Any:
        value = fn(*args, **kwargs)
        return json.loads(json.dumps(value, default=str))

    return CallStep.objects.run_once(call_id, step, lambda: journaled(), (), {})


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
