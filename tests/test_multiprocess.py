"""Several live server processes sharing one database: sessions, MRTR rounds and answers cross processes.

Nothing here is shared between the processes but the database (the channel
layer is the in-memory one), so every test also proves the database is
enough: a stream held by process A is woken by the engine's database poll
when the answer lands on process B.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from tests.clients import LegacySession, ModernClient, accept_target, audit_rows, http_client, iter_sse, iter_sse_events, model_says
from tests.conftest import LiveServer

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

STREAM_TIMEOUT = 20


@pytest.fixture(scope="module")
def pair(django_db_setup: None) -> Iterator[tuple[str, str]]:
    """Two processes on the same test database for the whole module: A is daphne, B is uvicorn."""
    servers = [LiveServer("daphne"), LiveServer("uvicorn")]
    try:
        for server in servers:
            server.start()
        yield servers[0].url, servers[1].url
    finally:
        for server in servers:
            server.stop()


# -- (a) a 2025-11-25 session is not bound to a process ---------------------------------------


async def test_session_initialized_on_a_is_served_by_b(pair: tuple[str, str]) -> None:
    url_a, url_b = pair
    async with http_client() as http:
        session = await LegacySession.open(http, url_a)
        tools = await session.request("tools/list", {}, url=url_b)
        assert "echo" in {tool["name"] for tool in tools["tools"]}
        result = await session.request("tools/call", {"name": "echo", "arguments": {"text": "from B"}}, url=url_b)
        assert result["content"] == [{"type": "text", "text": "from B"}]
        assert (await session.request("ping", {}, url=url_a)) == {}

        deleted = await session.delete(url=url_b)
        assert deleted.status_code in (200, 204), deleted.text
        # B forgets the session at once. A learns of it through the shared channel layer
        # (Redis) at once; with the in-memory layer, when its cached copy expires
        # (SESSION_CACHE_SECONDS, 1 s by default; see mcp_tools/sessions.py).
        from mcp_tools.interprocess.broadcast import shared_layer

        grace = 0.5 if await sync_to_async(shared_layer)() is not None else 2.0
        for url in (url_b, url_a):
            deadline = asyncio.get_running_loop().time() + grace
            while True:
                response, message = await session.post("tools/call", {"name": "echo", "arguments": {"text": "gone"}}, url=url)
                if response.status_code == 404 or asyncio.get_running_loop().time() > deadline:
                    break
                await asyncio.sleep(0.05)
            assert response.status_code == 404, response.text
            assert message["error"]["code"] == -32600
        assert (await session.delete(url=url_a)).status_code == 404


# -- (b) MRTR rounds on alternating processes ----------------------------------------------------------


async def deploy_mrtr(client: ModernClient, service: str, urls: list[str]) -> tuple[dict[str, Any], str]:
    """Run ``deploy`` round by round, round i on ``urls[i]``; returns the final result and the last requestState."""
    params = {"name": "deploy", "arguments": {"service": service}}
    first = await client.request("tools/call", params, url=urls[0])
    assert first["resultType"] == "input_required", first
    assert list(first["inputRequests"]) == ["target"]
    assert first["inputRequests"]["target"]["method"] == "elicitation/create"

    second = await client.request("tools/call", {**params, "requestState": first["requestState"],
                                                 "inputResponses": {"target": accept_target("production")}}, url=urls[1])
    assert second["resultType"] == "input_required", second
    assert list(second["inputRequests"]) == ["verdict"]
    assert second["inputRequests"]["verdict"]["method"] == "sampling/createMessage"

    final = await client.request("tools/call", {**params, "requestState": second["requestState"],
                                                "inputResponses": {"verdict": model_says("yes")}}, url=urls[2])
    return final, second["requestState"]


async def test_mrtr_rounds_alternate_between_processes(pair: tuple[str, str]) -> None:
    url_a, url_b = pair
    async with http_client() as http:
        client = ModernClient(http, url_a)
        for i in range(3):
            service = f"mrtr-alt-{i}"
            final, last_state = await deploy_mrtr(client, service, [url_a, url_b, url_a])
            assert final["resultType"] == "complete"
            assert final.get("isError") is not True, final
            rows = await audit_rows(service)
            assert len(rows) == 1
            assert final["structuredContent"] == {"service": service, "env": "production", "verdict": "yes", "audit_id": rows[0]["id"]}

            # The client lost the answer and retries the last round on the other process: same outcome, no second side effect.
            retry = await client.request("tools/call", {"name": "deploy", "arguments": {"service": service}, "requestState": last_state,
                                                        "inputResponses": {"verdict": model_says("yes")}}, url=url_b)
            assert retry["structuredContent"] == final["structuredContent"]
            assert len(await audit_rows(service)) == 1


async def test_mrtr_concurrent_calls_across_processes(pair: tuple[str, str]) -> None:
    url_a, url_b = pair
    async with http_client() as http:
        client = ModernClient(http, url_a)
        routes = [[url_a, url_b, url_a], [url_b, url_a, url_b], [url_a, url_a, url_b], [url_b, url_b, url_a]]
        finals = await asyncio.gather(*(deploy_mrtr(client, f"mrtr-conc-{i}", route) for i, route in enumerate(routes)))
    for i, (final, _) in enumerate(finals):
        assert final["resultType"] == "complete" and final.get("isError") is not True, final
        rows = await audit_rows(f"mrtr-conc-{i}")
        assert [row["id"] for row in rows] == [final["structuredContent"]["audit_id"]]


# -- (c) a 2025-11-25 stream on A, the client's answers POSTed to B -----------------------------------------


async def next_message(events: AsyncIterator[dict[str, Any]]) -> dict[str, Any]:
    async with asyncio.timeout(STREAM_TIMEOUT):
        return await anext(events)


async def deploy_on_stream(session: LegacySession, service: str, stream_url: str, answer_url: str) -> dict[str, Any]:
    """``tools/call deploy`` held open on ``stream_url``; every answer to the server's requests goes to ``answer_url``."""
    async with session.stream("tools/call", {"name": "deploy", "arguments": {"service": service}}, url=stream_url) as (request_id, response):
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        events = iter_sse(response)

        elicit = await next_message(events)
        assert elicit["method"] == "elicitation/create", elicit
        assert elicit["params"]["message"] == f"Where should {service} be deployed?"
        answered = await session.send({"jsonrpc": "2.0", "id": elicit["id"], "result": accept_target("production")}, url=answer_url)
        assert answered.status_code == 202, answered.text

        sample = await next_message(events)
        assert sample["method"] == "sampling/createMessage", sample
        assert sample["id"] != elicit["id"]
        answered = await session.send({"jsonrpc": "2.0", "id": sample["id"], "result": model_says("yes")}, url=answer_url)
        assert answered.status_code == 202, answered.text

        final = await next_message(events)
        assert final.get("id") == request_id, final
        assert "result" in final, final
        return final["result"]


async def test_session_answers_posted_to_the_other_process(pair: tuple[str, str]) -> None:
    url_a, url_b = pair
    async with http_client() as http:
        session = await LegacySession.open(http, url_a)
        result = await deploy_on_stream(session, "stream-cross", url_a, url_b)
    assert result.get("isError") is not True, result
    rows = await audit_rows("stream-cross")
    assert len(rows) == 1
    assert result["structuredContent"] == {"service": "stream-cross", "env": "production", "verdict": "yes", "audit_id": rows[0]["id"]}


async def test_concurrent_session_streams_cross_processes(pair: tuple[str, str]) -> None:
    url_a, url_b = pair
    async with http_client() as http:
        sessions = [await LegacySession.open(http, url) for url in (url_a, url_b, url_a)]
        routes = [(url_a, url_b), (url_b, url_a), (url_a, url_b)]
        results = await asyncio.gather(*(
            deploy_on_stream(session, f"stream-conc-{i}", stream_url, answer_url)
            for i, (session, (stream_url, answer_url)) in enumerate(zip(sessions, routes))
        ))
    for i, result in enumerate(results):
        rows = await audit_rows(f"stream-conc-{i}")
        assert [row["id"] for row in rows] == [result["structuredContent"]["audit_id"]]


# -- (d) a process dies between rounds; a new one continues --------------------------------------------------


async def test_mrtr_survives_a_killed_process(start_server: type[LiveServer]) -> None:
    first_server = start_server().start()
    services = [f"restart-{i}" for i in range(3)]
    async with http_client() as http:
        client = ModernClient(http, first_server.url)
        states = {}
        for service in services:
            first = await client.request("tools/call", {"name": "deploy", "arguments": {"service": service}})
            assert list(first["inputRequests"]) == ["target"]
            states[service] = first["requestState"]
        # One call is a round further along when the process dies.
        second = await client.request("tools/call", {"name": "deploy", "arguments": {"service": services[0]}, "requestState": states[services[0]],
                                                     "inputResponses": {"target": accept_target("staging")}})
        assert list(second["inputRequests"]) == ["verdict"]

        first_server.kill()
        assert first_server.process is not None and first_server.process.returncode == -9
        url = start_server().start().url

        final0 = await client.request("tools/call", {"name": "deploy", "arguments": {"service": services[0]}, "requestState": second["requestState"],
                                                     "inputResponses": {"verdict": model_says("ok")}}, url=url)
        finals = {services[0]: final0}
        for service in services[1:]:
            params = {"name": "deploy", "arguments": {"service": service}}
            step = await client.request("tools/call", {**params, "requestState": states[service], "inputResponses": {"target": accept_target("production")}}, url=url)
            assert list(step["inputRequests"]) == ["verdict"], step
            finals[service] = await client.request("tools/call", {**params, "requestState": step["requestState"],
                                                                  "inputResponses": {"verdict": model_says("ok")}}, url=url)
    for service, final in finals.items():
        assert final["resultType"] == "complete" and final.get("isError") is not True, final
        rows = await audit_rows(service)
        assert [row["id"] for row in rows] == [final["structuredContent"]["audit_id"]]
        assert final["structuredContent"]["env"] == ("staging" if service == services[0] else "production")



# -- (e) the client drops A's stream mid-call and resumes it on B (Last-Event-ID) ----------------------------


async def read_until_request(events: AsyncIterator[tuple[str | None, dict[str, Any] | None]], method: str) -> tuple[str, dict[str, Any]]:
    """Read an open call stream (``iter_sse_events``) up to the server's ``method`` request; returns its event id and message."""
    async with asyncio.timeout(STREAM_TIMEOUT):
        async for event_id, message in events:
            if message is not None:
                assert message.get("method") == method, message
                assert event_id, "session streams carry event ids"
                return event_id, message
    raise AssertionError(f"the stream ended before {method}")


async def test_session_stream_resumed_on_the_other_process(pair: tuple[str, str]) -> None:
    """Round 2's stream is dropped on A, the answer lands on A, and B resumes the stream and finishes the call."""
    url_a, url_b = pair
    async with http_client() as http:
        session = await LegacySession.open(http, url_a)
        async with session.stream("tools/call", {"name": "deploy", "arguments": {"service": "resumed"}}, url=url_a) as (request_id, response):
            events = iter_sse_events(response)
            _, elicit = await read_until_request(events, "elicitation/create")
            answered = await session.send({"jsonrpc": "2.0", "id": elicit["id"], "result": accept_target("staging")}, url=url_b)
            assert answered.status_code == 202, answered.text
            sample_event_id, sample = await read_until_request(events, "sampling/createMessage")
        # The stream is closed: the client went away with the sampling request unanswered. It answers on A
        # (no stream is open anywhere), then resumes on B. (Resuming first and answering afterwards would stall
        # here: daphne sends the resumed stream's headers only with its first body bytes.)
        answered = await session.send({"jsonrpc": "2.0", "id": sample["id"], "result": model_says("yes")}, url=url_a)
        assert answered.status_code == 202, answered.text

        async with session.resume(sample_event_id, url=url_b) as resumed:
            assert resumed.status_code == 200
            assert resumed.headers["content-type"].startswith("text/event-stream")
            final = await next_message(iter_sse(resumed))
    assert final["id"] == request_id, final
    structured = final["result"]["structuredContent"]
    rows = await audit_rows("resumed")
    assert [row["id"] for row in rows] == [structured["audit_id"]]
    assert structured == {"service": "resumed", "env": "staging", "verdict": "yes", "audit_id": rows[0]["id"]}


async def test_first_round_stream_resumed_on_the_other_process(pair: tuple[str, str]) -> None:
    """The stream is dropped right after the first request (elicitation); answer on B, then resume on B."""
    url_a, url_b = pair
    async with http_client() as http:
        session = await LegacySession.open(http, url_a)
        async with session.stream("tools/call", {"name": "deploy", "arguments": {"service": "resumed-early"}}, url=url_a) as (request_id, response):
            elicit_event_id, elicit = await read_until_request(iter_sse_events(response), "elicitation/create")
        answered = await session.send({"jsonrpc": "2.0", "id": elicit["id"], "result": accept_target("production")}, url=url_b)
        assert answered.status_code == 202, answered.text

        async with session.resume(elicit_event_id, url=url_b) as resumed:
            assert resumed.status_code == 200
            messages = iter_sse(resumed)
            sample = await next_message(messages)
            assert sample["method"] == "sampling/createMessage", sample
            answered = await session.send({"jsonrpc": "2.0", "id": sample["id"], "result": model_says("yes")}, url=url_a)
            assert answered.status_code == 202, answered.text
            final = await next_message(messages)
    assert final["id"] == request_id, final
    rows = await audit_rows("resumed-early")
    assert [row["id"] for row in rows] == [final["result"]["structuredContent"]["audit_id"]]


# -- (f) saga rounds on alternating processes ----------------------------------------------------


async def test_saga_rounds_alternate_between_processes(pair: tuple[str, str]) -> None:
    url_a, url_b = pair
    async with http_client() as http:
        client = ModernClient(http, url_a)
        first = await client.request("tools/callSaga", {"name": "deploy", "arguments": {"service": "saga-hop"}}, url=url_a)
        assert [s["stepId"] for s in first["steps"]] == ["target"]
        history = [{"stepId": "target", "result": accept_target("production")}]
        second = await client.request("tools/resumeSaga", {"sagaToken": first["sagaToken"], "completedSteps": history}, url=url_b)
        assert [s["stepId"] for s in second["steps"]] == ["verdict"]
        history.append({"stepId": "verdict", "result": model_says("yes")})
        final = await client.request("tools/resumeSaga", {"sagaToken": second["sagaToken"], "completedSteps": history}, url=url_a)
    rows = await audit_rows("saga-hop")
    assert [row["id"] for row in rows] == [final["structuredContent"]["audit_id"]]
