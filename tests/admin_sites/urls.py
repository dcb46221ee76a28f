"""A project with a second admin site (``ops``) beside the default one, serving the calls' admin."""
from django.contrib import admin
from django.urls import path

from mcp_tools.admin import ToolCallAdmin
from mcp_tools.models import ToolCall

ops = admin.AdminSite(name="ops")
ops.register(ToolCall, ToolCallAdmin)
urlpatterns = [path("admin/", admin.site.urls), path("ops/", ops.urls)]
