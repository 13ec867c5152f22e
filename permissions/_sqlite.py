"""Opening a SQLite file that several gatewright processes (editor windows) share.

Owner-only permissions (what the user trusts and said is private), WAL so readers never block the writer, a busy
timeout, and a retried switch to WAL: `PRAGMA journal_mode = WAL` does not wait on the busy timeout while another
process holds the file during its own first open, so concurrent first opens would otherwise fail with "database is
locked". Used by the permission rules, the audit log and the session store.
"""

from __future__ import annotations

import contextlib
import os
import random
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sqlite3

BUSY_TIMEOUT_MS = 10_000


def open_shared(path: str, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> sqlite3.Connection:
    """Open (creating if needed) the database at `path`, or `:memory:`.

    Raises:
        sqlite3.Error: the file cannot be opened, or stays locked beyond the busy timeout.
    """
    import sqlite3

    if path != ":memory:":
        os.makedirs(os.path.dirname(path) or ".", mode=0o700, exist_ok=True)
        if not os.path.exists(path):
            fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o600)
            os.close(fd)
    conn = sqlite3.connect(path, timeout=busy_timeout_ms / 1000, isolation_level=None, check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
    if path != ":memory:":
        deadline = time.monotonic() + busy_timeout_ms / 1000
        while True:
            try:
                conn.execute("PRAGMA journal_mode = WAL").fetchone()
                break
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    conn.close()
                    raise
                time.sleep(random.uniform(0.005, 0.05))  # noqa: S311 - jitter, not security
    # NORMAL is durable against a killed process (the WAL is in the OS); only a power cut may lose the last commits.
    conn.execute("PRAGMA synchronous = NORMAL")
    return conn


class LazyDatabase:
    """One shared SQLite file, opened (and its schema created) on first use; safe to share between threads.

    Subclasses set `schema`; `_db()` yields the connection under a lock.
    """

    schema = ""

    def __init__(self, path: str) -> None:
        self.path = path
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            if self._conn is None:
                conn = open_shared(self.path)
                conn.executescript(self.schema)
                self._conn = conn
            yield self._conn

    @classmethod
    def shared(cls, directory: str) -> LazyDatabase:
        """The process-wide instance of this database for a state dir (one connection shared by every session)."""
        with _shared_lock:
            found = _shared.get((cls, directory))
            if found is None:
                found = _shared[(cls, directory)] = cls(directory)
            return found


_shared: dict[tuple[type, str], LazyDatabase] = {}
_shared_lock = threading.Lock()
