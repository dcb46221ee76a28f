"""``mcp_tools.W007``: browser origins derived from an ``ALLOWED_HOSTS`` that holds ``"*"`` allow every page.

With ``ALLOWED_HOSTS = ["*"]`` and ``ALLOWED_ORIGINS`` unset, ``Origin: https://evil.example`` got 200 and
its CORS answer, and no check said so (W001 fires only for ``"*"`` in ``ALLOWED_ORIGINS`` itself), while
the spec says servers MUST validate the ``Origin`` header.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.conf import settings
from django.core import checks
from django.test import override_settings

from mcp_tools.checks import check_settings
from mcp_tools.transports.http import McpEndpoint
from tests.asgi_client import modern_message, post_headers, request

MCP_TOOLS = {key: value for key, value in settings.MCP_TOOLS.items() if key != "ALLOWED_ORIGINS"}


def ids(messages: list[Any]) -> list[str]:
    return [message.id for message in messages]


def test_w007_when_origins_come_from_a_wildcard_allowed_hosts() -> None:
    with override_settings(ALLOWED_HOSTS=["*"], MCP_TOOLS=MCP_TOOLS):
        found = check_settings(None)
        deploy = checks.run_checks(include_deployment_checks=True)
    assert ids(found) == ["mcp_tools.W007"] and found[0].level == checks.WARNING
    assert "ALLOWED_ORIGINS" in (found[0].hint or "")
    assert "mcp_tools.W007" in ids(deploy)


@pytest.mark.parametrize(("hosts", "origins"), [
    (["*"], ["https://app.example"]),  # the origins are listed
    (["*"], []),  # none
    ([".example.com", "localhost"], None),  # the site's own domain and its subdomains
    (["mcp.example.com"], None),
])
def test_w007_silent_otherwise(hosts: list[str], origins: list[str] | None) -> None:
    conf = MCP_TOOLS if origins is None else {**MCP_TOOLS, "ALLOWED_ORIGINS": origins}
    with override_settings(ALLOWED_HOSTS=hosts, MCP_TOOLS=conf):
        assert "mcp_tools.W007" not in ids(check_settings(None))


def test_a_wildcard_in_allowed_origins_itself_is_w001_alone() -> None:
    with override_settings(ALLOWED_HOSTS=["*"], MCP_TOOLS={**MCP_TOOLS, "ALLOWED_ORIGINS": ["*"]}):
        assert ids(check_settings(None)) == ["mcp_tools.W001"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("origins", "status"), [(None, 200), ([], 403), (["https://app.example"], 403)])
async def test_what_w007_warns_of_and_what_its_hint_does(origins: list[str] | None, status: int) -> None:
    conf = MCP_TOOLS if origins is None else {**MCP_TOOLS, "ALLOWED_ORIGINS": origins}
    body = json.dumps(modern_message("tools/list", {})).encode()
    with override_settings(ALLOWED_HOSTS=["*"], MCP_TOOLS=conf):
        response = await request(McpEndpoint(), "POST", headers=post_headers(extra={"mcp-method": "tools/list", "origin": "https://evil.example"}),
                                 body=body)
    assert response.status == status, response.body
    assert (response.header("access-control-allow-origin") == "https://evil.example") == (status == 200)
