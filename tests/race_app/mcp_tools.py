"""Tools of the live servers that tests/test_keepalive.py starts (loaded by tests/race_server_settings.py).

The tests and the servers meet in files of ``RACE_DIR``: an effect writes a line to
``<tag>.effects`` each time it runs (an outside effect, not rolled back with its transaction),
and waits until the test creates ``<tag>.release``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import mcp_tools

#: Where the effects write and the test releases them (one folder per test run).
DIR = Path(os.environ.get("RACE_DIR", "."))


def slow_effect(tag: str) -> int:
    """A sync effect: a line in ``<tag>.effects`` and an AuditLog row, then a wait for the test's release."""
    from demo_site.inventory.models import AuditLog

    with open(DIR / f"{tag}.effects", "a") as f:
        f.write(f"{os.getpid()}\n")
    entry = AuditLog.objects.create(actor="race", action=tag, detail={"pid": os.getpid()})
    release = DIR / f"{tag}.release"
    deadline = time.monotonic() + 15  # never hang a server: the test releases the effect long before
    while not release.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return entry.pk


@mcp_tools.tool
async def race_slow_once(ctx: mcp_tools.ToolContext, tag: str) -> dict:
    """Ask, then run a slow sync effect once.

    Args:
        tag: Names the effect's files and its AuditLog rows.
    """
    await ctx.elicit("Go?", {"type": "object", "properties": {"go": {"type": "boolean"}}}, key="go")
    audit_id = await ctx.once("effect", slow_effect, tag)
    return {"audit_id": audit_id}
