"""``include("mcp_tools.urls")`` under a path with a converter: one endpoint per tenant path.

docs/oauth.md has a deployment serve each resource "(a tenant, say) at a path of its own", and the
endpoint "may be an include() under any path": ``path("t/<slug:tenant>/mcp", include("mcp_tools.urls"))``.
Django passes the captured values to the view as keyword arguments, and ``mcp_view`` took the request
alone: every request there was a 500 (``TypeError: mcp_view() got an unexpected keyword argument
'tenant'``), and the path-suffixed metadata of such a path answered, with a 401 pointing at it.
Found by the oauth review.
"""

from __future__ import annotations

import json
import re

import pytest
from django.test import override_settings
from django.urls import include, path

from mcp_tools.urls import well_known_urlpatterns
from tests.asgi_client import modern_message, post_headers, request

pytestmark = pytest.mark.django_db(transaction=True)

urlpatterns = [path("t/<slug:tenant>/mcp", include("mcp_tools.urls")), *well_known_urlpatterns]

OAUTH = {"AUTHORIZATION_SERVERS": ["https://auth.example"], "TOKEN_VERIFIER": "mcp_tools.server.oauth.TokenVerifier",
         "SCOPES_SUPPORTED": ["mcp"]}


async def test_an_include_under_a_converter_serves_calls() -> None:
    from django.core.handlers.asgi import ASGIHandler

    with override_settings(ROOT_URLCONF=__name__):
        headers = post_headers(extra={"mcp-method": "tools/list"})
        answer = await request(ASGIHandler(), "POST", "/t/acme/mcp", headers=headers,
                               body=json.dumps(modern_message("tools/list")).encode())
    assert answer.status == 200, (answer.status, answer.body[:300])
    assert "tools" in json.loads(answer.body)["result"]


async def test_an_include_under_a_converter_is_its_own_resource() -> None:
    from django.conf import settings
    from django.core.handlers.asgi import ASGIHandler

    mcp = {**settings.MCP_TOOLS, "ALLOW_ANONYMOUS": False, "OAUTH": OAUTH}
    with override_settings(ROOT_URLCONF=__name__, MCP_TOOLS=mcp):
        headers = post_headers(extra={"mcp-method": "tools/list"})
        answer = await request(ASGIHandler(), "POST", "/t/acme/mcp", headers=headers,
                               body=json.dumps(modern_message("tools/list")).encode())
        assert answer.status == 401, (answer.status, answer.body[:300])
        metadata = re.search(r'resource_metadata="([^"]+)"', answer.header("www-authenticate") or "")
        assert metadata is not None and metadata.group(1) == "http://testserver/.well-known/oauth-protected-resource/t/acme/mcp"
        document = await request(ASGIHandler(), "GET", "/.well-known/oauth-protected-resource/t/acme/mcp", headers={"host": "testserver"})
    assert document.status == 200, (document.status, document.body[:300])
    assert json.loads(document.body)["resource"] == "http://testserver/t/acme/mcp"
