"""What a ``resources/read`` of a template resource answers for URIs whose variables decode oddly.

Found by a review with hostile input, on the demo's ``inventory://products/{sku}``:

- ``%00`` reached the handler as U+0000: on PostgreSQL its query failed (-32603, a traceback in the log),
  on SQLite the value was refused when the call was kept (-32602 "cannot be stored"); in a 2025-11-25
  session neither was "Resource not found". No resource has such a variable: now it is that, everywhere.
- "Resource not found"'s ``data.uri`` was the URI the handler rebuilt from the decoded variable
  (``a%2Fb`` came back as ``a/b``), not the one the client asked for (SEP-2164).
"""

from __future__ import annotations

import json

import pytest

from mcp_tools.protocol.errors import INVALID_PARAMS, RESOURCE_NOT_FOUND
from tests.asgi_client import HANDSHAKE, call_modern, handshake_message, post_headers, post_json
from tests.test_http_spec_edges import APP, open_session

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("uri", ["inventory://products/%00", "inventory://products/a%00b", "inventory://products/a%2Fb",
                                 "inventory://products/%FF"])
async def test_an_unknown_product_is_not_found_for_the_uri_asked_in_both_eras(uri: str) -> None:
    modern = (await call_modern(APP, "resources/read", {"uri": uri})).json()
    assert modern["error"]["code"] == INVALID_PARAMS and modern["error"]["message"] == "Resource not found", modern
    assert modern["error"]["data"] == {"uri": uri}, modern

    session = await open_session()
    reply = await post_json(APP, handshake_message("resources/read", {"uri": uri}, request_id=7), post_headers(version=HANDSHAKE, session=session))
    body = json.loads(reply.body) if reply.body.startswith(b"{") else json.loads(reply.body.decode().split("data: ")[-1])
    assert body["error"]["code"] == RESOURCE_NOT_FOUND and body["error"]["data"] == {"uri": uri}, body
