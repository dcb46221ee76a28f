"""The official ``mcp`` SDK client (both eras) against a live daphne process serving the demo site."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx2
import mcp_types as t
import pytest
from asgiref.sync import sync_to_async
from mcp import MCPError
from mcp.client.session import ClientRequestContext

from tests.asgi_client import ARGUMENT_ERRORS_META
from tests.clients import (
    JSON_ACCEPT,
    MODERN,
    audit_rows,
    create_products,
    create_user_with_token,
    modern_headers,
    modern_meta,
    sdk_client,
)
from tests.conftest import LiveServer

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

MODES = ["legacy", MODERN]


@pytest.fixture(scope="module", params=["daphne", "uvicorn"])
def server_url(request: pytest.FixtureRequest, django_db_setup: None) -> Iterator[str]:
    """One server process per ASGI server for the module (anonymous callers allowed); each test sets up its own data."""
    server = LiveServer(request.param).start()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


# -- callbacks --------------------------------------------------------------------------------


class FakeUser:
    """The human and the model on the client side: records what the server asked."""

    def __init__(self, elicit_action: str = "accept", env: str = "production", verdict: str = "yes") -> None:
        self.elicit_action = elicit_action
        self.env = env
        self.verdict = verdict
        self.elicitations: list[t.ElicitRequestParams] = []
        self.samplings: list[t.CreateMessageRequestParams] = []

    async def elicit(self, ctx: ClientRequestContext, params: t.ElicitRequestParams) -> t.ElicitResult:
        self.elicitations.append(params)
        if self.elicit_action != "accept":
            return t.ElicitResult(action=self.elicit_action)
        return t.ElicitResult(action="accept", content={"env": self.env, "confirm": True})

    async def sample(self, ctx: ClientRequestContext, params: t.CreateMessageRequestParams) -> t.CreateMessageResult:
        self.samplings.append(params)
        return t.CreateMessageResult(role="assistant", content=t.TextContent(text=self.verdict), model="fake", stop_reason="endTurn")


def _first_mcp_error(exc: BaseException) -> MCPError:
    if isinstance(exc, MCPError):
        return exc
    assert isinstance(exc, BaseExceptionGroup), exc
    found = [_first_mcp_error(inner) for inner in exc.exceptions]
    return found[0]


def _blocks(message: t.SamplingMessage) -> list[Any]:
    return message.content if isinstance(message.content, list) else [message.content]


# -- discovery, plain calls ---------------------------------------------------------------------


async def test_list_tools_and_echo(server_url: str, mode: str) -> None:
    async with sdk_client(server_url, mode) as client:
        assert client.protocol_version == ("2025-11-25" if mode == "legacy" else MODERN)
        listed = await client.list_tools()
        tools = {tool.name: tool for tool in listed.tools}
        assert {"echo", "search_products", "deploy", "ask_with_calculator", "slow_count"} <= set(tools)
        assert "restock" not in tools  # needs a permission anonymous callers do not have
        echo = tools["echo"]
        assert echo.input_schema["type"] == "object"
        assert echo.input_schema["properties"]["text"]["type"] == "string"
        assert echo.input_schema["required"] == ["text"]
        assert echo.description and "unchanged" in echo.description

        text = 'héllo wörld 👋 "quoted" \\ back\nslash\ttab <b>&amp;'
        result = await client.call_tool("echo", {"text": text})
        assert result.is_error is False
        assert len(result.content) == 1
        assert result.content[0].type == "text"
        assert result.content[0].text == text


async def test_resources_prompts_completion(server_url: str, mode: str) -> None:
    await create_products()
    async with sdk_client(server_url, mode) as client:
        resources = await client.list_resources()
        assert "inventory://products" in {str(r.uri) for r in resources.resources}
        templates = await client.list_resource_templates()
        assert "inventory://products/{sku}" in {r.uri_template for r in templates.resource_templates}

        everything = await client.read_resource("inventory://products")
        assert everything.contents[0].mime_type == "application/json"
        products = json.loads(everything.contents[0].text)
        assert [p["sku"] for p in products] == ["GAD-001", "WID-001", "WID-002"]

        one = await client.read_resource("inventory://products/WID-002")
        assert str(one.contents[0].uri) == "inventory://products/WID-002"
        assert json.loads(one.contents[0].text) == {"sku": "WID-002", "name": "Wide widget", "price": 3.75, "stock": 4}

        with pytest.raises(MCPError) as missing:
            await client.read_resource("inventory://products/NOPE-404")
        # Each era's code: -32602 from 2026-07-28 on (SEP-2164), -32002 in 2025-11-25 sessions.
        assert missing.value.error.code == (-32602 if mode == "2026-07-28" else -32002)

        prompts = await client.list_prompts()
        advice = next(p for p in prompts.prompts if p.name == "restock_advice")
        assert [(a.name, a.required) for a in advice.arguments or []] == [("sku", True)]
        prompt = await client.get_prompt("restock_advice", {"sku": "WID-002"})
        assert len(prompt.messages) == 1
        assert prompt.messages[0].role == "user"
        text = prompt.messages[0].content.text
        assert "WID-002 (Wide widget)" in text and "4 units in stock" in text and "restock tool" in text

        completed = await client.complete(t.PromptReference(name="restock_advice"), {"name": "sku", "value": "wid"})
        assert completed.completion.values == ["WID-001", "WID-002"]
        completed = await client.complete(t.ResourceTemplateReference(uri="inventory://products/{sku}"), {"name": "sku", "value": "G"})
        assert completed.completion.values == ["GAD-001"]


async def test_a_read_after_a_write_is_fresh(server_url: str, mode: str) -> None:
    """The official 2026-07-28 client caches a resources/read result for its ttlMs: a resource's
    read says 0 unless the resource asks for more, so a read after a tool changed it is fresh."""
    await create_products()
    token = await sync_to_async(create_user_with_token)(f"fresh-reader-{mode}", ("inventory.change_product",))
    async with sdk_client(server_url, mode, token=token) as client:
        before = json.loads((await client.read_resource("inventory://products/WID-001")).contents[0].text)["stock"]
        restocked = await client.call_tool("restock", {"sku": "WID-001", "quantity": 5})
        assert restocked.structured_content["stock"] == before + 5
        after = json.loads((await client.read_resource("inventory://products/WID-001")).contents[0].text)["stock"]
    assert after == before + 5


async def test_progress_and_log_notifications(server_url: str, mode: str) -> None:
    progress: list[tuple[float, float | None, str | None]] = []
    logs: list[t.LoggingMessageNotificationParams] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    async def on_log(params: t.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    n = 4
    async with sdk_client(server_url, mode, logging_callback=on_log, log_level="info") as client:
        await client.list_tools()
        result = await client.call_tool("slow_count", {"n": n}, progress_callback=on_progress)
    assert result.content[0].text == f"counted to {n}"
    assert len(progress) >= n
    values = [p[0] for p in progress]
    assert values == sorted(values) and len(set(values)) == len(values), values
    assert progress[-1] == (n, n, f"step {n}")
    assert [(entry.level, entry.data) for entry in logs] == [("info", f"counted {i}") for i in range(1, n + 1)]


async def test_log_level_filters_in_2026(server_url: str) -> None:
    logs: list[t.LoggingMessageNotificationParams] = []

    async def on_log(params: t.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    async with sdk_client(server_url, MODERN, logging_callback=on_log, log_level="warning") as client:
        await client.list_tools()
        result = await client.call_tool("slow_count", {"n": 2})
    assert result.content[0].text == "counted to 2"
    assert logs == []  # "info" messages are below the requested level


# -- elicitation and sampling ------------------------------------------------------------------------


async def test_deploy_with_elicitation_and_sampling(server_url: str, mode: str) -> None:
    service = f"api-{mode}"
    user = FakeUser(env="production", verdict="yes")
    async with sdk_client(server_url, mode, elicitation_callback=user.elicit, sampling_callback=user.sample) as client:
        await client.list_tools()
        result = await client.call_tool("deploy", {"service": service})
    assert result.is_error is False, result
    rows = await audit_rows(service)
    assert len(rows) == 1
    assert rows[0]["detail"] == {"service": service, "env": "production", "verdict": "yes"}
    assert rows[0]["actor"] == ""
    assert result.structured_content == {"service": service, "env": "production", "verdict": "yes", "audit_id": rows[0]["id"]}
    assert json.loads(result.content[0].text) == result.structured_content

    assert len(user.elicitations) == 1
    assert user.elicitations[0].message == f"Where should {service} be deployed?"
    assert user.elicitations[0].requested_schema["properties"]["env"]["enum"] == ["staging", "production"]
    assert len(user.samplings) == 1
    asked = user.samplings[0]
    assert asked.max_tokens == 100
    assert _blocks(asked.messages[0])[0].text == f"Is deploying {service} to production safe? Answer yes or no."


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_deploy_declined(server_url: str, mode: str, action: str) -> None:
    service = f"declined-{mode}-{action}"
    user = FakeUser(elicit_action=action)
    async with sdk_client(server_url, mode, elicitation_callback=user.elicit, sampling_callback=user.sample) as client:
        await client.list_tools()
        result = await client.call_tool("deploy", {"service": service})
    assert result.is_error is True
    assert result.content[0].text == "Deployment cancelled by the user"
    assert len(user.elicitations) == 1
    assert user.samplings == []  # nothing after the user said no
    assert await audit_rows(service) == []


async def test_deploy_with_an_answer_that_breaks_the_schema_ends_the_call(server_url: str, mode: str) -> None:
    """An elicitation answer outside the requested enum (a UI bug, free text) is refused with -32602 and
    the call ends: 2025-11-25 fails the step (the POST gets 400, which the SDK ignores, and the tool's
    result is an error), 2026-07-28 answers the retry with the error. Before, a 2025-11-25 step kept
    waiting for a corrected answer the SDK never sends: tools/call hung until the client's read timeout
    (-32001) and the row stayed input_required until CALL_TTL."""
    service = f"refused-{mode}"
    user = FakeUser(env="moon")
    async with sdk_client(server_url, mode, elicitation_callback=user.elicit, sampling_callback=user.sample,
                          read_timeout_seconds=20) as client:
        await client.list_tools()
        try:
            outcome: t.CallToolResult | MCPError = await client.call_tool("deploy", {"service": service})
        except MCPError as exc:
            outcome = exc
    if isinstance(outcome, MCPError):
        assert mode == MODERN, outcome
        assert outcome.error.code == -32602 and "Invalid" in outcome.error.message, outcome
    else:
        assert mode == "legacy" and outcome.is_error is True, outcome
        assert "Invalid answer" in outcome.content[0].text, outcome
    assert len(user.elicitations) == 1 and user.samplings == []
    assert await audit_rows(service) == []


async def test_sampling_with_server_side_calculator(server_url: str, mode: str) -> None:
    seen: list[t.CreateMessageRequestParams] = []
    tool_results: list[str] = []

    async def model(ctx: ClientRequestContext, params: t.CreateMessageRequestParams) -> t.CreateMessageResultWithTools | t.CreateMessageResult:
        seen.append(params)
        results = [block for block in _blocks(params.messages[-1]) if isinstance(block, t.ToolResultContent)]
        if not results:
            assert params.tools is not None and [tool.name for tool in params.tools] == ["calculator"]
            assert params.tools[0].input_schema["properties"]["expression"]["type"] == "string"
            return t.CreateMessageResultWithTools(
                role="assistant", model="fake", stop_reason="toolUse",
                content=[t.ToolUseContent(id="call_1", name="calculator", input={"expression": "6*7"})],
            )
        assert results[0].tool_use_id == "call_1"
        assert not results[0].is_error
        text = "".join(block.text for block in results[0].content if isinstance(block, t.TextContent))
        tool_results.append(text)
        return t.CreateMessageResult(role="assistant", model="fake", stop_reason="endTurn", content=t.TextContent(text=f"The answer is {text}"))

    async with sdk_client(
        server_url, mode, sampling_callback=model, sampling_capabilities=t.SamplingCapability(tools=t.SamplingToolsCapability()),
    ) as client:
        await client.list_tools()
        result = await client.call_tool("ask_with_calculator", {"question": "What is six times seven?"})
    assert result.is_error is False, result
    assert len(seen) == 2
    assert _blocks(seen[0].messages[0])[0].text == "What is six times seven?"
    # The second request replays the model's tool_use and carries the server's tool_result.
    assert any(isinstance(b, t.ToolUseContent) and b.name == "calculator" for m in seen[1].messages for b in _blocks(m))
    assert len(tool_results) == 1 and "42" in tool_results[0]
    assert result.content[0].text == f"The answer is {tool_results[0]}"


async def test_a_model_told_to_use_a_tool_can_still_answer(start_server: type[LiveServer], mode: str) -> None:
    """``tool_choice={"mode": "required"}`` was sent with every turn of the loop: a model that obeys it
    (this one calls the calculator whenever the request says "required") never gave its answer, and
    the call failed once the model had asked for SAMPLING_MAX_TOOL_CALLS calls. The first turn is
    "required", the turn after the calculator's result "auto", and the model answers."""
    choices: list[str | None] = []

    async def model(ctx: ClientRequestContext, params: t.CreateMessageRequestParams) -> t.CreateMessageResultWithTools | t.CreateMessageResult:
        choices.append(params.tool_choice.mode if params.tool_choice is not None else None)
        if params.tool_choice is not None and params.tool_choice.mode == "required":
            return t.CreateMessageResultWithTools(
                role="assistant", model="fake", stop_reason="toolUse",
                content=[t.ToolUseContent(id=f"call_{len(choices)}", name="calculator", input={"expression": "6*7"})],
            )
        results = [block for block in _blocks(params.messages[-1]) if isinstance(block, t.ToolResultContent)]
        text = "".join(block.text for block in results[0].content if isinstance(block, t.TextContent))
        return t.CreateMessageResult(role="assistant", model="fake", stop_reason="endTurn", content=t.TextContent(text=f"It is {text}"))

    url = start_server(server="uvicorn", app="tests.live_extras_asgi:application").start().url
    async with sdk_client(
        url, mode, sampling_callback=model, sampling_capabilities=t.SamplingCapability(tools=t.SamplingToolsCapability()),
    ) as client:
        await client.list_tools()
        result = await client.call_tool("live_ask_must_calculate", {"question": "What is six times seven?"})
    assert result.is_error is False, result
    assert choices == ["required", "auto"], choices
    assert "42" in result.content[0].text, result


# -- errors --------------------------------------------------------------------------------------------


async def test_unknown_tool_and_invalid_arguments(server_url: str, mode: str) -> None:
    async with sdk_client(server_url, mode) as client:
        await client.list_tools()
        with pytest.raises(MCPError) as unknown:
            await client.call_tool("no_such_tool", {})
        assert unknown.value.error.code == -32602
        assert "no_such_tool" in unknown.value.error.message

        # Invalid arguments: a tool execution error the model can read (server/tools, Error Handling).
        missing = await client.call_tool("echo", {})
        out_of_range = await client.call_tool("search_products", {"query": "w", "limit": 0})
        for refused, field in ((missing, "text"), (out_of_range, "limit")):
            assert refused.is_error is True and f"- {field}: " in refused.content[0].text, refused
            assert [error["field"] for error in refused.meta[ARGUMENT_ERRORS_META]] == [field]

        # The session/connection is still usable afterwards.
        assert (await client.call_tool("echo", {"text": "still here"})).content[0].text == "still here"


# -- authentication and permissions ------------------------------------------------------------------


async def test_authentication_and_permissions(start_server: type[LiveServer]) -> None:
    plain_token = await sync_to_async(create_user_with_token)("plain")
    clerk_token = await sync_to_async(create_user_with_token)("clerk", ("inventory.change_product",))
    await create_products()
    url = start_server(env={"MCP_TESTS_NO_ANON": "1"}).start().url

    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                  "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    list_params = {"_meta": modern_meta({})}
    modern_list = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": list_params}
    async with httpx2.AsyncClient(timeout=30) as http:
        for token in (None, "0" * 40):
            auth = {"Authorization": f"Token {token}"} if token else {}
            legacy = await http.post(url, json=initialize, headers={"Accept": JSON_ACCEPT, **auth})
            assert legacy.status_code == 401, legacy.text
            assert legacy.headers["www-authenticate"] == "Token"
            assert legacy.json()["error"]["code"] == -32600
            modern = await http.post(url, json=modern_list, headers={**modern_headers("tools/list", list_params), **auth})
            assert modern.status_code == 401, modern.text
            assert "mcp-session-id" not in legacy.headers

    for mode in MODES:
        # legacy: initialize fails (the SDK wraps the MCPError in an ExceptionGroup); 2026: the first request fails.
        with pytest.raises((MCPError, ExceptionGroup)) as anonymous:
            async with sdk_client(url, mode) as client:
                await client.list_tools()
        error = _first_mcp_error(anonymous.value)
        assert "Unauthorized" in error.error.message

        async with sdk_client(url, mode, token=plain_token) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert "echo" in names and "restock" not in names
            assert (await client.call_tool("echo", {"text": f"hi {mode}"})).content[0].text == f"hi {mode}"
            with pytest.raises(MCPError) as refused:
                await client.call_tool("restock", {"sku": "WID-002", "quantity": 5})
            assert refused.value.error.code == -32602
            assert refused.value.error.message == "Unknown tool: restock"  # same as a tool that does not exist

        async with sdk_client(url, mode, token=clerk_token) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            assert "restock" in tools
            assert tools["restock"].input_schema["properties"]["quantity"]["maximum"] == 100_000
            result = await client.call_tool("restock", {"sku": "WID-002", "quantity": 5})
            assert result.is_error is False, result
            assert result.structured_content["sku"] == "WID-002"

    from demo_site.inventory.models import Product

    stock = await sync_to_async(lambda: Product.objects.get(sku="WID-002").stock)()
    assert stock == 4 + 5 * len(MODES)  # only the permitted calls changed anything


async def test_authenticated_deploy_records_the_actor(start_server: type[LiveServer]) -> None:
    token = await sync_to_async(create_user_with_token)("deployer")
    url = start_server(env={"MCP_TESTS_NO_ANON": "1"}).start().url
    for mode in MODES:
        user = FakeUser(env="staging", verdict="fine")
        async with sdk_client(url, mode, token=token, elicitation_callback=user.elicit, sampling_callback=user.sample) as client:
            await client.list_tools()
            result = await client.call_tool("deploy", {"service": f"auth-{mode}"})
        assert result.is_error is False, result
        rows = await audit_rows(f"auth-{mode}")
        assert [(row["actor"], row["detail"]["env"]) for row in rows] == [("deployer", "staging")]


# -- arguments mirrored in Mcp-Param-* headers ----------------------------------------------------


async def test_tools_with_optional_and_nested_header_arguments_are_listed_and_called(start_server: type[LiveServer]) -> None:
    """The official 2026-07-28 client drops from tools/list a tool whose x-mcp-header annotations break the
    spec's rules (find_invalid_x_mcp_header): ``Annotated[str | None, Field(json_schema_extra={"x-mcp-header":
    "Zone"})] = None`` was such a tool (pydantic's anyOf has no ``type``), and so was an annotated field of a
    nested model (in ``$defs``). Both are listed now; the client mirrors the values (the nested one from its
    property path) and the server checks them, and an omitted or null optional argument needs no header."""
    url = start_server(server="uvicorn", app="tests.live_extras_asgi:application").start().url
    async with sdk_client(url, MODERN) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert {"live_zoned", "live_deploy_to"} <= set(tools), sorted(tools)
        assert tools["live_zoned"].input_schema["properties"]["zone"]["type"] == "string"
        assert (await client.call_tool("live_zoned", {"zone": "eu-west"})).content[0].text == "zone=eu-west"
        assert (await client.call_tool("live_zoned", {"zone": None})).content[0].text == "zone=None"
        assert (await client.call_tool("live_zoned", {})).content[0].text == "zone=None"
        deployed = await client.call_tool("live_deploy_to", {"target": {"region": "eu-west", "replicas": 2}})
        assert deployed.content[0].text == "eu-westx2"


# -- idle streams -------------------------------------------------------------------------------


@pytest.mark.parametrize("server", ["daphne", "uvicorn"])
async def test_an_idle_2026_subscription_outlives_the_client_read_timeout(start_server: type[LiveServer], server: str) -> None:
    """The official client reads a 2026-07-28 ``subscriptions/listen`` stream with a read timeout (300 s by
    default): with nothing to notify for longer, a stream that carried no byte died (httpx ReadTimeout, the
    SDK's SubscriptionLost). Keep-alive comments (every second on this server) keep it open past the
    client's 4 s read timeout, for three times as long."""
    import anyio
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    url = start_server(server=server, app="tests.live_extras_asgi:application").start().url
    read_timeout = 4.0
    idle_for = 3 * read_timeout
    async with httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=read_timeout)) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=MODERN, read_timeout_seconds=30) as client:
            async with client.listen(tools_list_changed=True) as subscription:
                with anyio.move_on_after(idle_for) as idle:
                    async for event in subscription:
                        raise AssertionError(f"nothing changed, yet the subscription delivered {event!r}")
            assert idle.cancelled_caught, "the subscription ended before the idle period did"
            assert (await client.call_tool("echo", {"text": "still here"})).content[0].text == "still here"


class CuttingProxy:
    """A TCP proxy in front of the live server that closes the first connection whose answer carries
    ``trigger``, as a network would drop an SSE stream (every later connection passes)."""

    def __init__(self, url: str, trigger: bytes) -> None:
        from urllib.parse import urlsplit

        parts = urlsplit(url)
        self.target = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.path = parts.path
        self.trigger = trigger
        self.cut = False
        self.server: Any = None

    async def __aenter__(self) -> str:
        import asyncio

        self.server = await asyncio.start_server(self._connection, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}{self.path}"

    async def __aexit__(self, *exc: Any) -> None:
        self.server.close()

    async def _connection(self, reader: Any, writer: Any) -> None:
        import asyncio

        upstream_reader, upstream_writer = await asyncio.open_connection(*self.target)

        async def pipe(source: Any, sink: Any, watch: bool) -> None:
            try:
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
                    if watch and not self.cut and self.trigger in data:
                        self.cut = True  # the client got this much of the stream, then nothing more
                        break
            except OSError:
                pass
            finally:
                writer.close()
                upstream_writer.close()

        await asyncio.gather(pipe(reader, upstream_writer, False), pipe(upstream_reader, writer, True), return_exceptions=True)


async def test_a_2025_call_whose_stream_drops_is_resumed_by_the_official_client_and_answers_once(server_url: str) -> None:
    """The network drops the POST's SSE stream after progress 5 of a fast call (no row). The spec: a
    disconnection is no cancellation, and the client resumes with Last-Event-ID. The official client
    does, and gets the answer, each progress value and log line once, the progress never going back."""
    progress: list[float] = []
    logs: list[Any] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async def on_log(params: t.LoggingMessageNotificationParams) -> None:
        logs.append(params.data)

    n = 20
    proxy = CuttingProxy(server_url, b'"progress":5,')
    async with proxy as url, sdk_client(url, "legacy", logging_callback=on_log, log_level="info") as client:
        result = await client.call_tool("slow_count", {"n": n}, progress_callback=on_progress)
    assert proxy.cut, "the stream was not cut"
    assert result.content[0].text == f"counted to {n}"
    assert progress == list(range(1, n + 1)), progress
    assert logs == [f"counted {i}" for i in range(1, n + 1)], logs


class SwitchingProxy:
    """A TCP proxy standing for a load balancer: new connections go to ``target`` (a live server's
    URL), which the test switches when it stops that server."""

    def __init__(self, url: str) -> None:
        self.target = url
        self.server: Any = None

    async def __aenter__(self) -> str:
        import asyncio

        self.server = await asyncio.start_server(self._connection, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/mcp"

    async def __aexit__(self, *exc: Any) -> None:
        self.server.close()

    async def _connection(self, reader: Any, writer: Any) -> None:
        import asyncio
        from urllib.parse import urlsplit

        parts = urlsplit(self.target)
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(parts.hostname, parts.port)
        except OSError:
            writer.close()
            return

        async def pipe(source: Any, sink: Any) -> None:
            try:
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            except OSError:
                pass
            finally:
                writer.close()
                upstream_writer.close()

        await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer), return_exceptions=True)


@pytest.mark.parametrize("stop_at", [60, 10], ids=["with_row", "without_row"])
async def test_a_2025_call_in_flight_when_daphne_shuts_down_is_finished_by_another_process(
        start_server: type[LiveServer], stop_at: int) -> None:
    """A rolling deploy: the daphne process running a call is stopped with SIGTERM; the load balancer
    sends the official client's resume (Last-Event-ID) to a uvicorn process on the same database, which
    takes the call over from its journal and answers it. Daphne cancels its applications at shutdown
    with no http.disconnect, and that used to end the call cancelled: the client got "The call was
    cancelled before it finished.". ``without_row``: stopped 0.5 s in, before SLOW_CALL_SECONDS gave
    the call its row; the resume answered 200 with the logged events and never an answer, for good."""
    import asyncio

    first = start_server(server="daphne").start()
    second = start_server(server="uvicorn").start()
    progress: list[float] = []
    n = 100  # 5 s: the call gets its row after SLOW_CALL_SECONDS (2 s)

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    proxy = SwitchingProxy(first.url)
    async with proxy as url, sdk_client(url, "legacy") as client:
        call = asyncio.ensure_future(client.call_tool("slow_count", {"n": n}, progress_callback=on_progress))
        while not progress or progress[-1] < stop_at:  # 3 s in: the call has its row (0.5 s: none yet)
            assert not call.done(), call.result()
            await asyncio.sleep(0.05)
        proxy.target = second.url  # new connections go to the other process...
        await asyncio.to_thread(first.stop)  # ...and daphne gets SIGTERM, the call running, its stream open
        result = await asyncio.wait_for(call, 60)
    assert not result.is_error and result.content[0].text == f"counted to {n}", result
    assert progress[-1] == n and all(a < b for a, b in zip(progress, progress[1:])), progress
