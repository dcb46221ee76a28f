"""Drive ``manage.py mcp_stdio`` interactively over real pipes, as an MCP host does: a child
process, messages written one at a time, everything it writes to stdout collected as it comes."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def init_message(version: str = "2025-11-25", capabilities: dict[str, Any] | None = None, request_id: Any = "init") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": capabilities or {}, "clientInfo": {"name": "tests", "version": "1"}}}


def call(request_id: Any, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": name, "arguments": arguments or {}}}


class StdioProcess:
    """``manage.py mcp_stdio *args`` with ``tests.stdio_settings`` (``env`` added to the environment).

    ``received`` holds each line of its stdout as it arrives: the decoded message, or
    ``{"__not_json__": line}`` for a line that is not JSON.
    """

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        self.args = args
        self.env = env or {}
        self.proc: asyncio.subprocess.Process | None = None
        self.received: list[dict[str, Any]] = []
        self.stderr = b""
        self._new = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> StdioProcess:
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.stdio_settings", "PYTHONPATH": str(ROOT), **self.env}
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "manage.py", "mcp_stdio", *self.args, cwd=ROOT, env=env,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            limit=64 * 1024 * 1024,
        )
        self._tasks = [asyncio.ensure_future(self._read()), asyncio.ensure_future(self._read_stderr())]
        return self

    async def _read(self) -> None:
        assert self.proc and self.proc.stdout
        while line := await self.proc.stdout.readline():
            try:
                self.received.append(json.loads(line))
            except ValueError:
                self.received.append({"__not_json__": line.decode(errors="replace")})
            self._new.set()

    async def _read_stderr(self) -> None:
        assert self.proc and self.proc.stderr
        self.stderr = await self.proc.stderr.read()

    async def send(self, message: dict[str, Any] | str) -> None:
        """Write one message (a ``str`` as it is) and its newline."""
        assert self.proc and self.proc.stdin
        line = message if isinstance(message, str) else json.dumps(message)
        self.proc.stdin.write(line.encode() + b"\n")
        await self.proc.stdin.drain()

    async def send_bytes(self, line: bytes) -> None:
        assert self.proc and self.proc.stdin
        self.proc.stdin.write(line)
        await self.proc.stdin.drain()

    async def wait_for(self, predicate: Any, timeout: float = 10.0) -> dict[str, Any]:
        """The first message received (so far or within ``timeout``) that ``predicate`` accepts."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        seen = 0
        while True:
            for message in self.received[seen:]:
                if predicate(message):
                    return message
            seen = len(self.received)
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise TimeoutError(f"no matching message within {timeout}s; received: {self.received!r}")
            self._new.clear()
            try:
                await asyncio.wait_for(self._new.wait(), remaining)
            except asyncio.TimeoutError:
                pass

    async def reply_to(self, request_id: Any, timeout: float = 10.0) -> dict[str, Any]:
        return await self.wait_for(lambda m: m.get("id") == request_id and ("result" in m or "error" in m), timeout)

    async def handshake(self, capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
        await self.send(init_message(capabilities=capabilities))
        reply = await self.reply_to("init", timeout=30)
        await self.send(INITIALIZED)
        return reply

    def close_stdin(self) -> None:
        assert self.proc and self.proc.stdin
        self.proc.stdin.close()

    async def wait_exit(self, timeout: float = 30.0) -> int:
        """The exit code, once the process exited and its output was read to the end."""
        assert self.proc
        code = await asyncio.wait_for(self.proc.wait(), timeout)
        await asyncio.wait_for(asyncio.gather(*self._tasks), 5)
        return code

    async def stop(self) -> None:
        """Kill the process if it still runs (a test's cleanup)."""
        if self.proc and self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()
        for task in self._tasks:
            task.cancel()
