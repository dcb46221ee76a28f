from django.apps import AppConfig


class InventoryConfig(AppConfig):
    """A tiny shop inventory whose ``mcp_tools.py`` is the public example of the package."""

    name = "demo_site.inventory"
    label = "inventory"
    verbose_name = "Inventory"
    default_auto_field = "django.db.models.BigAutoField"
