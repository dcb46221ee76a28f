"""With ``DATABASE_ROUTERS``, the call and session tables are read and written where writes go.

A primary/replica router (reads to a replica, writes to the primary, as in Django's multi-db
docs) sent every durable write to the replica (the store asked ``db_for_read``), and the ORM's
reads of these tables to a copy that may lag the write just made. Here the router's read alias
for mcp_tools's tables does not exist: any query sent there fails, so these tests fail while
any read or write of those tables follows ``db_for_read``.
"""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import override_settings

import mcp_tools
from mcp_tools.models import CallStep, ToolCall
from mcp_tools.registry import make_tool, registry
from mcp_tools.testing import McpTestClient
from tests.asgi_client import handshake_message, post_headers, post_json

pytestmark = pytest.mark.django_db(transaction=True)


class ReadsFromAReplica:
    """Reads of mcp_tools's tables to ``replica`` (not configured here), writes to ``default``."""

    def db_for_read(self, model: Any, **hints: Any) -> str | None:
        return "replica" if model._meta.app_label == "mcp_tools" else None

    def db_for_write(self, model: Any, **hints: Any) -> str | None:
        return "default" if model._meta.app_label == "mcp_tools" else None


ROUTED = override_settings(DATABASE_ROUTERS=[ReadsFromAReplica()])


@pytest.fixture(autouse=True)
def _in_memory_layer(settings: Any) -> None:
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


async def asks(ctx: mcp_tools.ToolContext) -> str:
    """Asks for an environment, then runs a side effect once."""
    answer = await ctx.elicit("env?", {"type": "object", "properties": {"env": {"type": "string"}}}, key="env")
    await ctx.once("effect", lambda: 1)
    return f"deployed to {answer['env']}"


def rows() -> list[tuple[str, int]]:
    return [(row.status, CallStep.objects.using("default").filter(call_id=row.id).count())
            for row in ToolCall.objects.using("default").all()]


async def test_a_durable_call_runs_on_the_primary() -> None:
    from mcp_tools.store import sql

    client = McpTestClient(answer=lambda key, request: {"action": "accept", "content": {"env": "staging"}})
    with ROUTED, registry.registered_temporarily(make_tool(asks)):
        assert sql.call_database() == "default"
        result = await client.call_tool("asks", {})
        assert result["content"][0]["text"] == "deployed to staging"
        assert await sync_to_async(rows)() == [("completed", 2)]


async def test_a_session_opened_on_the_primary_is_found_there() -> None:
    from demo_site.asgi import application

    with ROUTED:
        opened = await post_json(application, handshake_message("initialize", {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}), post_headers(version=None))
        assert opened.status == 200
        session = opened.header("mcp-session-id")
        listed = await post_json(application, handshake_message("tools/list", {}), post_headers(version="2025-11-25", session=session))
    assert listed.status == 200 and "tools" in listed.json()["result"]


class WritesNamed:
    """Writes of mcp_tools's tables to the alias the test names (a spy sees where transactions open)."""

    def db_for_write(self, model: Any, **hints: Any) -> str | None:
        return "default" if model._meta.app_label == "mcp_tools" else None


def test_purges_and_commit_hooks_use_the_alias_the_tables_are_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sessions purge, the calls purge and the store's commit hooks open their transaction on the
    routers' write alias for mcp_tools's tables, not on whatever ``default`` is (they said nothing)."""
    from datetime import timedelta

    from django.db import transaction
    from django.utils import timezone

    from mcp_tools.console.retention import purge_finished_calls
    from mcp_tools.models import McpSession
    from mcp_tools.store import calls, sessions

    used: list[Any] = []
    atomic, on_commit = transaction.atomic, transaction.on_commit
    monkeypatch.setattr(transaction, "atomic", lambda using=None, **kw: used.append(("atomic", using)) or atomic(using=using, **kw))
    monkeypatch.setattr(transaction, "on_commit", lambda fn, using=None, **kw: used.append(("on_commit", using)) or on_commit(fn, using=using, **kw))
    McpSession.objects.create(id="idle", protocol_version="2025-11-25", principal="p")
    McpSession.objects.filter(id="idle").update(last_seen_at=timezone.now() - timedelta(days=2))
    ToolCall.objects.create(tool_name="t", principal="p", params_digest="d", status="completed")
    ToolCall.objects.update(updated_at=timezone.now() - timedelta(days=40))
    with override_settings(DATABASE_ROUTERS=[WritesNamed()]):
        assert sessions.purge_idle_sessions(3600) == 1
        assert purge_finished_calls(30 * 86400).calls == 1
        calls.after_commit(lambda: None)
    assert used and all(using == "default" for _, using in used), used
    assert {kind for kind, _ in used} == {"atomic", "on_commit"}
