"""Opening a SQLite file that several gatewright processes (editor windows) share.

Owner-only permissions (what the user trusts and said is private), WAL so readers never block the writer, a busy
timeout, and a retried switch to WAL: `PRAGMA journal_mode = WAL` does not wait on the busy timeout while another
process holds the file during its own first open, so concurrent first opens would otherwise fail with "database is
locked". Used by the permission rules, the audit log and the session store.

A file that cannot be used is said once, in one line (never a traceback per call): `LazyDatabase.problem` keeps the
reason for `/status`, and `state_dir_problem` checks once per process whether the state dir can be written at all, so
that an unwritable state dir is one line at start rather than one per file and call.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Self

from permissions import lazy  # sqlite3: a session object and the start-up path must not load it

if TYPE_CHECKING:
    import sqlite3

log = logging.getLogger("gatewright.state")

BUSY_TIMEOUT_MS = 10_000


def open_shared(path: str, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> sqlite3.Connection:
    """Open (creating if needed) the database at `path`, or `:memory:`.

    Raises:
        sqlite3.Error: the file cannot be opened, or stays locked beyond the busy timeout.
    """
    if path != ":memory:":
        os.makedirs(os.path.dirname(path) or ".", mode=0o700, exist_ok=True)
        if not os.path.exists(path):
            fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o600)
            os.close(fd)
    conn = lazy.sqlite3.connect(path, timeout=busy_timeout_ms / 1000, isolation_level=None, check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
    if path != ":memory:":
        deadline = time.monotonic() + busy_timeout_ms / 1000
        while True:
            try:
                conn.execute("PRAGMA journal_mode = WAL").fetchone()
                break
            except lazy.sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    conn.close()
                    raise
                time.sleep(random.uniform(0.005, 0.05))  # noqa: S311 - jitter, not security
    # NORMAL is durable against a killed process (the WAL is in the OS); only a power cut may lose the last commits.
    conn.execute("PRAGMA synchronous = NORMAL")
    return conn


def describe_failure(exc: BaseException) -> str:
    """One line saying why a file could not be used: the OS's words for an OSError, SQLite's for its errors."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


class LazyDatabase:
    """One shared SQLite file, opened (and its schema created) on first use; safe to share between threads.

    Subclasses set `schema`; `_db()` yields the connection under a lock. `problem` is why the file could not be used
    the last time it was tried (None: it could, or it was not tried yet); `_failed` records it and says it once.
    """

    schema = ""

    def __init__(self, path: str) -> None:
        self.path = path
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self.problem: str | None = None
        self._said: str | None = None

    @property
    def directory(self) -> str:
        return os.path.dirname(self.path)

    @contextlib.contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            if self._conn is None:
                conn = open_shared(self.path)
                try:
                    conn.executescript(self.schema)
                except BaseException:
                    conn.close()
                    raise
                self._conn = conn
            yield self._conn

    def _worked(self) -> None:
        self.problem = None

    def _failed(self, exc: BaseException, consequence: str) -> str:
        """Record why the file cannot be used (closing the connection, so the next use opens it afresh) and say it
        once, in one line: `consequence` tells the user what this means. Returns the recorded problem."""
        with self._lock:
            if self._conn is not None:
                with contextlib.suppress(Exception):
                    self._conn.close()
                self._conn = None
        problem = f"{self.path}: {describe_failure(exc)}"
        self.problem = problem
        if problem != self._said:
            self._said = problem
            if known_state_dir_problem(self.directory) is not None:
                log.debug("%s (%s)", consequence, problem)  # the state dir's line at start already said it
            else:
                log.warning("%s (%s)", consequence, problem)
        return problem

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    @classmethod
    def shared(cls, directory: str) -> Self:
        """The process-wide instance of this database for a state dir (one connection shared by every session)."""
        with _shared_lock:
            found = _shared.get((cls, directory))
            if not isinstance(found, cls):  # keyed by class, so a found one is always of it
                found = _shared[(cls, directory)] = cls(directory)
            return found


def state_dir_problem(directory: str) -> str | None:
    """Why files cannot be created in the state dir `directory`, or None when they can. Checked once per process
    (creating the directory if needed and a probe file in it, which also fails for root where the path runs through
    a regular file or a read-only file system); a problem is logged once, in one line."""
    with _checked_lock:
        if directory in _checked:
            return _checked[directory]
        problem = None
        try:
            os.makedirs(directory, mode=0o700, exist_ok=True)
            probe = os.path.join(directory, f".probe-{os.getpid()}-{threading.get_ident()}")
            fd = os.open(probe, os.O_CREAT | os.O_WRONLY | os.O_EXCL | os.O_CLOEXEC, 0o600)
            os.close(fd)
            os.unlink(probe)
        except OSError as exc:
            problem = f"the state dir {directory} cannot be written ({describe_failure(exc)})"
            log.warning(
                "%s: sessions last only while this process runs, approvals are remembered for the session "
                "only, and the audit log is not kept",
                problem,
            )
        _checked[directory] = problem
        return problem


def known_state_dir_problem(directory: str) -> str | None:
    """What `state_dir_problem` found for `directory`, if it was checked (never checks)."""
    with _checked_lock:
        return _checked.get(directory)


_checked: dict[str, str | None] = {}
_checked_lock = threading.Lock()
_shared: dict[tuple[type, str], LazyDatabase] = {}
_shared_lock = threading.Lock()
