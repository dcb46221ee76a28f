"""``mcp_stdio --user NAME`` serves each request as the user is now, as HTTP authenticates each request.

The server's principal was made once, when the process started, and served every request until it
exited: the principal kept its permission answers and Django's ``ModelBackend`` kept the user's
permissions on the user object. A permission taken from the user or from its group went on granting
its tools, and a user made inactive or deleted went on calling tools, until the desktop client
restarted the server. Now each request reads the user again (one query): gone or inactive is refused
with ``-32600 Unauthorized`` (what HTTP answers with its 401), and permissions are asked afresh.

Driven in process over a pipe (:class:`StdioServer` with the command's own ``principal_for``) and,
live, as the child process a desktop client starts (:class:`tests.stdio_harness.StdioProcess`).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, BinaryIO, cast

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission

from mcp_tools import ToolContext, store
from mcp_tools.management.commands.mcp_call import principal_for
from mcp_tools.registry import make_tool, registry
from mcp_tools.server.flavors.session import parse_step_request_id
from mcp_tools.transports.stdio import StdioServer
from tests.stdio_harness import INITIALIZED, StdioProcess, call, init_message
from tests.test_stdio_refused_answer import Lines, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

PERMISSION = "inventory.view_product"


def gated_stdio() -> str:
    """A tool that needs inventory.view_product."""
    return "gated ok"


async def ask_gated_stdio(ctx: ToolContext) -> str:
    """A tool that needs inventory.view_product and asks a question first."""
    answer = await ctx.elicit("Go on?", {"type": "object", "properties": {"ok": {"type": "boolean"}}}, key="go")
    return f"answered {answer}"


GATED = make_tool(gated_stdio, permissions=[PERMISSION])
ASK_GATED = make_tool(ask_gated_stdio, permissions=[PERMISSION])


def view_product() -> Permission:
    return Permission.objects.get(content_type__app_label="inventory", codename="view_product")


def make_user(how: str) -> None:
    """``ada``, holding the permission directly (``how="user"``), through a group (``"group"``) or not at all."""
    user = get_user_model().objects.create_user("ada", password="x")
    if how == "user":
        user.user_permissions.add(view_product())
    elif how == "group":
        group = Group.objects.create(name="viewers")
        group.permissions.add(view_product())
        user.groups.add(group)


def change_user(change: str) -> None:
    """What an administrator does to ``ada`` while her stdio server runs."""
    user = get_user_model().objects.get(username="ada")
    if change == "permission removed":
        user.user_permissions.clear()
    elif change == "group left":
        user.groups.clear()
    elif change == "permission granted":
        user.user_permissions.add(view_product())
    elif change == "made inactive":
        user.is_active = False
        user.save()
    elif change == "deleted":
        user.delete()
    else:
        raise AssertionError(change)


class PipeClient:
    """A client of an in-process :class:`StdioServer` over a pipe: one line written at a time."""

    def __init__(self, feed: Any, out: Lines) -> None:
        self.feed = feed
        self.out = out

    def send(self, message: dict[str, Any]) -> None:
        self.feed.write(json.dumps(message).encode() + b"\n")
        self.feed.flush()

    async def reply_to(self, request_id: Any) -> dict[str, Any]:
        reply = await wait_for(self.out, lambda m: m.get("id") == request_id and ("result" in m or "error" in m), 15)
        assert reply is not None, f"no reply to {request_id!r}: {self.out.lines}"
        return reply

    async def request(self, request_id: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params or {}})
        return await self.reply_to(request_id)


@asynccontextmanager
async def serving(username: str | None, capabilities: dict[str, Any] | None = None) -> AsyncIterator[PipeClient]:
    """A stdio server as ``mcp_stdio --user username`` makes it (``None``: anonymous), initialized."""
    principal = await sync_to_async(principal_for)(username)
    read_fd, write_fd = os.pipe()
    reader, feed = os.fdopen(read_fd, "rb"), os.fdopen(write_fd, "wb")
    client = PipeClient(feed, Lines())
    task = asyncio.ensure_future(StdioServer(principal, reader, cast(BinaryIO, client.out), grace=1).serve())
    try:
        client.send(init_message(capabilities=capabilities))
        await client.reply_to("init")
        client.send(INITIALIZED)
        yield client
    finally:
        feed.close()
        await asyncio.wait_for(task, 15)


def is_refused_as_unauthorized(reply: dict[str, Any]) -> bool:
    error = reply.get("error") or {}
    return error.get("code") == -32600 and error.get("message", "").startswith("Unauthorized")


@pytest.mark.parametrize(("holds", "change"), [("user", "permission removed"), ("group", "group left")])
async def test_a_permission_taken_away_is_seen_by_the_next_request_of_the_same_process(holds: str, change: str) -> None:
    await sync_to_async(make_user)(holds)
    with registry.registered_temporarily(GATED):
        async with serving("ada") as client:
            assert (await client.request(1, "tools/call", {"name": "gated_stdio"}))["result"]["content"][0]["text"] == "gated ok"
            listed = await client.request(2, "tools/list")
            assert "gated_stdio" in [tool["name"] for tool in listed["result"]["tools"]]

            await sync_to_async(change_user)(change)

            refused = await client.request(3, "tools/call", {"name": "gated_stdio"})
            assert refused.get("error", {}).get("code") == -32602, f"still callable after '{change}': {refused}"
            listed = await client.request(4, "tools/list")
            assert "gated_stdio" not in [tool["name"] for tool in listed["result"]["tools"]]


async def test_a_permission_granted_is_seen_without_a_restart() -> None:
    await sync_to_async(make_user)("none")
    with registry.registered_temporarily(GATED):
        async with serving("ada") as client:
            assert (await client.request(1, "tools/call", {"name": "gated_stdio"}))["error"]["code"] == -32602
            await sync_to_async(change_user)("permission granted")
            assert (await client.request(2, "tools/call", {"name": "gated_stdio"}))["result"]["content"][0]["text"] == "gated ok"


@pytest.mark.parametrize("change", ["made inactive", "deleted"])
async def test_a_user_made_inactive_or_deleted_is_refused_as_over_http(change: str) -> None:
    await sync_to_async(make_user)("user")
    async with serving("ada") as client:
        assert (await client.request(1, "tools/call", {"name": "echo", "arguments": {"text": "hi"}}))["result"]["content"][0]["text"] == "hi"

        await sync_to_async(change_user)(change)

        requests: list[tuple[int, str, dict[str, Any]]] = [
            (2, "tools/call", {"name": "echo", "arguments": {"text": "hi"}}), (3, "tools/list", {}),
            (4, "resources/read", {"uri": "inventory://products"}), (5, "ping", {})]
        for request_id, method, params in requests:
            reply = await client.request(request_id, method, params)
            assert is_refused_as_unauthorized(reply), f"{method} after the user was {change}: {reply}"
            assert "ada" in reply["error"]["message"]


async def test_an_answer_to_a_question_is_refused_once_the_permission_is_gone() -> None:
    """A client's answer moves the call on (``accept_client_response`` checks the caller may run it):
    it was checked against the principal the process started with."""
    await sync_to_async(make_user)("user")
    with registry.registered_temporarily(ASK_GATED):
        async with serving("ada", capabilities={"elicitation": {"form": {}}}) as client:
            client.send(call(1, "ask_gated_stdio"))
            ask = await wait_for(client.out, lambda m: m.get("method") == "elicitation/create", 15)
            assert ask is not None, client.out.lines

            await sync_to_async(change_user)("permission removed")

            client.send({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"ok": True}}})
            # Lines are served in order, and a response before the next line: once the ping is
            # answered, the answer above was accepted or refused.
            assert (await client.request("ping", "ping"))["result"] == {}
            parsed = parse_step_request_id(ask["id"])
            assert parsed is not None, ask
            loaded = await store.load_call(parsed[0])
            assert loaded is not None
            step = loaded[1].at(parsed[1])
            assert step is not None and step.status == "pending", f"the answer of a caller who may no longer run the tool was taken: {step}"
            assert not [m for m in client.out.lines if m.get("id") == 1], "the call went on with the refused answer"


async def test_anonymous_stdio_still_serves() -> None:
    async with serving(None) as client:
        assert (await client.request(1, "tools/call", {"name": "echo", "arguments": {"text": "anon"}}))["result"]["content"][0]["text"] == "anon"
        assert (await client.request(2, "ping"))["result"] == {}


# -- the real process a desktop client starts -----------------------------------------------------


def may_view_customers() -> None:
    get_user_model().objects.get(username="ada").user_permissions.add(
        Permission.objects.get(content_type__app_label="shop", codename="view_customer"))


@pytest.mark.live
@pytest.mark.parametrize("change", ["permission removed", "made inactive"])
async def test_the_mcp_stdio_process_sees_the_change_without_a_restart(django_db_setup: None, change: str) -> None:
    await sync_to_async(make_user)("none")
    await sync_to_async(may_view_customers)()  # what check_account_issue (demo_site.shop) needs
    gated = call(1, "check_account_issue", {"customer_id": 999999})
    process = await StdioProcess("--user", "ada").start()
    try:
        await process.handshake()
        await process.send(gated)
        first = await process.reply_to(1, 30)
        assert "No customer" in first["result"]["content"][0]["text"], first

        await sync_to_async(change_user)(change)

        await process.send({**gated, "id": 2})
        second = await process.reply_to(2, 30)
        if change == "made inactive":
            assert is_refused_as_unauthorized(second), f"the running process still served an inactive user: {second}"
        else:
            assert second.get("error", {}).get("code") == -32602, f"the running process still granted the tool: {second}"
    finally:
        await process.stop()
