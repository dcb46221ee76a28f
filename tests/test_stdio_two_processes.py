"""Two ``mcp_stdio`` processes of one user (two desktop clients, or two servers one client starts)
on one database: each serves its own calls' requests to the client, as a 2025-11-25 session does.

A stdio process has no session id, so a client response was checked only for the caller and the
flavor ("a stdio call is its process's"): a response written to process B naming the request of a
call that process A runs (the same user) was journaled as the answer of A's call, which went on with
it, its own client's question left unanswered. Each process now takes answers only for the calls whose
requests it wrote on its own stdout (a task, which belongs to its caller, excepted, as over HTTP).

Both as two in-process :class:`StdioServer` (the command's own ``principal_for``) and, live, as two
``manage.py mcp_stdio`` child processes.
"""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model

from mcp_tools import store
from mcp_tools.server.flavors.session import parse_step_request_id
from tests.stdio_harness import StdioProcess, call
from tests.test_stdio_current_user import serving
from tests.test_stdio_refused_answer import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

ELICITING = "test_input_required_result_elicitation"  # demo_site.conformance: asks the name, greets
CAPABILITIES = {"elicitation": {"form": {}}}


def is_elicitation(message: dict[str, Any]) -> bool:
    return message.get("method") == "elicitation/create"


def answer(request_id: Any, name: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": {"action": "accept", "content": {"name": name}}}


async def still_waiting(request_id: str) -> bool:
    """Whether the step that request ``request_id`` asked for still waits for its answer (its call too)."""
    parsed = parse_step_request_id(request_id)
    assert parsed is not None, request_id
    loaded = await store.load_call(parsed[0])
    assert loaded is not None
    row, journal = loaded
    step = journal.at(parsed[1])
    assert step is not None
    return step.status == "pending" and row.status == "input_required"


async def test_a_stdio_server_takes_no_answer_to_another_servers_call() -> None:
    await sync_to_async(get_user_model().objects.create_user)("ada", password="x")
    async with serving("ada", CAPABILITIES) as a, serving("ada", CAPABILITIES) as b:
        a.send(call(1, ELICITING))
        asked = await wait_for(a.out, is_elicitation, 15)
        assert asked is not None, a.out.lines
        b.send(answer(asked["id"], "Mallory"))
        # Lines are served in order, and a response before the next line: once the ping is
        # answered, B has dealt with the answer above.
        assert (await b.request("ping", "ping"))["result"] == {}
        assert await still_waiting(asked["id"]), "B's client answered A's call"
        assert not any(is_elicitation(m) for m in b.out.lines), b.out.lines  # B was never asked A's question
        a.send(answer(asked["id"], "Ada"))
        assert (await a.reply_to(1))["result"]["content"][0]["text"] == "Hello, Ada!"


@pytest.mark.live
async def test_a_stdio_process_takes_no_answer_to_another_processs_call(django_db_setup: None) -> None:
    await sync_to_async(get_user_model().objects.create_user)("ada", password="x")
    a = await StdioProcess("--user", "ada").start()
    b = await StdioProcess("--user", "ada").start()
    try:
        await a.handshake(CAPABILITIES)
        await b.handshake(CAPABILITIES)
        await a.send(call(1, ELICITING))
        asked = await a.wait_for(is_elicitation, 30)

        # B's client answers A's request (its id), then pings: B reads its lines in order, so the
        # ping's reply comes once B has dealt with the answer.
        await b.send(answer(asked["id"], "Mallory"))
        await b.send({"jsonrpc": "2.0", "id": "ping", "method": "ping"})
        await b.reply_to("ping", 30)
        assert await still_waiting(asked["id"]), "process B's client answered process A's call"
        assert not any(is_elicitation(m) for m in b.received), b.received  # B was never asked A's question

        # A's own client answers it: the call goes on with that answer.
        await a.send(answer(asked["id"], "Ada"))
        reply = await a.reply_to(1, 30)
        assert reply["result"]["content"][0]["text"] == "Hello, Ada!", reply
    finally:
        await a.stop()
        await b.stop()
