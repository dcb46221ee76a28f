"""Lazily translated settings texts (``gettext_lazy``, as i18n sites write ``LANGUAGES``) are texts.

The settings table (conf.ACCEPTS) took only ``str`` for INSTRUCTIONS, SERVER_TITLE and the other text
keys: ``manage.py check`` reported E011 for a lazy string, and every ``initialize`` answered 500, with a
message that showed the text and said it was no string.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.core import checks
from django.utils.translation import gettext_lazy

from mcp_tools.conf import problem
from tests.asgi_client import HANDSHAKE, call_modern, handshake_message, post_headers, post_json
from tests.test_resources_review import APP

pytestmark = pytest.mark.django_db(transaction=True)

LAZY = {"INSTRUCTIONS": gettext_lazy("Use the inventory tools."), "SERVER_TITLE": gettext_lazy("Inventory"),
        "SERVER_NAME": gettext_lazy("inventory-server")}


@pytest.fixture
def lazy_texts(settings: Any) -> None:
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    settings.MCP_TOOLS = {**settings.MCP_TOOLS, **LAZY}


def test_lazy_texts_pass_the_checks(lazy_texts: None) -> None:
    assert [m.id for m in checks.run_checks() if m.id.startswith("mcp_tools.")] == []


async def test_a_2025_initialize_says_them(lazy_texts: None) -> None:
    message = handshake_message("initialize", {"protocolVersion": HANDSHAKE, "capabilities": {},
                                               "clientInfo": {"name": "t", "version": "1"}})
    r = await post_json(APP, message, post_headers(version=None))
    assert r.status == 200, r.body
    result = r.json()["result"]
    assert result["instructions"] == "Use the inventory tools."
    assert (result["serverInfo"]["name"], result["serverInfo"]["title"]) == ("inventory-server", "Inventory")


async def test_a_2026_discover_says_them(lazy_texts: None) -> None:
    r = await call_modern(APP, "server/discover", {})
    assert r.status == 200, r.body
    result = r.json()["result"]
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["title"] == "Inventory"


def test_a_refused_value_that_is_no_plain_value_is_named_by_its_type() -> None:
    class Shows:
        def __repr__(self) -> str:
            return "'Use the inventory tools.'"  # looks like a valid string

    said = problem("INSTRUCTIONS", Shows())
    assert said is not None and "not a Shows" in said
    assert problem("INSTRUCTIONS", 5) == "MCP_TOOLS['INSTRUCTIONS'] must be None or a string, not 5."
