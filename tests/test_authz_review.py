"""Authorization boundaries between principals across the handles a client holds: user-less OAuth
tokens, answers to a session call's requests, and what the admin console shows of a session."""
from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.test import Client, override_settings
from django.urls import reverse

from mcp_tools import ToolContext
from mcp_tools.models import ToolCall
from mcp_tools.registry import make_tool, registry
from mcp_tools.server import background
from mcp_tools.server.oauth import TokenInfo, TokenVerifier
from mcp_tools.transports.http import McpEndpoint
from tests.asgi_client import HANDSHAKE, call_modern, handshake_message, post_headers, post_json
from tests.clients import create_user_with_token
from tests.test_admin_console import make_call, viewer  # noqa: F401
from tests.test_background_review import queued  # noqa: F401
from tests.test_http_spec_edges import Stream, _in_memory_layer  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)
APP = McpEndpoint()
CONFIRM = {"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]}
RAN: list[str] = []


class DictVerifier(TokenVerifier):
    """A verifier of fixed tokens (what an introspection endpoint would answer)."""

    TOKENS: dict[str, TokenInfo] = {}

    def verify(self, token: str) -> TokenInfo | None:
        return self.TOKENS.get(token)


def oauth_settings() -> dict[str, Any]:
    conf = dict(settings.MCP_TOOLS)
    conf["OAUTH"] = {"AUTHORIZATION_SERVERS": ["https://as.example"], "TOKEN_VERIFIER": DictVerifier,
                     "SCOPES_SUPPORTED": ["mcp", "inventory:write"], "REQUIRE_AUDIENCE": False}
    return conf


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


async def ask_then_record(ctx: ToolContext) -> str:
    answer = await ctx.elicit("Proceed?", schema=CONFIRM, key="confirm")
    RAN.append("side effect")
    return f"done {answer.get('confirm')}"


async def open_session(headers: dict[str, str], capabilities: dict[str, Any]) -> str:
    r = await post_json(APP, handshake_message("initialize", {"protocolVersion": HANDSHAKE, "capabilities": capabilities,
                                                              "clientInfo": {"name": "t", "version": "1"}}),
                        post_headers(version=None, extra=headers))
    assert r.status == 200, r.body
    return r.header("mcp-session-id")


async def pending_request_id(call_id: str) -> str:
    from mcp_tools import store

    loaded = await store.load_call(call_id)
    assert loaded is not None
    [step] = loaded[1].pending
    return f"mcp_tools:{call_id}:{step.seq}"


# -- 1. user-less OAuth tokens without a client_id all share the principal "oauth-client:unknown" ----


async def test_two_userless_oauth_clients_without_client_id_cannot_use_each_others_request_state() -> None:
    """docs/oauth.md: "A token for no user is ``oauth-client:<client_id>``" and "Tokens (requestState,
    saga and resume tokens) and calls are bound to the principal id". A verifier may return no
    client_id (RFC 7662 makes it OPTIONAL in an introspection answer, and the docs' own
    IntrospectionVerifier passes ``data.get("client_id")``): every such token then becomes the one
    principal ``oauth-client:unknown``, so client B can answer (and so finish) client A's call with
    A's requestState, read A's tasks and reuse A's session. Expected: B's retry is refused
    ("Invalid or expired requestState"); actual: it completes A's call."""
    RAN.clear()
    DictVerifier.TOKENS = {
        "token-of-client-a": TokenInfo(user=None, scopes=frozenset({"mcp"})),
        "token-of-client-b": TokenInfo(user=None, scopes=frozenset({"mcp"})),
    }
    with override_settings(MCP_TOOLS=oauth_settings()), \
            registry.registered_temporarily(make_tool(ask_then_record, name="zz_authz_ask")):
        first = await call_modern(APP, "tools/call", {"name": "zz_authz_ask", "arguments": {}}, headers=bearer("token-of-client-a"))
        assert first.status == 200, first.body
        state = first.json()["result"]["requestState"]
        retry = await call_modern(APP, "tools/call", {"name": "zz_authz_ask", "arguments": {}, "requestState": state,
                                                       "inputResponses": {"confirm": {"action": "accept", "content": {"confirm": True}}}},
                                  headers=bearer("token-of-client-b"))
    body = retry.json()
    assert "error" in body and "requestState" in body["error"]["message"], (body, RAN)


# -- 2. a token without a tool's scope answers the input request of that tool's task (2025-11-25) ------


async def test_a_token_without_the_tools_scope_cannot_answer_its_tasks_input_request(queued: list[str]) -> None:  # noqa: F811
    """docs/oauth.md "Scopes that restrict tools" and docs/protocol.md: a task is hidden from a caller
    who may not call its tool now ("an OAuth token without the tool's scope"): tasks/get, tasks/result,
    tasks/cancel answer "Unknown task" to such a token and the 2026 tasks/update refuses it. The
    2025-11-25 response path does not: a token of the same user without ``inventory:write`` POSTs the
    answer to the task's elicitation (its id is ``mcp_tools:<taskId>:<seq>``, derivable from the
    task id), it is accepted (202), the task goes back to a worker, and the worker runs the scoped
    tool on with the *creating* token's scopes (the row's). Expected: refused like any response
    the caller cannot give (400), the task left waiting; actual: 202 and the scoped tool runs on."""
    from django.contrib.auth.models import User

    RAN.clear()
    user = await sync_to_async(User.objects.create_user)(username="scoped-owner", password="x")
    DictVerifier.TOKENS = {
        "wide": TokenInfo(user=user, scopes=frozenset({"mcp", "inventory:write"})),
        "narrow": TokenInfo(user=user, scopes=frozenset({"mcp"})),
    }
    caps = {"elicitation": {"form": {}}, "tasks": {}}
    tool = make_tool(ask_then_record, name="zz_authz_scoped", background=True, scopes=["inventory:write"])
    with override_settings(MCP_TOOLS=oauth_settings()), registry.registered_temporarily(tool):
        wide_session = await open_session(bearer("wide"), caps)
        created = await post_json(APP, handshake_message("tools/call", {"name": "zz_authz_scoped", "arguments": {}, "task": {}}),
                                  post_headers(version=HANDSHAKE, session=wide_session, extra=bearer("wide")))
        task_id = created.json()["result"]["task"]["taskId"]
        assert await background.run_in_worker(task_id, "w") == "input-required"
        narrow_session = await open_session(bearer("narrow"), caps)
        narrow = post_headers(version=HANDSHAKE, session=narrow_session, extra=bearer("narrow"))
        # Control: the narrow token cannot see the task.
        got = await post_json(APP, handshake_message("tasks/get", {"taskId": task_id}), narrow)
        assert got.json()["error"]["message"] == "Unknown task"
        answer = {"jsonrpc": "2.0", "id": await pending_request_id(task_id),
                  "result": {"action": "accept", "content": {"confirm": True}}}
        r = await post_json(APP, answer, narrow)
        requeued = queued.count(task_id)
        if requeued == 2:
            await background.run_in_worker(task_id, "w")
        row = await ToolCall.objects.aget(pk=task_id)
    assert (r.status, requeued, RAN) == (400, 1, []), (r.status, r.body, requeued, RAN, row.status)


# -- 3. a 2025-11-25 session call goes on after its caller lost the tool's permission --------------


async def test_a_session_call_does_not_go_on_for_a_caller_who_lost_the_tools_permission() -> None:
    """Every other way a call goes on re-checks the tool's permission for the request that carries it:
    a 2026 retry with requestState and a tools/resumeSaga resolve the tool for the caller again
    ("Unknown tool"), tasks/update and the 2025 tasks/* answer "Unknown task" (docs/protocol.md: "a
    permission taken away"), and a worker refuses to run a background call whose caller lost the
    permission ("The call cannot run"). A 2025-11-25 call waiting on its stream for an elicitation
    answer does not: once the user's permission is removed, the user's answer is accepted (202) and
    the handler runs on to its side effect with the permissions it had when the call started.
    Expected: the answer is refused (or the call ends) and the tool's effect does not run."""
    from django.contrib.auth.models import User

    RAN.clear()
    token = await sync_to_async(create_user_with_token)("revoked-user", ("auth.view_user",))
    tool = make_tool(ask_then_record, name="zz_authz_gated", permissions=["auth.view_user"])
    with registry.registered_temporarily(tool):
        session = await open_session({"authorization": f"Token {token}"}, {"elicitation": {"form": {}}})
        headers = post_headers(version=HANDSHAKE, session=session, token=token)
        stream = Stream("POST", headers, json.dumps(handshake_message("tools/call", {"name": "zz_authz_gated", "arguments": {}})).encode())
        _, ask = await stream.wait_for(lambda m: m.get("method") == "elicitation/create")

        def revoke() -> None:
            User.objects.get(username="revoked-user").user_permissions.clear()

        await sync_to_async(revoke)()
        # Control: the user may not start the tool any more.
        fresh = await post_json(APP, handshake_message("tools/call", {"name": "zz_authz_gated", "arguments": {}}), headers)
        assert fresh.json()["error"]["message"] == "Unknown tool: zz_authz_gated"
        r = await post_json(APP, {"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"confirm": True}}}, headers)
        if r.status == 202:  # accepted: the call goes on (or ends) and the stream answers
            await asyncio.wait_for(stream.task, 10)
        stream.gone.set()
        await asyncio.wait_for(stream.task, 10)
    assert RAN == [], (r.status, RAN, stream.events()[-1])


# -- 4. the admin console shows anonymous callers' session ids (their only credential) to view-only staff --


async def test_view_only_staff_do_not_get_an_anonymous_callers_session_secret() -> None:
    """docs/oauth.md "Anonymous callers": a 2025-11-25 anonymous caller is
    ``anonymous:session:<session id>``, "the session id is the caller's secret" (it is the whole
    credential: whoever sends it is that caller). docs/admin.md / test_admin_console: staff with only
    ``view_toolcall`` "can look but not act". The call report prints the session id in clear
    (``Session: <code>id</code>``, and the principal ``anonymous:session:<id>`` in the changelist,
    which also searches by it), so a view-only operator can copy it and then act as the caller
    on the MCP endpoint: answer its elicitations, read its tasks' results, cancel its requests,
    DELETE its session. Demonstrated below: the id scraped from the page answers the caller's
    pending elicitation (202). Expected: the console never shows a session id that is an anonymous
    caller's credential (show a digest or a prefix); actual: it does."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission
    from django.test import Client
    from django.urls import reverse

    RAN.clear()
    with registry.registered_temporarily(make_tool(ask_then_record, name="zz_authz_anon_ask")):
        session = await open_session({}, {"elicitation": {"form": {}}})
        headers = post_headers(version=HANDSHAKE, session=session)
        stream = Stream("POST", headers, json.dumps(handshake_message("tools/call", {"name": "zz_authz_anon_ask", "arguments": {}})).encode())
        _, ask = await stream.wait_for(lambda m: m.get("method") == "elicitation/create")
        call = await ToolCall.objects.aget(session_id=session)

        def viewer_pages() -> str:
            user = get_user_model().objects.create_user("viewer-authz", "v@example.com", "pw", is_staff=True)
            user.user_permissions.add(Permission.objects.get(content_type__app_label="mcp_tools", codename="view_toolcall"))
            client = Client()
            client.force_login(user)
            detail = client.get(reverse("admin:mcp_tools_toolcall_change", args=[call.pk]))
            listing = client.get(reverse("admin:mcp_tools_toolcall_changelist"))
            assert (detail.status_code, listing.status_code) == (200, 200)
            return detail.content.decode() + listing.content.decode()

        html = await sync_to_async(viewer_pages)()
        leaked = session in html
        if leaked:  # what the operator can do with it: answer the anonymous caller's question
            outsider = post_headers(version=HANDSHAKE, session=session)
            r = await post_json(APP, {"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"confirm": True}}}, outsider)
            assert r.status == 202
            await asyncio.wait_for(stream.task, 10)
        stream.gone.set()
        await asyncio.wait_for(stream.task, 10)
    assert not leaked, ("session id shown to a view-only operator", RAN)


SECRET = "s3cr3tSessionIdAbCdEf0123456789xyz"


@pytest.mark.django_db
@pytest.mark.parametrize("lookup", ["session_id__startswith", "principal__startswith", "session_id__contains"])
def test_view_only_staff_cannot_probe_a_session_id_by_prefix_in_the_url(viewer: Client, lookup: str) -> None:  # noqa: F811
    """docs/admin.md Permissions: the principal and session id match whole values only, in the search and in
    the URL's filters: ?session_id__startswith= would list the call for the right prefix only, giving the id
    away a character at a time."""
    make_call("deploy", "input_required", principal=f"anonymous:session:{SECRET}", session_id=SECRET)
    url = reverse("admin:mcp_tools_toolcall_changelist")
    prefix = SECRET[:12] if lookup.startswith("session") else f"anonymous:session:{SECRET[:12]}"
    if lookup.endswith("contains"):
        prefix = SECRET[3:12]
    right = viewer.get(url, {lookup: prefix})
    wrong = viewer.get(url, {lookup: prefix[:-1] + "#"})
    counts = [len(r.context["cl"].result_list) if r.status_code == 200 else None for r in (right, wrong)]
    assert counts != [1, 0], f"prefix oracle on {lookup}: right prefix shows {counts[0]} row(s), wrong shows {counts[1]}"
