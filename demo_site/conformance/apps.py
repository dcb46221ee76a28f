from django.apps import AppConfig


class ConformanceFixturesConfig(AppConfig):
    """The fixture tools, resources and prompts the MCP conformance suite calls.

    Installed only when ``MCP_CONFORMANCE=1`` (see ``demo_site/settings.py``).
    """

    name = "demo_site.conformance"
    label = "conformance_fixtures"
    verbose_name = "MCP conformance fixtures"
