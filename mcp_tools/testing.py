"""Test helpers for projects that use mcp_tools.

``McpTestClient`` talks to the endpoint in process (no server, no sockets), in
the 2026-07-28 era, and answers ``input_required`` rounds with a function you
give it, so a durable tool can be tested end to end in a plain async test
(pytest-django, pytest-asyncio in auto mode; here the demo's ``deploy``, which asks the
user, then the client's model, called as a user with a DRF token, as in
docs/getting-started.md)::

    import pytest
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    from mcp_tools.testing import McpTestClient

    def answer(key, request):
        if request["method"] == "elicitation/create":
            return {"action": "accept", "content": {"env": "staging"}}
        return {"role": "assistant", "content": {"type": "text", "text": "safe"}, "model": "test"}

    @pytest.mark.django_db(transaction=True)
    async def test_deploy():
        User = get_user_model()  # the login field is the model's USERNAME_FIELD: username, email...
        user = await User._default_manager.acreate(**{User.USERNAME_FIELD: "tester@example.com"})
        token = await Token.objects.acreate(user=user)
        client = McpTestClient(token=token.key, answer=answer)
        result = await client.call_tool("deploy", {"service": "api"})
        assert result["structuredContent"]["env"] == "staging"

The endpoint authenticates these requests as any other (anonymous callers only with
``ALLOW_ANONYMOUS``): ``token=`` sends ``Authorization: Token <key>`` (DRF's token
authentication); for another scheme pass the header itself, e.g.
``headers={"Authorization": f"Bearer {access_token}"}``.

Tests that touch the database need ``transaction=True``, as here, or Django's
``TransactionTestCase``: the endpoint reaches the database from its own thread, on
its own connection, which cannot see what a ``TestCase`` (or ``django_db`` without
``transaction=True``) wrote inside the transaction it rolls back at the end, and on
SQLite waits on its lock. A request that fails there with an internal error raises
:class:`McpTestSetupError`, naming the fix, instead (requests that need no such data, a
``tools/list`` or a tool that touches no table, work there as anywhere). ``registry.registered_temporarily(make_tool(fn))``
registers a tool for the length of a ``with`` block.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async

from .conf import endpoint_path
from .protocol import versions
from .protocol.errors import INTERNAL_ERROR

__all__ = ["McpTestClient", "McpTestError", "McpTestSetupError"]

Answer = Callable[[str, dict[str, Any]], Any]
DEFAULT_CAPABILITIES: dict[str, Any] = {"elicitation": {"form": {}, "url": {}}, "sampling": {"tools": {}}, "roots": {}}
_ids = itertools.count(1)


class McpTestError(Exception):
    """The endpoint answered with a JSON-RPC error."""

    def __init__(self, status: int, error: dict[str, Any]) -> None:
        super().__init__(f"{error.get('code')}: {error.get('message')} (HTTP {status})")
        self.status = status
        self.code = error.get("code")
        self.error = error


class McpTestSetupError(RuntimeError):
    """The client runs inside a test's transaction, where the endpoint cannot see the test's data."""


def _in_test_transaction() -> bool:
    """Whether this thread's database connections are inside the atomic block of a ``TestCase``
    (Django marks the blocks it opens for a test class and for each test with ``_from_testcase``).

    In a coroutine, ``connections`` holds the coroutine's own connections, not those the thread's
    synchronous code opened (asgiref's ``Local`` keeps them apart): pytest-django opens a test's
    transaction there, then pytest-asyncio runs the test's event loop on the same thread. Those are
    looked at too, where asgiref keeps them (the thread-local itself); if it ever keeps them
    elsewhere, that case is just not detected.
    """
    from django.db import connections

    opened: list[Any] = list(connections.all(initialized_only=True))
    storage = getattr(getattr(connections, "_connections", None), "_storage", None)
    opened += [getattr(storage, alias, None) for alias in connections]
    return any(getattr(block, "_from_testcase", False)
               for connection in opened if connection is not None
               for block in getattr(connection, "atomic_blocks", ()))


async def _refuse_test_transaction() -> None:
    """Raise :class:`McpTestSetupError` inside a ``TestCase``'s transaction (called when a request
    failed with an internal error, the way the endpoint fails there).

    Connections are per thread, and the test's may be this one's (pytest-asyncio runs the test's event
    loop on the thread that opened the transaction) or the thread ``sync_to_async`` runs its ORM calls
    on (Django runs an ``async def`` test method in ``async_to_sync``, whose caller is that thread):
    both are looked at. The endpoint's database work runs on a thread of its own, whose connection
    cannot see rows written in that transaction, nor (on SQLite) write while it holds the lock.
    """
    if _in_test_transaction() or await sync_to_async(_in_test_transaction)():
        raise McpTestSetupError(
            "McpTestClient cannot run inside a TestCase's transaction: the MCP endpoint reaches the database from "
            "its own thread and connection, which do not see the rows the test wrote (on SQLite it waits on the "
            "test's lock). Use django.test.TransactionTestCase instead of TestCase, or "
            "@pytest.mark.django_db(transaction=True) with pytest-django."
        )


def _header_value(text: str) -> str:
    """``text`` as a 2026-07-28 header carries it: as it is, or in the base64 form when it cannot be."""
    # A plain value that looks like the encoded form is encoded too (2026-07-28: clients MUST).
    looks_encoded = text.startswith("=?base64?") and text.endswith("?=")
    if text.isascii() and text.isprintable() and text == text.strip(" \t") and not looks_encoded:
        return text
    return "=?base64?" + base64.b64encode(text.encode()).decode() + "?="


def _param_headers(tool_name: str, arguments: Any) -> dict[str, str]:
    """The ``Mcp-Param-*`` headers a conforming client sends for the arguments a tool marks ``x-mcp-header``
    (the endpoint refuses a call without them): none for an argument that is absent or null."""
    from .registry import registry

    tool = registry.get_tool(tool_name)
    try:
        mirrored = tool.param_headers if tool is not None else ()
    except Exception:  # a tool whose schema cannot be built fails where it runs, as over HTTP
        return {}
    headers = {}
    for path, header_name in mirrored:
        value: Any = arguments
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if value is None:
            continue
        text = value if isinstance(value, str) else json.dumps(value)
        headers[f"mcp-param-{header_name.lower()}"] = _header_value(text)
    return headers


class McpTestClient:
    """An in-process 2026-07-28 client of the MCP endpoint.

    ``answer(key, request)`` returns the client's result for one input request
    (``request`` is ``{"method": ..., "params": ...}``); without it, a call that
    needs input fails with an ``AssertionError`` naming what was asked.

    ``token`` is a DRF token key, sent as ``Authorization: Token <key>``; ``headers``
    are sent on every request too, after the client's own (so an ``Authorization`` there,
    a Bearer token for instance, replaces the one ``token`` makes).
    """

    def __init__(
        self,
        app: Any = None,
        *,
        token: str | None = None,
        headers: dict[str, str] | None = None,
        capabilities: dict[str, Any] | None = None,
        answer: Answer | None = None,
        max_rounds: int = 20,
    ) -> None:
        if app is None:
            from .transports.http import McpEndpoint

            app = McpEndpoint()
        self.app = app
        self.token = token
        # ASGI header names are lower case: "Authorization" must replace "authorization".
        self.headers = {name.lower(): value for name, value in (headers or {}).items()}
        self.capabilities = DEFAULT_CAPABILITIES if capabilities is None else capabilities
        self.answer = answer
        self.max_rounds = max_rounds

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send one request and return its ``result`` (raises :class:`McpTestError` for an error).

        An internal error inside a ``TestCase``'s transaction raises :class:`McpTestSetupError`, which
        says why and names the fix (the endpoint's own connection cannot see or, on SQLite, write
        past the test's transaction). Not before: what needs no such data works there too.
        """
        params = dict(params or {})
        params["_meta"] = {
            **params.get("_meta", {}),
            versions.META_PROTOCOL_VERSION: versions.LATEST_MODERN,
            versions.META_CLIENT_CAPABILITIES: self.capabilities,
        }
        headers = {
            # Django's test runner always allows "testserver".
            "host": "testserver",
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": versions.LATEST_MODERN,
            "mcp-method": method,
        }
        from .transports.http import NAME_PARAM

        # What the endpoint requires each method to route by (the tasks extension's by task id), and a saga's
        # tool, which it checks when sent.
        name_param = "name" if method == "tools/callSaga" else NAME_PARAM.get(method)
        name = params.get(name_param) if name_param else None
        if isinstance(name, str):
            # A value a header cannot carry as it is goes in the 2026-07-28 base64 form.
            headers["mcp-name"] = _header_value(name)
        if method in ("tools/call", "tools/callSaga") and isinstance(name, str):
            headers.update(_param_headers(name, params.get("arguments")))
        if self.token:
            headers["authorization"] = f"Token {self.token}"
        headers.update(self.headers)
        status, body = await self._post(headers, {"jsonrpc": "2.0", "id": next(_ids), "method": method, "params": params})
        message = _final_message(body)
        if "error" in message:
            failure = McpTestError(status, message["error"])
            if message["error"].get("code") == INTERNAL_ERROR:
                try:
                    await _refuse_test_transaction()
                except McpTestSetupError as setup_error:
                    raise setup_error from failure
            raise failure
        return message["result"]

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        """Call a tool, answering ``input_required`` rounds with ``answer``; returns the final result."""
        params: dict[str, Any] = {"name": name, "arguments": arguments or {}}
        for _ in range(self.max_rounds):
            result = await self.request("tools/call", params)
            if result.get("resultType") != "input_required":
                return result
            if self.answer is None:
                raise AssertionError(f"{name} asked for input ({list(result['inputRequests'])}) and the client has no answer function")
            responses = {key: self.answer(key, request) for key, request in result["inputRequests"].items()}
            params = {**params, "inputResponses": responses, "requestState": result.get("requestState")}
        raise AssertionError(f"{name} still needed input after {self.max_rounds} rounds")

    async def _post(self, headers: dict[str, str], message: dict[str, Any]) -> tuple[int, bytes]:
        body = json.dumps(message).encode()
        # The endpoint's own path, as a real client reaches it: the OAuth resource (a token's audience) is built from it.
        path = endpoint_path()
        scope = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
            "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
            "headers": [(k.encode(), v.encode()) for k, v in headers.items()],
            "client": ("127.0.0.1", 0), "server": ("localhost", 80),
        }
        sent_request = False
        status = 0
        chunks: list[bytes] = []

        async def receive() -> dict[str, Any]:
            nonlocal sent_request
            if not sent_request:
                sent_request = True
                return {"type": "http.request", "body": body, "more_body": False}
            await asyncio.Event().wait()  # the client never disconnects first
            raise AssertionError("unreachable")

        async def send(event: dict[str, Any]) -> None:
            nonlocal status
            if event["type"] == "http.response.start":
                status = event["status"]
            elif event["type"] == "http.response.body":
                chunks.append(event.get("body", b""))

        await self.app(scope, receive, send)
        return status, b"".join(chunks)


def _final_message(body: bytes) -> dict[str, Any]:
    text = body.decode()
    if text.lstrip().startswith("{"):
        return json.loads(text)
    # SSE: the last data line that carries a result or an error.
    for line in reversed(text.splitlines()):
        if line.startswith("data: ") and line[6:].strip():
            message = json.loads(line[6:])
            if "result" in message or "error" in message:
                return message
    raise AssertionError(f"no JSON-RPC answer in the response: {text[:500]!r}")
