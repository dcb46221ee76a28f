"""``python manage.py mcp_stdio [--user NAME]``: serve the MCP registry over stdio."""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = "Serve MCP tools over stdio (newline-delimited JSON-RPC) for local clients."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--user", help="Username to run as (default: MCP_TOOLS['STDIO_USER'], else anonymous if allowed).")
        parser.add_argument(
            "--grace", type=float, default=None,
            help="Seconds to finish accepted requests after stdin closes (default: MCP_TOOLS['STDIO_SHUTDOWN_GRACE_SECONDS']).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        from mcp_tools.server.auth import ANONYMOUS, principal_for_user
        from mcp_tools.conf import mcp_settings
        from mcp_tools.transports.stdio import StdioServer

        # stdout carries the protocol: send every log line to stderr.
        logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
        username = options.get("user") or mcp_settings.STDIO_USER
        if username:
            try:
                user = get_user_model()._default_manager.get_by_natural_key(username)
            except get_user_model().DoesNotExist:
                raise CommandError(f"No user named {username!r}") from None
            principal = principal_for_user(user)
        elif mcp_settings.ALLOW_ANONYMOUS:
            principal = ANONYMOUS
        else:
            raise CommandError("Pass --user (or set MCP_TOOLS['STDIO_USER']), or enable ALLOW_ANONYMOUS")
        asyncio.run(StdioServer(principal, grace=options.get("grace")).serve())
