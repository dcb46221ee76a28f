"""Sampling with tools: the tools the client's model asks for keep what their declaration promises.

A review found that ``ctx.sample(tools=...)`` ran a tool with a ``time_limit`` without it (a tool
that overran hung the whole call) and ran a ``background=True`` tool inline in the request, away
from its worker, its queue and its retry policy; another found that a model repeating a
``tool_use`` id failed the call ("Internal error"). Each test below failed before its mend. The
permission and argument checks (the same as a direct ``tools/call``) and the refusal of a
``tool_use`` without an id are pinned here too.
"""
from __future__ import annotations

import asyncio
import hashlib
import time
from typing import Any

import pytest
from pydantic import BaseModel

from mcp_tools import ToolContext
from mcp_tools.registry import make_tool, registry
from mcp_tools.transports.http import McpEndpoint
from tests.asgi_client import call_modern

pytestmark = pytest.mark.django_db(transaction=True)

APP = McpEndpoint()
CAPS = {"sampling": {"tools": {}}}
RAN: list[str] = []
#: A run that does not answer within this many seconds hung (the slow tools sleep far longer).
HUNG = 10.0


async def rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
    response = await asyncio.wait_for(call_modern(APP, method, params, capabilities=CAPS), HUNG)
    assert response.status == 200, (response.status, response.body)
    body = response.json()
    assert "error" not in body, body
    return body["result"]


def uses(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks), "model": "m", "stopReason": "toolUse"}


async def tool_results(agent: Any, *tools: Any, answer: dict[str, Any]) -> list[dict[str, Any]]:
    """Call ``agent``, answer its first sampling request with ``answer``: the tool results it sends back."""
    with registry.registered_temporarily(make_tool(agent), *tools):
        params = {"name": agent.__name__, "arguments": {}}
        first = await rpc("tools/call", params)
        (key,) = first["inputRequests"]
        second = await rpc("tools/call", {**params, "requestState": first["requestState"], "inputResponses": {key: answer}})
    (key2,) = second["inputRequests"]
    results: list[dict[str, Any]] = second["inputRequests"][key2]["params"]["messages"][-1]["content"]
    return results


# -- time_limit: an overrunning tool is a tool error for the model, not a hung call --------------

async def slow_lookup(query: str) -> str:
    """Looks something up, slowly."""
    RAN.append("slow_lookup")
    await asyncio.sleep(60)
    return "found"


def slow_sync_lookup(query: str) -> str:
    """Looks something up, slowly, in a thread."""
    RAN.append("slow_sync_lookup")
    time.sleep(2.0)
    return "found"


async def quick_lookup(query: str) -> str:
    """Raises its own TimeoutError, well within its time limit."""
    raise TimeoutError("upstream said no")


async def lookup_agent(ctx: ToolContext) -> str:
    result = await ctx.sample("find it", tools=["slow_lookup", "slow_sync_lookup", "quick_lookup"])
    return result.text


# slow_sync_lookup's limit leaves its thread time to start on a loaded machine (the test checks it ran).
LOOKUP_TOOLS = (make_tool(slow_lookup, time_limit=0.2), make_tool(slow_sync_lookup, time_limit=0.6),
                make_tool(quick_lookup, time_limit=5))


async def test_a_tool_that_overruns_its_time_limit_is_a_tool_error() -> None:
    RAN.clear()
    # The tool sleeps 60 s: answered within HUNG seconds (rpc's guard), the run stopped at its limit.
    results = await tool_results(lookup_agent, *LOOKUP_TOOLS,
                                 answer=uses({"type": "tool_use", "id": "u1", "name": "slow_lookup", "input": {"query": "x"}}))
    assert RAN == ["slow_lookup"], RAN
    assert results[0]["isError"] is True, results
    assert "ran out of time (0.2 s)" in results[0]["content"][0]["text"], results


async def test_a_sync_tool_that_overruns_its_time_limit_is_a_tool_error() -> None:
    RAN.clear()
    results = await tool_results(lookup_agent, *LOOKUP_TOOLS,
                                 answer=uses({"type": "tool_use", "id": "u1", "name": "slow_sync_lookup", "input": {"query": "x"}}))
    assert RAN == ["slow_sync_lookup"], RAN
    assert results[0]["isError"] is True, results
    assert "ran out of time (0.6 s)" in results[0]["content"][0]["text"], results


async def test_a_tools_own_timeout_error_is_its_failure_not_the_limit() -> None:
    results = await tool_results(lookup_agent, *LOOKUP_TOOLS,
                                 answer=uses({"type": "tool_use", "id": "u1", "name": "quick_lookup", "input": {"query": "x"}}))
    assert results[0]["isError"] is True, results
    assert results[0]["content"][0]["text"] == "Internal error while running 'quick_lookup'; the server log has the details.", results


# -- a tool's failure: its ToolError is for the model, any other exception stays in the server log --

async def connect_lookup(query: str) -> str:
    """Looks something up in a database whose address is the server's business."""
    raise RuntimeError("connection to postgres://svc:hunter2@10.0.0.5/db failed")


async def refusing_lookup(query: str) -> str:
    """Refuses queries it cannot answer, saying why."""
    from mcp_tools import ToolError

    raise ToolError(f"No entry matches {query!r}.")


async def failing_agent(ctx: ToolContext) -> str:
    result = await ctx.sample("find it", tools=["connect_lookup", "refusing_lookup"])
    return result.text


async def test_an_exceptions_text_is_not_sent_to_the_clients_model_but_logged(caplog: Any) -> None:
    """The model's conversation goes to the client: it read the exception's text (a password here),
    where a direct tools/call of the same tool answers a generic error and logs the details."""
    with caplog.at_level("ERROR", logger="mcp_tools.calls"):
        results = await tool_results(failing_agent, make_tool(connect_lookup), make_tool(refusing_lookup),
                                     answer=uses({"type": "tool_use", "id": "u1", "name": "connect_lookup", "input": {"query": "x"}}))
    assert results[0]["isError"] is True, results
    assert results[0]["content"] == [{"type": "text", "text": "Internal error while running 'connect_lookup'; the server log has the details."}]
    assert "hunter2" not in str(results)
    assert any("hunter2" in (record.exc_text or "") or (record.exc_info and "hunter2" in str(record.exc_info[1]))
               for record in caplog.records), "the failure is in the server log"


async def test_a_tools_tool_error_is_the_models_to_read() -> None:
    results = await tool_results(failing_agent, make_tool(connect_lookup), make_tool(refusing_lookup),
                                 answer=uses({"type": "tool_use", "id": "u1", "name": "refusing_lookup", "input": {"query": "x"}}))
    assert results[0]["isError"] is True, results
    assert results[0]["content"] == [{"type": "text", "text": "No entry matches 'x'."}]


# -- background: refused to the model (it would run inline, without its worker's guarantees) -----

async def build_report(rows: int) -> str:
    """Builds a long report."""
    RAN.append("build_report")
    return f"report of {rows} rows"


async def report_agent(ctx: ToolContext) -> str:
    result = await ctx.sample("make a report", tools=["build_report"])
    return result.text


async def test_a_background_tool_is_refused_to_the_model() -> None:
    RAN.clear()
    results = await tool_results(report_agent, make_tool(build_report, background=True),
                                 answer=uses({"type": "tool_use", "id": "u1", "name": "build_report", "input": {"rows": 3}}))
    assert RAN == [], RAN
    assert results[0]["isError"] is True, results
    assert "background worker" in results[0]["content"][0]["text"], results


# -- the gates of a direct tools/call: permissions, then arguments -------------------------------

def drop_table(table: str) -> str:
    """Drops a table."""
    RAN.append(f"drop:{table}")
    return "dropped"


async def admin_agent(ctx: ToolContext) -> str:
    result = await ctx.sample("tidy up", tools=["drop_table"])
    return result.text


async def test_permissions_and_arguments_are_checked_as_for_tools_call() -> None:
    RAN.clear()
    guarded = make_tool(drop_table, permissions=("auth.delete_user",))
    with registry.registered_temporarily(guarded):
        direct = await call_modern(APP, "tools/call", {"name": "drop_table", "arguments": {"table": "users"}}, capabilities=CAPS)
    assert "error" in direct.json(), direct.body  # the anonymous caller may not call it directly...
    results = await tool_results(admin_agent, guarded, answer=uses(
        {"type": "tool_use", "id": "u1", "name": "drop_table", "input": {"table": "users"}},
    ))
    assert RAN == [], RAN  # ...nor through the model, which hears of no such tool (as tools/call answers)
    assert results[0]["isError"] is True and results[0]["content"][0]["text"] == "Unknown tool 'drop_table'", results
    results = await tool_results(admin_agent, make_tool(drop_table), answer=uses(
        {"type": "tool_use", "id": "u1", "name": "drop_table", "input": {"table": 7}},
    ))
    assert RAN == [], RAN
    assert results[0]["isError"] is True and "Invalid arguments" in results[0]["content"][0]["text"], results


async def two_tool_agent(ctx: ToolContext) -> str:
    return (await ctx.sample("tidy up", tools=["drop_table", "quick_lookup"])).text


async def first_sampling_request(agent: Any, token: str | None, *tools: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """``agent`` called by the holder of ``token``: its first answer and the sampling request's params."""
    with registry.registered_temporarily(make_tool(agent), *tools):
        response = await call_modern(APP, "tools/call", {"name": agent.__name__, "arguments": {}}, capabilities=CAPS, token=token)
    first: dict[str, Any] = response.json()["result"]
    (request,) = first["inputRequests"].values()
    return first, request["params"]


async def test_a_tool_the_caller_may_not_use_is_not_offered_to_its_model() -> None:
    """A review found a hidden tool's name, description and schema in the sampling request of an anonymous
    caller, to whom tools/list does not show it and tools/call answers "Unknown tool" (docs/oauth.md: every
    permission gate, tools offered to sampling included, enforces a tool's permissions and scopes)."""
    from asgiref.sync import sync_to_async

    from tests.clients import create_user_with_token

    guarded = make_tool(drop_table, permissions=("auth.delete_user",))
    open_tool = make_tool(quick_lookup)
    _, anonymous = await first_sampling_request(two_tool_agent, None, guarded, open_tool)
    assert [t["name"] for t in anonymous["tools"]] == ["quick_lookup"], anonymous
    holder = await sync_to_async(create_user_with_token)("may-drop", ("auth.delete_user",))
    _, allowed = await first_sampling_request(two_tool_agent, holder, guarded, open_tool)
    assert [t["name"] for t in allowed["tools"]] == ["drop_table", "quick_lookup"], allowed
    _, alone = await first_sampling_request(admin_agent, None, guarded)  # none of them: no tools at all
    assert "tools" not in alone and "toolChoice" not in alone, alone


async def test_a_permission_granted_between_rounds_does_not_change_the_journaled_step() -> None:
    """The step's digest is taken of what the handler asked, not of the tools offered: a caller whose
    permissions changed while the call waited replays the same step (not a NonDeterministicHandler)."""
    from asgiref.sync import sync_to_async
    from django.contrib.auth.models import Permission, User

    from tests.clients import create_user_with_token

    guarded = make_tool(drop_table, permissions=("auth.delete_user",))
    token = await sync_to_async(create_user_with_token)("granted-later")
    first, params = await first_sampling_request(admin_agent, token, guarded)
    assert "tools" not in params, params

    def grant() -> None:
        user = User.objects.get(username="granted-later")
        user.user_permissions.add(Permission.objects.get(content_type__app_label="auth", codename="delete_user"))

    await sync_to_async(grant)()
    (key,) = first["inputRequests"]
    text = {"role": "assistant", "content": {"type": "text", "text": "all tidy"}, "model": "m", "stopReason": "endTurn"}
    with registry.registered_temporarily(make_tool(admin_agent), guarded):
        response = await call_modern(APP, "tools/call", {"name": "admin_agent", "arguments": {}, "requestState": first["requestState"],
                                                         "inputResponses": {key: text}}, capabilities=CAPS, token=token)
    assert response.json()["result"]["content"] == [{"type": "text", "text": "all tidy"}], response.body


# -- tool_use ids the model repeats: not a failed call --------------------------------------------

async def lookup_rv(query: str) -> str:
    """Looks something up."""
    RAN.append(f"lookup:{query}")
    return f"found {query}"


async def agent_rv(ctx: ToolContext) -> str:
    return (await ctx.sample("find it", tools=["lookup_rv"], key="s")).text


def lookup(query: str, use_id: str | None = None) -> dict[str, Any]:
    use = {"type": "tool_use", "name": "lookup_rv", "input": {"query": query}}
    return use if use_id is None else {**use, "id": use_id}


DONE = {"role": "assistant", "content": {"type": "text", "text": "all found"}, "model": "m", "stopReason": "endTurn"}


async def test_a_models_repeated_tool_use_id_does_not_fail_the_call() -> None:
    """Each run is a ctx.once step keyed by its tool_use id: a repeated id was a second step under
    one key, an "Internal error" that failed the whole call. The repeated use is now an error the
    model reads; the first runs, once, and the call replays to its end."""
    RAN.clear()
    with registry.registered_temporarily(make_tool(agent_rv), make_tool(lookup_rv)):
        params = {"name": "agent_rv", "arguments": {}}
        first = await rpc("tools/call", params)
        (key,) = first["inputRequests"]
        second = await rpc("tools/call", {**params, "requestState": first["requestState"],
                                          "inputResponses": {key: uses(lookup("0", "dup"), lookup("1", "dup"))}})
        assert second.get("isError") is not True, second
        (key2,) = second["inputRequests"]
        results = second["inputRequests"][key2]["params"]["messages"][-1]["content"]
        # The next round replays the first turn from the journal: the same results, nothing run again.
        third = await rpc("tools/call", {**params, "requestState": second["requestState"], "inputResponses": {key2: DONE}})
    assert [r["toolUseId"] for r in results] == ["dup", "dup"], results
    assert results[0]["content"][0]["text"] == "found 0" and not results[0].get("isError"), results
    assert results[1]["isError"] is True and "repeats the id" in results[1]["content"][0]["text"], results
    assert RAN == ["lookup:0"], RAN
    assert third.get("isError") is not True and third["content"][0]["text"] == "all found", third


async def test_a_tool_use_without_an_id_is_refused_as_an_invalid_answer() -> None:
    """A use without an id (the engine would number it, "2" beside a use whose id is "2") never
    reaches the loop: the answer is refused (-32602) and the call waits for a corrected one."""
    RAN.clear()
    with registry.registered_temporarily(make_tool(agent_rv), make_tool(lookup_rv)):
        params = {"name": "agent_rv", "arguments": {}}
        first = await rpc("tools/call", params)
        (key,) = first["inputRequests"]
        refused = (await call_modern(APP, "tools/call", {**params, "requestState": first["requestState"],
                                                         "inputResponses": {key: uses(lookup("0", "2"), lookup("1"))}},
                                     capabilities=CAPS)).json()
        corrected = await rpc("tools/call", {**params, "requestState": first["requestState"],
                                             "inputResponses": {key: uses(lookup("0", "2"), lookup("1", "3"))}})
    assert refused["error"]["code"] == -32602 and '"id"' in refused["error"]["message"], refused
    assert corrected.get("isError") is not True and "inputRequests" in corrected, corrected
    assert RAN == ["lookup:0", "lookup:1"], RAN


def sync_agent(ctx: ToolContext) -> str:
    """A sync handler: the permission checks of what its model is offered run from its thread."""
    return str(ctx.sample("tidy up", tools=["drop_table", "quick_lookup"]).text)


async def test_a_sync_handler_offers_its_model_the_tools_its_caller_may_use() -> None:
    from asgiref.sync import sync_to_async

    from tests.clients import create_user_with_token

    guarded, open_tool = make_tool(drop_table, permissions=("auth.delete_user",)), make_tool(quick_lookup)
    _, anonymous = await first_sampling_request(sync_agent, None, guarded, open_tool)
    assert [t["name"] for t in anonymous["tools"]] == ["quick_lookup"], anonymous
    holder = await sync_to_async(create_user_with_token)("sync-may-drop", ("auth.delete_user",))
    _, allowed = await first_sampling_request(sync_agent, holder, guarded, open_tool)
    assert [t["name"] for t in allowed["tools"]] == ["drop_table", "quick_lookup"], allowed


# -- a registered tool given as its function is that tool ------------------------------------------

async def function_agent(ctx: ToolContext) -> str:
    return (await ctx.sample("tidy up", tools=[drop_table, quick_lookup])).text


async def background_function_agent(ctx: ToolContext) -> str:
    return (await ctx.sample("make a report", tools=[build_report])).text


async def test_a_registered_tool_given_as_its_function_keeps_its_permissions_and_name() -> None:
    """``@tool`` returns the function itself, so ``tools=[drop_table]`` is what an author writes. It was made a
    tool anew: no permissions (offered to, and run for, a caller they refuse), its function's name instead of
    the registered one, and ``background=True`` forgotten (run inline)."""
    guarded = make_tool(drop_table, name="tables.drop", permissions=("auth.delete_user",))
    open_tool = make_tool(quick_lookup)
    _, anonymous = await first_sampling_request(function_agent, None, guarded, open_tool)
    assert [t["name"] for t in anonymous["tools"]] == ["quick_lookup"], anonymous
    RAN.clear()
    results = await tool_results(function_agent, guarded, open_tool, answer=uses(
        {"type": "tool_use", "id": "u1", "name": "drop_table", "input": {"table": "users"}},
        {"type": "tool_use", "id": "u2", "name": "tables.drop", "input": {"table": "users"}},
    ))
    assert RAN == [], RAN
    assert [r["content"][0]["text"] for r in results] == ["Unknown tool 'drop_table'", "Unknown tool 'tables.drop'"], results

    results = await tool_results(background_function_agent, make_tool(build_report, background=True), answer=uses(
        {"type": "tool_use", "id": "u1", "name": "build_report", "input": {"rows": 3}}))
    assert RAN == [], RAN
    assert "background worker" in results[0]["content"][0]["text"], results


async def test_an_unregistered_function_is_still_a_tool_for_the_model() -> None:
    RAN.clear()
    results = await tool_results(function_agent, answer=uses(
        {"type": "tool_use", "id": "u1", "name": "drop_table", "input": {"table": "t"}}))
    assert RAN == ["drop:t"] and results[0]["content"][0]["text"] == "dropped", results


class Shop:
    def drop(self, table: str) -> str:
        """Drops a table."""
        RAN.append(f"shop-drop:{table}")
        return "dropped"


def test_a_registered_bound_method_or_wrapped_function_resolves_to_its_tool() -> None:
    """Equality, not identity: each ``shop.drop`` is a new bound method; a decorator applied after ``@tool``
    wraps the registered function. Made tools anew, both lost their permissions and name (as a function did)."""
    import functools

    shop = Shop()
    guarded = make_tool(shop.drop, name="shop.drop", permissions=("auth.delete_user",))

    @functools.wraps(drop_table)
    def logged(*args: Any, **kwargs: Any) -> Any:
        return drop_table(*args, **kwargs)

    tables = make_tool(drop_table, name="tables.drop", permissions=("auth.delete_user",))
    with registry.registered_temporarily(guarded, tables):
        resolved = registry.resolve_tools([shop.drop, logged])
        assert [(t.name, t.permissions) for t in resolved] == [("shop.drop", ("auth.delete_user",)), ("tables.drop", ("auth.delete_user",))]
        with registry.registered_temporarily(make_tool(drop_table, name="tables.drop2")):
            with pytest.raises(ValueError, match="registered as several tools"):
                registry.resolve_tools([drop_table])


class Count(BaseModel):
    n: int


def unshapeable() -> Count:
    """Returns a value its output schema refuses."""
    return Count.model_construct(n=None)  # type: ignore[arg-type]


async def unshapeable_agent(ctx: ToolContext) -> str:
    return (await ctx.sample("count", tools=["unshapeable"])).text


async def test_a_tool_whose_value_cannot_be_its_result_is_an_error_result_for_the_model() -> None:
    """run_tool_use promises error results, never an exception that fails the whole call: shaping the value
    (its outputSchema, rows read on the loop) raised out of it, and the calling tool failed."""
    results = await tool_results(unshapeable_agent, make_tool(unshapeable), answer=uses(
        {"type": "tool_use", "id": "u1", "name": "unshapeable", "input": {}}))
    assert results[0]["isError"] is True, results


# -- toolChoice "required": the first turn's, not every turn's ------------------------------------

async def agent_required(ctx: ToolContext) -> str:
    return (await ctx.sample("find it", tools=["lookup_rv"], tool_choice={"mode": "required"}, key="s")).text


async def test_a_required_tool_choice_holds_for_the_first_turn_only() -> None:
    """toolChoice "required" (client/sampling: the model MUST use at least one tool before completing)
    was sent again with every tool result: a model that obeys it can never give its final answer, and
    the loop ran to SAMPLING_MAX_TOOL_CALLS, failing the call. Once the model has used a tool the
    requirement is met: the later turns are sent "auto" and its final answer ends the loop."""
    RAN.clear()
    with registry.registered_temporarily(make_tool(agent_required), make_tool(lookup_rv)):
        params = {"name": "agent_required", "arguments": {}}
        first = await rpc("tools/call", params)
        (key,) = first["inputRequests"]
        second = await rpc("tools/call", {**params, "requestState": first["requestState"],
                                          "inputResponses": {key: uses(lookup("0", "u1"))}})
        (key2,) = second["inputRequests"]
        third = await rpc("tools/call", {**params, "requestState": second["requestState"], "inputResponses": {key2: DONE}})
    assert first["inputRequests"][key]["params"]["toolChoice"] == {"mode": "required"}, first
    assert second["inputRequests"][key2]["params"]["toolChoice"] == {"mode": "auto"}, second
    assert RAN == ["lookup:0"], RAN
    assert third.get("isError") is not True and third["content"][0]["text"] == "all found", third


def test_a_later_turn_journaled_required_by_an_earlier_release_still_replays() -> None:
    """A call in flight across the upgrade: its turn 1 was journaled (and sent) with "required". It is
    the same step on replay, not a NonDeterministicHandler, and keeps what it journaled."""
    from asgiref.sync import async_to_sync

    from mcp_tools.engine import Invocation, NeedsInput, run
    from mcp_tools.engine.journal import Journal, Step, derived_step_key, digest

    tool = make_tool(lookup_rv)

    class Runtime:
        def resolve_tools(self, tools: Any) -> list[Any]:
            return [tool]

        def sampling_limits(self) -> tuple[int, int]:
            return 16, 8

    described = {"tools": [{"name": tool.name, "description": tool.description, "inputSchema": tool.input.schema}],
                 "toolChoice": {"mode": "required"}}
    asked = [{"role": "user", "content": {"type": "text", "text": "find it"}}]
    turn0 = {"method": "sampling/createMessage", "params": {"messages": asked, "maxTokens": 1000, **described}}
    answer = uses(lookup("0", "u1"))
    result = {"type": "tool_result", "toolUseId": "u1", "content": [{"type": "text", "text": "found 0"}]}
    turn1 = {"method": "sampling/createMessage", "params": {"messages": [
        *asked, {"role": "assistant", "content": answer["content"]}, {"role": "user", "content": [result]}],
        "maxTokens": 1000, **described}}
    run_key = derived_step_key("s", 0, "tool_use", hashlib.sha256(b"u1").hexdigest()[:32])
    journal = Journal([
        Step(seq=0, kind="sample", key="s", digest=digest(["sample", turn0]), request=turn0, response=answer, status="done"),
        Step(seq=1, kind="once", key=run_key, digest=digest(["once", run_key]), response=result, status="done"),
        Step(seq=2, kind="sample", key="s.1", digest=digest(["sample", turn1]), request=turn1),
    ])
    inv = Invocation(fn=agent_required, is_async=True, kwargs={}, context_param="ctx", principal=None,
                     protocol_version="2026-07-28", client_capabilities=CAPS,
                     runtime=Runtime(), journal=journal)  # type: ignore[arg-type]
    outcome = async_to_sync(run)(inv)
    assert isinstance(outcome, NeedsInput), outcome
    assert [step.request for step in outcome.pending] == [turn1]
