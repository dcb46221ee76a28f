"""``tools/resumeSaga`` with an OAuth token that lacks the saga tool's scope: a 403 step-up challenge.

``tools/call`` and ``tools/callSaga`` of a tool whose scope the token lacks answer HTTP 403 with
``WWW-Authenticate: Bearer error="insufficient_scope", scope="..."`` (the spec's "Scope Challenge
Handling"), and so does a 2026 ``requestState`` retry (a ``tools/call``). ``tools/resumeSaga`` names
no tool, only a ``sagaToken``: the transport's scope check passed it, and the resume answered HTTP
200 -32602 "Unknown tool: <name>", which gives the client nothing to step up with. The saga was
started with a token that had the scope (a later token of the same user, narrowed, resumes it).
"""

from __future__ import annotations

import json
import secrets
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from pydantic import BaseModel

import mcp_tools
from mcp_tools.registry import make_tool, registry
from tests.asgi_client import HANDSHAKE, AsgiResponse, handshake_message, modern_message, post_headers, request
from tests.test_oauth_bearer_transport import RESOURCE, challenge, oauth_on, site

pytest.importorskip("oauth2_provider")
pytestmark = [pytest.mark.django_db(transaction=True)]

TOOL = "scoped_saga_tool"


class Go(BaseModel):
    go: bool


async def scoped_saga_tool(ctx: mcp_tools.ToolContext, service: str) -> str:
    """Asks the user before it answers (one saga step)."""
    answer = await ctx.elicit(f"Go with {service}?", schema=Go, key="go")
    return f"{service}: {'went' if answer.go else 'stayed'}"


def tokens_of_one_user() -> tuple[str, str]:
    """Two DOT tokens of one user for this endpoint: with the tool's scope, and without it."""
    from django.contrib.auth.models import User
    from django.utils import timezone
    from oauth2_provider.models import AccessToken, Application

    user = User.objects.create_user(username=f"saga-{secrets.token_hex(4)}", password="x")
    app = Application.objects.create(name="saga", user=user, client_type=Application.CLIENT_CONFIDENTIAL,
                                     authorization_grant_type=Application.GRANT_CLIENT_CREDENTIALS,
                                     client_secret=secrets.token_urlsafe(20))
    made = []
    for scope in ("mcp inventory:write", "mcp"):
        value = secrets.token_urlsafe(30)
        AccessToken.objects.create(user=user, application=app, token=value, expires=timezone.now() + timedelta(seconds=600),
                                   scope=scope, resource=[RESOURCE])
        made.append(value)
    return made[0], made[1]


class Era:
    """One protocol era's requests, as the bearer ``token`` given."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.session: str | None = None

    async def open(self, token: str) -> None:
        if self.name == "2025-11-25":
            message = handshake_message("initialize", {"protocolVersion": HANDSHAKE, "capabilities": {"elicitation": {"form": {}}},
                                                       "clientInfo": {"name": "t", "version": "1"}})
            response = await request(site(), "POST", headers=post_headers(version=None, extra={"authorization": f"Bearer {token}"}),
                                     body=json.dumps(message).encode())
            assert response.status == 200, response.body[:300]
            self.session = response.header("mcp-session-id")

    async def post(self, method: str, params: dict[str, Any], token: str) -> AsgiResponse:
        if self.name == "2025-11-25":
            headers = post_headers(version=HANDSHAKE, session=self.session, extra={"authorization": f"Bearer {token}"})
            message = handshake_message(method, params)
        else:
            extra = {"mcp-method": method, "authorization": f"Bearer {token}"}
            if "name" in params:
                extra["mcp-name"] = params["name"]
            headers, message = post_headers(extra=extra), modern_message(method, params)
        return await request(site(), "POST", headers=headers, body=json.dumps(message).encode())


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_resume_saga_without_the_tools_scope_is_a_403_step_up(era: str) -> None:
    scoped, narrow = await sync_to_async(tokens_of_one_user)()
    client = Era(era)
    with oauth_on(["rest_framework.authentication.TokenAuthentication"]), registry.registered_temporarily(
            make_tool(scoped_saga_tool, scopes=["inventory:write"])):
        await client.open(scoped)
        started = await client.post("tools/callSaga", {"name": TOOL, "arguments": {"service": "api"}}, scoped)
        assert started.status == 200, started.body[:300]
        saga = started.json()["result"]
        assert saga["state"] == "suspended", saga
        # As tools/callSaga answers the narrow token:
        refused_call = await client.post("tools/callSaga", {"name": TOOL, "arguments": {"service": "api"}}, narrow)
        assert refused_call.status == 403, refused_call.body[:300]

        completed = [{"stepId": "go", "result": {"action": "accept", "content": {"go": True}}}]
        resumed = await client.post("tools/resumeSaga", {"sagaToken": saga["sagaToken"], "completedSteps": completed}, narrow)
        assert resumed.status == 403, (resumed.status, resumed.body[:300])
        params = challenge(resumed)
        assert params["error"] == "insufficient_scope" and params["scope"] == "inventory:write mcp", params
        assert challenge(refused_call)["scope"] == params["scope"]
        assert TOOL in resumed.json()["error"]["message"]

        # A sagaToken that does not open is resume's to refuse, as before.
        forged = await client.post("tools/resumeSaga", {"sagaToken": saga["sagaToken"] + "x", "completedSteps": completed}, narrow)
        assert forged.status == 200 and forged.json()["error"]["message"] == "Invalid or expired sagaToken", forged.body[:300]

        # Stepped up (the token with the scope): the same resume completes the saga.
        done = await client.post("tools/resumeSaga", {"sagaToken": saga["sagaToken"], "completedSteps": completed}, scoped)
    assert done.status == 200, done.body[:300]
    assert done.json()["result"]["content"][0]["text"] == "api: went", done.body[:300]
