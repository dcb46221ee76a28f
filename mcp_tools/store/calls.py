"""Calls and their journals in the ORM (sync; coroutines use the async forms in :mod:`mcp_tools.store`)."""

from __future__ import annotations

import contextlib
import inspect
import json
from datetime import timedelta
from collections.abc import Callable, Sequence
from typing import Any

from django.utils import timezone

from ..conf import mcp_settings
from ..engine.errors import NonDeterministicHandler, error_of_once
from ..engine.journal import Journal, Step, failed_once_key
from ..states import LIVE_STATUSES, CallStatus, WireFlavor
from . import lane, sql

_db = sql.call_database


def load_call(call_id: Any) -> tuple[Any, Journal] | None:
    """The call row and its journal: one precompiled SELECT, no model instance per step."""
    from django.core.exceptions import ValidationError

    try:
        loaded = sql.load_call(call_id, _db())
    except (ValidationError, ValueError):  # not a call id
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
    """A new call row with its journal so far (one statement on PostgreSQL, one transaction on SQLite)."""
    from django.db.models.signals import post_save, pre_save

    from ..models import CALL_NAME_MAX_LENGTH, ToolCall

    now = timezone.now()
    fields.setdefault("expires_at", now + timedelta(seconds=mcp_settings.CALL_TTL))
    # A resources/read row is named by its URI, which may be longer than the column (PostgreSQL
    # would refuse the row); the name only labels the row, the whole URI is in its arguments.
    fields["tool_name"] = fields["tool_name"][:CALL_NAME_MAX_LENGTH]
    # ``receivers`` empty: no listener for any sender, told without has_listeners()'s filtering.
    if (pre_save.receivers and pre_save.has_listeners(ToolCall)) or (post_save.receivers and post_save.has_listeners(ToolCall)):
        # Someone listens for saves: go through Model.save so they hear this one (in the store's thread).
        lane.refuse()
        return str(ToolCall.objects.create_with_steps(steps, **fields).id)
    call_id = sql.insert_call(_db(), fields, steps, now)
    for step in steps:
        step.persisted = True
    return call_id


def save_round(call_id: Any, round_number: int, new_steps: list[Step], held_by: str | None = None, **fields: Any) -> bool:
    """New steps and state of a live call at ``round_number``; False if the call ended or moved on.

    Compare-and-set on ``round`` and on a live status: a call cancelled or expired
    meanwhile, or moved on by another process, is left as it is and nothing is written.
    With ``held_by`` (a worker), also on the call's worker: a worker whose lease another
    worker took over writes nothing over the run that holds it now.
    """
    now = timezone.now()
    where: dict[str, Any] = {"round": round_number, "status__in": LIVE_STATUSES}
    if held_by is not None:
        where["worker"] = held_by
    if not sql.write_round(call_id, _db(), where, {"updated_at": now, **fields}, {}, new_steps, now):
        return False
    for step in new_steps:
        step.persisted = True
    return True


def commit_round(
    call_id: Any, expected_round: int, answers: dict[int, tuple[str, Any, Any]], answers_digest: str,
    new_steps: list[Step], **fields: Any,
) -> bool:
    """Answers, new steps and outcome of a round that ran no effect, all or nothing (CAS on the round).

    The journal was read at ``expected_round`` (from the row, or from the requestState
    that carried it) and only an advance changes it, so the compare-and-set on
    ``round`` + ``input_required`` + not expired also proves that read current:
    exactly one of several concurrent retries wins, and a call that ended or
    expired meanwhile is left alone. One statement on PostgreSQL, one transaction
    on SQLite.
    """
    now = timezone.now()
    if not sql.write_round(
        call_id, _db(), {"round": expected_round, "status": CallStatus.INPUT_REQUIRED, "unexpired_at": now},
        {"round": expected_round + 1, "last_answers_digest": answers_digest, "updated_at": now, **fields},
        answers, new_steps, now,
    ):
        return False
    for step in new_steps:
        step.persisted = True
    return True


def advance(call_id: Any, expected_round: int, answers: dict[int, tuple[str, Any, Any]], answers_digest: str,
            on_worker: bool = False) -> bool:
    """Record answers for pending steps and move the call to the next round (CAS on the round).

    Of several concurrent retries of one round exactly one returns True; the others change
    nothing. A call past its expiry does not move (whoever loads it next marks it expired).
    """
    now = timezone.now()
    return sql.write_round(
        call_id, _db(), {"round": expected_round, "status": CallStatus.INPUT_REQUIRED, "unexpired_at": now},
        {"round": expected_round + 1, "status": CallStatus.WORKING, "last_answers_digest": answers_digest,
         # A background call goes on a worker from here: a retry of this round is told so (repeat_outcome).
         "last_outcome": {"round": expected_round + 1, "on_worker": True} if on_worker else None, "updated_at": now},
        answers, [], now,
    )


def claim_round(call_id: Any, expected_round: int) -> bool:
    from ..models import ToolCall

    return ToolCall.objects.claim_round(call_id, expected_round)


def answer_step(call_id: Any, seq: int, status: str, response: Any, error: Any) -> bool:
    from ..models import ToolCall

    return ToolCall.objects.answer_step(call_id, seq, status, response, error)


def run_once(call_id: Any, step: Step, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[bool, Any]:
    """Run ``fn`` and journal its (JSON) result atomically with ``fn``'s writes; ``(ran, value)``.

    One SELECT checks, before the effect, that the call is live (else
    :class:`CallNotLive`) and whether another run journaled the step first (then
    its recorded value is returned and ``fn`` does not run). ``fn`` then runs in a
    transaction that also inserts its step; if a concurrent run inserts the step
    first, ``fn``'s writes roll back with the losing insert and that run's value is
    returned.

    Where the check runs depends on what the database's transactions give:

    * SQLite: inside the transaction, whose ``BEGIN IMMEDIATE`` takes the write
      lock, so two processes' runs of one step take turns (check, effect, insert)
      and the second finds the first's value before its effect. No round trips here.
    * PostgreSQL: before the transaction. Its plain SELECT takes no lock either way
      and, like a READ COMMITTED transaction's every statement, sees what is
      committed, so the outcome is the same, without the BEGIN round trip it would
      wait for. When ``fn`` sends no statement and leaves no ``on_commit`` hook (a
      computation, an HTTP call), the transaction never begins (psycopg begins it
      at the first statement) and the step is one autocommit INSERT: two round
      trips for the step instead of four.
    """
    from django.db import IntegrityError, transaction

    using = _db()
    # This thread's statements and connection, looked up once for the step: a lookup of Django's
    # connections costs ~10,000 instructions (asgiref's Local), and the step's own made four (two now:
    # this one and the check's).
    statements = sql.statements(using)
    connection = statements.connection
    check_in_transaction = sql.locks_writers_on_begin(using, connection)
    if not check_in_transaction:
        journaled, response = _once_journaled(call_id, step, using)
        if journaled:
            return False, response
    done = Step(seq=step.seq, kind=step.kind, key=step.key, digest=step.digest, response=None, status="done")
    try:
        with transaction.atomic(using=using):
            if check_in_transaction:
                journaled, response = _once_journaled(call_id, step, using)
                if journaled:
                    return False, response
            try:
                value = fn(*args, **kwargs)
            except Exception as exc:
                raise _EffectFailed(exc) from exc  # rolls fn's writes back
            if inspect.isawaitable(value):
                if inspect.iscoroutine(value):
                    value.close()  # never awaited: say why instead of Python's warning
                raise TypeError(f"ctx.once({step.key!r}, ...) was given a function that returns an awaitable: "
                                "pass the async function itself (ctx.once(key, send_mail, to)), not a lambda around it")
            done.response = _json_value(value)
            began = sql.transaction_has_work(using, connection)
            if began:  # the step commits with what fn wrote (and before fn's on_commit hooks run)
                statements.insert_steps(call_id, [done], timezone.now())
        if not began:
            statements.insert_steps(call_id, [done], timezone.now())  # one statement: atomic by itself
    except _EffectFailed as failed:
        # A concurrent run that journaled the step first wins, as when our insert loses (below):
        # its value is the step's (the effect may have failed here only because that run's writes
        # came first). Otherwise the failure is this step's outcome.
        journaled, response = _once_journaled(call_id, step, using, live=False)
        if journaled:
            return False, response
        elsewhere, response = record_failed_once(call_id, step, failed.error)
        if elsewhere:
            return False, response
        with contextlib.suppress(AttributeError, TypeError):  # (an exception class that takes no attributes)
            failed.error.mcp_tools_journaled = True  # type: ignore[attr-defined]  # the step's outcome, not the store's failure
        raise failed.error from None
    except IntegrityError:
        journaled, response = _once_journaled(call_id, step, using, live=False)
        if not journaled:
            raise
        return False, response
    return True, done.response


class _EffectFailed(Exception):
    """The effect of a ``ctx.once`` raised (carried out of the transaction, which rolls back)."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


def record_failed_once(call_id: Any, step: Step, exc: Exception) -> tuple[bool, Any]:
    """Journal that a ``ctx.once`` effect failed (its class and message): on replay it fails again
    the same way instead of running again, so the handler takes the path it took.

    ``(False, None)``: the failure stands (journaled: ``step`` becomes the failed entry). When a
    concurrent run journaled the step first, its entry is the step's, as in :func:`run_once`:
    ``(True, value)`` for its value (this effect may have failed only because that run's writes
    came first), or :class:`OnceFailedElsewhere` for its failure; ``step`` is left as it was.
    """
    from django.db import IntegrityError

    failed = Step(seq=step.seq, kind=step.kind, key=failed_once_key(step.key, step.seq), digest=step.digest,
                  error=error_of_once(exc), status="failed")
    using = _db()
    try:
        with _savepoint(using):
            sql.insert_steps(call_id, using, [failed], timezone.now())
    except IntegrityError:
        # A concurrent run's entry, or none to be found (the call's row is gone): then the failure stands.
        return _once_journaled(call_id, step, using, live=False)
    step.key, step.status, step.error, step.response, step.persisted = failed.key, "failed", failed.error, None, True
    return False, None


def drop_failed_once_steps(call_id: Any) -> int:
    """Forget the ``ctx.once`` effects that failed (before a worker retries the call: they run again)."""
    from ..models import CallStep

    deleted, _ = CallStep.objects.filter(call_id=call_id, kind="once", status="failed").delete()
    return deleted


def check_once(call_id: Any, step: Step) -> tuple[bool, Any]:
    """Before an async ``ctx.once`` effect: ``(True, value)`` if some run journaled the step, else
    ``(False, None)``; :class:`CallNotLive` if the call has ended."""
    return _once_journaled(call_id, step, _db())


def _once_journaled(call_id: Any, step: Step, using: str, live: bool = True) -> tuple[bool, Any]:
    """``(True, value)`` if some run journaled ``step``; else ``(False, None)``, or :class:`CallNotLive` if
    ``live`` is asked for and the call has ended.

    Another run's entry is the step's outcome as this run would have found it in its journal:
    :class:`OnceFailedElsewhere` if that effect failed, ``NonDeterministicHandler`` if that run
    journaled another step at this place.
    """
    from ..managers import CallNotLive

    status, journaled = sql.once_check(call_id, step.seq, using)
    if journaled is not None:
        kind, key, step_status, response, error = journaled
        failed = step_status == "failed"
        if kind != "once" or key != (failed_once_key(step.key, step.seq) if failed else step.key):
            raise NonDeterministicHandler(
                f"Step {step.seq} of this call was journaled as {kind} {key!r} by another run, but this run runs once({step.key!r})")
        if failed:
            raise OnceFailedElsewhere(key, error)
        return True, response
    if live and status not in LIVE_STATUSES:
        raise CallNotLive(call_id)
    return False, None


class OnceFailedElsewhere(Exception):
    """Another run of the call journaled this ``ctx.once`` step first, as failed: the step fails as
    it did there (what a replay of that journal would raise)."""

    def __init__(self, key: str, error: Any) -> None:
        super().__init__(key)
        self.key = key
        self.error = error


def record_once(call_id: Any, step: Step, value: Any) -> tuple[bool, Any]:
    """Journal the value an async ``once`` function returned; ``(recorded, value)``.

    The function ran on the event loop, outside this transaction (see
    ``docs/durable-calls.md``): when a concurrent run journaled the step first,
    its value wins and is returned. The step is one INSERT, atomic by itself (a
    savepoint inside a caller's transaction, so a losing insert leaves that usable).
    """
    from django.db import IntegrityError

    using = _db()
    if not _plain_json(value):
        lane.refuse()  # its JSON form calls str() of what it holds: user code, for the store's thread
    value = _json_value(value)
    done = [Step(seq=step.seq, kind=step.kind, key=step.key, digest=step.digest, response=value, status="done")]
    try:
        with _savepoint(using):
            sql.insert_steps(call_id, using, done, timezone.now())
    except IntegrityError:
        journaled, response = _once_journaled(call_id, step, using, live=False)
        if not journaled:  # the winner is not visible here (a caller's REPEATABLE READ snapshot): say so
            raise
        return False, response
    return True, value


def _savepoint(using: str) -> Any:
    """A savepoint inside a caller's transaction, so a losing INSERT leaves that usable; nothing
    around a single statement in autocommit (always so in the event loop's SQLite lane)."""
    from django.db import transaction

    if sql.lane_running.lane is None and sql.in_transaction(using):
        return transaction.atomic(using=using)
    return contextlib.nullcontext()


def _plain_json(value: Any) -> bool:
    """Whether ``value`` is made of JSON's own types only (its JSON form runs no code of the caller's)."""
    if value is None or type(value) in (str, int, float, bool):
        return True
    if type(value) is list:
        return all(_plain_json(item) for item in value)
    if type(value) is dict:
        return all(type(key) is str and _plain_json(item) for key, item in value.items())
    return False


def _json_value(value: Any) -> Any:
    """``value`` as it reads back from a JSON column (what a replay will see)."""
    if value is None or type(value) in (str, int, bool):
        return value
    return json.loads(json.dumps(value, default=str))


def end_call(call_id: Any, status: str, message: str = "", at_round: int | None = None) -> bool:
    """Cancel or expire a live call (compare-and-set, at ``at_round`` if given); False if it had ended (or moved on)."""
    from ..models import ToolCall

    return ToolCall.objects.end(call_id, status, message, at_round=at_round)


def record_progress(call_id: Any, progress: float, total: float | None, message: str) -> bool:
    """Progress of a live call; False when the call has ended (the handler should stop).

    Progress only goes up (the spec: each notification's value increases): a run that starts
    again (a retry, a worker taking over, a replayed round) and reports less than the row holds
    writes nothing, and its call goes on.
    """
    try:
        if sql.update_call(call_id, _db(), {"status__in": LIVE_STATUSES, "progress_below": progress},
                           {"progress": progress, "progress_total": total, "status_message": message,
                            "updated_at": timezone.now()}):
            return True
        status = sql.call_status(call_id, _db())
        return status is not None and status[0] in LIVE_STATUSES
    except sql.UnstorableValue:
        raise  # a value of the handler's, not a call that ended (the runtime drops such a message)
    except ValueError:
        return False


def mark_task(call_id: Any) -> bool:
    """Mark a call as created as a task (a 2026-07-28 call the tasks extension made one); False if no such call."""
    from ..models import ToolCall

    return bool(ToolCall.objects.filter(id=call_id).update(is_task=True))


def set_stream(call_id: Any, stream_id: str, request_id: str | None = None) -> bool:
    """The stream that carries a live call, and the request it answers (see the manager's method)."""
    from ..models import ToolCall

    return ToolCall.objects.set_stream(call_id, stream_id, request_id)


def call_status(call_id: Any) -> tuple[str, int, Any, str] | None:
    """``(status, round, last_outcome, last_answers_digest)`` of a call, or None."""
    try:
        return sql.call_status(call_id, _db())
    except ValueError:
        return None


def session_calls(*session_ids: str, waiting_only: bool = False, orphaned_principals: Sequence[str] = ()) -> list[str]:
    """The live calls 2025-11-25 sessions hold (``waiting_only``: those waiting for input): not their
    tasks, which belong to the caller and outlive the session, unless their caller is one of
    ``orphaned_principals`` (an anonymous caller bound to the session: nobody else can reach its
    tasks). A background call held on the session's stream (no task) is the session's: nothing
    reaches it once the session is gone (it was spared as a task, and waited until ``CALL_TTL``)."""
    from django.db.models import Q

    from ..models import ToolCall

    statuses = (CallStatus.INPUT_REQUIRED,) if waiting_only else LIVE_STATUSES
    reachable_by_none = Q(is_task=False) | Q(principal__in=list(orphaned_principals)) if orphaned_principals else Q(is_task=False)
    rows = ToolCall.objects.filter(reachable_by_none, session_id__in=session_ids, status__in=statuses)
    return [str(call_id) for call_id in rows.values_list("id", flat=True)]


def live_session_call(session_id: str, request_id: str) -> tuple[str, int] | None:
    """``(call id, round)`` of the call a 2025-11-25 session's request started (``request_id`` as the
    row keeps it) if it has not ended (it runs, or waits for the client's input); None otherwise."""
    from ..models import ToolCall

    row = (ToolCall.objects.filter(session_id=session_id, request_id=request_id, flavor=WireFlavor.SESSION,
                                   status__in=(CallStatus.WORKING, CallStatus.INPUT_REQUIRED)).values_list("id", "round").first())
    return (str(row[0]), row[1]) if row is not None else None


#: The status message of a call the client stopped (its ``notifications/cancelled``): the row's last
#: progress message would stay as the reason otherwise (an operator's cancel and an expiry write theirs).
CLIENT_CANCELLED = "The client cancelled the request"


def client_cancelled_request(call_id: Any) -> tuple[str, str | int] | None:
    """``(session id, request id)`` of the 2025-11-25 request whose call its client cancelled
    (``notifications/cancelled`` received by any process: the row ended ``cancelled`` with
    :data:`CLIENT_CANCELLED`); None for any other end, or a call of no session."""
    from ..models import ToolCall

    row = (ToolCall.objects.filter(id=call_id, flavor=WireFlavor.SESSION, status=CallStatus.CANCELLED, status_message=CLIENT_CANCELLED)
           .exclude(session_id="").values_list("session_id", "request_id").first())
    if row is None or not row[1]:
        return None
    request_id = json.loads(row[1])
    return (row[0], request_id) if type(request_id) in (str, int) else None


def call_request_id(call_id: Any) -> str | None:
    from ..models import ToolCall

    return ToolCall.objects.filter(id=call_id).values_list("request_id", flat=True).first()


def call_tool_name(call_id: Any) -> str | None:
    """The tool (or prompt, or resource URI) a call runs, or None: no such call (or not a call id)."""
    from django.core.exceptions import ValidationError

    from ..models import ToolCall

    try:
        return ToolCall.objects.filter(id=call_id).values_list("tool_name", flat=True).first()
    except (ValidationError, ValueError, TypeError):  # not a call id
        return None


def call_progress_token(call_id: Any) -> Any:
    """The ``progressToken`` of the request that started a call (None: it had none, or no such call)."""
    from ..models import ToolCall

    return ToolCall.objects.filter(id=call_id).values_list("progress_token", flat=True).first()


def record_progress_relayed(call_id: Any, progress: float) -> bool:
    """A task's ``tasks/result`` stream sent ``progress`` under the call's token; kept if above what the row
    holds (the next ``tasks/result`` goes on from above it). False when the row holds as much already."""
    from django.db.models import Q

    from ..models import ToolCall

    below = Q(progress_relayed__isnull=True) | Q(progress_relayed__lt=progress)
    return bool(ToolCall.objects.filter(below, id=call_id).update(progress_relayed=progress))


def call_for_stream(stream_id: str) -> str | None:
    from ..models import ToolCall

    value = ToolCall.objects.filter(stream_id=stream_id).values_list("id", flat=True).first()
    return str(value) if value else None


# -- background work ------------------------------------------------------------


def after_caller_commits(fn: Callable[[], Any]) -> None:
    """Run ``fn`` once the caller's transaction commits: the one open on the call tables' alias, else on
    any other database (a project whose router keeps its own data apart, on ``default``); at once when
    none is open. Not at all if it rolls back."""
    from django.db import connections, transaction

    calls_alias = _db()
    for alias in (calls_alias, *(alias for alias in connections if alias != calls_alias)):
        if connections[alias].in_atomic_block:
            transaction.on_commit(fn, using=alias)
            return
    fn()


def after_commit(fn: Callable[[], Any]) -> None:
    """Run ``fn`` once the current transaction commits (at once in autocommit)."""
    from django.db import transaction

    transaction.on_commit(fn, using=_db())  # the transaction of the call tables' alias (routers)


def claim_for_worker(call_id: Any, worker: str, lease_seconds: float, task_id: str | None = None) -> bool:
    """Take a queued background call for ``worker`` on the message of task ``task_id`` (see the manager's method)."""
    from ..models import ToolCall

    return ToolCall.objects.claim_for_worker(call_id, worker, lease_seconds, task_id)


def renew_lease(call_id: Any, worker: str, lease_seconds: float, ends_with_ttl: bool = False) -> bool:
    from ..models import ToolCall

    return ToolCall.objects.renew_lease(call_id, worker, lease_seconds, ends_with_ttl=ends_with_ttl)


def orphaned_background_calls() -> list[tuple[str, str, int]]:
    """``(call id, tool name, requeues)`` of the background calls no worker will run (their worker or message was lost)."""
    from ..models import ToolCall

    return ToolCall.objects.orphaned_background_calls()


def requeue_orphan(call_id: Any, seen_requeues: int, task_id: str, wait_seconds: float) -> bool:
    """Put an orphaned background call back in the queue (compare-and-set; see the manager's method)."""
    from ..models import ToolCall

    return ToolCall.objects.requeue_orphan(call_id, seen_requeues, task_id, wait_seconds)


def expire_overdue(call_id: Any = None) -> int:
    """Mark live calls past their expiry ``expired`` (only ``call_id``, if given); how many moved."""
    from ..models import ToolCall

    return ToolCall.objects.expire_overdue(call_id)


def queued_for_a_worker(principal: str, tool_name: str, since: Any) -> bool:
    """Whether a live background call of ``principal``'s to ``tool_name``, made at or after ``since``,
    waits for a worker to take it (no worker has claimed it): what ``mcp_call`` tells its operator. Not one
    that waits for its ``retry_on`` retry: ``worker`` is empty then too, but the worker that ran it holds
    its lease over the wait (one past its lease, the retry's message lost or no worker left, counts)."""
    from django.db.models import Q

    from ..models import ToolCall

    unheld = Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=timezone.now())
    return ToolCall.objects.filter(unheld, principal=principal, tool_name=tool_name, background=True, status=CallStatus.WORKING,
                                   worker="", created_at__gte=since).exists()


def not_queued(call_id: Any, task_id: str) -> bool:
    """The broker refused the task ``task_id`` of a queued call: the row says nothing is queued for it
    (no task id, no queue deadline), and the next sweep queues it again. Not once a worker took it
    (a redelivered message came first), nor once it was queued again under another task."""
    from ..models import ToolCall

    return bool(ToolCall.objects.filter(id=call_id, status__in=LIVE_STATUSES, worker="", celery_task_id=task_id).update(
        celery_task_id="", queued_until=None))


def queue_call(call_id: Any, task_id: str, wait_seconds: float) -> bool:
    """A live background call is queued under ``task_id``, with a queue deadline (see the manager's ``queue``)."""
    from ..models import ToolCall

    return ToolCall.objects.queue(call_id, task_id, wait_seconds)


def tasks_of(principal: str, after: tuple[str, str] | None, limit: int) -> list[Any]:
    """A caller's tasks (the calls created as tasks, not every background call), newest first;
    ``after``: only those past that ``(created_at, id)`` position of this order."""
    from django.db.models import Q

    from ..models import ToolCall

    # (background=True too: a task is a background call, and the partial index of those serves this.)
    rows = ToolCall.objects.filter(principal=principal, background=True, is_task=True)
    if after is not None:
        created_at, call_id = after
        rows = rows.filter(Q(created_at__lt=created_at) | Q(created_at=created_at, id__lt=call_id))
    return list(rows.order_by("-created_at", "-id")[:limit])


def copy_failed_background_call(call_id: Any, task_id: str, wait_seconds: float) -> tuple[str, str, str] | None:
    """A new working row for a failed background call, keeping its journal's ``once`` steps out.

    Returns ``(new call id, tool name, task id)``, or None if ``call_id`` is not a failed
    background call, or was retried already (``retried_as``: a call is retried once). The new
    call is queued with a deadline ``wait_seconds`` away (the sweep queues it again past it).
    """
    import uuid

    from django.core.exceptions import ValidationError as DjangoValidationError
    from django.db import transaction

    from ..models import ToolCall

    retryable = {"background": True, "status": "failed", "retried_as__isnull": True}
    new_id = uuid.uuid4()
    with transaction.atomic(using=_db()):
        try:
            # Compare-and-set: of two retries of one call (a double click, two operators) one wins.
            if not ToolCall.objects.filter(id=call_id, **retryable).update(retried_as=new_id):
                return None
        except (ValueError, TypeError, DjangoValidationError):
            return None
        old = ToolCall.objects.get(id=call_id)
        fields = {
            name: getattr(old, name)
            for name in ("method", "tool_name", "arguments", "user_id", "principal", "protocol_version", "flavor",
                         "params_digest", "client_capabilities", "session_id", "poll_interval_ms", "scopes", "is_task")
        }
        ToolCall.objects.create(
            **fields, id=new_id, background=True, status="working", celery_task_id=task_id, status_message=f"Retry of {old.id}",
            expires_at=timezone.now() + timedelta(seconds=mcp_settings.CALL_TTL),
            queued_until=timezone.now() + timedelta(seconds=wait_seconds),
        )
    return str(new_id), old.tool_name, task_id


def touch_live(call_id: Any) -> bool:
    """Mark a live call as still being run by its (living) owner; False when it has ended."""
    return sql.update_call(call_id, _db(), {"status__in": LIVE_STATUSES}, {"updated_at": timezone.now()})


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
