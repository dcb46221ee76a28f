from django.apps import AppConfig


class ShopConfig(AppConfig):
    """A small shop whose models' actions are MCP tools (model actions, a toolset, a tool chain)."""

    name = "demo_site.shop"
    label = "shop"
    verbose_name = "Shop"
    default_auto_field = "django.db.models.BigAutoField"
