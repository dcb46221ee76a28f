"""Values read back from the journal are the values written, on every database.

PostgreSQL's ``jsonb`` (Django's type for a ``JSONField``) rewrites what it stores: object keys
in its own order, ``1e20`` as the integer ``100000000000000000000``, ``-0.0`` as ``0.0``. A
durable call replayed from its row saw other values than its first run, and was called
non-deterministic (or its saga token invalid) on PostgreSQL only. The columns are
``models.ExactJSONField`` now: PostgreSQL's ``json``, which keeps the text as written.
These tests pass on SQLite before and after; on PostgreSQL they failed before.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import DataError, connection

from mcp_tools import ToolContext
from mcp_tools.registry import make_tool, registry
from tests.asgi_client import call_modern

pytestmark = pytest.mark.django_db(transaction=True)
FORM = {"elicitation": {"form": {}}}
OK = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
AMOUNT = {"type": "object", "properties": {"amount": {"type": "number"}}, "required": ["amount"]}
PICK = {"type": "object", "properties": {"bb": {"type": "boolean"}, "a": {"type": "boolean"}}}
#: What jsonb writes otherwise: a number past 1e16, a negative zero, keys longer first.
AWKWARD = {"zeta": 1, "a": -0.0, "big": 1e20, "nested": {"long key": [1.5e300], "k": None}}


def make_order() -> dict[str, Any]:
    return dict(AWKWARD)


async def order_then_confirm(ctx: ToolContext) -> str:
    """Builds its question from a ``ctx.once`` value: the replay must see the same one."""
    order = await ctx.once("order", make_order)
    await ctx.elicit(f"Confirm {order!r} (keys {', '.join(order)})?", OK, key="confirm")
    return repr(order)


async def ask_then_repeat(ctx: ToolContext) -> str:
    """Builds its second question from the first answer (replayed from the row: it has a once step)."""
    await ctx.once("audit", lambda: "logged")
    amount = await ctx.elicit("How much?", AMOUNT, key="amount")
    picked = await ctx.elicit("Which?", PICK, key="pick")
    await ctx.elicit(f"Pay {amount['amount']!r} for {', '.join(picked)}?", OK, key="confirm")
    return "paid"


async def pay(ctx: ToolContext, amount: float) -> str:
    """A saga step on arguments jsonb would rewrite."""
    await ctx.elicit("Pay?", OK, key="confirm")
    return f"paid {amount!r}"


async def report(ctx: ToolContext) -> dict[str, Any]:
    await ctx.elicit("Go?", OK, key="go")
    return dict(AWKWARD)


@pytest.fixture
def app():  # type: ignore[no-untyped-def]
    from demo_site.asgi import application

    with registry.registered_temporarily(make_tool(order_then_confirm), make_tool(ask_then_repeat), make_tool(pay), make_tool(report)):
        yield application


async def rpc(app: Any, method: str, params: dict[str, Any]) -> dict[str, Any]:
    response = await call_modern(app, method, params, capabilities=FORM)
    assert response.status == 200, (response.status, response.body)
    body = response.json()
    assert "error" not in body, body
    result: dict[str, Any] = body["result"]
    assert result.get("isError") is not True, result
    return result


def accept(content: dict[str, Any]) -> dict[str, Any]:
    return {"action": "accept", "content": content}


async def test_a_once_value_replays_as_the_first_run_saw_it(app: Any) -> None:
    params = {"name": "order_then_confirm", "arguments": {}}
    first = await rpc(app, "tools/call", params)
    done = await rpc(app, "tools/call", params | {"requestState": first["requestState"], "inputResponses": {"confirm": accept({"ok": True})}})
    assert done["content"][0]["text"] == repr(AWKWARD)


async def test_answers_replay_as_the_handler_first_saw_them(app: Any) -> None:
    params = {"name": "ask_then_repeat", "arguments": {}}
    first = await rpc(app, "tools/call", params)
    second = await rpc(app, "tools/call", params | {"requestState": first["requestState"], "inputResponses": {"amount": accept({"amount": 1e20})}})
    third = await rpc(app, "tools/call", params | {"requestState": second["requestState"], "inputResponses": {"pick": accept({"bb": True, "a": True})}})
    assert third["inputRequests"]["confirm"]["params"]["message"] == "Pay 1e+20 for bb, a?"
    done = await rpc(app, "tools/call", params | {"requestState": third["requestState"], "inputResponses": {"confirm": accept({"ok": True})}})
    assert done["content"][0]["text"] == "paid"


@pytest.mark.parametrize("amount", [1e20, -0.0, 2.5])
async def test_a_saga_resumes_whatever_numbers_its_arguments_hold(app: Any, amount: float) -> None:
    first = await rpc(app, "tools/callSaga", {"name": "pay", "arguments": {"amount": amount}})
    done = await rpc(app, "tools/resumeSaga", {"sagaToken": first["sagaToken"], "completedSteps": [
        {"stepId": "confirm", "result": accept({"ok": True})}]})
    assert done["content"][0]["text"] == f"paid {amount!r}"


async def test_an_identical_retry_gets_the_identical_answer(app: Any) -> None:
    params = {"name": "report", "arguments": {}}
    first = await rpc(app, "tools/call", params)
    retry = params | {"requestState": first["requestState"], "inputResponses": {"go": accept({"ok": True})}}
    answered = await call_modern(app, "tools/call", retry, capabilities=FORM)
    again = await call_modern(app, "tools/call", retry, capabilities=FORM)
    # The same text (key order and number forms included), the JSON-RPC id aside.
    assert json.dumps(again.json()["result"]) == json.dumps(answered.json()["result"])
    value = again.json()["result"]["structuredContent"]["result"]  # a dict return is wrapped (no schema of its own)
    assert list(value) == list(AWKWARD) and repr(value) == repr(AWKWARD)


def test_the_json_columns_keep_their_text_on_postgresql() -> None:
    from mcp_tools.models import ToolCall

    # MariaDB's json is LONGTEXT with a JSON_VALID check: the text as written, as SQLite's text.
    expected = {"postgresql": "json", "mysql": "json", "sqlite": "text"}[connection.vendor]
    with connection.cursor() as cursor:
        for field in ToolCall._meta.get_fields():
            if getattr(field, "get_internal_type", lambda: "")() == "JSONField":
                assert field.db_type(connection) == expected, field.name


def test_the_store_refuses_a_string_longer_than_its_column_instead_of_cutting_it() -> None:
    """PostgreSQL cut a string cast to ``varchar(128)`` silently (the store's INSERTs cast their
    values); the column itself refuses it. SQLite keeps any length (the engine refuses long keys)."""
    if connection.vendor != "postgresql":
        pytest.skip("SQLite does not enforce a varchar's length")
    from django.utils import timezone

    from mcp_tools.engine.journal import Step
    from mcp_tools.store import sql

    fields = {"tool_name": "t", "principal": "p" * 129, "flavor": "mrtr", "params_digest": "d"}
    with pytest.raises(DataError):
        sql.insert_call("default", fields, [Step(seq=1, kind="once", key="k", digest="d")], timezone.now())
