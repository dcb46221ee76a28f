"""A stream resumed with ``Last-Event-ID`` while the client's earlier connection to it still looks open.

A client resumes when it believes its connection is gone; the server may not have noticed yet (a
half-open TCP connection, a proxy that dropped only one side). Both connections then wait on the
same call. Spec 2025-11-25, transports: a message goes on one of the connected streams only, and
the request gets one response. Before the fix:

- the earlier connection, losing the round to the resumed one, answered the request with -32603
  "Another stream continued this call" and kept it in the stream's log: a later resume replayed
  that error as the request's one response, and dropped the real result after it (a client told to
  retry ran the tool, and its side effect, again);
- two resumes of one stream each sent the call's next request and each kept it in the log: every
  later resume replayed it twice (the official SDK runs its sampling callback once per request).
"""

from __future__ import annotations

import asyncio
import inspect
import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from mcp_tools import ToolContext, store
from mcp_tools.registry import make_tool, registry
from tests.asgi_client import HANDSHAKE, post_headers, post_json
from tests.test_http_spec_edges import APP, Stream, _in_memory_layer, open_session  # noqa: F401
from tests.test_resumed_requests_sent_once import closed, priming_event_id, resumed, waiting  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)

EFFECTS: list[str] = []
CONFIRM = {"type": "object", "properties": {"go": {"type": "boolean"}}}
ACCEPT = {"action": "accept", "content": {"go": True}}
MODEL_SAYS = {"role": "assistant", "content": {"type": "text", "text": "ship it"}, "model": "m"}


def record_effect() -> str:
    EFFECTS.append("ran")
    return "done"


async def ask_then_sample(ctx: ToolContext) -> str:
    """Asks the user, then the client's model, then runs its effect once."""
    await ctx.elicit("Deploy?", CONFIRM, key="confirm")
    verdict = await ctx.sample("Is it safe?", key="verdict")
    return f"{verdict.text}: " + await ctx.once("effect", record_effect)


def answer(message: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": message["id"], "result": result}


def responses_to(stream: Stream, request_id: int) -> list[dict[str, Any]]:
    return [m for _, m in stream.events() if m.get("id") == request_id and "method" not in m]


def requests_of(stream: Stream, method: str) -> list[Any]:
    return [m["id"] for _, m in stream.events() if m.get("method") == method]


async def start(request_id: int) -> tuple[dict[str, str], Stream, str, dict[str, Any]]:
    """A session call that asked the user: (headers, its POST stream, the request's event id, the request)."""
    session = await open_session({"elicitation": {}, "sampling": {}})
    headers = post_headers(version=HANDSHAKE, session=session)
    call = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": "ask_then_sample", "arguments": {}}}
    post = Stream("POST", headers, json.dumps(call).encode())
    event_id, asked = await post.wait_for(lambda m: m.get("method") == "elicitation/create")
    assert event_id is not None
    return headers, post, event_id, asked


@pytest.fixture(autouse=True)
def tool() -> Any:
    EFFECTS.clear()
    with registry.registered_temporarily(make_tool(ask_then_sample)):
        yield


def _delayed_in_the_posts_wait(original: Any) -> Any:
    """``original`` (a store function), 0.3 s late when the POST's handler calls it (``session_flavor._wait``)."""

    async def delayed(*args: Any) -> Any:
        if any(frame.function == "_wait" for frame in inspect.stack(0)):
            await asyncio.sleep(0.3)
        return await original(*args)

    return delayed


@pytest.fixture(params=["claim_round", "load_call"], ids=["post-claims-late", "post-looks-late"])
def post_late(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The POST's connection claims the answered round after the resumed one (which then wins it), or looks
    at the call only once the resumed one has carried it on: the orders a server that had not noticed the
    earlier connection gone gives, made certain. (The second left the POST's connection waiting for ever.)"""
    monkeypatch.setattr(store, request.param, _delayed_in_the_posts_wait(getattr(store, request.param)))


async def test_a_resume_beside_the_open_post_gives_the_request_one_response_the_result(
    waiting: asyncio.Event, post_late: None,
) -> None:
    headers, post, event_id, asked = await start(50)
    waiting.clear()
    again = resumed(headers, event_id)  # the POST's connection still open
    await asyncio.wait_for(waiting.wait(), 10)
    assert (await post_json(APP, answer(asked, ACCEPT), headers)).status == 202

    # Whichever connection carries the call on sends the sampling request (the other has nothing to send).
    async def sampling_request() -> dict[str, Any]:
        while True:
            for stream in (post, again):
                found = [m for _, m in stream.events() if m.get("method") == "sampling/createMessage"]
                if found:
                    return found[0]
            await asyncio.sleep(0.01)

    sampled = await asyncio.wait_for(sampling_request(), 10)
    assert (await post_json(APP, answer(sampled, MODEL_SAYS), headers)).status == 202
    _, result = await again.wait_for(lambda m: m.get("id") == 50)  # the resumed connection carried the call on
    assert result["result"]["content"][0]["text"] == "ship it: done", result
    await asyncio.wait_for(post.task, 10)
    assert responses_to(post, 50) == [], "the earlier connection ends without a response (it was -32603)"
    assert "retry: " in post.text(), "and says when to resume"
    await closed(again)
    assert EFFECTS == ["ran"]

    # What the stream's log says to a client that resumes once more: the result, once.
    later = resumed(headers, event_id)
    await later.wait_for(lambda m: m.get("id") == 50)
    await closed(later)
    assert responses_to(later, 50) == [result]
    assert len(requests_of(later, "sampling/createMessage")) == 1


async def test_two_resumes_of_one_stream_leave_its_next_request_once_in_every_replay(waiting: asyncio.Event) -> None:
    headers, post, event_id, asked = await start(51)
    await closed(post)  # the client's read timed out
    waiting.clear()
    first = resumed(headers, event_id)
    await asyncio.wait_for(waiting.wait(), 10)
    waiting.clear()
    second = resumed(headers, event_id)  # a reconnect before the server noticed the first one gone
    await asyncio.wait_for(waiting.wait(), 10)
    assert (await post_json(APP, answer(asked, ACCEPT), headers)).status == 202
    _, sampled = await second.wait_for(lambda m: m.get("method") == "sampling/createMessage")
    await closed(first)
    await closed(second)

    replay = resumed(headers, priming_event_id(post))
    await replay.wait_for(lambda m: m.get("method") == "sampling/createMessage")
    assert (await post_json(APP, answer(sampled, MODEL_SAYS), headers)).status == 202
    _, final = await replay.wait_for(lambda m: m.get("id") == 51)
    await closed(replay)
    assert final["result"]["content"][0]["text"] == "ship it: done", final
    assert requests_of(replay, "elicitation/create") == [asked["id"]]
    assert requests_of(replay, "sampling/createMessage") == [sampled["id"]], "the request replayed once"
    assert await sync_to_async(list)(EFFECTS) == ["ran"]


async def test_a_resumed_stream_that_fails_after_it_started_is_ended_with_when_to_resume(
    monkeypatch: pytest.MonkeyPatch, waiting: asyncio.Event,
) -> None:
    """A failure of the server's own after the SSE stream started (here, reading the call's progress token) was
    logged, and the stream left open: under daphne the client waited without a byte until its read timeout."""
    headers, post, event_id, asked = await start(52)
    await closed(post)

    async def broken(call_id: str) -> Any:
        raise RuntimeError("the database refused a statement")

    monkeypatch.setattr(store, "call_progress_token", broken)
    again = resumed(headers, event_id)
    await asyncio.wait_for(again.task, 10)
    last = again.sent[-1]
    assert last["type"] == "http.response.body" and not last.get("more_body"), again.sent
    assert "retry: 1000" in again.text()


async def test_when_the_open_post_carries_the_call_on_a_resume_beside_it_sends_no_second_response(
    waiting: asyncio.Event, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The other order: the POST's connection wins the answered round, and the resumed one follows the call to
    its end. Both sent the result, under two event ids, and a resume at the POST's one replayed the other's: the
    request answered twice (found by a review with raw httpx, daphne and uvicorn, one and two processes)."""

    async def claim_late_when_following(call_id: str, round_number: int) -> bool:
        if any(frame.function == "follow" for frame in inspect.stack(0)):
            await asyncio.sleep(0.3)
        return await original(call_id, round_number)

    original = store.claim_round
    monkeypatch.setattr(store, "claim_round", claim_late_when_following)
    headers, post, event_id, asked = await start(53)
    waiting.clear()
    again = resumed(headers, event_id)  # the POST's connection still open
    await asyncio.wait_for(waiting.wait(), 10)
    assert (await post_json(APP, answer(asked, ACCEPT), headers)).status == 202
    _, sampled = await post.wait_for(lambda m: m.get("method") == "sampling/createMessage")
    assert (await post_json(APP, answer(sampled, MODEL_SAYS), headers)).status == 202
    _, result = await post.wait_for(lambda m: m.get("id") == 53)
    assert result["result"]["content"][0]["text"] == "ship it: done", result
    await asyncio.wait_for(again.task, 10)
    assert responses_to(again, 53) == [], "the resumed connection ends without a second response"
    assert "retry: " in again.text(), "and says when to resume"
    assert EFFECTS == ["ran"]

    response_event = next(i for i, m in post.events() if m.get("id") == 53)
    for resume_at in (event_id, response_event):
        later = resumed(headers, resume_at)
        await asyncio.wait_for(later.task, 10)
        assert responses_to(later, 53) == ([result] if resume_at == event_id else []), resume_at
