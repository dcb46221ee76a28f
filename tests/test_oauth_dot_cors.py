"""docs/oauth.md "Browser clients: CORS on DOT's endpoints", checked against django-oauth-toolkit.

A client whose OAuth requests run in a browser page (the MCP Inspector at http://localhost:6274)
must read DOT's token answer cross-origin. The page said nothing of it, and that the demo "does all
of this". DOT sends no CORS headers there; the page's django-cors-headers lines, run as written
(where the package is installed: it is no dependency of this project), add them for DOT's token
and revocation endpoints only.
"""

from __future__ import annotations

import re
import secrets
from pathlib import Path
from typing import Any

import pytest
from django.test import Client, override_settings

pytest.importorskip("oauth2_provider")
pytestmark = [pytest.mark.django_db]

PAGE = Path(__file__).resolve().parent.parent / "docs" / "oauth.md"
INSPECTOR = "http://localhost:6274"


def application() -> tuple[str, str]:
    """A confidential client-credentials application (its id and secret)."""
    from django.contrib.auth.models import User
    from oauth2_provider.models import Application

    secret = secrets.token_urlsafe(20)
    owner = User.objects.create_user(username=f"cors-{secrets.token_hex(4)}", password="x")
    app = Application.objects.create(name="cors", user=owner, client_type=Application.CLIENT_CONFIDENTIAL,
                                     authorization_grant_type=Application.GRANT_CLIENT_CREDENTIALS, client_secret=secret,
                                     allowed_origins=INSPECTOR)
    return app.client_id, secret


def answers(origin: str) -> dict[str, Any]:
    """DOT's answers to a browser page at ``origin``: the token preflight and request, and a revocation."""
    client_id, secret = application()
    client = Client()
    preflight = client.options("/o/token/", HTTP_ORIGIN=origin, HTTP_ACCESS_CONTROL_REQUEST_METHOD="POST",
                               HTTP_ACCESS_CONTROL_REQUEST_HEADERS="authorization, content-type")
    token = client.post("/o/token/", {"grant_type": "client_credentials", "client_id": client_id, "client_secret": secret,
                                      "resource": "http://testserver/mcp"}, HTTP_ORIGIN=origin)
    assert token.status_code == 200, token.content
    revoked = client.post("/o/revoke_token/", {"token": token.json()["access_token"], "client_id": client_id,
                                                "client_secret": secret}, HTTP_ORIGIN=origin)
    assert revoked.status_code == 200, revoked.content
    return {"preflight": preflight, "token": token, "revoked": revoked}


def documented_cors_settings() -> dict[str, Any]:
    """The settings the page's django-cors-headers block makes of this project's, run as written."""
    from django.conf import settings

    section = PAGE.read_text().split("### Browser clients: CORS on DOT's endpoints", 1)[1]
    block = re.search(r"^```python\n(.*?)^```$", section, re.M | re.S)
    assert block is not None, "the section has no python block"
    namespace: dict[str, Any] = {"INSTALLED_APPS": list(settings.INSTALLED_APPS), "MIDDLEWARE": list(settings.MIDDLEWARE)}
    exec(block.group(1), namespace)
    return {name: value for name, value in namespace.items() if name.isupper()}


def test_dot_itself_answers_a_browser_page_without_cors_headers() -> None:
    """Why the section exists: even with the page's origin among the application's allowed origins."""
    for name, response in answers(INSPECTOR).items():
        assert "Access-Control-Allow-Origin" not in response, (name, dict(response.items()))


def test_the_documented_django_cors_headers_setup_opens_dots_token_and_revocation_endpoints_only() -> None:
    pytest.importorskip("corsheaders")
    with override_settings(**documented_cors_settings()):
        found = answers(INSPECTOR)
        assert {name: response["Access-Control-Allow-Origin"] for name, response in found.items()} == dict.fromkeys(found, INSPECTOR)
        assert "POST" in found["preflight"]["Access-Control-Allow-Methods"]
        assert {"authorization", "content-type"} <= set(found["preflight"]["Access-Control-Allow-Headers"].split(", "))
        assert "Access-Control-Allow-Credentials" not in found["token"]
        # Another origin, and the site's other paths, get nothing.
        assert all("Access-Control-Allow-Origin" not in response for response in answers("https://elsewhere.example").values())
        admin = Client().options("/admin/login/", HTTP_ORIGIN=INSPECTOR, HTTP_ACCESS_CONTROL_REQUEST_METHOD="POST")
        assert "Access-Control-Allow-Origin" not in admin
