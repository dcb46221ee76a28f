"""Shared helpers of the live tests: raw HTTP for both eras, SSE parsing, the SDK client, DB checks.

Everything here talks to a real server process (see ``tests/conftest.py``)
over a socket, with ``httpx2`` (the HTTP client the official ``mcp`` SDK uses).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
from asgiref.sync import sync_to_async

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
JSON_ACCEPT = "application/json, text/event-stream"
TIMEOUT = httpx2.Timeout(30)

#: What a client that can answer elicitation and sampling advertises.
FULL_CAPABILITIES: dict[str, Any] = {"elicitation": {"form": {}}, "sampling": {"tools": {}}, "roots": {"listChanged": True}}

# -- the database (the live servers share the test database) -----------------------------


def _audit_rows(service: str | None) -> list[dict[str, Any]]:
    from demo_site.inventory.models import AuditLog

    rows = list(AuditLog.objects.filter(action="deploy").values("id", "actor", "detail"))
    if service is not None:
        rows = [row for row in rows if row["detail"].get("service") == service]
    return rows


async def audit_rows(service: str | None = None) -> list[dict[str, Any]]:
    """The ``deploy`` audit log entries (of one service), read from the shared test database."""
    return await sync_to_async(_audit_rows, thread_sensitive=True)(service)


def _create_products() -> None:
    from demo_site.inventory.models import Product

    for sku, name, price, stock in [("WID-001", "Widget", "2.50", 40), ("WID-002", "Wide widget", "3.75", 4), ("GAD-001", "Gadget", "10.00", 7)]:
        Product.objects.update_or_create(sku=sku, defaults={"name": name, "price": price, "stock": stock})


async def create_products() -> None:
    await sync_to_async(_create_products, thread_sensitive=True)()


def conformance_node(conformance_dir: Path) -> Path:
    """The Node 22 that runs the conformance suite and the Inspector: the one ``scripts/test`` linked as
    ``node`` in their directory (npm's package for this machine, or a node on the PATH), else the npm
    package a directory installed before that link holds (``node_modules/node-<os>-<arch>``)."""
    linked = conformance_dir / "node"
    if linked.exists():
        return linked
    installed = sorted((conformance_dir / "node_modules").glob("node-*/bin/node"))
    return installed[0] if installed else linked


def create_user_with_token(username: str, perms: tuple[str, ...] = ()) -> str:
    """A user (optionally with ``app_label.codename`` permissions) and their DRF token key (sync)."""
    from django.contrib.auth.models import Permission, User
    from rest_framework.authtoken.models import Token

    user = User.objects.create_user(username=username, password="x")
    for perm in perms:
        app_label, codename = perm.split(".")
        user.user_permissions.add(Permission.objects.get(content_type__app_label=app_label, codename=codename))
    return Token.objects.create(user=user).key


# -- JSON-RPC over HTTP -------------------------------------------------------------------


def modern_meta(capabilities: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": FULL_CAPABILITIES if capabilities is None else capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": "tests", "version": "1"},
        **extra,
    }


def modern_headers(method: str, params: dict[str, Any]) -> dict[str, str]:
    headers = {"Accept": JSON_ACCEPT, "Content-Type": "application/json", "MCP-Protocol-Version": MODERN, "Mcp-Method": method}
    name = (
        params.get("uri") if method == "resources/read"
        else params.get("name") if method in ("tools/call", "tools/callSaga", "prompts/get")
        else params.get("taskId") if method in ("tasks/get", "tasks/update", "tasks/cancel")
        else None
    )
    if isinstance(name, str):
        headers["Mcp-Name"] = name
    return headers


def parse_sse(text: str) -> list[dict[str, Any]]:
    """The JSON-RPC messages of a complete SSE body (priming events with empty data are skipped)."""
    messages = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        data = "\n".join(line[5:].lstrip() for line in block.split("\n") if line.startswith("data:"))
        if data.strip():
            messages.append(json.loads(data))
    return messages


def response_messages(response: httpx2.Response) -> list[dict[str, Any]]:
    """Every JSON-RPC message of a (JSON or SSE) response."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        return parse_sse(response.text)
    return [response.json()]


def final_message(response: httpx2.Response, request_id: Any) -> dict[str, Any]:
    """The response (result or error) to ``request_id`` in a JSON or SSE response."""
    found = [m for m in response_messages(response) if m.get("id") == request_id and ("result" in m or "error" in m)]
    assert len(found) == 1, f"expected one response to {request_id!r}, got {response.status_code} {response.text[:500]}"
    return found[0]


async def iter_sse_events(response: httpx2.Response) -> AsyncIterator[tuple[str | None, dict[str, Any] | None]]:
    """Stream ``(event id, JSON-RPC message or None for an empty priming event)`` of an open SSE response."""
    data: list[str] = []
    event_id: str | None = None
    async for line in response.aiter_lines():
        line = line.rstrip("\r")
        if line.startswith("data:"):
            data.append(line[5:].lstrip())
        elif line.startswith("id:"):
            event_id = line[3:].strip()
        elif line == "":
            payload = "\n".join(data).strip()
            if data or event_id is not None:
                yield event_id, json.loads(payload) if payload else None
            data = []
            event_id = None


async def iter_sse(response: httpx2.Response) -> AsyncIterator[dict[str, Any]]:
    """Stream the JSON-RPC messages of an open SSE response as they arrive (priming events skipped)."""
    async for _, message in iter_sse_events(response):
        if message is not None:
            yield message


class ModernClient:
    """Raw 2026-07-28 requests: one stateless POST each, ``_meta`` and headers filled in."""

    def __init__(self, http: httpx2.AsyncClient, url: str, capabilities: dict[str, Any] | None = None) -> None:
        self.http = http
        self.url = url
        self.capabilities = capabilities
        self._next_id = 0

    async def post(self, method: str, params: dict[str, Any], *, url: str | None = None) -> tuple[httpx2.Response, dict[str, Any]]:
        self._next_id += 1
        request_id = self._next_id
        params = {**params, "_meta": modern_meta(self.capabilities)}
        body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        response = await self.http.post(url or self.url, json=body, headers=modern_headers(method, params))
        return response, final_message(response, request_id)

    async def request(self, method: str, params: dict[str, Any], *, url: str | None = None) -> dict[str, Any]:
        """The result of a request that must succeed."""
        response, message = await self.post(method, params, url=url)
        assert "result" in message, f"{method} failed: {response.status_code} {message}"
        return message["result"]


class LegacySession:
    """A raw 2025-11-25 session: initialize once, then POSTs with ``Mcp-Session-Id``."""

    def __init__(self, http: httpx2.AsyncClient, url: str, session_id: str) -> None:
        self.http = http
        self.url = url
        self.session_id = session_id
        self._next_id = 1

    @classmethod
    async def open(cls, http: httpx2.AsyncClient, url: str, capabilities: dict[str, Any] | None = None) -> LegacySession:
        body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": LEGACY, "capabilities": FULL_CAPABILITIES if capabilities is None else capabilities,
            "clientInfo": {"name": "tests", "version": "1"}}}
        response = await http.post(url, json=body, headers={"Accept": JSON_ACCEPT, "Content-Type": "application/json"})
        assert response.status_code == 200, response.text
        assert response.json()["result"]["protocolVersion"] == LEGACY
        session = cls(http, url, response.headers["mcp-session-id"])
        initialized = await session.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert initialized.status_code == 202, initialized.text
        return session

    def headers(self) -> dict[str, str]:
        return {"Accept": JSON_ACCEPT, "Content-Type": "application/json", "Mcp-Session-Id": self.session_id, "MCP-Protocol-Version": LEGACY}

    def new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    async def send(self, message: dict[str, Any], *, url: str | None = None) -> httpx2.Response:
        return await self.http.post(url or self.url, json=message, headers=self.headers())

    async def post(self, method: str, params: dict[str, Any], *, url: str | None = None) -> tuple[httpx2.Response, dict[str, Any]]:
        request_id = self.new_id()
        response = await self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}, url=url)
        if response.status_code != 200:
            return response, response.json() if response.content else {}
        return response, final_message(response, request_id)

    async def request(self, method: str, params: dict[str, Any], *, url: str | None = None) -> dict[str, Any]:
        response, message = await self.post(method, params, url=url)
        assert "result" in message, f"{method} failed: {response.status_code} {message}"
        return message["result"]

    @contextlib.asynccontextmanager
    async def stream(self, method: str, params: dict[str, Any], *, url: str | None = None) -> AsyncIterator[tuple[int, httpx2.Response]]:
        """POST a request and keep its response open (to read server→client requests as they come)."""
        request_id = self.new_id()
        body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        async with self.http.stream("POST", url or self.url, json=body, headers=self.headers()) as response:
            yield request_id, response

    @contextlib.asynccontextmanager
    async def resume(self, last_event_id: str, *, url: str | None = None) -> AsyncIterator[httpx2.Response]:
        """GET the stream again from ``Last-Event-ID`` (SSE resumption)."""
        headers = {"Accept": "text/event-stream", "Mcp-Session-Id": self.session_id, "MCP-Protocol-Version": LEGACY, "Last-Event-ID": last_event_id}
        async with self.http.stream("GET", url or self.url, headers=headers) as response:
            yield response

    async def delete(self, *, url: str | None = None) -> httpx2.Response:
        return await self.http.delete(url or self.url, headers={"Mcp-Session-Id": self.session_id, "MCP-Protocol-Version": LEGACY})


def http_client(token: str | None = None) -> httpx2.AsyncClient:
    headers = {"Authorization": f"Token {token}"} if token else {}
    return httpx2.AsyncClient(headers=headers, timeout=TIMEOUT)


# -- answers a test client gives ------------------------------------------------------------


def accept_target(env: str = "production") -> dict[str, Any]:
    return {"action": "accept", "content": {"env": env, "confirm": True}}


def model_says(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": {"type": "text", "text": text}, "model": "test-model", "stopReason": "endTurn"}


# -- the official SDK client ----------------------------------------------------------------


@contextlib.asynccontextmanager
async def sdk_client(url: str, mode: str, token: str | None = None, **kwargs: Any) -> AsyncIterator[Any]:
    """``mcp.Client`` over Streamable HTTP (``mode``: "legacy" | "2026-07-28"), with an optional DRF token."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    kwargs.setdefault("read_timeout_seconds", 30)
    async with http_client(token) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode, **kwargs) as client:
            yield client
