"""A resource whose function takes a :class:`~mcp_tools.ToolContext`, as tools and prompts may.

docs/protocol.md lists ``resources/read`` among the 2026-07-28 multi-round-trip requests, but a
resource function never received a context: one declaring it registered without complaint, then
every read was -32603 (``missing 1 required positional argument: 'ctx'``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import mcp_tools
from mcp_tools import ToolContext
from mcp_tools.registry import registry
from tests.asgi_client import call_modern

pytestmark = pytest.mark.django_db(transaction=True)

CAPS = {"elicitation": {"form": {}}}
SECRET_URI = "notes://secret"


@pytest.fixture(autouse=True)
def secret_notes() -> Iterator[None]:
    @mcp_tools.resource(SECRET_URI, mime_type="text/plain")
    async def secret_note(ctx: ToolContext) -> str:
        """A note the user must agree to share."""
        answer = await ctx.elicit("Share the secret note?", {"type": "object", "properties": {"share": {"type": "boolean"}}}, key="share")
        return "the note" if answer.get("share") else "withheld"

    @mcp_tools.resource("notes://{topic}", mime_type="text/plain")
    def topic_note(topic: str, ctx: ToolContext) -> str:
        """A note on a topic, for the caller."""
        return f"{topic} for {ctx.principal.id}"

    try:
        yield
    finally:
        registry.unregister_resource(SECRET_URI)
        registry.unregister_resource("notes://{topic}")


async def read(params: dict[str, Any]) -> dict[str, Any]:
    body = (await call_modern(mcp_tools_app(), "resources/read", params, capabilities=CAPS)).json()
    assert "result" in body, body
    result: dict[str, Any] = body["result"]
    return result


def mcp_tools_app() -> Any:
    from demo_site.asgi import application

    return application


async def test_a_resource_that_asks_is_read_over_two_rounds() -> None:
    first = await read({"uri": SECRET_URI})
    assert first["resultType"] == "input_required", first
    assert first["inputRequests"]["share"]["params"]["message"] == "Share the secret note?"
    done = await read({"uri": SECRET_URI, "requestState": first["requestState"],
                       "inputResponses": {"share": {"action": "accept", "content": {"share": True}}}})
    assert done["contents"] == [{"uri": SECRET_URI, "mimeType": "text/plain", "text": "the note"}], done


async def test_a_template_resource_gets_its_variables_and_the_context() -> None:
    done = await read({"uri": "notes://birds"})
    assert done["contents"][0]["text"] == "birds for anonymous", done


def test_a_context_parameter_named_as_a_template_variable_is_refused() -> None:
    """The context took the variable's place: ``notes://birds`` read with the context as its ``ctx``."""
    from django.core.exceptions import ImproperlyConfigured

    with pytest.raises(ImproperlyConfigured, match="'ctx' is also a variable of the URI"):
        @mcp_tools.resource("clash://{ctx}")
        def clash(ctx: ToolContext) -> str:
            return "never"


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
async def test_binary_contents_of_any_buffer_type_are_a_blob(kind: Any) -> None:
    """A BinaryField reads as a ``memoryview`` on PostgreSQL (``bytes`` on SQLite): it was sent as its repr."""
    @mcp_tools.resource("bin://data", mime_type="application/octet-stream")
    def data() -> Any:
        return kind(b"\x00\x01\xff")

    try:
        done = await read({"uri": "bin://data"})
    finally:
        registry.unregister_resource("bin://data")
    assert done["contents"] == [{"uri": "bin://data", "blob": "AAH/", "mimeType": "application/octet-stream"}], done


async def test_a_resource_or_tool_returning_a_queryset_is_served_its_rows() -> None:
    """Shaped on the event loop, the QuerySet ran its query there: SynchronousOnlyOperation, -32603 for a
    resource (a tool: "does not match its output schema"). docs/protocol.md: other values as JSON text."""
    from asgiref.sync import sync_to_async
    from django.contrib.auth.models import User

    from mcp_tools.registry import make_tool

    await sync_to_async(User.objects.create_user)("reader", password="x")

    @mcp_tools.resource("users://names", mime_type="application/json")
    def names() -> Any:
        return User.objects.order_by("username").values("username")

    def user_names() -> Any:
        """The users' names."""
        return User.objects.order_by("username").values_list("username", flat=True)

    try:
        with registry.registered_temporarily(make_tool(user_names)):
            done = await read({"uri": "users://names"})
            tool = (await call_modern(mcp_tools_app(), "tools/call", {"name": "user_names", "arguments": {}})).json()
    finally:
        registry.unregister_resource("users://names")
    assert done["contents"][0]["text"] == '[{"username": "reader"}]', done
    assert tool["result"]["content"] == [{"type": "text", "text": '["reader"]'}], tool


def test_a_template_naming_a_variable_twice_is_refused_with_its_uri() -> None:
    """It raised re's "redefinition of group name" at import, naming no resource."""
    from django.core.exceptions import ImproperlyConfigured

    with pytest.raises(ImproperlyConfigured, match="'twice://{a}/{a}': the variable 'a' appears twice"):
        @mcp_tools.resource("twice://{a}/{a}")
        def twice(a: str) -> str:
            return a
