"""Shared fixtures: live server processes (daphne/uvicorn) on free ports, sharing the test database."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SERVICES = os.environ.get("MCP_TOOLS_TEST_SERVICES") == "1"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ChildProcess:
    """A process a test starts (server or worker), stopped or killed by the test or at teardown."""

    #: Seconds a stopped process gets to exit before it is killed.
    stop_grace = 10.0
    process: subprocess.Popen[bytes] | None = None

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(self.stop_grace)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)

    def kill(self) -> None:
        self.stop(signal.SIGKILL)

    def freeze(self) -> None:
        """Stop the process where it is (SIGSTOP): it writes nothing until :meth:`thaw` or :meth:`kill`."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)


class LiveServer(ChildProcess):
    """A real ASGI server process serving demo_site on 127.0.0.1."""

    def __init__(self, server: str = "daphne", port: int | None = None, env: dict[str, str] | None = None,
                 app: str = "demo_site.asgi:application") -> None:
        self.server = server
        self.app = app
        self.port = port or free_port()
        self.env = env or {}
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = ROOT / "tests" / f".server-{self.port}.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> LiveServer:
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.server_settings", "PYTHONPATH": str(ROOT), **self.env}
        if self.server == "daphne":
            cmd = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(self.port), self.app]
        else:
            cmd = [sys.executable, "-m", "uvicorn", "--host", "127.0.0.1", "--port", str(self.port), "--log-level", "warning", self.app]
        log = open(self.log_path, "wb")  # noqa: SIM115 - closed with the process
        self.process = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited early: {self.log_path.read_text()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return self
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("server did not start in 30 s")


class CeleryWorker(ChildProcess):
    """A real ``celery worker`` process for the demo (solo pool), on the tests' database and broker."""

    stop_grace = 15.0

    def __init__(self, env: dict[str, str] | None = None, name: str | None = None) -> None:
        self.env = env or {}
        self.name = name or f"w{free_port()}"
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = ROOT / "tests" / f".worker-{self.name}.log"

    def start(self) -> CeleryWorker:
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.server_settings", "PYTHONPATH": str(ROOT), **self.env}
        cmd = [sys.executable, "-m", "celery", "-A", "demo_site", "worker", "--pool=solo", "--loglevel=INFO",
               "--without-gossip", "--without-mingle", "--without-heartbeat", "-n", f"{self.name}@%h"]
        log = open(self.log_path, "wb")  # noqa: SIM115 - closed with the process
        self.process = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"worker exited early: {self.log_path.read_text()[-3000:]}")
            if b" ready." in self.log_path.read_bytes():
                return self
            time.sleep(0.1)
        raise RuntimeError(f"worker did not start in 60 s: {self.log_path.read_text()[-3000:]}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


@pytest.fixture
def earlier_garbage_collected() -> None:
    """Collect, before the test, what earlier tests left to the garbage collector (a task left
    pending, a future whose exception nobody read, a coroutine whose ``finally`` raises, on loops
    those tests closed): each is logged or raised as it is destroyed, and a test that collects to
    see what its own code left must see only that."""
    import gc

    gc.collect()


@pytest.fixture(params=["django-filter", "orm"])
def filter_backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Model tool filters applied through django-filter's ``FilterSet`` (a site that has it installed),
    then through ``QuerySet.filter`` (one that has not): a test using this runs once each way."""
    from mcp_tools.modeltools import toolsets

    if request.param == "django-filter":
        import django_filters  # a test extra: the FilterSet path is tested, never skipped

        monkeypatch.setattr(toolsets, "django_filters", django_filters)
    else:
        monkeypatch.setattr(toolsets, "django_filters", None)
    return str(request.param)


@pytest.fixture
def start_worker(django_db_setup: None) -> Iterator[type[CeleryWorker]]:
    """Start Celery workers inside a test; all stop afterwards. Stale queued messages are dropped first."""
    from django.conf import settings

    options = getattr(settings, "CELERY_BROKER_TRANSPORT_OPTIONS", {})
    folder = options.get("data_folder_in")
    if folder and os.path.isdir(folder):
        for entry in os.listdir(folder):
            path = os.path.join(folder, entry)
            if os.path.isfile(path):
                os.unlink(path)
    started: list[CeleryWorker] = []

    class Tracked(CeleryWorker):
        def start(self) -> CeleryWorker:
            started.append(self)
            return super().start()

    yield Tracked
    for worker in started:
        worker.stop()


@pytest.fixture
def start_server(django_db_setup: None) -> Iterator[type[LiveServer]]:
    """Start live servers inside a test (``start_server(server="uvicorn").start()``); all stop afterwards."""
    started: list[LiveServer] = []

    class Tracked(LiveServer):
        def start(self) -> LiveServer:
            started.append(self)
            return super().start()

    yield Tracked
    for server in started:
        server.stop()


@pytest.fixture
def live_server_url(start_server: type[LiveServer]) -> str:
    return start_server().start().url


async def reset_thread_time_zones() -> None:
    """Set up again, for ``USE_TZ`` and ``TIME_ZONE`` as they are now, the database connections of the
    threads the server's code queries from: asgiref's worker thread and the store's threads (the
    idle request threads end; new ones start with new connections).

    Django does so, when a test changes either setting, only in the thread that changes it
    (``django.test.signals.update_connections_time_zone``); a connection elsewhere keeps the time
    zone it cached, and a PostgreSQL one goes on returning aware (or, afterwards, naive) datetimes.
    """
    from asgiref.sync import sync_to_async
    from django.test.signals import update_connections_time_zone

    from mcp_tools import store
    from mcp_tools.server import threads

    def reset() -> None:
        update_connections_time_zone(setting="USE_TZ")
        from django.db import connections

        for connection in connections.all(initialized_only=True):
            # The store's statements keep the converters chosen when they were made, and MySQL's
            # backend adds its datetime converter (make_aware) only under USE_TZ: made again.
            connection.__dict__.pop("mcp_tools_statements", None)

    await sync_to_async(reset, thread_sensitive=True)()
    await store.db(reset)()
    await store.db_alive(reset)()
    threads.close_idle_threads()


@pytest.fixture
async def no_time_zone_support() -> AsyncIterator[None]:
    """``USE_TZ = False`` and ``TIME_ZONE = "America/New_York"`` for one async test, in every thread."""
    from django.test import override_settings

    with override_settings(USE_TZ=False, TIME_ZONE="America/New_York"):
        await reset_thread_time_zones()
        yield
    await reset_thread_time_zones()


@pytest.fixture(scope="session", autouse=True)
def _close_worker_thread_connections(django_db_setup: None, django_db_blocker: object) -> Iterator[None]:
    """Close the database connections that async tests opened in asgiref's worker thread.

    Django closes only the main thread's connections before dropping the test
    database; PostgreSQL refuses to drop a database another session still uses.
    """
    yield
    from asgiref.sync import async_to_sync, sync_to_async
    from django.db import connections

    with django_db_blocker.unblock():  # type: ignore[attr-defined]
        async_to_sync(sync_to_async(connections.close_all, thread_sensitive=True))()
        from mcp_tools import store
        from mcp_tools.server import threads

        threads.close_idle_threads()  # request threads kept for later requests, with their connections
        async_to_sync(store.close_connections)()
        connection = connections["default"]
        if connection.vendor == "postgresql":
            # Idle connections of other worker threads (thread_sensitive=False hops) of this process.
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
        connection.close()


@pytest.fixture(scope="session", autouse=True)
def _remove_this_runs_broker_folder() -> Iterator[None]:
    """The embedded broker's folder is per test run (tests/settings.py); remove it afterwards."""
    yield
    import shutil

    folder = os.environ.get("MCP_TOOLS_BROKER_DIR", "")
    if os.path.basename(folder).startswith(".broker-"):
        shutil.rmtree(folder, ignore_errors=True)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Remove this run's SQLite ``-wal`` / ``-shm`` files once its test database is gone.

    Connections of this process that Django does not track (asgiref's worker threads)
    are still open when the test database is deleted, so SQLite never deletes the log
    files beside it: 40 MB a run, left in tests/.
    """
    from django.conf import settings

    if not settings.configured:
        return
    name = str(settings.DATABASES["default"].get("TEST", {}).get("NAME") or "")
    if not os.path.basename(name).startswith(".test-db-") or os.path.exists(name):
        return
    for suffix in ("-wal", "-shm"):
        with contextlib.suppress(OSError):
            os.remove(name + suffix)


@pytest.fixture(autouse=True)
def _stop_the_worker_loop() -> Iterator[None]:
    """Stop the background worker loop a test started in this process (``run_call.apply``), with its tasks.

    A Celery worker process keeps that loop for its life, and serves no MCP client. In the test
    process it would outlive its test, and the process-wide listeners it started (the channel
    layer's groups) would keep handling messages meant for later tests' loops.
    """
    yield
    from mcp_tools.server import background

    loop = background._loop
    if loop is None or loop.is_closed() or not loop.is_running():
        return

    async def cancel_everything() -> None:
        # A few passes: what is cancelled may start tasks of its own (a listener's leave), which,
        # left pending on the loop closed next, the collector would destroy in a later test.
        for _ in range(3):
            others = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
            if not others:
                return
            for task in others:
                task.cancel()
            await asyncio.wait(others, timeout=5)

    asyncio.run_coroutine_threadsafe(cancel_everything(), loop).result(30)
    loop.call_soon_threadsafe(loop.stop)
    background._loop = None
