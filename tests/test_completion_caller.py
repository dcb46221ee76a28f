"""A completer may name a ``principal`` parameter and is given the caller, to leave out what they may not see.

A completer was called ``fn(value, arguments)`` (or ``fn(value)``) and nothing else: it could not know
who asked, so a completion could only suggest what every caller of the prompt or template may see
(the demo's SKUs, the names of another store's orders). One written with a ``principal`` parameter
was refused at registration (``ImproperlyConfigured``: "must take (value, arguments) or (value)"), or,
with a default, always got that default. Now a ``principal`` parameter (by keyword, optional, as a
tool's ``ctx``) is given the caller (``principal.user``, ``principal.scopes``), sync or async, with or
without ``arguments``; completers without one are called as before.
"""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

import mcp_tools
from mcp_tools.registry import registry
from mcp_tools.transports.http import McpEndpoint
from tests.asgi_client import call_modern
from tests.clients import create_user_with_token

pytestmark = pytest.mark.django_db(transaction=True)
STORES = ["north", "south"]


def stores_for(principal: Any) -> list[str]:
    user = principal.user
    return STORES if user.has_perm("auth.view_user") else STORES[:1]


def with_arguments(value: str, arguments: dict[str, Any], principal: Any) -> list[str]:
    return [s for s in stores_for(principal) if s.startswith(value)]


async def async_with_arguments(value: str, arguments: dict[str, Any], *, principal: Any) -> list[str]:
    return [s for s in await sync_to_async(stores_for)(principal) if s.startswith(value)]


def value_only(value: str, *, principal: Any = None) -> list[str]:
    return [s for s in stores_for(principal) if s.startswith(value)]


def without_caller(value: str, arguments: dict[str, Any]) -> list[str]:
    return [s for s in STORES if s.startswith(value)]


async def complete(prompt: str, token: str | None) -> list[str]:
    params = {"ref": {"type": "ref/prompt", "name": prompt}, "argument": {"name": "store", "value": ""}}
    body = (await call_modern(McpEndpoint(), "completion/complete", params, token=token)).json()
    assert "error" not in body, body
    values: list[str] = body["result"]["completion"]["values"]
    return values


@pytest.mark.parametrize("completer", [with_arguments, async_with_arguments, value_only], ids=["sync", "async", "value-only"])
async def test_a_completer_that_names_the_principal_suggests_what_the_caller_may_see(completer: Any) -> None:
    mcp_tools.prompt(name="caller_completed", completions={"store": completer})(lambda store: f"about {store}")
    try:
        staff = await sync_to_async(create_user_with_token)("completer-staff", ("auth.view_user",))
        clerk = await sync_to_async(create_user_with_token)("completer-clerk")
        assert await complete("caller_completed", staff) == ["north", "south"]
        assert await complete("caller_completed", clerk) == ["north"]
        assert await complete("caller_completed", None) == ["north"]  # anonymous: its AnonymousUser
    finally:
        registry.unregister_prompt("caller_completed")


async def test_a_completer_without_it_is_called_as_before() -> None:
    mcp_tools.resource("caller-completed://{store}", completions={"store": without_caller})(lambda store: store)
    try:
        params = {"ref": {"type": "ref/resource", "uri": "caller-completed://{store}"}, "argument": {"name": "store", "value": "s"}}
        body = (await call_modern(McpEndpoint(), "completion/complete", params)).json()
        assert body["result"]["completion"]["values"] == ["south"], body
    finally:
        registry.unregister_resource("caller-completed://{store}")
