"""A step's request is checked storable from the text its digest is taken of, walked only when in doubt.

``ctx.elicit`` / ``ctx.sample`` journal the request they send before sending it, so one holding
what no column keeps (U+0000, a lone surrogate, a float NaN or infinity) is refused where the
handler asks. The check reads the canonical JSON the step's digest hashes (one scan) and walks
the value only when that text may hold one. A lone surrogate used to fail the handler inside the
digest itself, with a ``UnicodeEncodeError`` naming neither the step nor the value.
"""

from __future__ import annotations

import logging
import math
import random
from typing import Any

import pytest

from mcp_tools import ToolContext
from mcp_tools.engine.journal import _walk_unstorable, canonical_json, plainly_storable, unstorable_part
from mcp_tools.models import ToolCall
from mcp_tools.registry import make_tool, registry
from tests.asgi_client import call_modern

LEAVES: list[Any] = [
    "plain", "", "NaN", "Infinity", "-Infinity", "a\\u0000b", "\\\\u0000", "x\x00y", "\ud800", "a\udc00b", "\U0001f600",
    0, -7, 2**70, 1.5, -0.0, math.nan, math.inf, -math.inf, True, False, None, ("t", 1), {1, 2},
]
KEYS: list[Any] = ["k", "NaN", "a\x00", "\udbff", 3, "\\u0000"]


def random_value(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth >= 3 or roll < 0.4:
        return rng.choice(LEAVES)
    if roll < 0.7:
        return [random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {rng.choice(KEYS): random_value(rng, depth + 1) for _ in range(rng.randrange(4))}


def test_the_text_clears_only_what_the_walk_clears() -> None:
    rng = random.Random(20261127)
    cleared = walked_clean = 0
    for _ in range(20_000):
        value = random_value(rng)
        try:
            text = canonical_json(["elicit", {"method": "elicitation/create", "params": value}])
        except TypeError:  # keys of mixed types cannot be sorted: the digest raises first, as before
            continue
        problem = _walk_unstorable(value, "params")
        assert unstorable_part(value, "params") == problem, value  # the shortcut never changes the answer
        if plainly_storable(text):
            cleared += 1
            assert problem is None, (value, problem)
        walked_clean += problem is None
    # Both answers occur: the scan clears values, and some values only the walk clears ("NaN" as text).
    assert 0 < cleared < walked_clean


#: What the handler asks with: the client's arguments cannot carry these (refused as they arrive).
CASES: dict[str, tuple[str, Any]] = {
    "surrogate": ("pick\ud800", None), "nul": ("pick\x00", None), "infinity": ("pick", math.inf),
    "looks-like-one": ("NaN or \\u0000?", None),
}


async def asks(ctx: ToolContext, case: str) -> str:
    """Asks once with the message (and field default) of ``case``."""
    message, default = CASES[case]
    field: dict[str, Any] = {"type": "number"}
    if default is not None:
        field["default"] = default
    answer = await ctx.elicit(message, {"type": "object", "properties": {"n": field}}, key="n")
    return f"got {answer['n']}"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("case, says", [
    ("surrogate", "params['message'] holds a lone surrogate"),
    ("nul", "params['message'] holds U+0000"),
    ("infinity", "params['requestedSchema']['properties']['n']['default'] is the float infinity"),
])
async def test_a_request_no_column_keeps_is_the_handlers_error_naming_its_place(
    case: str, says: str, caplog: pytest.LogCaptureFixture,
) -> None:
    from demo_site.asgi import application

    calls_log = logging.getLogger("mcp_tools.calls")  # the demo's logging does not propagate it to caplog's root handler
    calls_log.addHandler(caplog.handler)
    try:
        with registry.registered_temporarily(make_tool(asks)):
            body = (await call_modern(application, "tools/call", {"name": "asks", "arguments": {"case": case}})).json()
    finally:
        calls_log.removeHandler(caplog.handler)
    result = body["result"]
    assert result["isError"] is True, body
    assert result["content"][0]["text"] == "Internal error while running 'asks'; the server log has the details."
    # The handler's own error, logged for its author (before: a UnicodeEncodeError out of the digest).
    [failure] = {id(r): r for r in caplog.records if r.exc_info and r.name == "mcp_tools.calls"}.values()  # once, however it came
    logged = str(failure.exc_info[1])  # type: ignore[index]
    assert "The elicitation/create request of step 'n' cannot be journaled" in logged and says in logged, logged
    assert not await ToolCall.objects.filter(tool_name="asks").aexists(), "nothing journaled"


@pytest.mark.django_db(transaction=True)
async def test_text_that_only_looks_like_one_is_asked() -> None:
    from demo_site.asgi import application

    with registry.registered_temporarily(make_tool(asks)):
        body = (await call_modern(application, "tools/call", {"name": "asks", "arguments": {"case": "looks-like-one"}})).json()
    result = body["result"]
    assert result["resultType"] == "input_required", body
    assert result["inputRequests"]["n"]["params"]["message"] == "NaN or \\u0000?"

