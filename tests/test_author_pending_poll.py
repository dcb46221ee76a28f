"""``Pending(poll_seconds=...)`` takes a number of seconds above 0; another value is a ``ValueError`` (or
``TypeError``) where the ``Pending`` is made, naming it.

Found by the author review: ``Pending("not yet", poll_seconds=0)`` (or a negative number) made the server
run the tool again without a pause, as fast as it could, for the whole ``CONVERGE_WAIT_SECONDS`` (60 s by
default) of a client without resume tokens: thousands of runs of the handler (its queries) for one call.
``poll_seconds="1"`` failed the call with an internal error once the first run answered; NaN gave up at once.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from mcp_tools import Pending



@pytest.mark.parametrize("poll_seconds", [0, -1, math.nan, math.inf, "1", True])
def test_a_poll_interval_that_is_no_number_of_seconds_above_0_is_refused(poll_seconds: Any) -> None:
    with pytest.raises((ValueError, TypeError), match="poll_seconds"):
        Pending("not yet", poll_seconds=poll_seconds)


def test_a_poll_interval_above_0_is_taken() -> None:
    assert Pending("not yet", poll_seconds=0.01).poll_seconds == 0.01
    assert Pending("not yet").poll_seconds == 1.0
