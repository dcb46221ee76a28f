"""``ctx.once`` in the store: exactly once, atomic with the effect's writes, first journaled value wins.

These drive :func:`mcp_tools.store.calls.run_once` / ``record_once`` directly (the
engine's tests drive them through real rounds). The races need a second database
connection that can write while the first runs its effect: PostgreSQL; SQLite lets
one writer at a time, so there the second run waits its turn and the check-first
tests below cover it.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection, connections, transaction

from mcp_tools.engine.journal import Step
from mcp_tools.managers import CallNotLive
from mcp_tools.models import CallStep
from mcp_tools.store import sync_calls

pytestmark = pytest.mark.django_db(transaction=True)

needs_concurrent_writers = pytest.mark.skipif(
    "connection.vendor == 'sqlite'", reason="SQLite lets one connection write at a time")


def new_call() -> str:
    return sync_calls.create_call([], method="tools/call", tool_name="deploy", arguments={}, principal="anon",
                                  protocol_version="2026-07-28", flavor="mrtr", status="working")


def once_step(seq: int = 0) -> Step:
    return Step(seq=seq, kind="once", key=f"effect-{seq}", digest="d")


def journaled(call_id: str) -> list[tuple[int, str, Any]]:
    return list(CallStep.objects.filter(call_id=call_id).order_by("seq").values_list("seq", "status", "response"))


def in_another_connection(fn: Any, *args: Any) -> Any:
    """``fn(*args)`` in a thread of its own (so on a connection of its own); its result."""
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(fn(*args))
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(30)
    assert not thread.is_alive(), "the other connection's write did not finish"
    return out[0]


def test_an_effect_that_writes_commits_its_write_with_its_step() -> None:
    call_id = new_call()

    ran, value = sync_calls.run_once(call_id, once_step(), lambda: User.objects.create(username="audit").pk, (), {})

    assert ran is True
    assert User.objects.get(username="audit").pk == value
    assert journaled(call_id) == [(0, "done", value)]


def test_an_effect_without_writes_is_journaled_with_its_value() -> None:
    call_id = new_call()

    ran, value = sync_calls.run_once(call_id, once_step(), lambda n: {"square": n * n}, (7,), {})

    assert (ran, value) == (True, {"square": 49})
    assert journaled(call_id) == [(0, "done", {"square": 49})]
    assert not connection.in_atomic_block and connection.get_autocommit()


def test_a_journaled_step_returns_its_value_and_the_effect_does_not_run_again() -> None:
    call_id = new_call()
    runs: list[int] = []

    def effect() -> int:
        runs.append(1)
        return len(runs)

    first = sync_calls.run_once(call_id, once_step(), effect, (), {})
    second = sync_calls.run_once(call_id, once_step(), effect, (), {})

    assert first == (True, 1)
    assert second == (False, 1)
    assert runs == [1]


def test_an_ended_call_runs_no_effect() -> None:
    call_id = new_call()
    assert sync_calls.end_call(call_id, "cancelled")
    runs: list[int] = []

    with pytest.raises(CallNotLive):
        sync_calls.run_once(call_id, once_step(), lambda: runs.append(1), (), {})

    assert runs == []
    assert journaled(call_id) == []


def test_an_effect_that_fails_journals_its_failure_and_its_writes_roll_back() -> None:
    call_id = new_call()

    def effect() -> None:
        User.objects.create(username="half-done")
        raise RuntimeError("the payment provider said no")

    with pytest.raises(RuntimeError, match="payment provider"):
        sync_calls.run_once(call_id, once_step(), effect, (), {})

    assert not User.objects.filter(username="half-done").exists()
    # The failure is journaled (so a replay fails the same way instead of running the effect again).
    assert journaled(call_id) == [(0, "failed", None)]
    error = CallStep.objects.get(call_id=call_id).error
    assert error == {"type": "builtins.RuntimeError", "message": "the payment provider said no"}


@needs_concurrent_writers
def test_a_run_that_journals_first_wins_and_the_losers_writes_roll_back() -> None:
    call_id = new_call()

    def effect() -> str:
        User.objects.create(username="loser")  # this transaction has begun
        in_another_connection(sync_calls.record_once, call_id, once_step(), "winner")
        return "loser"

    assert sync_calls.run_once(call_id, once_step(), effect, (), {}) == (False, "winner")
    assert not User.objects.filter(username="loser").exists()
    assert journaled(call_id) == [(0, "done", "winner")]


@needs_concurrent_writers
def test_a_run_that_journals_first_wins_over_an_effect_without_writes() -> None:
    call_id = new_call()

    def effect() -> str:  # sends no statement: its step would be one autocommit INSERT
        in_another_connection(sync_calls.record_once, call_id, once_step(), "winner")
        return "loser"

    assert sync_calls.run_once(call_id, once_step(), effect, (), {}) == (False, "winner")
    assert journaled(call_id) == [(0, "done", "winner")]


def test_an_async_effects_value_loses_to_the_one_journaled_first() -> None:
    call_id = new_call()

    assert sync_calls.record_once(call_id, once_step(), {"id": 1}) == (True, {"id": 1})
    assert sync_calls.record_once(call_id, once_step(), {"id": 2}) == (False, {"id": 1})
    assert journaled(call_id) == [(0, "done", {"id": 1})]


def test_a_losing_async_record_leaves_the_callers_transaction_usable() -> None:
    call_id = new_call()
    sync_calls.record_once(call_id, once_step(), "first")

    with transaction.atomic():
        User.objects.create(username="before")
        assert sync_calls.record_once(call_id, once_step(), "second") == (False, "first")
        User.objects.create(username="after")  # no "current transaction is aborted"

    assert set(User.objects.values_list("username", flat=True)) == {"before", "after"}


def test_an_effects_commit_hook_runs_after_its_step_is_journaled() -> None:
    call_id = new_call()
    seen: list[list[tuple[int, str, Any]]] = []

    def effect() -> str:  # no statement of its own: only a hook for after the commit
        transaction.on_commit(lambda: seen.append(journaled(call_id)))
        return "sent"

    assert sync_calls.run_once(call_id, once_step(), effect, (), {}) == (True, "sent")
    assert seen == [[(0, "done", "sent")]]


@needs_concurrent_writers
def test_a_losing_effects_commit_hook_never_runs() -> None:
    call_id = new_call()
    hooks: list[str] = []

    def effect() -> str:
        transaction.on_commit(lambda: hooks.append("email sent"))
        in_another_connection(sync_calls.record_once, call_id, once_step(), "winner")
        return "loser"

    assert sync_calls.run_once(call_id, once_step(), effect, (), {}) == (False, "winner")
    assert hooks == []


def test_an_effect_that_marks_its_transaction_for_rollback_journals_nothing() -> None:
    from django.db.transaction import TransactionManagementError

    call_id = new_call()

    def effect() -> str:  # no statement of its own, but its transaction must not commit
        transaction.set_rollback(True)
        return "value"

    with pytest.raises(TransactionManagementError):
        sync_calls.run_once(call_id, once_step(), effect, (), {})
    assert journaled(call_id) == []


def test_a_losing_async_record_leaves_a_manual_transaction_usable() -> None:
    call_id = new_call()
    sync_calls.record_once(call_id, once_step(), "first")

    transaction.set_autocommit(False)
    try:
        assert sync_calls.record_once(call_id, once_step(), "second") == (False, "first")
        User.objects.create(username="after")  # no "current transaction is aborted"
        transaction.commit()
    finally:
        transaction.set_autocommit(True)

    assert User.objects.filter(username="after").exists()


def test_an_effect_that_fails_after_another_run_journaled_its_step_returns_that_value(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two runs of one step (a run taken over while alive): if this one's effect fails because the other's
    writes came first, the other's journaled value is the step's, as when this run's insert loses."""
    call_id = new_call()
    real = sync_calls._once_journaled

    def other_run_journaled_meanwhile(call_id: Any, step: Any, using: str, live: bool = True) -> Any:
        if not live:  # the look after the failure: the winner's entry is there by now
            return True, "the winner's value"
        return real(call_id, step, using, live)

    monkeypatch.setattr(sync_calls, "_once_journaled", other_run_journaled_meanwhile)

    def effect() -> None:
        raise RuntimeError("duplicate key: the other run created it")

    assert sync_calls.run_once(call_id, once_step(), effect, (), {}) == (False, "the winner's value")
    assert journaled(call_id) == [], "no failure recorded over the winner's step"


def test_a_step_another_run_journaled_as_failed_fails_here_the_same_way_and_the_effect_never_runs() -> None:
    """Another run of the call (one taken over while alive) journaled the step first, as failed: this
    run's journal, loaded before that, did not have it. The step fails as that journal says (it read
    as the value None), for a sync and for an async effect alike."""
    from mcp_tools.store import OnceFailedElsewhere

    call_id = new_call()
    assert sync_calls.record_failed_once(call_id, once_step(), ValueError("card declined")) == (False, None)
    ran: list[str] = []

    with pytest.raises(OnceFailedElsewhere) as failed:
        sync_calls.run_once(call_id, once_step(), lambda: ran.append("sync") or "charged", (), {})
    assert (failed.value.key, failed.value.error["message"]) == ("effect-0#failed:0", "card declined")
    with pytest.raises(OnceFailedElsewhere):
        sync_calls.check_once(call_id, once_step())  # before an async effect
    with pytest.raises(OnceFailedElsewhere):
        sync_calls.record_once(call_id, once_step(), "charged")  # after one that ran meanwhile
    assert ran == []
    assert journaled(call_id) == [(0, "failed", None)]


def test_an_async_effect_that_fails_after_another_run_journaled_its_step_takes_that_value() -> None:
    """As for a sync effect: the failure may come from the other run's writes coming first."""
    call_id = new_call()
    sync_calls.record_once(call_id, once_step(), {"id": 7})
    step = once_step()

    assert sync_calls.record_failed_once(call_id, step, RuntimeError("duplicate key")) == (True, {"id": 7})
    assert (step.key, step.status, step.persisted) == ("effect-0", "pending", False), "the step is left as it was"
    assert journaled(call_id) == [(0, "done", {"id": 7})]


def test_another_step_journaled_at_this_place_is_a_non_deterministic_handler() -> None:
    from mcp_tools.engine.errors import NonDeterministicHandler

    call_id = new_call()
    sync_calls.record_once(call_id, Step(seq=0, kind="once", key="refund", digest="d"), "refunded")
    with pytest.raises(NonDeterministicHandler):
        sync_calls.run_once(call_id, Step(seq=0, kind="once", key="charge", digest="d"), lambda: "charged", (), {})
    assert journaled(call_id) == [(0, "done", "refunded")]


def test_a_client_step_at_this_place_under_the_same_key_is_a_non_deterministic_handler() -> None:
    """Another run suspended on an elicitation at this place, under the key this run's once uses:
    not this step's value (a replay of that journal raises the same)."""
    from mcp_tools.engine.errors import NonDeterministicHandler

    call_id = new_call()
    sync_calls.save_round(call_id, 0, [Step(seq=0, kind="elicitation", key="confirm", digest="e",
                                            request={"method": "elicitation/create", "params": {}})], status="input_required")
    once = Step(seq=0, kind="once", key="confirm", digest="o")
    with pytest.raises(NonDeterministicHandler):
        sync_calls.check_once(call_id, once)
    with pytest.raises(NonDeterministicHandler):
        sync_calls.run_once(call_id, once, lambda: "charged", (), {})
    assert journaled(call_id) == [(0, "pending", None)]
