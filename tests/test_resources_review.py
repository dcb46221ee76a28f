"""Review of resources, prompts, completion and capabilities (both eras). Each test fails on the
current code for the reason its docstring gives."""
from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async

import mcp_tools
from mcp_tools import prompt, resource
from mcp_tools.models import ResourceSubscription
from mcp_tools.registry import registry
from mcp_tools.transports.http import McpEndpoint
from tests.asgi_client import HANDSHAKE, call_modern, handshake_message, modern_message, post_headers, post_json
from tests.clients import create_user_with_token

pytestmark = pytest.mark.django_db(transaction=True)
APP = McpEndpoint()


@pytest.fixture(autouse=True)
def _in_memory_layer(settings: Any) -> None:
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


async def open_session(token: str | None = None) -> str:
    message = handshake_message("initialize", {"protocolVersion": HANDSHAKE, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}})
    r = await post_json(APP, message, post_headers(version=None, token=token))
    assert r.status == 200, r.body
    return r.header("mcp-session-id")


async def legacy(session: str, method: str, params: dict[str, Any], token: str | None = None) -> dict[str, Any]:
    r = await post_json(APP, handshake_message(method, params), post_headers(version=HANDSHAKE, session=session, token=token))
    assert r.status == 200, r.body
    return r.json()


async def discover_capabilities() -> dict[str, Any]:
    r = await call_modern(APP, "server/discover", {})
    return r.json()["result"]["capabilities"]


# -- 1. 2026-07-28: log messages are sent, but the logging capability is not declared -------------------

async def test_discover_declares_logging_since_log_messages_are_sent() -> None:
    """2026-07-28 logging.mdx, Capabilities: "Servers that emit log message notifications MUST declare
    the `logging` capability". The server emits notifications/message for a request whose _meta has
    io.modelcontextprotocol/logLevel, yet server/discover leaves `logging` out."""
    message = modern_message("tools/call", {"name": "test_tool_with_logging", "arguments": {},
                                            "_meta": {"io.modelcontextprotocol/logLevel": "info"}})
    r = await post_json(APP, message, post_headers(extra={"mcp-method": "tools/call", "mcp-name": "test_tool_with_logging"}))
    sent = [m.get("method") for m in r.sse_messages()]
    assert "notifications/message" in sent, sent  # the server does emit log messages in this era
    assert "logging" in await discover_capabilities()


# -- 2. 2026-07-28: resourceSubscriptions are honoured, but resources.subscribe is not declared ---------

async def test_discover_declares_resource_subscribe_since_listen_honours_resource_subscriptions() -> None:
    """2026-07-28 resources.mdx, Capabilities: `subscribe` says "whether the server supports
    resource-specific update notifications for resources requested through subscriptions/listen using
    the resourceSubscriptions filter". The server honours that filter (tests/test_resource_updates.py,
    docs/protocol.md) but server/discover advertises only listChanged, so a client that checks the
    capability before subscribing never subscribes."""
    caps = await discover_capabilities()
    assert caps["resources"].get("subscribe") is True, caps["resources"]


# -- 4. prompts/get: what a prompt returns is sent as messages no client can read --------------------------

def one_message() -> Any:
    return {"role": "user", "content": {"type": "text", "text": "Summarise the report."}}


def model_content() -> Any:
    from mcp_types import TextContent
    return [("user", TextContent(type="text", text="Summarise the report."))]


def system_role() -> Any:
    return [("system", "You are terse.")]


@pytest.mark.parametrize("fn", [one_message, model_content, system_role])
@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_prompt_result_is_a_valid_get_prompt_result_or_an_error(fn: Any, era: str) -> None:
    """core.shape_prompt passes what a prompt returns through unchecked, so prompts/get answers a
    result that breaks GetPromptResult: a single message dict is iterated as its keys (two user
    messages "role" and "content"), an mcp_types content model (accepted from tools) is sent as its
    repr string (jsonrpc.dumps(default=str)), and a role other than "user"/"assistant" goes out as is.
    The answer must be a valid GetPromptResult (the value converted) or a -32603, never malformed."""
    from mcp_types import _v2025_11_25, _v2026_07_28

    name = f"review_{fn.__name__}"
    prompt(name=name)(fn)
    try:
        if era == "2026-07-28":
            body = (await call_modern(APP, "prompts/get", {"name": name})).json()
            model = _v2026_07_28.GetPromptResult
        else:
            body = await legacy(await open_session(), "prompts/get", {"name": name})
            model = _v2025_11_25.GetPromptResult
    finally:
        registry.unregister_prompt(name)
    if "error" in body:
        assert body["error"]["code"] == -32603, body
        return
    model.model_validate(body["result"])  # raises: the result is not a GetPromptResult
    assert [m["content"].get("text") for m in body["result"]["messages"]] != ["role", "content"], body


async def test_a_prompt_of_model_content_and_an_assistant_message_is_sent_converted() -> None:
    """The valid shapes go out converted, not refused: a content model as its JSON, a single
    message dict as one message."""
    from mcp_types import TextContent

    def conversation() -> Any:
        return [("user", TextContent(type="text", text="Hi")), {"role": "assistant", "content": "Hello."}]

    prompt(name="review_conversation")(conversation)
    try:
        body = (await call_modern(APP, "prompts/get", {"name": "review_conversation"})).json()
    finally:
        registry.unregister_prompt("review_conversation")
    assert body["result"]["messages"] == [
        {"role": "user", "content": {"type": "text", "text": "Hi"}},
        {"role": "assistant", "content": {"type": "text", "text": "Hello."}},
    ], body


# -- 5. resources/read: a pydantic model is sent as its repr ----------------------------------------------

async def test_a_resource_returning_a_pydantic_model_reads_as_its_json() -> None:
    """core.shape_resource JSON-encodes anything that is not str/bytes with json.dumps(default=str), so a
    resource that returns a pydantic model (as tools may, and as the demo's ProductOut is) is read as
    the JSON string of its repr ("sku='WID-001' stock=4") labelled application/json, not as the
    model's JSON object."""
    from pydantic import BaseModel

    class Stock(BaseModel):
        sku: str
        stock: int

    def stock() -> Stock:
        return Stock(sku="WID-001", stock=4)

    resource("review://stock")(stock)
    try:
        body = (await call_modern(APP, "resources/read", {"uri": "review://stock"})).json()
    finally:
        registry.unregister_resource("review://stock")
    content = body["result"]["contents"][0]
    assert json.loads(content["text"]) == {"sku": "WID-001", "stock": 4}, content


async def test_a_resource_may_return_mcp_types_resource_contents() -> None:
    """What a resource returns may be ready contents as mcp_types models, as a tool may return
    mcp_types content blocks; before, such a model was read as the JSON string of its repr."""
    from mcp_types import TextResourceContents

    def contents() -> TextResourceContents:
        return TextResourceContents(uri="review://contents", mime_type="text/markdown", text="# Stock")

    resource("review://contents")(contents)
    try:
        body = (await call_modern(APP, "resources/read", {"uri": "review://contents"})).json()
    finally:
        registry.unregister_resource("review://contents")
    assert body["result"]["contents"] == [{"uri": "review://contents", "mimeType": "text/markdown", "text": "# Stock"}], body


# -- 6. resource templates: what the matcher accepts ----------------------------------------------------

async def test_a_template_does_not_match_a_uri_with_a_trailing_newline() -> None:
    """Resource.__post_init__ anchors the pattern with "$", which also matches before a final "\\n": the
    demo template test://template/{id}/data reads "test://template/x/data\\n" (and echoes that
    invalid URI in contents[0].uri), while the fixed resource test://static-text\\n is -32602.
    resources.mdx, Security: "Servers MUST validate all resource URIs"."""
    uri = "test://template/x/data\n"
    import base64
    r = await call_modern(APP, "resources/read", {"uri": uri},
                          headers={"mcp-name": "=?base64?" + base64.b64encode(uri.encode()).decode() + "?="})
    body = r.json()
    assert body.get("error", {}).get("code") == -32602, body


@pytest.mark.parametrize("uri", ["test://template/x\ny/data", "test://template/x y/data", "test://template/x\ty/data"])
async def test_a_template_variable_does_not_match_whitespace_inside_a_uri(uri: str) -> None:
    """A URI has no whitespace or control characters (RFC 3986; RFC 6570 expansion encodes them):
    "test://template/x\ny/data" is no URI the demo's test://template/{id}/data gives, so it is not read."""
    import base64
    r = await call_modern(APP, "resources/read", {"uri": uri},
                          headers={"mcp-name": "=?base64?" + base64.b64encode(uri.encode()).decode() + "?="})
    body = r.json()
    assert body.get("error", {}).get("code") == -32602, body


def test_a_reserved_template_variable_takes_slashes_but_not_spaces() -> None:
    from mcp_tools.registry import Resource

    template = Resource(uri=None, uri_template="files:///{+path}", name="files", title=None, description=None,
                        mime_type=None, fn=lambda path: path, is_async=False, permissions=(), completions={})
    assert template.match("files:///a/b%20c.txt") == {"path": "a/b c.txt"}
    assert template.match("files:///a/b c.txt") is None
    assert template.match("files:///a\nb") is None


async def test_a_fragment_template_variable_is_expanded_as_rfc6570_says() -> None:
    """{#var} passes the registration check (lstrip("+#")) but is matched like {var}: the "#" the
    expansion adds is neither required nor stripped. For "review://doc{#section}", RFC 6570 expands
    section="intro" to "review://doc#intro": the handler gets "#intro" for that URI, and
    "review://docintro" (which the template cannot produce) is read as section "intro". Either
    {#var} is refused at registration, as {?q} is, or it is matched as a fragment."""
    def doc(section: str) -> str:
        return section

    try:
        resource("review://doc{#section}")(doc)
    except Exception:
        return  # refused at registration, like the other unsupported operators: fine
    try:
        body = (await call_modern(APP, "resources/read", {"uri": "review://doc#intro"})).json()
        stray = (await call_modern(APP, "resources/read", {"uri": "review://docintro"})).json()
    finally:
        registry.unregister_resource("review://doc{#section}")
    assert body["result"]["contents"][0]["text"] == "intro", body
    assert stray.get("error", {}).get("code") == -32602, stray


# -- 3. 2025-11-25: a subscription the client can no longer remove ----------------------------------------

GATED_URI = "review://gated"


def gated() -> str:
    return "secret"


async def test_unsubscribe_works_after_the_caller_lost_access_to_the_resource() -> None:
    """resources/unsubscribe re-checks that the URI names a resource the caller may read
    (methods._subscription_uri), so once the caller's permission is revoked (or the resource is
    unregistered) unsubscribe answers -32602 "Resource not found" and the subscription row stays: the
    session keeps getting notifications/resources/updated for a resource it may no longer read and has
    no way to stop them. Unsubscribing from one's own subscription must always succeed and remove it."""
    token = await sync_to_async(create_user_with_token)("reviewer", ("inventory.change_product",))
    resource(GATED_URI, permissions=["inventory.change_product"])(gated)
    try:
        session = await open_session(token)
        subscribed = await legacy(session, "resources/subscribe", {"uri": GATED_URI}, token)
        assert subscribed.get("result") == {}, subscribed
        assert await sync_to_async(ResourceSubscription.objects.filter(session_id=session, uri=GATED_URI).exists)()

        def revoke() -> None:
            from django.contrib.auth.models import User
            User.objects.get(username="reviewer").user_permissions.clear()

        await sync_to_async(revoke)()
        answer = await legacy(session, "resources/unsubscribe", {"uri": GATED_URI}, token)
        still_subscribed = await sync_to_async(ResourceSubscription.objects.filter(session_id=session, uri=GATED_URI).exists)()
        notified = await mcp_tools.notify_resource_updated(GATED_URI)
    finally:
        registry.unregister_resource(GATED_URI)
    assert "result" in answer, answer
    assert not still_subscribed
    assert notified == 0


@pytest.mark.parametrize("variant", ["async", "sync"])
@pytest.mark.parametrize("lost", ["permission", "active"])
async def test_an_update_is_not_sent_to_a_session_that_may_no_longer_read_the_resource(variant: str, lost: str) -> None:
    """notify_resource_updated told every subscribed session, also one whose user had since lost the
    permission to read the resource (or was made inactive): resources/read refuses it, and
    resources/subscribe would now. At send time such a session is left out and unsubscribed;
    one that may still read it is told."""
    from mcp_tools.interprocess import notifications

    perm = ("inventory.change_product",)
    tokens = {name: await sync_to_async(create_user_with_token)(name, perm) for name in ("leaver", "keeper")}
    resource(GATED_URI, permissions=list(perm))(gated)
    outboxes = {name: notifications.Outbox() for name in tokens}
    sessions: dict[str, str] = {}
    try:
        for name, token in tokens.items():
            sessions[name] = await open_session(token)
            assert (await legacy(sessions[name], "resources/subscribe", {"uri": GATED_URI}, token)).get("result") == {}
            await notifications.open_stream(sessions[name], outboxes[name])

        def take_away() -> None:
            from django.contrib.auth.models import User
            user = User.objects.get(username="leaver")
            if lost == "permission":
                user.user_permissions.clear()
            else:
                user.is_active = False
                user.save()

        await sync_to_async(take_away)()
        if variant == "async":
            told = await mcp_tools.notify_resource_updated(GATED_URI)
        else:
            told = await sync_to_async(mcp_tools.notify_resource_updated_sync)(GATED_URI)
        for _ in range(500):  # delivered by this process's listener, in a task of its own
            if outboxes["keeper"].qsize():
                break
            await asyncio.sleep(0.01)
        subscribed = await sync_to_async(lambda: set(ResourceSubscription.objects.filter(uri=GATED_URI).values_list("session_id", flat=True)))()
    finally:
        for name, session in sessions.items():
            notifications.close_stream(session, outboxes[name])
        registry.unregister_resource(GATED_URI)
    assert told == 1
    assert outboxes["keeper"].qsize() == 1
    assert outboxes["leaver"].qsize() == 0, "the session that may no longer read the resource was told of it"
    assert subscribed == {sessions["keeper"]}, "the lost reader's subscription stays"


async def test_unsubscribe_works_after_the_resource_was_unregistered() -> None:
    """The same with a resource that goes away (a registry that changes at run time, as the
    notifications/resources/list_changed the server advertises implies): the client hears
    list_changed, unsubscribes, and is refused, and the row stays until the session ends."""
    resource("review://transient")(gated)
    try:
        session = await open_session()
        subscribed = await legacy(session, "resources/subscribe", {"uri": "review://transient"})
        assert "result" in subscribed, subscribed
    finally:
        registry.unregister_resource("review://transient")
    answer = await legacy(session, "resources/unsubscribe", {"uri": "review://transient"})
    assert "result" in answer, answer
    assert not await sync_to_async(ResourceSubscription.objects.filter(session_id=session, uri="review://transient").exists)()


# -- 7. URIs longer than the tables' columns ---------------------------------------------------------

async def test_subscribing_to_a_uri_longer_than_the_column_is_invalid_params() -> None:
    """resources/subscribe stores the URI in ResourceSubscription.uri, a CharField(max_length=2048),
    without bounding it first; a template such as inventory://products/{sku} matches a URI of any
    length, so on PostgreSQL a longer URI raises DataError inside the handler: -32603 "Internal error"
    (logged with a traceback), while SQLite silently stores it. The answer is -32602 on any database,
    and nothing is stored."""
    uri = "inventory://products/" + "A" * 3000
    session = await open_session()
    body = await legacy(session, "resources/subscribe", {"uri": uri})
    assert body.get("error", {}).get("code") == -32602, body
    assert not await sync_to_async(ResourceSubscription.objects.filter(session_id=session).exists)()


async def test_a_recorded_read_of_a_long_uri_names_its_row_within_the_column(settings: Any) -> None:
    """resources/read names its call row (ToolCall.tool_name, a CharField(max_length=256)) by the URI,
    which a template matches at any length: with RECORD_ALL_CALLS (or a read slower than
    SLOW_CALL_SECONDS) a longer URI made PostgreSQL refuse the row. The row's name is cut to the
    column, and the whole URI stays in its arguments."""
    from mcp_tools.models import CALL_NAME_MAX_LENGTH, ToolCall

    settings.MCP_TOOLS = {**settings.MCP_TOOLS, "RECORD_ALL_CALLS": True}
    uri = "review://long/" + "A" * 3000

    def long(rest: str) -> str:
        return "secret"

    resource("review://long/{rest}")(long)
    try:
        body = await legacy(await open_session(), "resources/read", {"uri": uri})
    finally:
        registry.unregister_resource("review://long/{rest}")
    assert body["result"]["contents"][0]["text"] == "secret", body
    row = await sync_to_async(ToolCall.objects.get)(method="resources/read")
    assert row.tool_name == uri[:CALL_NAME_MAX_LENGTH]
    assert row.arguments["uri"] == uri
