"""The OAuth 2.0 Protected Resource Metadata document (RFC 9728), as an ASGI app and a Django view.

Served at ``/.well-known/oauth-protected-resource`` and at the path-suffixed form
``/.well-known/oauth-protected-resource/<MCP path>`` that the MCP authorization spec
has clients try first; the ``resource_metadata`` of every 401 points at the latter.
Both answer 404 while ``MCP_TOOLS["OAUTH"]`` is not set.
"""

from __future__ import annotations

import json
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse

from ..server import oauth
from .http import _headers, check_origin, HttpError

#: Anyone may read the document, from any origin (it is public by design, RFC 9728 3).
CORS = [(b"access-control-allow-origin", b"*")]


class ProtectedResourceMetadata:
    """ASGI app serving the metadata (mounted by :func:`mcp_tools.routing.http_urlpatterns`)."""

    @classmethod
    def as_asgi(cls) -> ProtectedResourceMetadata:
        return cls()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        headers = _headers(scope)
        status, body, extra = 200, b"", [(b"content-type", b"application/json")]
        try:
            # Host is checked like the endpoint's: the document names URLs built from it.
            check_origin({"host": headers["host"]} if "host" in headers else {})
        except HttpError as exc:
            status, body = exc.status, json.dumps({"error": exc.error.message}).encode()
        else:
            if scope.get("method") not in ("GET", "HEAD"):
                status, body, extra = 405, b"", [(b"allow", b"GET, HEAD")]
            elif not oauth.enabled():
                status, body = 404, json.dumps({"error": "OAuth is not configured"}).encode()
            else:
                body = json.dumps(oauth.metadata_document(oauth.origin_of(scope, headers))).encode()
        await send({"type": "http.response.start", "status": status, "headers": extra + CORS})
        await send({"type": "http.response.body", "body": b"" if scope.get("method") == "HEAD" else body})


def protected_resource_metadata(request: HttpRequest, resource_path: str = "") -> HttpResponse:
    """The same document through Django's URLconf (``mcp_tools.urls.well_known_urlpatterns``)."""
    if request.method not in ("GET", "HEAD"):
        response = HttpResponse(status=405)
        response["Allow"] = "GET, HEAD"
        return response
    if not oauth.enabled():
        response = JsonResponse({"error": "OAuth is not configured"}, status=404)
    else:
        origin = f"{request.scheme}://{request.get_host()}"
        response = JsonResponse(oauth.metadata_document(origin))
    response["Access-Control-Allow-Origin"] = "*"
    return response
