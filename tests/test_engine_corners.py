"""Corners of the engine a tool author runs into: what a ``ctx.once`` value may hold, what
``ctx.sample`` may ask of a client, and how sampling's tool uses are named in the journal.

Each test failed before the fix its section names.
"""

from __future__ import annotations

import inspect
import json
import logging
import math
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from mcp_tools import ToolContext
from mcp_tools.engine.errors import UnstorableOnceValue
from mcp_tools.engine.journal import unstorable_part
from mcp_tools.models import CallStep, ToolCall
from mcp_tools.registry import make_tool, registry
from mcp_tools.transports.http import McpEndpoint
from tests.asgi_client import HANDSHAKE, call_modern, handshake_message, post_headers, post_json

pytestmark = pytest.mark.django_db(transaction=True)

APP = McpEndpoint()
FORM = {"elicitation": {"form": {}}}
OK = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
RAN: list[str] = []


@pytest.fixture(autouse=True)
def _in_memory_layer(settings: Any) -> None:
    """The endpoint runs in the test's own event loop (a Redis layer's connections belong to the loop that opened them)."""
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    RAN.clear()


def body_of(raw: bytes) -> dict[str, Any]:
    """The JSON-RPC response of a POST answered as JSON or as an SSE stream (its last data line)."""
    text = raw.decode()
    if text.lstrip().startswith("{"):
        return dict(json.loads(text))
    data = [line[len("data:"):].strip() for line in text.splitlines() if line.startswith("data:")]
    return dict(json.loads(data[-1]))


async def call_tool(era: str, name: str, capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
    """``tools/call`` of ``name`` without arguments in protocol era ``era``; its JSON-RPC response."""
    if era == "2026-07-28":
        response = await call_modern(APP, "tools/call", {"name": name, "arguments": {}}, capabilities=capabilities or {})
    else:
        opened = await post_json(APP, handshake_message("initialize", {
            "protocolVersion": HANDSHAKE, "capabilities": capabilities or {}, "clientInfo": {"name": "t", "version": "1"}}),
            post_headers(version=None))
        assert opened.status == 200, opened.body
        headers = post_headers(version=HANDSHAKE, session=opened.header("mcp-session-id"))
        initialized = await post_json(APP, handshake_message("notifications/initialized", notification=True), headers)
        assert initialized.status == 202
        response = await post_json(APP, handshake_message("tools/call", {"name": name, "arguments": {}}), headers)
    assert response.status == 200, response.body
    return body_of(response.body)


# -- 1. a ctx.once value the journal cannot hold ----------------------------------------------------

def nan_in_a_dict() -> Any:
    RAN.append("nan_in_a_dict")
    return {"total": 1.5, "ratio": math.nan}


async def infinity_in_a_list() -> Any:
    RAN.append("infinity_in_a_list")
    return [1, [2, -math.inf]]


def nul_in_a_string() -> Any:
    RAN.append("nul_in_a_string")
    return {"note": "a\x00b"}


async def surrogate_in_a_key() -> Any:
    RAN.append("surrogate_in_a_key")
    return {"\ud800": 1}


EFFECTS = {fn.__name__: fn for fn in (nan_in_a_dict, infinity_in_a_list, nul_in_a_string, surrogate_in_a_key)}
#: What the error says of each effect's value.
PROBLEMS = {
    "nan_in_a_dict": "value['ratio'] is the float NaN",
    "infinity_in_a_list": "value[1][1] is the float -infinity",
    "nul_in_a_string": "value['note'] holds U+0000",
    "surrogate_in_a_key": "a key of value, '\\ud800', holds a lone surrogate",
}


async def run_effect(ctx: ToolContext, effect: str) -> str:
    """Runs one of the effects above as a once step."""
    return repr(await ctx.once(f"step-{effect}", EFFECTS[effect]))


async def run_effect_and_go_on(ctx: ToolContext, effect: str) -> str:
    """Catches what its once step raises, then asks the user: the next round replays the step."""
    try:
        outcome = repr(await ctx.once("charge", EFFECTS[effect]))
    except Exception as exc:
        outcome = type(exc).__name__
    await ctx.elicit("Go on?", OK, key="go-on")
    return outcome


@pytest.mark.parametrize("era", ["2026-07-28", "2025-11-25"])
@pytest.mark.parametrize("effect", list(EFFECTS))
async def test_an_unstorable_once_value_is_an_error_naming_its_step_and_what_is_wrong(
        era: str, effect: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger="mcp_tools")

    async def handler(ctx: ToolContext) -> str:
        """Runs an effect whose value the journal cannot hold."""
        return await run_effect(ctx, effect)

    with registry.registered_temporarily(make_tool(handler, name="unstorable")):
        body = await call_tool(era, "unstorable")
    result = body["result"]
    assert result["isError"] is True
    [logged] = [record for record in caplog.records if record.exc_info]
    error = logged.exc_info[1]
    assert isinstance(error, UnstorableOnceValue)
    assert f"ctx.once('step-{effect}', ...)" in str(error) and PROBLEMS[effect] in str(error), str(error)
    assert RAN == [effect]
    [call] = await sync_to_async(list)(ToolCall.objects.values("status"))
    assert call["status"] == "failed"
    [step] = await sync_to_async(list)(CallStep.objects.values("status", "error"))
    assert step["status"] == "failed" and step["error"]["type"].endswith("UnstorableOnceValue")


@pytest.mark.parametrize("effect", ["nan_in_a_dict", "infinity_in_a_list"])
async def test_a_handler_that_catches_it_goes_on_without_running_the_effect_again(effect: str) -> None:
    async def handler(ctx: ToolContext) -> str:
        """Goes on past a once step whose value the journal cannot hold."""
        return await run_effect_and_go_on(ctx, effect)

    with registry.registered_temporarily(make_tool(handler, name="goes_on")):
        params: dict[str, Any] = {"name": "goes_on", "arguments": {}}
        first = (await call_modern(APP, "tools/call", params, capabilities=FORM)).json()["result"]
        assert first["resultType"] == "input_required", first
        second = (await call_modern(APP, "tools/call", {
            **params, "requestState": first["requestState"],
            "inputResponses": {"go-on": {"action": "accept", "content": {"ok": True}}}}, capabilities=FORM)).json()["result"]
    assert RAN == [effect], "the effect ran once, and its failure replayed"
    assert second["content"][0]["text"] == "UnstorableOnceValue", second


def test_what_the_journal_can_hold_passes_the_check() -> None:
    assert unstorable_part({"a": [1, 2.5, None, True, "\U0001f600", "\\u0000"], "b": (1e308, -0.0)}) is None
    shared: list[Any] = [1.0]
    cyclic: list[Any] = [shared, shared]
    cyclic.append(cyclic)
    assert unstorable_part(cyclic) is None  # the store's json.dumps says what a cycle is
    assert unstorable_part(ValueError("x\x00")) == "value holds U+0000, which no database column here keeps"


# -- 2. includeContext and the client's sampling.context capability ----------------------------------

class StubRuntime:
    """What ``engine.run`` needs of a runtime for a handler that only asks the client things."""

    def resolve_tools(self, tools: Any) -> list[Any]:
        assert not tools
        return []

    def sampling_limits(self) -> tuple[int, int]:
        return 16, 8


def first_request(handler: Any, capabilities: dict[str, Any], version: str = "2026-07-28",
                  journal: Any = None) -> dict[str, Any]:
    """The params of the first request ``handler`` sends a client of ``capabilities`` speaking ``version``."""
    from asgiref.sync import async_to_sync

    from mcp_tools.engine import Invocation, NeedsInput, run
    from mcp_tools.engine.journal import Journal

    inv = Invocation(fn=handler, is_async=True, kwargs={}, context_param="ctx", principal=None, protocol_version=version,
                     client_capabilities=capabilities, runtime=StubRuntime(),  # type: ignore[arg-type]
                     journal=journal or Journal())
    outcome = async_to_sync(run)(inv)
    assert isinstance(outcome, NeedsInput)
    request = outcome.pending[0].request
    assert request is not None
    return dict(request["params"])


async def sample_with_this_server(ctx: ToolContext) -> str:
    return (await ctx.sample("Summarise what you know", include_context="thisServer")).text


async def sample_step_with_all_servers(ctx: ToolContext) -> str:
    [answer] = await ctx.gather(ctx.sample_step("Summarise", includeContext="allServers"))
    return str(answer)


async def sample_with_none(ctx: ToolContext) -> str:
    return (await ctx.sample("Summarise", include_context="none")).text


@pytest.mark.parametrize("handler", [sample_with_this_server, sample_step_with_all_servers])
@pytest.mark.parametrize("version", ["2026-07-28", "2025-11-25"])
def test_deprecated_include_context_is_left_out_for_a_client_without_sampling_context(handler: Any, version: str) -> None:
    """client/sampling, Capabilities: servers SHOULD NOT use "thisServer" / "allServers" unless the client
    declares sampling.context; the spec's way out is to omit includeContext ("none" by default)."""
    assert "includeContext" not in first_request(handler, {"sampling": {}}, version)
    assert "includeContext" not in first_request(handler, {"sampling": {"tools": {}}}, version)


@pytest.mark.parametrize("handler", [sample_with_this_server, sample_step_with_all_servers])
def test_a_client_that_declares_sampling_context_is_sent_it(handler: Any) -> None:
    assert first_request(handler, {"sampling": {"context": {}}})["includeContext"] in ("thisServer", "allServers")


def test_none_and_versions_before_the_capability_are_sent_as_given() -> None:
    assert first_request(sample_with_none, {"sampling": {}})["includeContext"] == "none"
    assert first_request(sample_with_this_server, {"sampling": {}}, "2025-06-18")["includeContext"] == "thisServer"


def test_a_step_journaled_with_it_by_an_earlier_release_still_replays() -> None:
    """A call in flight across the upgrade: its sampling step was sent (and digested) with includeContext."""
    from mcp_tools.engine.journal import Journal, Step, digest

    sent = {"method": "sampling/createMessage", "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": "Summarise what you know"}}],
        "maxTokens": 1000, "includeContext": "thisServer"}}
    journal = Journal([Step(seq=0, kind="sample", key="sample-0", digest=digest(["sample", sent]), request=sent)])
    assert first_request(sample_with_this_server, {"sampling": {}}, journal=journal) == sent["params"]


async def test_over_http_the_input_request_goes_without_it() -> None:
    with registry.registered_temporarily(make_tool(sample_with_this_server)):
        response = await call_modern(APP, "tools/call", {"name": "sample_with_this_server", "arguments": {}},
                                     capabilities={"sampling": {}})
    [request] = response.json()["result"]["inputRequests"].values()
    assert request["method"] == "sampling/createMessage" and "includeContext" not in request["params"]


# -- 3. tool_use ids in the journal's keys ---------------------------------------------------------

class RunningRuntime(StubRuntime):
    """A runtime that runs ``ctx.once`` effects in memory and offers the tools it is given."""

    def __init__(self, tools: list[Any]) -> None:
        self.tools = tools

    def resolve_tools(self, tools: Any) -> list[Any]:
        return [tool for tool in self.tools if tool.name in tools]

    async def run_once(self, inv: Any, step: Any, fn: Any, args: Any, kwargs: Any) -> Any:
        value = fn(*args, **kwargs)
        if inspect.isawaitable(value):
            value = await value
        step.response, step.status, step.persisted = json.loads(json.dumps(value)), "done", True
        return value


async def lookup_ec(query: str) -> str:
    """Looks something up."""
    RAN.append(f"lookup:{query}")
    return f"found {query}"


def save(text: str) -> str:
    RAN.append(f"save:{text}")
    return "saved"


def use_of(use_id: str, query: str = "q") -> dict[str, Any]:
    return {"role": "assistant", "model": "m", "stopReason": "toolUse",
            "content": [{"type": "tool_use", "id": use_id, "name": "lookup_ec", "input": {"query": query}}]}


def done(text: str) -> dict[str, Any]:
    return {"role": "assistant", "model": "m", "stopReason": "endTurn", "content": {"type": "text", "text": text}}


async def run_rounds(handler: Any, answers: dict[str, Any], journal: Any = None) -> tuple[Any, Any]:
    """Run ``handler`` round after round, answering each pending step from ``answers`` by its key,
    until it completes: its value and its journal."""
    from mcp_tools.engine import Completed, Invocation, NeedsInput, run
    from mcp_tools.engine.journal import Journal

    journal = journal or Journal()
    runtime = RunningRuntime([make_tool(lookup_ec)])
    for _ in range(10):
        inv = Invocation(fn=handler, is_async=True, kwargs={}, context_param="ctx", principal=None, protocol_version="2026-07-28",
                         client_capabilities={"sampling": {"tools": {}}}, runtime=runtime,  # type: ignore[arg-type]
                         journal=journal)
        outcome = await run(inv)
        if isinstance(outcome, Completed):
            return outcome.value, journal
        assert isinstance(outcome, NeedsInput)
        for step in outcome.pending:
            step.response, step.status = answers[step.key], "done"
    raise AssertionError("the handler never completed")


async def draft_then_save(ctx: ToolContext) -> str:
    """Keys its own steps under its sampling's key, as a handler may."""
    draft = await ctx.sample("write it", tools=["lookup_ec"], key="draft")
    return str(await ctx.once("draft.0.save", save, draft.text))


async def save_then_draft(ctx: ToolContext) -> str:
    await ctx.once("draft.0.save", save, "notes")
    return (await ctx.sample("write it", tools=["lookup_ec"], key="draft")).text


async def research_twice(ctx: ToolContext) -> str:
    first = await ctx.sample("look", tools=["lookup_ec"], key="research")
    second = await ctx.sample("look again", tools=["lookup_ec"], key="research.0")
    return f"{first.text} / {second.text}"


@pytest.mark.parametrize("handler, answers, ran", [
    # The model's id "save" named the tool's run "draft.0.save": the handler's own step after it...
    (draft_then_save, {"draft": use_of("save"), "draft.1": done("the draft")}, ["lookup:q", "save:the draft"]),
    # ...or before it: a second step under one key, either way ("Internal error").
    (save_then_draft, {"draft": use_of("save"), "draft.1": done("the draft")}, ["save:notes", "lookup:q"]),
    # The id "1" in the first sampling named its run "research.0.1": turn 1 of the sampling keyed "research.0".
    (research_twice, {"research": use_of("1", "a"), "research.1": done("one"), "research.0": use_of("2", "b"),
                      "research.0.1": done("two")}, ["lookup:a", "lookup:b"]),
], ids=["handler-key-after", "handler-key-before", "another-samplings-turn"])
async def test_a_models_tool_use_id_cannot_name_another_step(handler: Any, answers: dict[str, Any], ran: list[str]) -> None:
    value, journal = await run_rounds(handler, answers)
    assert RAN == ran
    keys = [step.key for step in journal.steps]
    assert len(keys) == len(set(keys)), keys
    # And a replay of the whole journal runs nothing again and gives the same value.
    RAN.clear()
    again, _ = await run_rounds(handler, {}, journal)
    assert again == value and RAN == []


async def test_a_run_journaled_under_the_former_key_still_replays() -> None:
    """A call in flight across the upgrade: its tool runs were journaled as ``<key>.<turn>.<id>``."""
    from mcp_tools.engine.journal import derived_step_key

    value, journal = await run_rounds(research_twice, {
        "research": use_of("call_1", "a"), "research.1": done("one"), "research.0": use_of("x" * 200, "b"),
        "research.0.1": done("two")})
    runs = [step for step in journal.steps if step.kind == "once"]
    assert [step.key.split(".")[-2] for step in runs] == ["tool_use", "tool_use"]
    runs[0].key = derived_step_key("research", 0, "call_1")
    runs[1].key = derived_step_key("research.0", 0, "x" * 200)  # past 128 characters: a digest of it
    RAN.clear()
    again, _ = await run_rounds(research_twice, {}, journal)
    assert again == value and RAN == []


# -- 4. NonDeterministicHandler says which step ----------------------------------------------------

async def ask_about(ctx: ToolContext, text: str) -> str:
    await ctx.elicit(f"Delete {text}?", OK, key="confirm")
    return "deleted"


async def ask_something_else(ctx: ToolContext, text: str) -> str:
    await ctx.once("look", lambda: text)
    return "looked"


@pytest.mark.parametrize("handler, text, changed, asked", [
    (ask_about, "order 2", True, ("elicit", "confirm")),  # the same step, another question
    (ask_something_else, "order 1", False, ("once", "look")),  # another step at that place
])
async def test_non_determinism_names_the_journaled_and_the_asked_step(handler: Any, text: str, changed: bool,
                                                                      asked: tuple[str, str]) -> None:
    from mcp_tools.engine import Invocation, NeedsInput, NonDeterministicHandler, run

    def invocation(fn: Any, journal: Any = None) -> Invocation:
        from mcp_tools.engine.journal import Journal

        return Invocation(fn=fn, is_async=True, kwargs={"text": text}, context_param="ctx", principal=None,
                          protocol_version="2026-07-28", client_capabilities=FORM, runtime=StubRuntime(),  # type: ignore[arg-type]
                          journal=journal or Journal())

    first = invocation(ask_about)
    first.kwargs = {"text": "order 1"}
    assert isinstance(await run(first), NeedsInput)
    with pytest.raises(NonDeterministicHandler) as caught:
        await run(invocation(handler, first.journal))
    error = caught.value
    assert (error.seq, error.journaled_kind, error.journaled_key) == (0, "elicit", "confirm")
    assert (error.kind, error.key) == asked and error.request_changed is changed
