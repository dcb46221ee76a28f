"""A stream resumed with ``Last-Event-ID`` does not send again a request the client already received.

Spec 2025-11-25, transports, "Resumability and Redelivery": the server MAY replay the messages
"that would have been sent after the last event ID". A pending ``elicitation/create`` (or
``sampling/createMessage``) the stream carried at or before that id reached the client: sent again,
the official SDK ran its elicitation callback twice (a second dialog for the user), whenever its
SSE read timed out or a proxy dropped the idle stream. It was sent again under a new event id,
and logged again, so a later resume from the priming event replayed it twice.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

from mcp_tools.interprocess import wakeups
from mcp_tools.server import background
from tests.asgi_client import HANDSHAKE, post_headers, post_json
from tests.test_background_review import queued  # noqa: F401
from tests.test_http_spec_edges import APP, Stream, _in_memory_layer, open_session  # noqa: F401
from tests.test_task_resume import CAPABILITIES as TASK_CAPABILITIES, _task_waiting_on_a_dropped_result_stream
from tests.test_task_review import open_session as open_task_session

pytestmark = pytest.mark.django_db(transaction=True)

ANSWERS = {
    "test_elicitation": {"action": "accept", "content": {"username": "u", "email": "e@x.org"}},
    "test_sampling": {"role": "assistant", "content": {"type": "text", "text": "yes"}, "model": "m"},
}
ARGUMENTS = {"test_elicitation": {"message": "hi"}, "test_sampling": {"prompt": "hi"}}
ASKS = {"test_elicitation": "elicitation/create", "test_sampling": "sampling/createMessage"}


@pytest.fixture
def waiting() -> Iterator[asyncio.Event]:
    """Set whenever a stream that carries a call goes back to waiting on it (``wakeups.wait``): by then
    a resumed stream has sent whatever it was going to send for the call as it found it."""
    idle = asyncio.Event()
    original = wakeups.wait

    async def wait(event: asyncio.Event, timeout: float = wakeups.POLL_SECONDS) -> None:
        idle.set()
        await original(event, timeout)

    wakeups.wait = wait
    try:
        yield idle
    finally:
        wakeups.wait = original


def priming_event_id(stream: Stream) -> str:
    """The id of a stream's first event (the priming one, which carries no message)."""
    first = stream.text().split("\n\n")[0]
    return next(line[3:].strip() for line in first.splitlines() if line.startswith("id:"))


def resumed(headers: dict[str, str], event_id: str) -> Stream:
    return Stream("GET", {**headers, "accept": "text/event-stream", "last-event-id": event_id})


async def closed(stream: Stream) -> None:
    stream.gone.set()
    await asyncio.wait_for(stream.task, 10)


@pytest.mark.parametrize("tool", ["test_elicitation", "test_sampling"])
async def test_a_stream_resumed_at_the_request_does_not_send_it_again(tool: str, waiting: asyncio.Event) -> None:
    session = await open_session({"elicitation": {}, "sampling": {}})
    headers = post_headers(version=HANDSHAKE, session=session)
    call = {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": tool, "arguments": ARGUMENTS[tool]}}
    first = Stream("POST", headers, json.dumps(call).encode())
    event_id, asked = await first.wait_for(lambda m: m.get("method") == ASKS[tool])
    assert event_id is not None
    await closed(first)  # the client's read timed out right after the request arrived

    waiting.clear()
    again = resumed(headers, event_id)
    await asyncio.wait_for(waiting.wait(), 10)  # the resumed stream holds the call, and waits on it
    answer = {"jsonrpc": "2.0", "id": asked["id"], "result": ANSWERS[tool]}
    assert (await post_json(APP, answer, headers)).status == 202
    _, final = await again.wait_for(lambda m: m.get("id") == 5)
    await closed(again)
    assert "result" in final and not final["result"].get("isError"), final
    sent_again = [m for _, m in again.events() if m.get("method") == ASKS[tool]]
    assert sent_again == [], f"the request the client received (event {event_id}) was sent again: {sent_again}"

    # The stream's log holds the request once: a resume from its start replays it once.
    replay = resumed(headers, priming_event_id(first))
    await replay.wait_for(lambda m: m.get("id") == 5)
    await closed(replay)
    replayed: list[Any] = [m["id"] for _, m in replay.events() if m.get("method") == ASKS[tool]]
    assert replayed == [asked["id"]], replayed


async def test_a_request_never_carried_by_the_stream_is_sent_on_its_resume(waiting: asyncio.Event) -> None:
    """What the stream did not carry (the request went into its log after the resume point, or never did)
    still reaches the client: replayed from the log, once."""
    session = await open_session({"elicitation": {}})
    headers = post_headers(version=HANDSHAKE, session=session)
    call = {"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "test_elicitation", "arguments": {"message": "hi"}}}
    first = Stream("POST", headers, json.dumps(call).encode())
    _, asked = await first.wait_for(lambda m: m.get("method") == "elicitation/create")
    await closed(first)

    waiting.clear()
    again = resumed(headers, priming_event_id(first))  # the client saw only the priming event
    await asyncio.wait_for(waiting.wait(), 10)
    assert [m["id"] for _, m in again.events() if m.get("method") == "elicitation/create"] == [asked["id"]]
    await closed(again)


async def test_a_resumed_tasks_result_stream_does_not_send_its_input_request_again(
    queued: list[str], waiting: asyncio.Event,  # noqa: F811
) -> None:
    """The same for a 2025-11-25 task's ``tasks/result`` stream (docs/protocol.md: a resumed one goes on
    "the input requests it carried not sent again")."""
    session = await open_task_session(capabilities=TASK_CAPABILITIES)
    headers = post_headers(version=HANDSHAKE, session=session)
    task_id, event_id, ask = await _task_waiting_on_a_dropped_result_stream(headers, "result-3")
    waiting.clear()
    again = resumed(headers, event_id)
    await asyncio.wait_for(waiting.wait(), 10)
    answer = {"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"confirm": True}}}
    assert (await post_json(APP, answer, headers)).status == 202
    assert await background.run_in_worker(task_id, "w") == "finished"
    _, final = await again.wait_for(lambda m: m.get("id") == "result-3")
    await closed(again)
    assert final["result"]["content"][0]["text"] == "deleted file.txt", final
    assert [m for _, m in again.events() if m.get("method") == "elicitation/create"] == []
