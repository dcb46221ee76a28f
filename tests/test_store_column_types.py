"""A call and its journal read back with the ORM's Python types, on every database.

``sql.load_call`` reads the call row and its steps with one ``UNION ALL``, the call's half
filled with ``NULL`` for the step columns and the other way round. MariaDB types an
``INT UNSIGNED`` column (a ``PositiveIntegerField``) unioned with a bare ``NULL`` as
``DECIMAL``: ``round``, ``seq``, ``retries``… came back as ``Decimal``, which the engine then
wrote into JSON (a background call's ``save_round``, a 2026-07-28 call's token) and failed
("Object of type Decimal is not JSON serializable"). Run with ``DATABASE_URL=mysql://…``.
"""

from __future__ import annotations

import json

import pytest

from mcp_tools.engine.journal import Step
from mcp_tools.store import sql, sync_calls

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_loaded_call_and_its_steps_have_the_orms_types() -> None:
    steps = [Step(seq=0, kind="once", key="a", digest="d", response={"n": 1}, status="answered"),
             Step(seq=1, kind="elicitation", key="b", digest="d", request={"message": "Sure?"}, status="pending")]
    call_id = sync_calls.create_call(steps, method="tools/call", tool_name="deploy", arguments={"n": 1}, principal="anon",
                                     protocol_version="2026-07-28", flavor="mrtr", status="input_required",
                                     background=True, poll_interval_ms=500, progress=0.5)
    loaded = sql.load_call(call_id, sql.call_database())
    assert loaded is not None
    call, rows = loaded
    ints = {name: getattr(call, name) for name in ("round", "poll_interval_ms", "lost_workers", "requeues", "retries")}
    assert ints == {"round": 0, "poll_interval_ms": 500, "lost_workers": 0, "requeues": 0, "retries": 0}
    assert {name: type(value) for name, value in ints.items()} == dict.fromkeys(ints, int)
    assert call.background is True and call.progress == 0.5 and type(call.progress) is float
    assert [row[0] for row in rows] == [0, 1] and [type(row[0]) for row in rows] == [int, int]
    # What the engine does with them: JSON (a round's outcome, a token's carried journal).
    json.dumps({**ints, "seqs": [row[0] for row in rows]})
