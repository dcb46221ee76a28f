"""A principal id fits its columns (``ToolCall.principal``, ``McpSession.principal``: 128 characters).

An OAuth token for no user is the principal ``oauth-client:<client_id>``, and a 2025-11-25 client
id may be the URL of its metadata document, well past 115 characters. PostgreSQL refused the
session row of such a client's ``initialize`` (a 500) and cut its calls' principal, so its own
task was "Unknown task" to it; SQLite kept the ids whole. A longer id is now fitted where every
principal is made (``Principal``): its beginning, ``~`` and a digest of the whole.
"""
from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import override_settings
from django.urls import reverse

from mcp_tools import ToolContext
from mcp_tools.models import McpSession, ToolCall
from mcp_tools.registry import make_tool, registry
from mcp_tools.server.oauth import TokenInfo, TokenVerifier
from mcp_tools.transports.http import McpEndpoint
from tests.asgi_client import call_modern, handshake_message, post_headers, post_json

pytestmark = pytest.mark.django_db(transaction=True)

APP = McpEndpoint()
LIMIT = 128
CLIENT_ID = "https://agents.example.com/.well-known/oauth-client-metadata/" + "tenant-0123456789abcdef/" * 4 + "client.json"
OTHER_CLIENT_ID = CLIENT_ID.replace("client.json", "other.json")
RAW = "oauth-client:" + CLIENT_ID
TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
CONFIRM = {"type": "object", "properties": {"ok": {"type": "boolean"}}}


class UrlClientIds(TokenVerifier):
    """Each bearer token is a client of its own, with a URL client id."""

    def verify(self, token: str) -> TokenInfo | None:
        client_id = {"a": CLIENT_ID, "b": OTHER_CLIENT_ID}.get(token)
        if client_id is None:
            return None
        return TokenInfo(user=None, scopes=frozenset({"mcp"}), client_id=client_id, audience=("http://testserver/mcp",))


def oauth_on() -> dict[str, Any]:
    conf = dict(settings.MCP_TOOLS)
    conf.update(ALLOW_ANONYMOUS=False, OAUTH={"AUTHORIZATION_SERVERS": ["https://as.example"], "TOKEN_VERIFIER": UrlClientIds,
                                              "SCOPES_SUPPORTED": ["mcp"]})
    return conf


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


async def principals(model: Any) -> list[str]:
    return await sync_to_async(lambda: sorted(model.objects.values_list("principal", flat=True)))()


def test_the_limit_is_the_columns() -> None:
    from mcp_tools.server.auth import PRINCIPAL_MAX_LENGTH

    assert ToolCall._meta.get_field("principal").max_length == McpSession._meta.get_field("principal").max_length \
        == PRINCIPAL_MAX_LENGTH == LIMIT


def test_a_long_principal_id_is_fitted_and_stays_distinct() -> None:
    from mcp_tools.server.auth import Principal, fit_principal_id

    assert len(RAW) > LIMIT
    one, other = Principal(user=None, id=RAW), Principal(user=None, id="oauth-client:" + OTHER_CLIENT_ID)
    assert len(one.id) == len(other.id) == LIMIT and one.id != other.id
    assert one.id.startswith("oauth-client:https://agents.example.com/")
    assert one.id == fit_principal_id(RAW)
    assert Principal(user=None, id=one.id, stored=True).id == one.id  # a row's id rebuilds itself
    assert Principal(user=None, id="user:7").id == "user:7"


def test_two_raw_ids_never_share_a_principal() -> None:
    """A raw id of exactly 128 characters shaped like a fitted one was kept as it was: the id of
    the longer one it copies. A client picks its client id (a URL under CIMD), so it could take
    another client's calls, tasks and sessions."""
    from mcp_tools.server.auth import Principal, fit_principal_id

    victim = "oauth-client:https://apps.example.com/clients/" + "v" * 100 + "/metadata.json"
    other = "oauth-client:" + fit_principal_id(victim)[len("oauth-client:"):]
    assert other != victim and len(other) == LIMIT
    assert Principal(user=None, id=other).id != Principal(user=None, id=victim).id
    assert len(Principal(user=None, id=other).id) == LIMIT
    # Ids of that length not of that shape, and every shorter one, are kept as they are.
    assert fit_principal_id("u" * LIMIT) == "u" * LIMIT
    assert fit_principal_id(other[:-1]) == other[:-1]


async def whoami(ctx: ToolContext) -> str:
    """Says who runs it."""
    return ctx.principal.id


async def test_a_background_call_of_a_long_principal_id_runs_as_its_caller() -> None:
    """The worker rebuilds the caller from the call row: its id is fitted already, and fitting it
    again (fitting is not idempotent) would make the worker run the call as someone else."""
    from mcp_tools.server import background
    from mcp_tools.server.auth import fit_principal_id

    sent: list[str] = []
    original = background.send
    background.send = lambda call_id, tool, task_id: sent.append(call_id)  # type: ignore[assignment]
    try:
        with override_settings(MCP_TOOLS=oauth_on()), \
                registry.registered_temporarily(make_tool(whoami, name="zz_long_principal_whoami", background=True)):
            created = (await call_modern(APP, "tools/call", {"name": "zz_long_principal_whoami", "arguments": {}},
                                         capabilities=TASKS, headers=bearer("a"))).json()
            task_id = created["result"]["taskId"]
            [call_id] = sent
            assert await background.run_in_worker(call_id, "w-long") == "finished"
            got = (await call_modern(APP, "tasks/get", {"taskId": task_id}, capabilities=TASKS,
                                     headers={**bearer("a"), "mcp-name": task_id})).json()
    finally:
        background.send = original  # type: ignore[assignment]
    assert got["result"]["status"] == "completed", got
    assert got["result"]["result"]["content"][0]["text"] == fit_principal_id(RAW), got
    assert await principals(ToolCall) == [fit_principal_id(RAW)]


async def test_a_2025_session_of_a_long_oauth_client_id() -> None:
    """The initialize that was a 500 on PostgreSQL; the session then serves its own client only."""
    with override_settings(MCP_TOOLS=oauth_on()):
        opened = await post_json(APP, handshake_message("initialize", {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}),
            headers=post_headers(version=None, extra=bearer("a")))
        assert opened.status == 200, (opened.status, opened.body[:300])
        session = opened.header("mcp-session-id")
        listed = await post_json(APP, handshake_message("tools/list", {}),
                                 headers=post_headers(version="2025-11-25", session=session, extra=bearer("a")))
        stolen = await post_json(APP, handshake_message("tools/list", {}),
                                 headers=post_headers(version="2025-11-25", session=session, extra=bearer("b")))
    assert listed.status == 200 and "tools" in listed.json()["result"], listed.body[:300]
    assert stolen.status != 200, stolen.body[:300]
    [principal] = await principals(McpSession)
    assert len(principal) <= LIMIT and principal.startswith("oauth-client:https://agents.example.com/"), principal


async def test_a_2026_task_of_a_long_oauth_client_id_is_its_own() -> None:
    """The task row's principal was cut on PostgreSQL: the client's own task was "Unknown task"."""
    from mcp_tools.server import background

    sent: list[str] = []
    original = background.send
    background.send = lambda call_id, tool, task_id: sent.append(call_id)  # type: ignore[assignment]
    try:
        with override_settings(MCP_TOOLS=oauth_on()):
            created = (await call_modern(APP, "tools/call", {"name": "slow_compute", "arguments": {"seconds": 30}},
                                         capabilities=TASKS, headers=bearer("a"))).json()
            task_id = created["result"]["taskId"]
            got = (await call_modern(APP, "tasks/get", {"taskId": task_id}, capabilities=TASKS,
                                     headers={**bearer("a"), "mcp-name": task_id})).json()
            other = (await call_modern(APP, "tasks/get", {"taskId": task_id}, capabilities=TASKS,
                                       headers={**bearer("b"), "mcp-name": task_id})).json()
    finally:
        background.send = original  # type: ignore[assignment]
    assert "error" not in got, got
    assert got["result"]["status"] == "working", got
    assert "error" in other, other  # another client id alike in its first 150 characters is another principal
    [principal] = await principals(ToolCall)
    assert len(principal) <= LIMIT, principal


async def ask(ctx: ToolContext) -> str:
    await ctx.elicit("Go?", CONFIRM, key="confirm")
    return "done"


async def test_a_2026_round_of_a_long_oauth_client_id_goes_on() -> None:
    """The requestState is bound to the principal, compared with the call row's on the next round."""
    with override_settings(MCP_TOOLS=oauth_on()), registry.registered_temporarily(make_tool(ask, name="zz_long_principal_ask")):
        params = {"name": "zz_long_principal_ask", "arguments": {}}
        first = (await call_modern(APP, "tools/call", params, headers=bearer("a"))).json()
        state = first["result"]["requestState"]
        answers = {"requestState": state, "inputResponses": {"confirm": {"action": "accept", "content": {"ok": True}}}}
        second = (await call_modern(APP, "tools/call", {**params, **answers}, headers=bearer("a"))).json()
    assert second["result"]["content"][0]["text"] == "done", second
    [principal] = await principals(ToolCall)
    assert len(principal) <= LIMIT, principal


@pytest.fixture
def staff_client(client):  # type: ignore[no-untyped-def]
    user = get_user_model().objects.create_superuser("boss", "boss@example.com", "pw")
    client.force_login(user)
    return client


def test_the_admin_finds_the_rows_of_a_long_principal_id_as_it_was_made(staff_client) -> None:  # type: ignore[no-untyped-def]
    from mcp_tools.server.auth import fit_principal_id

    call = ToolCall.objects.create(tool_name="zz_found", principal=fit_principal_id(RAW), flavor="mrtr", params_digest="0" * 64,
                            status="input_required")
    McpSession.objects.create(id="s" * 32, protocol_version="2025-11-25", principal=fit_principal_id(RAW))
    calls = staff_client.get(reverse("admin:mcp_tools_toolcall_changelist"), {"q": RAW})
    sessions = staff_client.get(reverse("admin:mcp_tools_mcpsession_changelist"), {"q": RAW})
    other = staff_client.get(reverse("admin:mcp_tools_toolcall_changelist"), {"q": "oauth-client:" + OTHER_CLIENT_ID})
    assert calls.status_code == sessions.status_code == other.status_code == 200
    link = reverse("admin:mcp_tools_toolcall_change", args=[call.pk]).encode()
    assert link in calls.content
    assert "ssssssss…".encode() in sessions.content  # the session, shown by its first 8 characters
    assert link not in other.content


def test_the_admin_finds_a_raw_id_of_the_fitted_shape_and_its_stored_form(staff_client) -> None:  # type: ignore[no-untyped-def]
    """A raw id of exactly 128 characters shaped like a fitted one is stored fitted (it would
    otherwise be another id's): the operator finds its rows by the raw id, and by the stored one."""
    from mcp_tools.server.auth import fit_principal_id

    raw = "oauth-client:" + "c" * 74 + "~" + "0123456789abcdef0123456789abcdef01234567"
    assert len(raw) == LIMIT and fit_principal_id(raw) != raw
    call = ToolCall.objects.create(tool_name="zz_shape", principal=fit_principal_id(raw), flavor="mrtr", params_digest="0" * 64,
                                   status="input_required")
    link = reverse("admin:mcp_tools_toolcall_change", args=[call.pk]).encode()
    for term in (raw, fit_principal_id(raw)):
        assert link in staff_client.get(reverse("admin:mcp_tools_toolcall_changelist"), {"q": term}).content, term


@pytest.mark.parametrize("form", ["raw", "fitted"])
def test_the_admins_principal_filter_in_the_url_takes_a_long_id_as_it_was_made(staff_client, form: str) -> None:  # type: ignore[no-untyped-def]
    """?principal=<id> matched the stored, fitted form only, while the search finds both: a link or a
    bookmark made with the id as the caller's credentials gave it listed nothing."""
    from mcp_tools.server.auth import fit_principal_id

    call = ToolCall.objects.create(tool_name="zz_filtered", principal=fit_principal_id(RAW), flavor="mrtr", params_digest="0" * 64,
                                   status="input_required")
    McpSession.objects.create(id="s" * 32, protocol_version="2025-11-25", principal=fit_principal_id(RAW))
    value = RAW if form == "raw" else fit_principal_id(RAW)
    link = reverse("admin:mcp_tools_toolcall_change", args=[call.pk]).encode()
    for key in ("principal", "principal__exact"):
        calls = staff_client.get(reverse("admin:mcp_tools_toolcall_changelist"), {key: value})
        sessions = staff_client.get(reverse("admin:mcp_tools_mcpsession_changelist"), {key: value})
        assert calls.status_code == sessions.status_code == 200, key
        assert link in calls.content, key
        assert "ssssssss…".encode() in sessions.content  # the session, shown by its first 8 characters, key
    other = staff_client.get(reverse("admin:mcp_tools_toolcall_changelist"), {"principal": "oauth-client:" + OTHER_CLIENT_ID})
    assert link not in other.content
