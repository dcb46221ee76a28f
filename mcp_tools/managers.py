"""Domain operations on the call, journal and event tables, each atomic.

The durable round's writes (advance, save, commit of a round, ``ctx.once``,
progress) live in :mod:`mcp_tools.store.calls` as precompiled SQL; what stays
here are the other status changes, each a compare-and-set on a live row. They
are sync; coroutines reach them through :mod:`mcp_tools.store` (one boundary).
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from django.core.exceptions import ValidationError
from django.db import models, router, transaction
from django.utils import timezone

from .states import LIVE_STATUSES, CallStatus, StepStatus, WireFlavor

if TYPE_CHECKING:
    from .engine.journal import Step
    from .models import ToolCall


def _held_by_lease(now: Any) -> models.Q:
    """A working background call (not a 2025-11-25 task, whose ``ttl`` ends it while it runs) with an
    unexpired lease: a worker runs it, or it waits for a ``retry_on`` retry. ``CALL_TTL`` (a 2026-07-28
    task's ``ttlMs`` too) does not end it (see :meth:`ToolCallManager.overdue`). A call that waits in the
    queue holds no lease (its deadline is ``queued_until``): ``CALL_TTL`` ends it."""
    return models.Q(status=CallStatus.WORKING, background=True, lease_expires_at__gt=now) & ~models.Q(flavor=WireFlavor.TASK)


def _orphaned(now: Any) -> models.Q:
    """A background call that no worker will run (with ``status=working, background=True``): the
    worker holding it, or the wait for a ``retry_on`` retry, is past its lease; or it waits in the
    queue past its deadline (``queued_until``: its message may be lost), or with no task queued at
    all (the broker refused it: no task id); or it has neither lease nor deadline and nobody
    touched it for ``WORKER_LEASE_SECONDS`` (a row queued before deadlines were kept, or whose
    process died between moving it back to ``working`` and queueing it)."""
    from .conf import mcp_settings

    untouched = now - timedelta(seconds=float(mcp_settings.WORKER_LEASE_SECONDS))
    waiting = models.Q(celery_task_id="") | models.Q(queued_until__lt=now) | models.Q(queued_until__isnull=True, updated_at__lt=untouched)
    return models.Q(lease_expires_at__lt=now) | (models.Q(lease_expires_at__isnull=True) & waiting)


def _lost_worker(now: Any) -> models.Case:
    """1 for a call whose worker let its lease run out (the worker was lost), else 0: what taking it over adds to
    ``lost_workers``. A call that waits for a worker (queued, or for a retry) has no worker: not a loss.

    In an ``UPDATE``, assign ``lost_workers`` before ``worker`` and ``lease_expires_at``: MySQL and MariaDB
    evaluate ``SET`` left to right, each expression seeing the columns already assigned (SQLite and
    PostgreSQL, the row as it was), so after them this read the new worker and lease: never a loss."""
    lost = ~models.Q(worker="") & models.Q(lease_expires_at__lt=now)
    return models.Case(models.When(lost, then=models.Value(1)), default=models.Value(0), output_field=models.PositiveIntegerField())


def _run_now(now: Any) -> models.Q:
    """A working call (not a background one: :func:`_held_by_lease`) touched by its owner within the
    time a round is taken over after (``3 × CANCEL_POLL_SECONDS``): a living process runs its handler."""
    from .conf import mcp_settings

    stale = 3 * float(mcp_settings.CANCEL_POLL_SECONDS)
    return models.Q(status=CallStatus.WORKING, background=False, updated_at__gte=now - timedelta(seconds=stale))


def _abandoned(now: Any) -> models.Q | None:
    """A working foreground call that nobody runs and no client can come back to (None: none can be told).

    Its handler touches the row every ``CANCEL_POLL_SECONDS`` while it runs
    (:class:`~mcp_tools.interprocess.cancellation.CallWatch`); untouched for :data:`ABANDONED_AFTER_POLLS`
    times as long, and at least :data:`ABANDONED_AFTER_SECONDS`, its process stopped without writing
    the end: a server shut down under it (uvicorn and Daphne cancel the handlers and close the loop, so
    the shielded write of ``cancelled`` never runs) or died. Not three times as long, the time a round
    is taken over after (a wrong guess there runs the round again; here it would end a live call): the
    touches are timers of the handler's event loop, which a blocking call in any tool of that process,
    a long collection or a slow database holds up. Kept, as someone may still carry it on:

    * a call of a 2025-11-25 session (any flavor it was recorded with: a resume token's page too) and
      a task's: a stream resumed with ``Last-Event-ID`` (a ``tasks/result``) takes its round over
      (``session._owner_gone``);
    * a 2026-07-28 or saga call at a round its client's answers started (round > 0): a retry of that
      request with the same ``requestState`` takes it over (``core.repeat_outcome``), until that
      token expires: ``TOKEN_TTL`` after it was sealed, which was before the row's last touch.

    A call's first round (no token names it: a retry of the request is a new call), and a call of
    the stdio transport or ``mcp_call`` (their client went with the process), nobody can resume.
    With ``CANCEL_POLL_SECONDS`` 0 no handler touches its row, and none can be told abandoned.
    """
    from .conf import mcp_settings

    poll = float(mcp_settings.CANCEL_POLL_SECONDS)
    if poll <= 0:
        return None
    stale = max(ABANDONED_AFTER_POLLS * poll, ABANDONED_AFTER_SECONDS)
    untouched = models.Q(status=CallStatus.WORKING, background=False, updated_at__lt=now - timedelta(seconds=stale))
    token_lives = now - timedelta(seconds=max(stale, float(mcp_settings.TOKEN_TTL)))
    retried = models.Q(flavor__in=(WireFlavor.MRTR, WireFlavor.SAGA), round__gt=0, updated_at__gte=token_lives)
    resumable = models.Q(flavor__in=(WireFlavor.SESSION, WireFlavor.TASK)) | models.Q(session_id__gt="")
    return untouched & ~resumable & ~retried


#: A foreground call is abandoned (:func:`_abandoned`) once its row went untouched this many
#: ``CANCEL_POLL_SECONDS``...
ABANDONED_AFTER_POLLS = 20
#: ...and at least this many seconds: long past any pause of a live process's event loop.
ABANDONED_AFTER_SECONDS = 60.0


#: What an abandoned call's row says (:func:`_abandoned`), for the operator who finds it.
ABANDONED_MESSAGE = "The process running the call stopped before it finished (a server shutdown?), and no client can resume it."


_M = TypeVar("_M", bound=models.Model)


class PrimaryManager(models.Manager[_M]):
    """A manager whose reads go where its writes go.

    These tables are the durable engine's one truth, read right after they are written (a
    session just opened, a round just advanced, a lease just taken): a read replica's copy may
    lag. With ``DATABASE_ROUTERS`` every query of them uses the alias ``router.db_for_write``
    picks for the model, reads included (Django's default sends reads to ``db_for_read``).
    """

    @property
    def db(self) -> str:
        return self._db or router.db_for_write(self.model, **getattr(self, "_hints", {}))

    def get_queryset(self) -> models.QuerySet[_M]:
        queryset = super().get_queryset()
        if self._db is None and router.routers:
            return queryset.using(router.db_for_write(self.model, **getattr(self, "_hints", {})))
        return queryset


class ToolCallManager(PrimaryManager["ToolCall"]):
    def _steps_model(self) -> Any:
        """The journal's model, found through the relation (managers do not import models)."""
        return self.model._meta.get_field("steps").related_model

    def create_with_steps(self, steps: list[Step], **fields: Any) -> ToolCall:
        CallStep = self._steps_model()

        with transaction.atomic(using=self.db):
            call = self.create(**fields)
            CallStep.objects.bulk_create(
                [
                    CallStep(call=call, seq=s.seq, kind=s.kind, key=s.key, digest=s.digest, request=s.request,
                             response=s.response, error=s.error, status=s.status,
                             answered_at=timezone.now() if s.status != "pending" else None)
                    for s in steps
                ]
            )
        for step in steps:
            step.persisted = True
        return call

    def _insert_steps(self, call_id: Any, steps: list[Step]) -> None:
        """Journal ``steps`` of a call (inside the caller's transaction) and mark them persisted."""
        if not steps:
            return
        CallStep = self._steps_model()
        CallStep.objects.bulk_create(
            [
                CallStep(call_id=call_id, seq=s.seq, kind=s.kind, key=s.key, digest=s.digest, request=s.request,
                         response=s.response, error=s.error, status=s.status)
                for s in steps
            ]
        )
        for step in steps:
            step.persisted = True

    def answer_step(self, call_id: Any, seq: int, status: str, response: Any, error: Any) -> bool:
        """Record a client's answer to one pending step (2025-11-25 sessions)."""
        CallStep = self._steps_model()

        # Only while the call lives: an answer that races a cancel does not go into the ended call's journal.
        # The call's status is asked in a subquery of its own, not through ``call__status__in``: a filter
        # across the relation makes Django's UPDATE ``WHERE id IN (SELECT ... JOIN ...)`` (on MySQL and
        # MariaDB, a list of ids it selects first), so the step's ``status = 'pending'`` guard is no longer
        # on the row being updated. PostgreSQL re-checks only that row's own conditions after waiting for a
        # concurrent answer's lock, and both answers would "win", the second overwriting the first.
        live_call = self.filter(id=call_id, status__in=LIVE_STATUSES)
        return bool(
            CallStep.objects.filter(call_id=call_id, seq=seq, status=StepStatus.PENDING)
            .filter(models.Exists(live_call))
            .update(status=status, response=response, error=error, answered_at=timezone.now())
        )

    def claim_round(self, call_id: Any, expected_round: int) -> bool:
        """Move an input_required call whose steps are all answered back to working (CAS)."""
        return bool(
            self.filter(id=call_id, round=expected_round, status=CallStatus.INPUT_REQUIRED).update(
                round=expected_round + 1, status=CallStatus.WORKING, updated_at=timezone.now()
            )
        )

    def end(self, call_id: Any, status: str, message: str = "", at_round: int | None = None) -> bool:
        """Move a live call to ``cancelled`` or ``expired``; False if it had ended already.

        Of a completion and a cancellation racing for one call, whichever
        commits first wins and the other learns it lost (its update matches no row).
        With ``at_round``, only a call still at that round moves.
        """
        if status not in (CallStatus.CANCELLED, CallStatus.EXPIRED):
            raise ValueError(f"end() moves calls to cancelled or expired, not {status!r}")
        now = timezone.now()
        fields: dict[str, Any] = {"status": status, "finished_at": now, "updated_at": now}
        if message:
            fields["status_message"] = message
        try:
            rows = self.filter(id=call_id, status__in=LIVE_STATUSES)
            if at_round is not None:
                rows = rows.filter(round=at_round)
            return bool(rows.update(**fields))
        except (ValidationError, ValueError):  # not a call id at all
            return False

    def set_stream(self, call_id: Any, stream_id: str, request_id: str | None = None) -> bool:
        """The SSE stream a live session call asks its client on (for Last-Event-ID resumption), and the
        request (its id as ``jsonrpc.id_text`` keeps it) that stream answers, when not the call's own: a
        2025-11-25 task is carried by a ``tasks/result`` request, which a resumed stream answers."""
        fields: dict[str, Any] = {"request_id": request_id} if request_id is not None else {}
        return bool(self.filter(id=call_id, status__in=LIVE_STATUSES).update(stream_id=stream_id, updated_at=timezone.now(), **fields))

    def claim_for_worker(self, call_id: Any, worker: str, lease_seconds: float, task_id: str | None = None) -> bool:
        """Take a queued background call for ``worker``, on the message of Celery task ``task_id`` (compare-and-set).

        Succeeds for a working background call queued for a worker (no lease), or whose worker
        let its lease run out (it died, or the retry it waited for never came): that is how a lost
        worker's call is taken over. A call that waits for a ``retry_on`` retry (no worker, a lease
        to the retry's time) is the retry's alone: only the message of the task the call waits on
        (``celery_task_id``; the retry is a task of its own id) takes it. Another message (the sweep
        queued the call again while the queue was slow, a redelivery, of the failed run's own message
        too) finds it claimed, rather than
        run it at once, without the backoff. Exactly one of several workers wins. Never for an
        :meth:`overdue` call, even before a sweep marks it so.
        """
        now = timezone.now()
        free = models.Q(lease_expires_at__isnull=True) | models.Q(lease_expires_at__lt=now)
        if task_id:
            free |= models.Q(worker="", celery_task_id=task_id)
        # Not overdue: a retry's lease holds the call past CALL_TTL as a worker's does (see overdue()).
        unexpired = models.Q(expires_at__isnull=True) | models.Q(expires_at__gt=now) | _held_by_lease(now)
        return bool(
            self.filter(free, unexpired, id=call_id, status=CallStatus.WORKING, background=True).update(
                # Taking over from a worker whose lease ran out (a message that came before the sweep
                # did) counts the lost worker as the sweep would: the run that claims checks the bound.
                # First: it reads the old worker and lease (see _lost_worker).
                lost_workers=models.F("lost_workers") + _lost_worker(now),
                worker=worker, lease_expires_at=now + timedelta(seconds=lease_seconds), updated_at=now, queued_until=None,
            )
        )

    def queue(self, call_id: Any, task_id: str, wait_seconds: float) -> bool:
        """A live background call is queued under ``task_id``: no worker holds it, and a worker should
        take it within ``wait_seconds`` (``queued_until``; past it the sweep queues it again, as its
        message may be lost: a broker restarted without persistence, a server that died before sending).
        False, and nothing changed, when a worker holds the call already (another message for it came
        first and claimed it): its claim stands, and no message need go."""
        now = timezone.now()
        return bool(self.filter(id=call_id, status__in=LIVE_STATUSES, worker="").update(
            celery_task_id=task_id, lease_expires_at=None, queued_until=now + timedelta(seconds=wait_seconds), updated_at=now))

    def renew_lease(self, call_id: Any, worker: str, lease_seconds: float, *, ends_with_ttl: bool = False) -> bool:
        """Extend the lease of a call this worker runs; False when the call ended or was taken over.

        ``ends_with_ttl`` (a 2025-11-25 task, whose ``ttl`` no lease holds off): a call past its
        expiry is not renewed but ends ``expired`` here, as the sweep would end it (:meth:`overdue`),
        and False tells its worker to stop. Any other call's expiry (``CALL_TTL``) does not end its run,
        and its renewal costs one statement.
        """
        if ends_with_ttl and self.expire_overdue(call_id):
            return False
        now = timezone.now()
        return bool(
            self.filter(id=call_id, worker=worker, status__in=LIVE_STATUSES).update(
                lease_expires_at=now + timedelta(seconds=lease_seconds)
            )
        )

    def orphaned_background_calls(self) -> list[tuple[str, str, int]]:
        """``(call id, tool name, requeues)`` of the working background calls that no worker will run: the worker
        holding one let its lease run out (it died, or was killed), or a call that waits for a worker
        (queued, or for a ``retry_on`` retry) is past its deadline, or no worker task was queued for
        it (the broker refused it: an empty task id, no lease)."""
        rows = self.filter(_orphaned(timezone.now()), status=CallStatus.WORKING, background=True)
        return [(str(pk), name, requeues) for pk, name, requeues in rows.values_list("id", "tool_name", "requeues")[:1000]]

    def requeue_orphan(self, call_id: Any, seen_requeues: int, task_id: str, wait_seconds: float) -> bool:
        """Put an orphaned call (:meth:`orphaned_background_calls`) back in the queue under ``task_id``.

        Compare-and-set on the ``requeues`` count the sweep read, and on the call being orphaned
        still: of two sweeps one wins, and a call a worker claimed meanwhile stays its. The call
        then waits in the queue, held by no worker, with a deadline ``wait_seconds`` away (past it
        the sweep queues it again); a worker that was lost holding it counts in ``lost_workers``.
        """
        now = timezone.now()
        return bool(
            self.filter(_orphaned(now), id=call_id, requeues=seen_requeues, status=CallStatus.WORKING, background=True).update(
                lost_workers=models.F("lost_workers") + _lost_worker(now),  # first: see _lost_worker
                requeues=seen_requeues + 1, worker="",
                lease_expires_at=None, queued_until=now + timedelta(seconds=wait_seconds), celery_task_id=task_id, updated_at=now,
            )
        )

    def overdue(self) -> models.QuerySet[ToolCall]:
        """Live calls past their expiry: ``CALL_TTL`` after they were made, or a task's ``ttl``.

        Not a background call (other than a task) that a worker runs now, or will run for a
        ``retry_on`` retry: it holds an unexpired lease. Nor a call whose handler runs now in a
        living process (its watch touches the row every ``CANCEL_POLL_SECONDS``), as a round
        answered just before the expiry that then works a while. ``CALL_TTL`` is how long a call may wait
        (for input, for a worker); such a call waits for nothing. A task's ``ttl`` is the
        client's own limit on the whole task, and holds while a worker runs it.
        """
        now = timezone.now()
        return self.filter(status__in=LIVE_STATUSES, expires_at__lt=now).exclude(_held_by_lease(now)).exclude(_run_now(now))

    def abandoned(self) -> models.QuerySet[ToolCall]:
        """Working foreground calls whose process stopped under them, that no client can resume
        (a 2026-07-28 call cut off by a server shutdown): see :func:`_abandoned`."""
        abandoned = _abandoned(timezone.now())
        return self.none() if abandoned is None else self.filter(abandoned)

    def cancel_abandoned(self) -> int:
        """Mark the :meth:`abandoned` calls ``cancelled``, as a closed 2026-07-28 stream marks its
        call (the shutdown that cut them off is such a close); how many moved.

        The sweep (``mcp_tools.sweep``) and the cleanup (``console.retention.cleanup``: the cleanup task
        and ``mcp_cleanup``) run it, after :meth:`expire_overdue`: an abandoned call past its expiry
        ends ``expired``, as before."""
        now = timezone.now()
        return self.abandoned().update(
            status=CallStatus.CANCELLED, status_message=ABANDONED_MESSAGE, finished_at=now, updated_at=now
        )

    def expire_overdue(self, call_id: Any = None) -> int:
        """Mark the :meth:`overdue` calls ``expired`` (only ``call_id``, if given); how many moved."""
        now = timezone.now()
        rows = self.overdue()
        if call_id is not None:
            rows = rows.filter(id=call_id)
        return rows.update(
            status=CallStatus.EXPIRED, finished_at=now, updated_at=now
        )


class CallNotLive(Exception):
    """The call has ended (cancelled, expired, finished): its handler must not run more effects."""


class CallStepManager(PrimaryManager[Any]):
    """Journal steps are written by the store (:mod:`mcp_tools.store.calls`), in the call's round transactions."""


class StreamEventManager(PrimaryManager[Any]):
    def append(self, session_id: str, stream_id: str, payload: str, retention: int) -> int:
        event = self.create(session_id=session_id, stream_id=stream_id, payload=payload)
        if event.id % 50 == 0:  # trim now and then, not on every event
            cutoff = self.filter(stream_id=stream_id).order_by("-id").values_list("id", flat=True)[retention : retention + 1]
            cutoff_ids = list(cutoff)
            if cutoff_ids:
                self.filter(stream_id=stream_id, id__lte=cutoff_ids[0]).delete()
        return event.id

    def after(self, stream_id: str, last_id: int, limit: int) -> list[Any]:
        return list(self.filter(stream_id=stream_id, id__gt=last_id).order_by("id")[:limit])

    def purge_older_than(self, seconds: int, batch: int = 500) -> int:
        """Delete the events older than ``seconds``; how many.

        In batches of ``batch``, oldest first (ids follow time, and the id's index finds them; an
        index on ``created_at`` would cost every event's insert): a large backlog holds neither one
        long transaction nor a lock on the whole log while streams append to it.
        """
        old = self.filter(created_at__lt=timezone.now() - timedelta(seconds=seconds)).order_by("id")
        deleted = 0
        while ids := list(old.values_list("id", flat=True)[:batch]):
            deleted += self.filter(id__in=ids).delete()[0]
        return deleted
