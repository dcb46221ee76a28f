"""``python manage.py mcp_stdio [--user NAME]``: serve the MCP registry over stdio."""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import Any

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
        from mcp_tools.management.commands.mcp_call import principal_for
        from mcp_tools.transports.stdio import StdioServer

        # stdout carries the protocol: send every log line to stderr.
        logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
        principal = principal_for(options.get("user"))  # the same rules as mcp_call (an inactive user is refused)
        asyncio.run(StdioServer(principal, grace=options.get("grace")).serve())
