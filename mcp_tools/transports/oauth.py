"""The OAuth 2.0 Protected Resource Metadata document (RFC 9728), as an ASGI app and a Django view.

Served at ``/.well-known/oauth-protected-resource`` and at the path-suffixed form
``/.well-known/oauth-protected-resource/<path>`` that the MCP authorization spec has
clients try first, for every path the endpoint is served at (the ASGI mount, an
``include()`` under any path, ``RESOURCE``'s path); the ``resource_metadata`` of every
401 points at the latter. Both answer 404 while ``MCP_TOOLS["OAUTH"]`` is not set.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import register_converter
from django.views.decorators.csrf import csrf_exempt

from ..server import oauth
from .http import _TOKEN_CHARS, CORS_MAX_AGE, _headers, check_origin, HttpError


class ResourcePathConverter:
    """``<mcp_resource:resource_path>``: a path the endpoint is served at (``oauth.serves_resource``).

    Any other suffix does not match, so the site's own routes after the metadata route (another
    resource's metadata, a 404) still get it: the route must not claim every well-known path.
    """

    regex = ".+"

    def to_python(self, value: str) -> str:
        if not oauth.serves_resource("/" + value):
            raise ValueError(value)
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(ResourcePathConverter, "mcp_resource")

#: The path-suffixed route, for ``path()`` in Channels' URLRouter and in Django's URLconf.
SUFFIXED_ROUTE = ".well-known/oauth-protected-resource/<mcp_resource:resource_path>"

#: Anyone may read the document, from any origin (it is public by design, RFC 9728 3).
CORS = [(b"access-control-allow-origin", b"*")]
#: The methods the document answers (``Allow``, ``Access-Control-Allow-Methods``).
METHODS = "GET, HEAD, OPTIONS"


def preflight_headers(requested: str) -> list[tuple[bytes, bytes]]:
    """The answer to an ``OPTIONS`` of the document (a CORS preflight, from any origin), :data:`CORS` aside.

    A browser client sends headers of its own with the GET (the TypeScript SDK sends
    ``MCP-Protocol-Version``), which makes it no "simple" request: the browser asks first with
    ``OPTIONS``, and without this answer never fetches the document. ``requested`` is the
    ``Access-Control-Request-Headers`` value: those headers are allowed as named (the document is
    the same whatever they say); ``*`` when it names none or something that is no header name (a
    wildcard holds for requests without credentials, as these are).
    """
    names = [name.strip().lower() for name in requested.split(",")] if requested.strip() else []
    valid = names and all(name and _TOKEN_CHARS.issuperset(name) for name in names)
    allowed = ", ".join(dict.fromkeys(names)) if valid else "*"
    return [(b"allow", METHODS.encode()), (b"access-control-allow-methods", METHODS.encode()),
            (b"access-control-allow-headers", allowed.encode("latin-1")), (b"access-control-max-age", CORS_MAX_AGE),
            # The allowed headers echo the request's: a cache must tell preflights apart by them.
            (b"vary", b"Access-Control-Request-Headers")]


class ProtectedResourceMetadata:
    """ASGI app serving the metadata (mounted by :func:`mcp_tools.routing.http_urlpatterns`)."""

    @classmethod
    def as_asgi(cls) -> ProtectedResourceMetadata:
        return cls()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        headers = _headers(scope)
        status, body, extra = 200, b"", [(b"content-type", b"application/json")]
        try:
            # Host is checked like the endpoint's (X-Forwarded-Host too, with USE_X_FORWARDED_HOST): the
            # document names URLs built from it. Not the Origin: the document is public, read cross-origin.
            check_origin({name: headers[name] for name in ("host", "x-forwarded-host") if name in headers})
        except HttpError as exc:
            status, body = exc.status, json.dumps({"error": exc.error.message}).encode()
        else:
            if scope.get("method") not in ("GET", "HEAD", "OPTIONS"):
                status, body, extra = 405, b"", [(b"allow", METHODS.encode())]
            elif not oauth.enabled():
                status, body = 404, json.dumps({"error": "OAuth is not configured"}).encode()
            elif scope.get("method") == "OPTIONS":
                status, extra = 204, preflight_headers(headers.get("access-control-request-headers", ""))
            else:
                # The path-suffixed form describes the endpoint at its suffix; the root form the ASGI mount.
                suffix = scope.get("url_route", {}).get("kwargs", {}).get("resource_path")
                document = oauth.metadata_document(oauth.origin_of(scope, headers), "/" + suffix if suffix else None)
                body = json.dumps(document).encode()
        await send({"type": "http.response.start", "status": status, "headers": extra + CORS})
        await send({"type": "http.response.body", "body": b"" if scope.get("method") in ("HEAD", "OPTIONS") else body})


# Exempt from CsrfViewMiddleware: the document is public and read-only, and an unsafe method gets the
# view's own 405 with Allow, as from the ASGI mount, not Django's CSRF 403 page (HTML to a JSON client).
@csrf_exempt
@login_not_required  # public: what a client reads before it has a token (LoginRequiredMiddleware redirected it)
def protected_resource_metadata(request: HttpRequest, resource_path: str = "") -> HttpResponse:
    """The same document through Django's URLconf (``mcp_tools.urls.well_known_urlpatterns``)."""
    if request.method not in ("GET", "HEAD", "OPTIONS"):
        response = HttpResponse(status=405)
        response["Allow"] = METHODS
    elif not oauth.enabled():
        response = JsonResponse({"error": "OAuth is not configured"}, status=404)
    elif request.method == "OPTIONS":
        response = HttpResponse(status=204)
        del response["Content-Type"]  # no content
        for name, value in preflight_headers(request.headers.get("Access-Control-Request-Headers", "")):
            response[name.decode()] = value.decode("latin-1")
    else:
        origin = f"{request.scheme}://{request.get_host()}"
        response = JsonResponse(oauth.metadata_document(origin, "/" + resource_path if resource_path else None))
    response["Access-Control-Allow-Origin"] = "*"
    return response
