"""``python manage.py mcp_stdio [--user NAME]``: serve the MCP registry over stdio."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import signal
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
        """Serve until stdin closes (or SIGTERM / SIGINT), then end the process."""
        from mcp_tools.management.commands.mcp_call import principal_for
        from mcp_tools.transports.stdio import StdioServer, claim_stdio

        grace = options.get("grace")
        if grace is not None and not (math.isfinite(grace) and grace >= 0):  # the setting's own rule (E005)
            raise CommandError("--grace must be a finite number of seconds >= 0")
        # stdout carries the protocol: send every log line to stderr.
        logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
        # The same rules as mcp_call (an inactive user is refused); the server reads the user again
        # for each request (StdioServer.current_principal).
        principal = principal_for(options.get("user"))
        server = StdioServer(principal, *claim_stdio(), grace=options.get("grace"))

        async def serve() -> None:
            # No signal handlers in Windows' event loops (NotImplementedError), nor outside the main
            # thread (RuntimeError: call_command("mcp_stdio") from a thread): stdin's end still stops it.
            with contextlib.suppress(NotImplementedError, RuntimeError):
                # A client that gives up waiting for the exit sends SIGTERM (the official Python
                # client 2 s after closing stdin): the calls in flight then end cancelled and are
                # answered, instead of dying with the process and staying input_required.
                asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, server.stop, "SIGTERM")
                # Ctrl-C in a terminal signals the client and this child together: the same, where
                # asyncio.run's KeyboardInterrupt left the requests unanswered with a traceback.
                asyncio.get_running_loop().add_signal_handler(signal.SIGINT, server.stop, "SIGINT")
            await server.serve()
            # Every accepted request has its reply. Exit now, from inside the loop: asyncio.run
            # would wait for the loop's executor threads (a thread_sensitive=False tool's) and
            # interpreter exit for the other sync tools' threads, cancelled at the end of the
            # grace period (a thread cannot be stopped), past the grace period the setting promises.
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)

        asyncio.run(serve())
