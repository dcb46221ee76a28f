"""``mcp_tools.testing.McpTestClient``: the in-process client shipped for projects' own tests."""

from __future__ import annotations

import unittest
from typing import Any

import pytest
from django.test import TestCase

from mcp_tools.testing import McpTestClient, McpTestError, McpTestSetupError
from tests.clients import audit_rows, create_user_with_token

pytestmark = pytest.mark.django_db(transaction=True)


def answers(key: str, request: dict[str, Any]) -> Any:
    if request["method"] == "elicitation/create":
        return {"action": "accept", "content": {"env": "staging", "confirm": True}}
    return {"role": "assistant", "content": {"type": "text", "text": "safe"}, "model": "test"}


async def test_test_client_runs_a_durable_tool_to_completion() -> None:
    client = McpTestClient(answer=answers)
    result = await client.call_tool("deploy", {"service": "helper"})
    assert {k: result["structuredContent"][k] for k in ("service", "env", "verdict")} == {"service": "helper", "env": "staging", "verdict": "safe"}
    assert len(await audit_rows("helper")) == 1


async def test_test_client_reports_protocol_errors() -> None:
    with pytest.raises(McpTestError) as caught:
        await McpTestClient().call_tool("no_such_tool")
    assert caught.value.code == -32602


async def test_test_client_without_answers_says_what_was_asked() -> None:
    with pytest.raises(AssertionError, match="target"):
        await McpTestClient().call_tool("deploy", {"service": "unanswered"})


async def test_test_client_collects_a_streamed_result() -> None:
    # With a progress token the answer is an SSE stream: notifications, then the result.
    result = await McpTestClient().request("tools/call", {"name": "slow_count", "arguments": {"n": 2}, "_meta": {"progressToken": "t"}})
    assert result["content"] == [{"type": "text", "text": "counted to 2"}]


def tool_names(tools: dict[str, Any]) -> set[str]:
    return {tool["name"] for tool in tools["tools"]}


async def test_test_client_sends_extra_headers_on_every_request() -> None:
    from asgiref.sync import sync_to_async

    # 'clerk' may restock (a model permission): the tool is listed only to a request made as them.
    key = await sync_to_async(create_user_with_token)("clerk", ("inventory.change_product",))
    assert "restock" not in tool_names(await McpTestClient().request("tools/list"))
    as_clerk = McpTestClient(headers={"Authorization": f"Token {key}"})
    assert "restock" in tool_names(await as_clerk.request("tools/list"))
    # headers= comes after token=: its Authorization is the one sent.
    with pytest.raises(McpTestError) as caught:
        await McpTestClient(token=key, headers={"authorization": "Token not-a-token"}).request("tools/list")
    assert caught.value.status == 401



async def test_test_client_reaches_the_endpoint_at_the_configured_path(settings: Any) -> None:
    """The client's requests are for ``MCP_TOOLS["PATH"]``, as a real client's: a bearer token whose
    audience names the endpoint (``<origin>/api/mcp/``, no ``OAUTH["RESOURCE"]`` set) is served by
    the real endpoint there, and was refused (401) to the test client, whose requests were for
    ``/mcp`` whatever the setting (docs review)."""
    from asgiref.sync import sync_to_async
    from django.contrib.auth import get_user_model

    from mcp_tools.server.oauth import TokenInfo
    from tests.test_authz_review import DictVerifier

    user = await sync_to_async(get_user_model()._default_manager.create_user)("audience-user", "audience-user@example.com")
    DictVerifier.TOKENS["audience-token"] = TokenInfo(user=user, scopes=frozenset({"mcp"}), audience=("http://testserver/api/mcp/",))
    settings.MCP_TOOLS = {**settings.MCP_TOOLS, "PATH": "/api/mcp/", "OAUTH": {
        "AUTHORIZATION_SERVERS": ["https://as.example"], "TOKEN_VERIFIER": DictVerifier, "SCOPES_SUPPORTED": ["mcp"]}}
    try:
        assert "echo" in tool_names(await McpTestClient(headers={"Authorization": "Bearer audience-token"}).request("tools/list"))
    finally:
        DictVerifier.TOKENS.pop("audience-token", None)



async def test_test_client_sends_the_task_id_as_mcp_name() -> None:
    """The tasks extension's requests route by task id (``Mcp-Name``, as docs/protocol.md says), which the
    endpoint requires: ``request("tasks/get", ...)`` was refused with -32020 for the header the test client
    did not send, instead of being answered (here "Unknown task", for a task that does not exist)."""
    client = McpTestClient(capabilities={"extensions": {"io.modelcontextprotocol/tasks": {}}})
    for method, params in [("tasks/get", {}), ("tasks/update", {"inputResponses": {}}), ("tasks/cancel", {})]:
        with pytest.raises(McpTestError) as caught:
            await client.request(method, {"taskId": "00000000-0000-0000-0000-000000000000", **params})
        assert (caught.value.code, caught.value.error["message"]) == (-32602, "Unknown task"), method



@pytest.fixture
def short_sqlite_lock_wait() -> Any:
    """The endpoint's SQLite connections wait 1 s, not the demo's 20 s, for the test transaction's lock
    (what the tests below provoke on purpose): their own connections are closed so the next ones open with it."""
    from asgiref.sync import async_to_sync
    from django.db import connections

    from mcp_tools import store
    from mcp_tools.server import threads

    def reconnect() -> None:
        threads.close_idle_threads()
        async_to_sync(store.close_connections)()

    if connections["default"].vendor != "sqlite":  # nothing waits on a lock there
        yield
        return
    options = connections.settings["default"].setdefault("OPTIONS", {})  # shared by every thread's connection
    kept = options.get("timeout")
    options["timeout"] = 1
    reconnect()
    yield
    if kept is None:
        options.pop("timeout", None)
    else:
        options["timeout"] = kept
    reconnect()


SETUP_ERROR = (
    "mcp_tools.testing.McpTestSetupError: McpTestClient cannot run inside a TestCase's transaction: the MCP endpoint "
    "reaches the database from its own thread and connection, which do not see the rows the test wrote (on SQLite it "
    "waits on the test's lock). Use django.test.TransactionTestCase instead of TestCase, or "
    "@pytest.mark.django_db(transaction=True) with pytest-django."
)


def test_test_client_in_a_django_testcase_names_the_fix(short_sqlite_lock_wait: None) -> None:
    """Inside a ``TestCase`` (``manage.py test``) a call that writes fails, on SQLite, with an error that
    names the fix; it failed with "-32603: Internal error" and "database table is locked" in the log.
    Requests that need no table work in a ``TestCase``, as they did before the check. (On PostgreSQL the
    endpoint's own connection writes beside the test's transaction: the call completes, and its rows
    outlive the test, which is why it is not run there.)"""
    from django.db import connection

    class InATestCase(TestCase):
        async def test_call(self) -> None:
            await McpTestClient(answer=answers).call_tool("deploy", {"service": "helper"})

        async def test_list(self) -> None:
            assert "deploy" in tool_names(await McpTestClient().request("tools/list"))

    sqlite = connection.vendor == "sqlite"
    outcome = unittest.TestResult()
    tests = [InATestCase("test_list")] + ([InATestCase("test_call")] if sqlite else [])
    unittest.TestSuite(tests).run(outcome)  # as the runner does: the class's transaction too
    assert outcome.testsRun == len(tests)
    assert [trace.splitlines()[-1] for _, trace in outcome.errors + outcome.failures] == ([SETUP_ERROR] if sqlite else [])


@pytest.mark.django_db(transaction=False)
async def test_test_client_in_a_non_transactional_django_db_test_names_the_fix(short_sqlite_lock_wait: None) -> None:
    from django.db import connection

    if connection.vendor != "sqlite":
        pytest.skip("on PostgreSQL the endpoint's own connection writes beside the test's transaction (rows that outlive the test)")
    with pytest.raises(McpTestSetupError, match=r"TransactionTestCase .*transaction=True") as caught:
        await McpTestClient(answer=answers).call_tool("deploy", {"service": "helper"})
    assert isinstance(caught.value.__cause__, McpTestError) and caught.value.__cause__.error["code"] == -32603
