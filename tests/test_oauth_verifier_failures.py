"""A token verifier that fails (its introspection endpoint times out, refuses, answers garbage) has
not vouched for the token: 401 invalid_token with the Bearer challenge, never a 500 (a review found
the exception reached the endpoint's catch-all)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings

from mcp_tools.server.oauth import TokenInfo, TokenVerifier
from mcp_tools.transports.http import McpEndpoint
from tests.asgi_client import call_modern

pytestmark = pytest.mark.django_db(transaction=True)
APP = McpEndpoint()


class BrokenIntrospection(TokenVerifier):
    """An introspection verifier whose endpoint fails, as the token says how."""

    def verify(self, token: str) -> TokenInfo | None:
        if token == "timeout":
            raise TimeoutError("introspection timed out")
        if token == "garbage":
            return json.loads("<html>502 Bad Gateway</html>")  # type: ignore[no-any-return]
        raise ConnectionError("introspection endpoint refused")


def oauth_on(verifier: Any) -> dict[str, Any]:
    conf = dict(settings.MCP_TOOLS)
    conf.update(ALLOW_ANONYMOUS=False, OAUTH={"AUTHORIZATION_SERVERS": ["https://as.example"], "TOKEN_VERIFIER": verifier,
                                              "SCOPES_SUPPORTED": ["mcp"]})
    return conf


@pytest.mark.parametrize("token", ["timeout", "garbage", "refused"])
async def test_a_failing_verifier_is_a_401_with_the_bearer_challenge(token: str, caplog: pytest.LogCaptureFixture) -> None:
    with override_settings(MCP_TOOLS=oauth_on(BrokenIntrospection)):
        response = await call_modern(APP, "tools/list", {}, headers={"authorization": f"Bearer {token}"})
    assert response.status == 401, (response.status, response.body)
    challenge = response.header("www-authenticate") or ""
    assert 'error="invalid_token"' in challenge and "could not be verified" in challenge, challenge
    assert 'resource_metadata="http://testserver/.well-known/oauth-protected-resource/mcp"' in challenge, challenge
    assert any("token verifier" in record.getMessage() for record in caplog.records)  # the cause is logged
