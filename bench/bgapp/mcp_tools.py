"""The benchmark's tools: one background tool and its inline twin, with the same body.

The handler's first line takes ``time.time()`` and sends it as the ``start`` probe
(see ``probes.py``), so the benchmark knows when the handler began, on a worker or
in the request. The tools do no other work: what is measured is the path around them.
"""

from __future__ import annotations

import os
import time

from pydantic import BaseModel

import mcp_tools

from . import probes


class Started(BaseModel):
    tag: str
    started: float
    pid: int


@mcp_tools.tool(background=True)
async def bench_bg(ctx: mcp_tools.ToolContext, tag: str) -> Started:
    """Background twin: record when the handler starts on a worker, and return it."""
    started = time.time()
    probes.emit("start", ctx.call_id, started, tag=tag)
    return Started(tag=tag, started=started, pid=os.getpid())


@mcp_tools.tool
async def bench_inline(ctx: mcp_tools.ToolContext, tag: str) -> Started:
    """Inline twin: the same body, run in the request."""
    started = time.time()
    probes.emit("start", ctx.call_id, started, tag=tag)
    return Started(tag=tag, started=started, pid=os.getpid())
