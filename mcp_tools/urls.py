"""``path("mcp", include("mcp_tools.urls"))``: the endpoint behind Django's URLconf (see :mod:`mcp_tools.transports.view`)."""

from django.urls import path

from .transports.view import mcp_view

app_name = "mcp_tools"
urlpatterns = [path("", mcp_view, name="endpoint")]
