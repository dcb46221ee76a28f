"""answerSchema is "journaled with the step and never sent" (docs/durable-calls.md): the 2026-07-28
requestState carries the round's journal (core.seal's carry), and with it the step's answerSchema.

And what is sent, ``requestedSchema``, is made of the spec's form fields (``PrimitiveSchemaDefinition``),
each with its ``type``. Before their mend, a ``Decimal`` field was sent with no ``type`` (pydantic's
number-or-string ``anyOf`` left out), and so was a union no form field expresses (``int | str``): the
TypeScript SDK refused the whole elicitation, where the developer now gets a ``TypeError`` naming the field.
"""

from __future__ import annotations

import ast
import datetime
import decimal
import enum
import json
import os
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, Field

from mcp_tools import ToolContext
from mcp_tools.registry import make_tool, registry
from mcp_tools.server import tokens
from tests.asgi_client import call_modern
from tests.clients import conformance_node

pytestmark = pytest.mark.django_db(transaction=True)


class Code(BaseModel):
    code: str = Field(pattern=r"^[A-Z]{3}$")


async def ask_code_wire(ctx: ToolContext) -> str:
    """A model whose pattern requestedSchema cannot carry."""
    answer = await ctx.elicit("Three capital letters", schema=Code, key="code")
    return answer.code


async def test_the_request_state_does_not_carry_the_answer_schema() -> None:
    from demo_site.asgi import application

    with registry.registered_temporarily(make_tool(ask_code_wire)):
        body = (await call_modern(application, "tools/call", {"name": "ask_code_wire", "arguments": {}},
                                  capabilities={"elicitation": {"form": {}}})).json()
    state = body["result"]["requestState"]
    payload: dict[str, Any] = tokens.unseal("request", state)
    carried = [step[4] for step in payload.get("j", [])]
    assert all("answerSchema" not in (request or {}) for request in carried), carried
    assert "^[A-Z]{3}$" not in str(payload), "the model's pattern went to the client inside requestState"


# -- requestedSchema: the spec's form fields, each with its type -----------------------------------------

ROOT = Path(__file__).resolve().parent.parent
#: The ``type`` of each of the spec's form fields (schema.ts, ``PrimitiveSchemaDefinition``).
SPEC_TYPES = {"string", "number", "integer", "boolean", "array"}
FORM = {"elicitation": {"form": {}}}


class Payment(BaseModel):
    amount: decimal.Decimal = Field(gt=0)
    tip: decimal.Decimal | None = None


async def pay(ctx: ToolContext) -> str:
    payment = await ctx.elicit("How much?", schema=Payment, key="pay")
    return f"{payment.amount!r}/{payment.tip!r}"


class Either(BaseModel):
    value: int | str


class Nested(BaseModel):
    code: Code


#: Models no form expresses: asked here to show they are refused.
NO_FORMS = (Either, Nested)


async def ask_either(ctx: ToolContext) -> str:
    return repr(await ctx.elicit("Which?", schema=Either, key="either"))


def test_a_decimal_is_asked_as_a_number() -> None:
    from mcp_tools.engine.context import _flat_elicitation_schema

    requested = _flat_elicitation_schema(Payment)
    assert requested["properties"] == {"amount": {"type": "number", "title": "Amount"},
                                       "tip": {"type": "number", "title": "Tip"}}, requested
    assert requested["required"] == ["amount"]
    # A step the previous release journaled (no type) is this step on replay.
    from mcp_tools.engine.context import _earlier_elicitation_schemas

    assert {"type": "object", "properties": {"amount": {"title": "Amount"}, "tip": {"title": "Tip"}},
            "required": ["amount"]} in _earlier_elicitation_schemas(Payment)


async def _answer(name: str, key: str, content: dict[str, Any]) -> dict[str, Any]:
    from demo_site.asgi import application

    first = (await call_modern(application, "tools/call", {"name": name, "arguments": {}}, capabilities=FORM)).json()["result"]
    assert first["resultType"] == "input_required", first
    return (await call_modern(application, "tools/call", {
        "name": name, "arguments": {}, "requestState": first["requestState"],
        "inputResponses": {key: {"action": "accept", "content": content}}}, capabilities=FORM)).json()


@pytest.mark.parametrize(("content", "expected"), [
    ({"amount": 12.5}, "Decimal('12.5')/None"),
    ({"amount": 3, "tip": 0.1}, "Decimal('3')/Decimal('0.1')"),
    ({"amount": "12.5"}, None),  # a number was asked for
    ({"amount": 0}, None),       # gt=0, which requestedSchema cannot carry: the model's own schema checks it
])
async def test_a_decimal_answer_is_the_number_the_form_asked_for(content: dict[str, Any], expected: str | None) -> None:
    with registry.registered_temporarily(make_tool(pay)):
        body = await _answer("pay", "pay", content)
    if expected is None:
        assert body["error"]["code"] == -32602, body
    else:
        assert body["result"]["content"][0]["text"] == expected, body


@pytest.mark.parametrize(("model", "field"), [(Either, "value"), (Nested, "code")])
def test_a_field_no_form_field_expresses_is_refused_naming_it(model: type[BaseModel], field: str) -> None:
    from mcp_tools.engine.context import _flat_elicitation_schema

    with pytest.raises(TypeError, match=f"{model.__name__} cannot be asked in an elicitation form: its field '{field}'"):
        _flat_elicitation_schema(model)


def test_a_step_the_previous_release_journaled_for_such_a_model_still_replays() -> None:
    """A call in flight across the upgrade: the previous release sent ``Either`` with its field untyped,
    and the client answered. Its next round replays that step (the TypeError is for a step not yet
    sent): it failed there, and the answer the user gave was lost."""
    from asgiref.sync import async_to_sync

    from mcp_tools.engine import Completed, Invocation, run
    from mcp_tools.engine.journal import Journal, Step, digest
    from tests.test_engine_corners import StubRuntime

    sent = {"type": "object", "properties": {"value": {"title": "Value"}}, "required": ["value"]}
    request = {"method": "elicitation/create", "params": {"mode": "form", "message": "Which?", "requestedSchema": sent}}
    journal = Journal([Step(seq=0, kind="elicit", key="either", digest=digest(["elicit", request]), request=request,
                            status="done", response={"action": "accept", "content": {"value": 7}})])
    inv = Invocation(fn=ask_either, is_async=True, kwargs={}, context_param="ctx", principal=None,
                     protocol_version="2025-11-25", client_capabilities=FORM,
                     runtime=StubRuntime(), journal=journal)  # type: ignore[arg-type]
    outcome = async_to_sync(run)(inv)
    assert isinstance(outcome, Completed), outcome
    assert outcome.value == "Either(value=7)"


async def test_a_tool_asking_a_form_no_client_can_render_fails_without_asking(caplog: Any) -> None:
    from demo_site.asgi import application

    import logging

    calls = logging.getLogger("mcp_tools.calls")  # (the demo's LOGGING may not propagate it to caplog's handler)
    calls.addHandler(caplog.handler)
    try:
        with registry.registered_temporarily(make_tool(ask_either)):
            body = (await call_modern(application, "tools/call", {"name": "ask_either", "arguments": {}}, capabilities=FORM)).json()
    finally:
        calls.removeHandler(caplog.handler)
    assert body["result"]["isError"] is True and "inputRequests" not in body["result"], body
    assert "Either cannot be asked in an elicitation form: its field 'value'" in caplog.text  # the server log


def _elicited_schemas() -> dict[str, Any]:
    """Every schema the demo's tools, the plugin's and the tests' ask ``ctx.elicit`` for, by where it is
    asked: a module-level name or a literal in the call (one built inside a handler is not found)."""
    import importlib

    found: dict[str, Any] = {}
    for path in sorted([*ROOT.glob("demo_site/**/*.py"), *ROOT.glob("mcp_tools/**/*.py"), *ROOT.glob("tests/**/*.py")]):
        source = path.read_text()
        if ".elicit(" not in source:
            continue
        module = importlib.import_module(".".join(path.relative_to(ROOT).with_suffix("").parts))
        for node in ast.walk(ast.parse(source)):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "elicit"):
                continue
            given = next((kw.value for kw in node.keywords if kw.arg == "schema"), node.args[1] if len(node.args) > 1 else None)
            if given is None:
                continue
            try:
                schema = eval(compile(ast.Expression(given), str(path), "eval"), vars(module))  # noqa: S307 (the repo's own source)
            except NameError:  # a handler's local
                continue
            if schema not in NO_FORMS:
                found[f"{path.relative_to(ROOT)}:{node.lineno}"] = schema
    return found


def _requests() -> dict[str, dict[str, Any]]:
    from mcp_tools.engine.context import _flat_elicitation_schema

    return {where: {"method": "elicitation/create", "params": {"mode": "form", "message": "m", "requestedSchema": _flat_elicitation_schema(schema)}}
            for where, schema in _elicited_schemas().items()}


def test_every_field_of_every_requested_schema_has_a_spec_type() -> None:
    requests = _requests()
    names = {getattr(schema, "__name__", None) for schema in _elicited_schemas().values()}
    assert {"TargetForm", "Code", "Profile", "Payment"} <= names and len(requests) > 30, sorted(requests)  # the scan found them
    untyped = {where: names for where, request in requests.items()
               if (names := [name for name, prop in request["params"]["requestedSchema"]["properties"].items()
                             if prop.get("type") not in SPEC_TYPES])}
    assert not untyped, untyped


CONFORMANCE_DIR = Path(os.environ.get("MCP_CONFORMANCE_DIR") or ROOT / ".conformance")
NODE = conformance_node(CONFORMANCE_DIR)
SDK_TYPES = CONFORMANCE_DIR / "node_modules" / "@modelcontextprotocol" / "sdk" / "dist" / "cjs" / "types.js"


@pytest.mark.skipif(not (NODE.exists() and SDK_TYPES.exists()), reason="no TypeScript SDK (scripts/test installs it with the conformance suite)")
def test_the_typescript_sdk_takes_every_elicitation_request() -> None:
    """The TypeScript SDK checks an ``elicitation/create`` against ``ElicitRequestSchema`` and refuses one
    that does not fit."""
    script = ("const t = require(process.argv[1]); const requests = JSON.parse(require('fs').readFileSync(0, 'utf8'));"
              "const refused = {}; for (const [where, r] of Object.entries(requests)) { const p = t.ElicitRequestSchema.safeParse(r);"
              " if (!p.success) refused[where] = p.error.issues; } console.log(JSON.stringify(refused));")
    done = subprocess.run([str(NODE), "-e", script, str(SDK_TYPES)], input=json.dumps(_requests()), capture_output=True,
                          text=True, timeout=60, check=True)
    assert json.loads(done.stdout) == {}, done.stdout


# -- formats and defaults the spec's forms do not have -----------------------------------------------
# Found by a review of the tool author's API: a UUID field was sent with "format": "uuid" (also "time",
# "binary" for bytes) and a Decimal's default as the text "1.5" under "type": "number"; the TypeScript
# SDK refused the whole elicitation. An IntEnum field was an enum of integers, which the spec's enums
# (strings) are not.


class Order(BaseModel):
    order_id: uuid.UUID
    price: decimal.Decimal = decimal.Decimal("1.5")
    at: datetime.time | None = None
    raw: bytes = b""
    email: str = Field("", json_schema_extra={"format": "email"})


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Leveled(BaseModel):
    level: Level


async def ask_order(ctx: ToolContext) -> str:
    return repr((await ctx.elicit("Which order?", schema=Order, key="order")).order_id)


def test_a_form_says_only_the_spec_s_formats_and_a_number_default_as_a_number() -> None:
    from mcp_tools.engine.context import _flat_elicitation_schema

    properties = _flat_elicitation_schema(Order)["properties"]
    assert properties["order_id"] == {"type": "string", "title": "Order Id"}, properties
    assert properties["price"]["default"] == 1.5 and properties["price"]["type"] == "number", properties
    assert "format" not in properties["at"] and "format" not in properties["raw"], properties
    assert properties["email"]["format"] == "email", properties  # one of the spec's four is kept


def test_an_enum_of_integers_is_no_form_field() -> None:
    from mcp_tools.engine.context import _flat_elicitation_schema

    with pytest.raises(TypeError, match="Leveled cannot be asked in an elicitation form: its field 'level'"):
        _flat_elicitation_schema(Leveled)


@pytest.mark.parametrize(("content", "ok"), [({"order_id": "12345678-1234-5678-1234-567812345678"}, True), ({"order_id": "not-a-uuid"}, False)],
                         ids=["uuid", "not-a-uuid"])
async def test_what_the_form_no_longer_says_is_still_checked_when_the_answer_comes(content: dict[str, Any], ok: bool) -> None:
    with registry.registered_temporarily(make_tool(ask_order)):
        body = await _answer("ask_order", "order", content)
    if ok:
        assert body["result"]["content"][0]["text"] == "UUID('12345678-1234-5678-1234-567812345678')", body
    else:
        assert body["error"]["code"] == -32602, body  # refused then, not a StepFailed on the next replay


def test_a_step_journaled_with_the_previous_form_still_replays() -> None:
    from asgiref.sync import async_to_sync

    from mcp_tools.engine import Completed, Invocation, run
    from mcp_tools.engine.context import _FormJsonSchema, _wire_schema
    from mcp_tools.engine.journal import Journal, Step, digest
    from tests.test_engine_corners import StubRuntime

    sent = _wire_schema(Order.model_json_schema(schema_generator=_FormJsonSchema), keep_null_defaults=False)
    assert sent["properties"]["order_id"]["format"] == "uuid"  # what the previous release sent
    request = {"method": "elicitation/create", "params": {"mode": "form", "message": "Which order?", "requestedSchema": sent}}
    answer = {"action": "accept", "content": {"order_id": "12345678-1234-5678-1234-567812345678"}}
    journal = Journal([Step(seq=0, kind="elicit", key="order", digest=digest(["elicit", request]), request=request,
                            status="done", response=answer)])
    inv = Invocation(fn=ask_order, is_async=True, kwargs={}, context_param="ctx", principal=None,
                     protocol_version="2025-11-25", client_capabilities=FORM,
                     runtime=StubRuntime(), journal=journal)  # type: ignore[arg-type]
    outcome = async_to_sync(run)(inv)
    assert isinstance(outcome, Completed), outcome
    assert outcome.value == "UUID('12345678-1234-5678-1234-567812345678')"
