"""A token names its caller by a keyed digest of the principal's id, never by the id itself.

Tokens are signed, not encrypted: the client, its logs and its proxies read them. They held the
principal's id in clear, which for an anonymous 2025-11-25 caller is ``anonymous:session:<id>``:
the session id, that caller's only credential (seed 002, "Opacity: Tokens should not expose any
internal or sensitive information"), and for a user the database's key.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.core import signing
from django.test import override_settings

from mcp_tools.models import ToolCall
from mcp_tools.server import tokens
from tests.asgi_client import HANDSHAKE, handshake_message, post_headers, post_json
from tests.test_mrtr_security import APP, TARGET, call, create_user_token, result_of, start
from tests.test_resources_review import legacy

pytestmark = pytest.mark.django_db(transaction=True)


def readable_payload(token: str) -> str:
    """What anyone holding ``token`` reads in it (its signed, uncompressed JSON part)."""
    head = token.split(":")[0]
    assert not head.startswith("."), "tokens are not compressed"
    return signing.b64_decode(head.encode()).decode()


async def open_eliciting_session() -> str:
    """An anonymous 2025-11-25 session whose client can answer elicitations: its id is its secret."""
    message = handshake_message("initialize", {"protocolVersion": HANDSHAKE, "capabilities": {"elicitation": {"form": {}}},
                                               "clientInfo": {"name": "t", "version": "1"}})
    response = await post_json(APP, message, post_headers(version=None))
    assert response.status == 200, response.body
    return response.header("mcp-session-id")


async def test_a_2025_anonymous_sessions_saga_token_does_not_hold_its_session_id() -> None:
    session = await open_eliciting_session()
    answer = await legacy(session, "tools/callSaga", {"name": "deploy", "arguments": {"service": "x"}})
    token = answer["result"]["sagaToken"]
    payload = readable_payload(token)
    assert session not in payload and "anonymous" not in payload, payload


async def test_a_users_request_state_does_not_hold_the_users_id_and_still_binds_to_the_user() -> None:
    alice = await sync_to_async(create_user_token)("alice")
    state = await start(token=alice)
    row = await sync_to_async(ToolCall.objects.get)()
    payload = json.loads(readable_payload(state))
    assert row.principal not in json.dumps(payload) and payload["p"] == tokens.principal_tag(row.principal), payload
    assert result_of(await call(state=state, responses={"target": TARGET}, token=alice))["resultType"] == "input_required"


async def test_a_token_sealed_before_tags_with_the_principal_id_itself_still_opens() -> None:
    """A call in flight across the upgrade: its requestState holds the id, as the release before sealed it."""
    alice = await sync_to_async(create_user_token)("alice")
    state = await start(token=alice)
    row = await sync_to_async(ToolCall.objects.get)()
    old_form = tokens.seal("request", {**tokens.unseal("request", state), "p": row.principal})
    assert result_of(await call(state=old_form, responses={"target": TARGET}, token=alice))["resultType"] == "input_required"


def test_a_tag_made_under_a_rotated_key_names_its_principal_and_no_other() -> None:
    with override_settings(SECRET_KEY="old-key-" + "x" * 50, SECRET_KEY_FALLBACKS=[]):
        tag = tokens.principal_tag("user:7")
    with override_settings(SECRET_KEY="new-key-" + "y" * 50, SECRET_KEY_FALLBACKS=["old-key-" + "x" * 50]):
        assert tokens.principal_tag("user:7") != tag
        assert tokens.names_principal(tag, "user:7")
        assert not tokens.names_principal(tag, "user:8")
    with override_settings(SECRET_KEY="new-key-" + "y" * 50, SECRET_KEY_FALLBACKS=[]):
        assert not tokens.names_principal(tag, "user:7")  # the old key is gone: so is what it made
    assert not tokens.names_principal(None, "user:7") and not tokens.names_principal(["user:7"], "user:7")
