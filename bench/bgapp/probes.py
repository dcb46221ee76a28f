"""Timing probes of the background benchmark: one UDP datagram per event, to ``BENCH_UDP``.

Every process of the run (the server and the workers) sends ``{"ev", "call", "t", "pid"}``
with ``t = time.time()`` (one wall clock on one machine) to the benchmark process, which
listens on ``BENCH_UDP`` (``host:port``). UDP keeps the probes off the path being measured:
no database write, no waiting for an answer. Without ``BENCH_UDP`` the probes do nothing.

Each event also carries ``q``: the SQL statements this process has run so far (any
thread), so the benchmark can count the queries of one call on each side.

Events: ``published`` (server: ``mcp_tools.run_call`` handed to the broker, after the row
committed), ``prerun`` (worker: Celery starts the task), ``start`` (worker or request:
the handler's first line), ``postrun`` (worker: the task returned, the outcome is in the
row), ``ready`` (a worker is consuming).
"""

from __future__ import annotations

import json
import os
import socket
import time
from typing import Any

_TARGET: tuple[str, int] | None = None
_QUERIES = [0]
_SOCK: socket.socket | None = None
RUN_TASK = "mcp_tools.run_call"


def _target() -> tuple[str, int] | None:
    global _TARGET, _SOCK
    if _TARGET is None and os.environ.get("BENCH_UDP"):
        host, port = os.environ["BENCH_UDP"].rsplit(":", 1)
        _TARGET = (host, int(port))
        _SOCK = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    return _TARGET


def emit(event: str, call: str | None, t: float | None = None, **extra: Any) -> None:
    """Send one probe event (``t`` defaults to now)."""
    target = _target()
    if target is None or _SOCK is None:
        return
    payload = {"ev": event, "call": call, "t": time.time() if t is None else t, "pid": os.getpid(), "q": _QUERIES[0], **extra}
    try:
        _SOCK.sendto(json.dumps(payload).encode(), target)
    except OSError:  # a full buffer loses one probe, never the call
        pass


def _call_of(args: Any) -> str | None:
    return str(args[0]) if args else None


def _published(sender: Any = None, body: Any = None, headers: Any = None, **kwargs: Any) -> None:
    if sender == RUN_TASK and isinstance(body, (list, tuple)) and body:
        emit("published", _call_of(body[0]))


def _prerun(sender: Any = None, task: Any = None, args: Any = None, **kwargs: Any) -> None:
    if getattr(task, "name", None) == RUN_TASK:
        emit("prerun", _call_of(args))


def _postrun(sender: Any = None, task: Any = None, args: Any = None, retval: Any = None, **kwargs: Any) -> None:
    if getattr(task, "name", None) == RUN_TASK:
        emit("postrun", _call_of(args), outcome=str(retval))


def _ready(**kwargs: Any) -> None:
    emit("ready", None)


def _count_query(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
    _QUERIES[0] += 1
    return execute(sql, params, many, context)


def _on_connection_created(sender: Any, connection: Any, **kwargs: Any) -> None:
    if _count_query not in connection.execute_wrappers:
        connection.execute_wrappers.append(_count_query)


def connect_celery_signals() -> None:
    """Hook the probes into Celery's signals and count SQL statements (in every process that loads the app)."""
    if not os.environ.get("BENCH_UDP"):
        return
    from celery import signals
    from django.db.backends.signals import connection_created

    connection_created.connect(_on_connection_created, weak=False)

    signals.after_task_publish.connect(_published, weak=False)
    signals.task_prerun.connect(_prerun, weak=False)
    signals.task_postrun.connect(_postrun, weak=False)
    signals.worker_ready.connect(_ready, weak=False)
