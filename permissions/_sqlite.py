"""Opening a SQLite file that several gatewright processes (editor windows) share.

Owner-only permissions (what the user trusts and said is private), WAL so readers never block the writer, a busy
timeout, and a retried switch to WAL: `PRAGMA journal_mode = WAL` does not wait on the busy timeout while another
process holds the file during its own first open, so concurrent first opens would otherwise fail with "database is
locked". Used by the permission rules, the audit log and the session store.
"""

from __future__ import annotations

import os
import random
import time
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
