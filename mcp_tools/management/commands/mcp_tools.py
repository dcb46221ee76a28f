"""``python manage.py mcp_tools list|call``: the tools a user sees, and calling one in process.

``mcp_tools list [--user NAME]`` is ``mcp_call --list``; ``mcp_tools call TOOL --arg k=v``
is ``mcp_call TOOL --arg k=v`` (see :mod:`.mcp_call` for the options).
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from .mcp_call import add_call_arguments, run_call, run_list


class Command(BaseCommand):
    help = "MCP tools from the terminal: 'list' the tools a user can see, 'call' one in process."
    stealth_options = ("stdin",)

    def add_arguments(self, parser: CommandParser) -> None:
        subcommands = parser.add_subparsers(dest="subcommand", metavar="{list,call}")
        listing = subcommands.add_parser("list", help="List the tools the user can see.")
        add_call_arguments(listing, call=False)
        calling = subcommands.add_parser("call", help="Call a tool, answering its questions on the terminal.")
        calling.add_argument("tool", help="The tool to call.")
        add_call_arguments(calling)

    def handle(self, *args: Any, **options: Any) -> None:
        if options.get("subcommand") == "list":
            run_list(self, options)
        elif options.get("subcommand") == "call":
            run_call(self, options)
        else:
            raise CommandError("Use 'mcp_tools list' or 'mcp_tools call TOOL --arg KEY=VALUE'")
