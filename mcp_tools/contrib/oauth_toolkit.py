"""django-oauth-toolkit as the authorization server of the MCP endpoint (``pip install '/path/to/django-mcp-tools[oauth]'`` from a checkout).

::

    MCP_TOOLS = {"OAUTH": {
        "AUTHORIZATION_SERVERS": ["/o"],  # DOT mounted at path("o/", include("oauth2_provider.urls"))
        "TOKEN_VERIFIER": "mcp_tools.contrib.oauth_toolkit.OAuthToolkitVerifier",
        "SCOPES_SUPPORTED": ["mcp"],
    }}

The verifier reads DOT's own ``AccessToken`` table (by the token's SHA-256 checksum, as
DOT does), so it sees revocation at once. See docs/oauth.md.
"""

from __future__ import annotations

import hashlib
from typing import Any

from ..server.oauth import TokenInfo, TokenVerifier


class OAuthToolkitVerifier(TokenVerifier):
    """Looks access tokens up in django-oauth-toolkit's models.

    - expiry: ``AccessToken.expires``;
    - audience: ``AccessToken.resource``, the RFC 8707 resource indicators the client asked
      for at the token endpoint (DOT >= 3.2 records them);
    - scopes: ``AccessToken.scope``;
    - user: the token's user, or for a client-credentials token (no user) the user who owns
      the DOT ``Application`` (a service account), else none (the client acts for nobody).
    """

    def verify(self, token: str) -> TokenInfo | None:
        from oauth2_provider.models import get_access_token_model

        checksum = hashlib.sha256(token.encode("utf-8")).hexdigest()
        found = (
            get_access_token_model().objects.select_related("application", "user", "application__user")
            .filter(token_checksum=checksum).first()
        )
        if found is None:
            return None
        application: Any = found.application
        if application is not None and hasattr(application, "is_usable") and not application.is_usable(None):
            return None
        user = found.user if found.user is not None else getattr(application, "user", None)
        resource = getattr(found, "resource", None) or []
        return TokenInfo(
            user=user,
            scopes=frozenset(found.scope.split()),
            expires_at=found.expires,
            audience=tuple(str(item) for item in resource),
            client_id=getattr(application, "client_id", None),
        )
