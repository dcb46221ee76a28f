"""The event loop's SQLite lane: a round's own statements without the hop to the store's thread.

On SQLite a durable round's statements are calls into a library in this process that
take tens of microseconds, and the hop to the store's thread and back (:mod:`.hop`)
cost more than all of them together: two thread wake-ups and the GIL handed back and
forth (``docs/performance-durable.md``, seventh pass). So the store functions that run
nothing but statements of ours (no ORM query, no user code, no signal) run them on the
event loop's own thread, on one connection the lane opens for the process, when:

* the database is a SQLite file in WAL mode, where readers never wait for a writer;
* nothing watches Django's cursors (query logging, ``execute_wrappers``, a wrapped
  ``CursorWrapper.execute``, a backend that makes its cursors its own way, the
  ``STORE_DRIVER_CURSOR`` setting: the rules of the driver's cursor, :mod:`.sql`), and
  nobody listens to the call model's ``pre_save`` / ``post_save`` / ``post_init``;
* ``CONN_MAX_AGE`` is not 0 (0 means no persistent connection: each hop opens its own),
  and the lane's connection is younger than it;
* Django's connections are like the lane's: no ``connection_created`` receiver (it would
  set up Django's only), and ``transaction_mode`` ``IMMEDIATE`` (a deferred transaction of
  the store's thread that reads, then writes, would fail if the lane committed between);
* ``MCP_TOOLS["STORE_SQLITE_LANE"]`` is True (the default).

Otherwise, and whenever the lane cannot go on, the function runs in the store's thread
as before. **The lane never waits on the loop**:

* its connection's busy timeout is 0: when another connection holds the write lock (the
  store's thread running a ``ctx.once`` inside its transaction, another process), the
  statement fails at once with ``SQLITE_BUSY``, what the function wrote rolls back, and
  it runs again from the start in the store's thread, where it waits its turn;
* its connection never checkpoints on the loop (``wal_autocheckpoint = 0``): a checkpoint
  copies the WAL back into the database file and syncs it, up to tens of milliseconds.
  Every :data:`CHECKPOINT_EVERY` commits the lane looks at the length of the log and, past
  the database's own ``wal_autocheckpoint``, a thread of its own (not the store's, not the
  loop) checkpoints on a connection of its own: first ``PASSIVE``, which copies the log
  while writers go on (the lane keeps committing on the loop meanwhile), then ``RESTART``
  for the few frames written in between, which holds the write lock only that long, and
  makes the next commit write the log from the start of the file again. The file keeps its
  size (``journal_size_limit`` bounds it; where the project sets none, the lane's connection
  sets twice the checkpoint size): writing over its blocks costs the kernel less
  than growing it anew, which ``TRUNCATE`` made every frame of every round do (a round
  pair ~7% more CPU, ``docs/performance-durable.md``, session 34). So the file's size no
  longer measures the log: :meth:`Lane.log_reaches` reads the frame header where the log
  would end (the WAL file format, https://www.sqlite.org/fileformat2.html#walformat).

An awaited lane function still suspends its caller once, as the hop did: other tasks run
and a cancel reaches the caller before the function starts.

The statements, their transactions and their compare-and-set conditions are the same in
both places (:class:`~mcp_tools.store.sql.Statements`), so every guarantee of a round
holds whichever runs it. A lane function runs from its first statement to its last
without giving the loop back, so nothing interleaves with its transaction.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import os
import sqlite3
import threading
import time
import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any, ParamSpec, TypeVar

from django.core.signals import setting_changed
from django.db import connections
from django.dispatch import receiver

from ..conf import mcp_settings
from . import sql
from .hop import db, handing_over

P = ParamSpec("P")
R = TypeVar("R")

logger = logging.getLogger("mcp_tools.store")

#: Commits between two looks at the WAL's size.
CHECKPOINT_EVERY = 64
#: After a checkpoint that could not finish (readers elsewhere), looks skipped before the next.
CHECKPOINT_BACKOFF = 8

#: The WAL file's header and each frame's header, in bytes (SQLite's WAL file format).
WAL_HEADER = 32
FRAME_HEADER = 24

#: SQLite's primary result codes for "another connection holds the lock".
_WAIT_CODES = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


class Fallback(Exception):
    """The function cannot run in the lane now: it runs in the store's thread instead.

    Raised before anything is written, or from inside a write transaction, which then
    rolls back.
    """


class Lane:
    """The process's connection to one SQLite database, for the store's own statements."""

    def __init__(self, alias: str, raw: sqlite3.Connection, store_wrapper: Any, wal_path: str,
                 checkpoint_bytes: int, max_age: float | None) -> None:
        self.alias = alias
        self.raw = raw
        #: The store thread's Django connection: what watches it must see the statements too.
        self.store_wrapper = store_wrapper
        self.wal_path = wal_path
        self.database_path = wal_path.removesuffix("-wal")
        self.checkpoint_bytes = checkpoint_bytes
        self.close_at = None if max_age is None else time.monotonic() + max_age
        self.commits = 0
        #: A checkpoint was asked of the checkpoint thread and has not run yet (that job clears it).
        self.checkpointing = False
        #: No look at the WAL's size before this many commits (after a checkpoint that could not finish).
        self.next_look = 0
        #: The salts of the log the last finished checkpoint copied back, and its frames: until a commit
        #: restarts the log (and writes new salts), the file still holds those frames, checkpointed.
        self.checkpointed: tuple[bytes, int] | None = None
        self.statements: LaneStatements | None = None  # made on first use
        #: No new function starts on a closed lane; its connection closes as soon as none runs.
        self.closed = False
        self.raw_closed = False
        #: Held while a function runs on this connection (event loops in other threads use the store's thread meanwhile).
        self.in_use = threading.Lock()

    def statements_of_thread(self) -> LaneStatements:
        """The store's statements on this lane's connection (made on first use)."""
        if self.statements is None:
            self.statements = LaneStatements(self.alias, self)
        return self.statements

    def usable(self) -> bool:
        """Whether this lane may run a function now (checked before each)."""
        if self.closed or not mcp_settings.STORE_SQLITE_LANE or (self.close_at is not None and time.monotonic() >= self.close_at):
            return False
        return not (sql._django_cursor_watched(connections[self.alias]) or sql._django_cursor_watched(self.store_wrapper)
                    or _model_signals_heard())

    def committed(self) -> None:
        """Count a commit; past the database's checkpoint size, ask the checkpoint thread for a checkpoint."""
        self.commits += 1
        if self.commits % CHECKPOINT_EVERY or not self.checkpoint_bytes or self.checkpointing or self.commits < self.next_look:
            return
        if self.log_reaches(self.checkpoint_bytes):
            self.checkpointing = True
            try:
                _checkpoint_thread().submit(self.checkpoint)  # whatever becomes of this loop, it runs and clears the flag
            except RuntimeError:  # the interpreter is shutting down: no new threads
                self.checkpointing = False

    def log_reaches(self, size: int) -> bool:
        """Whether the log written since the last checkpoint spans at least ``size`` bytes of the WAL file.

        A checkpoint that restarts the log leaves the file as large as it was, and the next
        commit writes its frames from the start over the old ones: the file's size says
        nothing of the log. A frame belongs to the current log when its header repeats the
        two salts of the file's header, which a restart changes (SQLite's own test of a
        frame). So this reads the header of the frame where a log of ``size`` bytes would
        end. Reading the file is safe for SQLite: its locks are on the database and ``-shm``
        files, none on the WAL, so opening and closing it here releases nothing of theirs.
        A frame caught half written reads as not there yet: the next look sees it. Between a
        checkpoint and the commit that restarts the log, the file's header keeps the old salts:
        only frames past the checkpointed ones count then (:attr:`checkpointed`).
        """
        try:
            with open(self.wal_path, "rb", buffering=0) as wal:
                header = wal.read(WAL_HEADER)
                if len(header) < WAL_HEADER:
                    return False
                frame_bytes = FRAME_HEADER + int.from_bytes(header[8:12], "big")  # the page size
                frames = max(1, -(-(size - WAL_HEADER) // frame_bytes))  # the frames a log of that size holds
                checkpointed = self.checkpointed
                if checkpointed is not None and checkpointed[0] == header[16:24]:
                    frames += checkpointed[1]  # not restarted yet: the log starts after the copied-back frames
                wal.seek(WAL_HEADER + (frames - 1) * frame_bytes)
                frame = wal.read(FRAME_HEADER)
        except OSError:
            return False
        return len(frame) == FRAME_HEADER and frame[8:16] == header[16:24]

    def checkpoint(self) -> None:
        """Copy the log back into the database file and restart it, in the checkpoint thread, on
        a connection of its own (never the lane's, so the loop's functions go on meanwhile).

        ``PASSIVE`` does the long part (the copy and the file's sync) without taking any lock a
        writer needs; ``RESTART`` then copies what was committed meanwhile and waits for no
        reader to use the log, so that the next commit writes it from the start of the file,
        holding the write lock that long (a lane function meeting it goes to the store's
        thread and waits its turn there). Not ``TRUNCATE``: a file emptied has every frame of
        the next ~10,000 pages grow it anew, which costs more than writing over its blocks.
        Its busy timeout is 0: readers or a writer elsewhere make it stop where it is, and it
        is tried again after :data:`CHECKPOINT_BACKOFF` × :data:`CHECKPOINT_EVERY` commits.
        """
        try:
            # The salts before the checkpoint: of the log it copies back, or of an older one if a
            # commit restarts the log meanwhile (then the file's header differs from them: never a
            # live log taken for a checkpointed one).
            salts = self._salts()
            checkpointer = sqlite3.connect(self.database_path, timeout=0, isolation_level=None, check_same_thread=False)
            try:
                checkpointer.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                busy, logged, _ = checkpointer.execute("PRAGMA wal_checkpoint(RESTART)").fetchone()
                if busy:  # readers (or a writer) elsewhere: the log stays as large for now
                    self.next_look = self.commits + CHECKPOINT_BACKOFF * CHECKPOINT_EVERY
                elif salts is not None:
                    self.checkpointed = (salts, max(int(logged), 0))
            finally:
                checkpointer.close()
        except sqlite3.Error as exc:
            logger.warning("WAL checkpoint of database %r failed: %s", self.alias, exc)
        finally:
            self.checkpointing = False

    def _salts(self) -> bytes | None:
        """The two salts of the WAL file's header (None: no header yet)."""
        try:
            with open(self.wal_path, "rb", buffering=0) as wal:
                header = wal.read(WAL_HEADER)
        except OSError:
            return None
        return header[16:24] if len(header) == WAL_HEADER else None

    def release(self) -> None:
        """Release :attr:`in_use`, closing the connection first if the lane was closed meanwhile."""
        try:
            if self.closed and not self.raw_closed:
                self._close_raw()
        finally:
            self.in_use.release()

    def close(self) -> None:
        """Close the connection (the caller holds :attr:`in_use`, or nobody else can)."""
        self.closed = True
        self._close_raw()

    def _close_raw(self) -> None:
        self.raw_closed = True
        try:
            self.raw.close()
        except sqlite3.Error:  # pragma: no cover - closing never matters more than what came before
            pass


class LaneStatements(sql.Statements):
    """The hot statements on a lane's connection: the event loop's thread, no Django cursor.

    The lane's checks (nothing watches Django's cursors, a stock backend) were made before
    the function started; here a statement that meets another connection's lock raises
    :class:`~mcp_tools.store.lane.Fallback` (what the function wrote rolls back), and a
    commit is counted for the lane's checkpoints.
    """

    def __init__(self, using: str, lane: Lane) -> None:
        super().__init__(using)
        self.lane = lane
        self.raw = lane.raw

    @contextlib.contextmanager
    def cursor(self) -> Iterator[Any]:
        raw = self.raw.cursor()
        try:
            with self.connection.wrap_database_errors:  # Django's exception classes, as elsewhere
                try:
                    yield sql._QmarkCursor(raw)
                except self.driver_error as exc:
                    if waits_for_lock(exc):
                        raise Fallback() from exc
                    raise
        finally:
            with contextlib.suppress(self.driver_error):
                raw.close()

    @contextlib.contextmanager
    def write_transaction(self) -> Iterator[Any]:
        with self.cursor() as cursor:
            cursor.execute("BEGIN IMMEDIATE")
            try:
                yield cursor
                cursor.execute("COMMIT")
            except BaseException:
                if self.raw.in_transaction:
                    self.raw.rollback()
                raise
        self.lane.committed()

    def _execute(self, cursor: Any, sql: str, params: Sequence[Any]) -> int:
        rowcount = super()._execute(cursor, sql, params)
        if cursor is None:  # a write in autocommit, outside write_transaction
            self.lane.committed()
        return rowcount


def waits_for_lock(error: BaseException) -> bool:
    """Whether ``error`` is SQLite saying another connection holds the lock."""
    return isinstance(error, sqlite3.OperationalError) and (getattr(error, "sqlite_errorcode", 0) & 0xFF) in _WAIT_CODES


#: The lane of each database alias, process-wide; None where the database cannot have one
#: (not SQLite, not WAL, a memory database, CONN_MAX_AGE 0, the setting off).
_lanes: dict[str, Lane | None] = {}
_lanes_lock = threading.Lock()
#: Connections a forked child inherited: never used, never closed (the parent still uses the file).
_inherited: list[Lane] = []
#: alias -> when to try opening its lane again, after an error opening it (say, a lock held elsewhere).
_retry_at: dict[str, float] = {}
#: Seconds between two tries at opening a lane that failed to open.
RETRY_OPEN_SECONDS = 5.0


#: The thread lanes' checkpoints run in (made on first use; a forked child makes its own).
_checkpointer: concurrent.futures.ThreadPoolExecutor | None = None


def _checkpoint_thread() -> concurrent.futures.ThreadPoolExecutor:
    global _checkpointer
    if _checkpointer is None:
        with _lanes_lock:
            if _checkpointer is None:
                _checkpointer = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="mcp-tools-checkpoint")
    return _checkpointer


def refuse() -> None:
    """Called where a store function is about to do what only the store's thread may (the ORM, signals)."""
    if sql.lane_running.lane is not None:
        raise Fallback()


@functools.cache
def _row_signals() -> tuple[Any, tuple[Any, ...]]:
    """The call model and the model signals a row's save or load sends (looked up once: asked per function)."""
    from django.db.models.signals import post_init, post_save, pre_init, pre_save

    from ..models import ToolCall

    return ToolCall, (pre_init, post_init, pre_save, post_save)


def _model_signals_heard() -> bool:
    """Whether user code would run inside a lane function: the model signals a row's save or load sends."""
    model, signals = _row_signals()
    # A signal with no receiver at all (``receivers`` is the list connect() appends to and disconnect()
    # deletes from) has none for the model either: that answer without has_listeners(), which filters
    # its receivers for the sender (a weak-key cache lookup, two lists) per signal per lane function.
    for signal in signals:
        if signal.receivers and signal.has_listeners(model):
            return True
    return False


_alias = sql.call_database


def _open(alias: str) -> Lane | None:
    """A lane's connection, made in the store's thread as Django makes its own (params, functions,
    ``init_command``), with no busy wait and no checkpoints; None if the database cannot have a lane.

    Not where Django's connections could differ from it or from each other:

    * a ``connection_created`` receiver (it would set up Django's connections only);
    * a ``transaction_mode`` other than ``IMMEDIATE`` / ``EXCLUSIVE``: a deferred transaction
      of the store's thread (a ``ctx.once``) that reads, then writes, fails if the lane
      commits in between (system check ``mcp_tools.W005`` asks for ``IMMEDIATE``).
    """
    from django.db.backends.signals import connection_created

    wrapper = connections[alias]
    if wrapper.vendor != "sqlite" or not mcp_settings.STORE_SQLITE_LANE or not sql._stock_backend(wrapper):
        return None
    max_age = wrapper.settings_dict.get("CONN_MAX_AGE", 0)
    if max_age == 0 or connection_created.has_listeners(type(wrapper)):
        return None
    params = wrapper.get_connection_params()  # also reads OPTIONS' transaction_mode into the wrapper
    if str(getattr(wrapper, "transaction_mode", None) or "").upper() not in ("IMMEDIATE", "EXCLUSIVE"):
        return None
    params["timeout"] = 0  # busy timeout 0: a lock held elsewhere is SQLITE_BUSY at once, never a wait
    raw = wrapper.get_new_connection(params)  # an error here (a lock during init_command) is the caller's
    raw.isolation_level = None  # autocommit, as Django keeps it: our BEGIN IMMEDIATE opens each transaction
    try:
        journal_mode = str(raw.execute("PRAGMA journal_mode").fetchone()[0]).lower()
        path = raw.execute("PRAGMA database_list").fetchone()[2]
        if journal_mode != "wal" or not path:
            raw.close()
            return None
        pages = int(raw.execute("PRAGMA wal_autocheckpoint").fetchone()[0])
        page_size = int(raw.execute("PRAGMA page_size").fetchone()[0])
        raw.execute("PRAGMA wal_autocheckpoint = 0")
        if pages > 0 and int(raw.execute("PRAGMA journal_size_limit").fetchone()[0]) < 0:
            # No limit (SQLite's default): a log this lane restarts would keep the largest size the
            # file ever reached (a long reader elsewhere holding off checkpoints, a bulk write). The
            # commit that restarts the log trims the file to this bound: twice the checkpoint size.
            raw.execute(f"PRAGMA journal_size_limit = {2 * pages * page_size:d}")
    except BaseException:
        raw.close()
        raise
    return Lane(alias, raw, wrapper, path + "-wal", max(pages, 0) * page_size, max_age)


_open_in_store_thread = db(_open)


async def _lane() -> Lane | None:
    """The usable lane to the call model's database, opened on first use; None if none."""
    alias = _alias()
    if alias in _lanes:
        lane = _lanes[alias]
        if lane is None:
            return None
        if not lane.closed and (lane.close_at is None or time.monotonic() < lane.close_at):
            return lane if lane.usable() else None
    # First use, closed, or past CONN_MAX_AGE: a new connection, as Django would open.
    if _retry_at.get(alias, 0.0) > time.monotonic():
        return None
    try:
        with handing_over(None):  # not the caller's job: a stop here hands nothing over (hop.handing_over)
            opened = await _open_in_store_thread(alias)
    except Exception as exc:  # the store's thread takes the work; try again later
        _retry_at[alias] = time.monotonic() + RETRY_OPEN_SECONDS
        logger.info("no SQLite lane for database %r yet: %s", alias, exc)
        return None
    with _lanes_lock:
        stale = _lanes.get(alias)
        if stale is not None and stale is not opened and not stale.closed and (stale.close_at is None or time.monotonic() < stale.close_at):
            # another thread's event loop opened one meanwhile: use that one
            if opened is not None:
                opened.close()
            opened = stale
        else:
            _lanes[alias] = opened
    if stale is not None and stale is not opened:
        if stale.in_use.acquire(blocking=False):
            try:
                stale.close()
            finally:
                stale.in_use.release()
        else:  # in use (a checkpoint, another loop): whoever holds it closes the connection on release
            stale.closed = True
    return opened if opened is not None and opened.usable() else None


def in_lane(fn: Callable[P, R]) -> Callable[P, Any]:
    """``fn`` (sync, statements of ours only) as a coroutine function: in the loop's SQLite lane where
    it can run there (see the module), else in the store's thread (:func:`~mcp_tools.store.hop.db`)."""
    in_store_thread = db(fn)

    @functools.wraps(fn)
    async def in_lane_or_store_thread(*args: P.args, **kwargs: P.kwargs) -> R:
        lane = await _lane()
        if lane is not None:
            # An awaited store call stays a suspension point, as the hop made it: other tasks
            # run here, and a cancel (a client's notifications/cancelled) reaches the caller
            # before the function starts, not after a handler's whole loop of progress reports.
            await asyncio.sleep(0)
        if lane is not None and lane.in_use.acquire(blocking=False):
            on_thread = sql.lane_running
            on_thread.lane = lane
            try:
                if not lane.closed:
                    return fn(*args, **kwargs)
            except Fallback:
                pass
            finally:
                on_thread.lane = None
                lane.release()
        result: R = await in_store_thread(*args, **kwargs)
        return result

    return in_lane_or_store_thread


def close_lanes() -> None:
    """Close every lane's connection (tests before dropping their database; shutdown); the next
    round opens a new one."""
    with _lanes_lock:
        lanes = [lane for lane in _lanes.values() if lane is not None]
        _lanes.clear()
        _retry_at.clear()
    for lane in lanes:
        with lane.in_use:  # not while a function runs on it
            lane.close()


@receiver(setting_changed)
def _settings_changed(setting: str, **kwargs: Any) -> None:
    if setting in ("DATABASES", "MCP_TOOLS", "DEBUG"):
        close_lanes()


def _forget_lanes_after_fork() -> None:
    # A forked child (a Celery prefork worker) must not use its parent's SQLite connections,
    # nor its checkpoint thread (threads do not survive a fork).
    global _lanes_lock, _checkpointer
    _checkpointer = None
    _inherited.extend(lane for lane in _lanes.values() if lane is not None)
    _lanes.clear()
    _lanes_lock = threading.Lock()  # another thread may have held it at the fork
    for lane in _inherited:
        lane.closed = True


if hasattr(os, "register_at_fork"):  # POSIX only (no fork on Windows)
    os.register_at_fork(after_in_child=_forget_lanes_after_fork)
