"""``path("mcp", include("mcp_tools.urls"))``: the endpoint behind Django's URLconf (see :mod:`mcp_tools.views`)."""

from django.urls import path

from .views import mcp_view

app_name = "mcp_tools"
urlpatterns = [path("", mcp_view, name="endpoint")]
