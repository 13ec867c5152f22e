"""The SQLite file under the state dir: opening it safely for several processes, and versioned migrations.

Several gatewright processes (one per editor window) share one state dir, so the database runs in WAL mode with a
busy timeout, and every writer takes the write lock up front with `BEGIN IMMEDIATE` (a deferred transaction that
upgrades to a writer mid-way can fail with SQLITE_BUSY without waiting). Connections run in autocommit mode so that
transactions are always explicit. The store imports `sqlite3` here only, and this module loads with the first session
(`runtime.open_store`, a lazy name): nothing on the `initialize` path touches the disk.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from permissions.shared_sqlite import open_shared

log = logging.getLogger("gatewright.store")

BUSY_TIMEOUT_MS = 10_000
DB_NAME = "gatewright.sqlite3"

# Append-only: a released migration is never edited; the schema version is the number of migrations applied.
MIGRATIONS: tuple[str, ...] = (
    # 1: sessions, their replay log and their model context.
    """
    CREATE TABLE sessions (
        id TEXT PRIMARY KEY,
        cwd TEXT NOT NULL,
        additional_dirs TEXT NOT NULL DEFAULT '[]',
        title TEXT,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        mode TEXT NOT NULL,
        model_id TEXT,
        context_epoch INTEGER NOT NULL DEFAULT 0,
        state TEXT NOT NULL DEFAULT '{}',
        parent_id TEXT
    );
    CREATE INDEX sessions_by_cwd ON sessions(cwd, updated_at DESC, id DESC);
    CREATE INDEX sessions_by_time ON sessions(updated_at DESC, id DESC);
    -- What the user saw, in order: session/update payloads (chunks coalesced), replayed by session/load.
    CREATE TABLE events (
        session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        kind TEXT NOT NULL,
        data TEXT NOT NULL,
        at REAL NOT NULL,
        PRIMARY KEY (session_id, seq)
    ) WITHOUT ROWID;
    -- What the model sees: the runtime history. A compaction starts a new epoch holding the rewritten context.
    CREATE TABLE messages (
        session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        epoch INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        data TEXT NOT NULL,
        PRIMARY KEY (session_id, epoch, seq)
    ) WITHOUT ROWID;
    """,
)


def default_state_dir() -> Path:
    """`$GATEWRIGHT_STATE_DIR`, else `$XDG_STATE_HOME/gatewright`, else `~/.local/state/gatewright`."""
    env = os.environ.get("GATEWRIGHT_STATE_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_STATE_HOME")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".local" / "state"
    return base / "gatewright"


def connect(path: str | Path) -> sqlite3.Connection:
    """Open (creating if needed) the database at `path` and bring its schema up to date.

    `path` may be `:memory:` (used when the state dir cannot be written: sessions then last for the process).
    """
    conn = open_shared(str(path), BUSY_TIMEOUT_MS)
    conn.execute("PRAGMA foreign_keys = ON")
    migrate(conn)
    return conn


@contextlib.contextmanager
def write(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction holding the database write lock from its first statement."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def migrate(conn: sqlite3.Connection) -> int:
    """Apply the migrations this database has not seen yet; returns the resulting schema version.

    Two processes may start at once on a new file: the version is re-read under the write lock, so each migration
    runs exactly once. A database newer than this build is left alone (and refused), never downgraded.
    """
    version: int = conn.execute("PRAGMA user_version").fetchone()[0]
    if version == len(MIGRATIONS):
        return version
    with write(conn):
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > len(MIGRATIONS):
            raise RuntimeError(
                f"the session store has schema version {version}, newer than this gatewright "
                f"({len(MIGRATIONS)}); upgrade gatewright"
            )
        for number in range(version, len(MIGRATIONS)):
            for statement in _statements(MIGRATIONS[number]):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {number + 1}")
    return len(MIGRATIONS)


def _statements(script: str) -> list[str]:
    # executescript() would COMMIT our transaction; split instead (the migrations hold no ';' inside literals).
    lines = [ln for ln in script.splitlines() if not ln.strip().startswith("--")]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]
