"""Two different answers to one pending step of a 2025-11-25 session call, delivered at once by two
processes: exactly one is recorded (``ToolCall.objects.answer_step`` is a compare-and-set on the step).

On SQLite writers are serialised and this cannot race; on PostgreSQL and MariaDB the second UPDATE waits
for the first's row lock and must then find the step answered."""
from __future__ import annotations

import threading

import pytest
from django.db import connection, connections, transaction  # noqa: F401 (connection: the skipif conditions)

from mcp_tools.models import CallStep, ToolCall
from tests.row_locks import wait_until_another_connection_waits

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.skipif("connection.vendor == 'sqlite'", reason="SQLite serialises writers: no two answers can race")
def test_two_different_answers_racing_for_one_step_record_exactly_one() -> None:
    call = ToolCall.objects.create(method="tools/call", arguments={"name": "ask"}, status="input_required")
    CallStep.objects.create(call=call, seq=0, kind="elicit", key="go", digest="d",
                            request={"method": "elicitation/create", "params": {}})
    accepted: dict[str, bool] = {}
    first_wrote = threading.Event()
    second_blocked = threading.Event()
    errors: list[BaseException] = []

    def deliver(answer: str, before_commit: threading.Event | None) -> None:
        try:
            with transaction.atomic():
                accepted[answer] = ToolCall.objects.answer_step(call.id, 0, "done", {"go": answer}, None)
                if before_commit is not None:
                    first_wrote.set()
                    assert before_commit.wait(20), "the second answer never reached the step's row lock"
        except BaseException as error:  # reported by the main thread
            errors.append(error)
        finally:
            connections.close_all()

    first = threading.Thread(target=deliver, args=("first", second_blocked))
    first.start()
    assert first_wrote.wait(20)
    second = threading.Thread(target=deliver, args=("second", None))
    second.start()
    try:
        wait_until_another_connection_waits("mcp_tools_callstep")  # the second UPDATE is queued behind the first's lock
    finally:
        second_blocked.set()
    first.join(30)
    second.join(30)
    assert not errors, errors
    assert accepted == {"first": True, "second": False}
    assert CallStep.objects.get(call=call, seq=0).response == {"go": "first"}


def test_an_answer_to_a_step_of_an_ended_call_is_refused() -> None:
    call = ToolCall.objects.create(method="tools/call", arguments={"name": "ask"}, status="cancelled")
    CallStep.objects.create(call=call, seq=0, kind="elicit", key="go", digest="d",
                            request={"method": "elicitation/create", "params": {}})
    assert ToolCall.objects.answer_step(call.id, 0, "done", {"go": "late"}, None) is False
    step = CallStep.objects.get(call=call, seq=0)
    assert (step.status, step.response) == ("pending", None)
