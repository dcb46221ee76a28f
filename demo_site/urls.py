"""URLs of the demo site. The MCP endpoint itself is routed in ``demo_site/asgi.py``."""

from __future__ import annotations

from django.conf import settings
from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.urls import include, path
from django.utils.html import escape


def index(request: HttpRequest) -> HttpResponse:
    """A one-page explanation of where the MCP endpoint is and how to call it."""
    from mcp_tools.conf import endpoint_path, mcp_settings

    endpoint = request.build_absolute_uri(endpoint_path())
    anonymous = bool(mcp_settings.ALLOW_ANONYMOUS)
    auth_note = (
        "Anonymous callers are allowed."
        if anonymous
        else "Send <code>Authorization: Token &lt;token&gt;</code> (run <code>python manage.py demo_setup</code> to get one)."
    )
    body = f"""<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>mcp_tools demo</title>
<style>body{{font-family:system-ui,sans-serif;max-width:46rem;margin:3rem auto;line-height:1.5;padding:0 1rem}}
code,pre{{background:#f4f4f4;padding:.1rem .3rem;border-radius:3px}}pre{{padding:.8rem;overflow:auto}}</style>
</head>
<body>
<h1>mcp_tools demo</h1>
<p>This Django site serves a <a href="https://modelcontextprotocol.io/">Model Context Protocol</a> server.</p>
<p>MCP endpoint (Streamable HTTP): <code>{escape(endpoint)}</code></p>
<p>{auth_note}</p>
<p>Try it with any MCP client, for example:</p>
<pre>npx @modelcontextprotocol/inspector --transport http --server-url {escape(endpoint)}</pre>
<p>The tools, resources and prompts are defined in <code>demo_site/inventory/mcp_tools.py</code>.
Manage the products in the <a href="/admin/">admin</a>.</p>
</body>
</html>
"""
    return HttpResponse(body)


urlpatterns = [
    path("", index, name="index"),
    path("admin/", admin.site.urls),
    # The same endpoint through Django's URLconf and middleware (the alternative to the
    # ASGI mount in asgi.py; slower, but an include() is all it takes).
    path("mcp-via-django", include("mcp_tools.urls")),
]

# The protected resource metadata (RFC 9728) for the URLconf mount; the ASGI mount in
# asgi.py serves it first for /mcp (mcp_tools.routing.http_urlpatterns).
from mcp_tools.urls import well_known_urlpatterns  # noqa: E402

urlpatterns += well_known_urlpatterns

if getattr(settings, "OAUTH_INSTALLED", False):
    # django-oauth-toolkit, the demo's authorization server: its endpoints under /o/, and its
    # RFC 8414 metadata at the root well-known URI for the issuer <origin>/o.
    from oauth2_provider import urls as oauth2_urls  # noqa: E402
    from oauth2_provider.views import OAuthServerMetadataView  # noqa: E402

    urlpatterns += [
        path("o/", include(oauth2_urls)),
        path(".well-known/oauth-authorization-server/o", OAuthServerMetadataView.as_view()),
    ]
