"""A model action whose method makes a ``ctx`` step fails that call; it no longer hangs the server.

A confirmed change runs the method inside ``ctx.once`` (its writes and the journal entry commit
together), in the store's thread. A method that takes the call's ``ToolContext`` (docs/model-tools.md:
"A parameter annotated ToolContext receives the call's context") and made a step with it, say
``ctx.once("mail", ...)`` for a side effect, waited on the store's thread from inside it: the call never
answered, and neither did any other durable call of the process, whose store work queued behind it.
Now such a step raises ``RuntimeError`` at once (the call's internal error, logged with the reason)
and the process goes on. Found by the model review (a scratch project's ``notify`` action, both eras,
SQLite and PostgreSQL).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connection, models
from django.test.utils import isolate_apps

import mcp_tools
from mcp_tools import ToolContext
from mcp_tools.modeltools.actions import unregister_model_action
from tests.asgi_client import call_modern

pytestmark = pytest.mark.django_db(transaction=True)

YES = {"confirm": {"action": "accept", "content": {"confirm": True}}}


def notify(self: Any, ctx: ToolContext) -> str:
    """Mark the row notified and send the mail once."""
    self.notified = True
    self.save()
    return str(ctx.once("mail", lambda: "sent"))


def touch(self: Any, ctx: ToolContext) -> str:
    """Mark the row notified, then record it once (the same row, from the effect)."""
    self.notified = True
    self.save()
    return str(ctx.once("touch", lambda: type(self).objects.filter(pk=self.pk).update(notified=True)))


def chatty(self: Any, ctx: ToolContext) -> str:
    """Report progress and log: steps that do not wait on the method's transaction."""
    ctx.report_progress(1, 2)
    ctx.log("info", "halfway")
    return "told"


@pytest.fixture
def rows() -> Iterator[Any]:
    with isolate_apps("demo_site.shop"):
        meta = type("Meta", (), {"app_label": "shop"})
        model: Any = type("NotifiedRow", (models.Model,), {"__module__": __name__, "Meta": meta,
                                                          "notified": models.BooleanField(default=False), "notify": notify,
                                                          "touch": touch, "chatty": chatty})
        with connection.schema_editor() as editor:
            editor.create_model(model)
        action = mcp_tools.register_model_action(model, "notify", name="ctxchange.rows.notify", permissions=[], confirm=True)
        plain = mcp_tools.register_model_action(model, "touch", name="ctxchange.rows.touch", permissions=[])
        told = mcp_tools.register_model_action(model, "chatty", name="ctxchange.rows.chatty", permissions=[])
        try:
            yield model
        finally:
            for registered in (action, plain, told):
                unregister_model_action(registered)
            with connection.schema_editor() as editor:
                editor.delete_model(model)


async def call(name: str, arguments: dict[str, Any], **params: Any) -> dict[str, Any]:
    from demo_site.asgi import application

    response = await asyncio.wait_for(call_modern(application, "tools/call", {"name": name, "arguments": arguments, **params}), 20)
    result: dict[str, Any] = response.json()["result"]
    return result


async def test_a_ctx_step_inside_a_confirmed_change_fails_the_call_not_the_server(rows: Any) -> None:
    pk = (await sync_to_async(rows.objects.create)()).pk
    asked = await call("ctxchange.rows.notify", {"id": pk})
    assert asked.get("resultType") == "input_required", asked
    done = await call("ctxchange.rows.notify", {"id": pk}, inputResponses=YES, requestState=asked["requestState"])
    assert done.get("isError") is True, done
    assert await sync_to_async(lambda: rows.objects.get(pk=pk).notified)() is False  # rolled back
    # The store still serves: another durable call asks its question and is answered.
    again = await call("ctxchange.rows.notify", {"id": pk})
    assert again.get("resultType") == "input_required", again


async def test_a_ctx_step_inside_a_model_actions_transaction_fails_at_once(rows: Any) -> None:
    """Unconfirmed, the method runs in its own transaction in the handler's thread; a ``ctx.once`` there ran
    in the store's thread on another connection and waited for that transaction's locks (SQLite's write
    lock: "database is locked" after its timeout, the store's thread held meanwhile; PostgreSQL's row lock,
    for ever), while the method waited for it."""
    pk = (await sync_to_async(rows.objects.create)()).pk
    done = await call("ctxchange.rows.touch", {"id": pk})
    assert done.get("isError") is True, done
    assert await sync_to_async(lambda: rows.objects.get(pk=pk).notified)() is False  # rolled back


async def test_progress_and_logs_inside_a_model_actions_transaction_still_go_out(rows: Any) -> None:
    pk = (await sync_to_async(rows.objects.create)()).pk
    done = await call("ctxchange.rows.chatty", {"id": pk})
    assert done.get("isError") is not True, done
    assert done["content"][0]["text"] == "told"


def logged_effect(ctx: ToolContext) -> str:
    """A sync tool whose once effect logs what it did."""

    def effect() -> str:
        ctx.log("info", "mailed")
        return "done"

    done = str(ctx.once("mail", effect))
    ctx.log("info", "after")
    return done


async def test_a_log_line_inside_a_once_function_goes_out_when_it_returns() -> None:
    # Since ctx steps were refused inside a once function, this call answered -32603 (RuntimeError); before,
    # the line went out and the call answered (found by the revB review). It is sent once the effect returns.
    from mcp_tools.registry import make_tool, registry

    params: dict[str, Any] = {"name": "ctxchange_logged_effect", "arguments": {}, "_meta": {"io.modelcontextprotocol/logLevel": "info"}}
    with registry.registered_temporarily(make_tool(logged_effect, name="ctxchange_logged_effect")):
        from demo_site.asgi import application

        response = await asyncio.wait_for(call_modern(application, "tools/call", params), 20)
    assert response.json()["result"]["content"][0]["text"] == "done", response.json()
    logs = [m["params"]["data"] for m in response.sse_messages() if m.get("method") == "notifications/message"]
    assert logs == ["mailed", "after"], logs
