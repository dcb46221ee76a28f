"""Integrations with third-party packages, each imported only by the project that configures it."""
