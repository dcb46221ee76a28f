"""``path("mcp", include("mcp_tools.urls"))``: the endpoint behind Django's URLconf (see :mod:`mcp_tools.transports.view`).

The OAuth protected resource metadata must live at the site root, so it is a separate
list: ``urlpatterns += mcp_tools.urls.well_known_urlpatterns`` in the root URLconf.
"""

from django.urls import path

from .routing import require_installed

require_installed()  # before the view's imports: the URLconf fails to load, as a 500 per request did

from .transports.oauth import SUFFIXED_ROUTE, protected_resource_metadata  # noqa: E402
from .transports.view import mcp_view  # noqa: E402

app_name = "mcp_tools"
urlpatterns = [path("", mcp_view, name="endpoint")]

#: RFC 9728 metadata at the root and at the path-suffixed form for every path the endpoint is
#: served at (this include under whatever path, the ASGI mount, RESOURCE's path).
well_known_urlpatterns = [
    path(".well-known/oauth-protected-resource", protected_resource_metadata, name="mcp_tools_resource_metadata"),
    path(SUFFIXED_ROUTE, protected_resource_metadata),
]
