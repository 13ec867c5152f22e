"""Persisted remembered rules: `permissions.db` in the state dir (project and global scopes).

Several editor windows (several `gatewright acp` processes) and the `gatewright permissions` command share one state
dir, so the file is SQLite in WAL mode with a busy timeout: a rule added or revoked by one process is seen by the
others at their next decision (rules are read per decision, never cached). `sqlite3` is imported when the database
is first used, never on the `initialize` path.
"""

from __future__ import annotations

import os
import secrets
from typing import TYPE_CHECKING, Any

from permissions._sqlite import LazyDatabase
from permissions.rules import Rule

if TYPE_CHECKING:
    pass

RULES_FILE = "permissions.db"
AUDIT_FILE = "audit.db"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS rules (
    id TEXT PRIMARY KEY,
    action TEXT NOT NULL CHECK (action IN ('allow', 'deny')),
    tool TEXT NOT NULL,
    rule_key TEXT NOT NULL,
    label TEXT NOT NULL,
    scope TEXT NOT NULL CHECK (scope IN ('project', 'global')),
    match TEXT NOT NULL CHECK (match IN ('exact', 'under')),
    project TEXT,
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS rules_by_project ON rules (scope, project);
"""


def state_dir(explicit: str | None = None) -> str:
    """The state dir: `--state-dir`, else `$GATEWRIGHT_STATE_DIR`, else `$XDG_STATE_HOME/gatewright`, else
    `~/.local/state/gatewright` (the CLI contract's "user's state dir")."""
    chosen = explicit or os.environ.get("GATEWRIGHT_STATE_DIR")
    if chosen:
        return os.path.abspath(os.path.expanduser(chosen))
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "gatewright")


class RuleDatabase(LazyDatabase):
    """The project and global rules under one state dir. Safe to share between sessions of one process."""

    schema = _SCHEMA

    def __init__(self, directory: str) -> None:
        super().__init__(os.path.join(directory, RULES_FILE))

    def add(self, rule: Rule) -> Rule:
        """Persist a project or global rule, giving it a short id that is easy to type (`p-3fa9c2`)."""
        if rule.scope == "session":
            raise ValueError("session rules are not persisted")
        stored = Rule(f"p-{secrets.token_hex(3)}", rule.action, rule.tool, rule.rule_key, rule.label, rule.scope,
                      rule.match, rule.project if rule.scope == "project" else None, rule.created_at)
        with self._db() as db:
            # Remembering the same thing twice keeps one rule: the newer decision replaces the older one.
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute("DELETE FROM rules WHERE tool = ? AND rule_key = ? AND scope = ? AND match = ? "
                           "AND project IS ?", (stored.tool, stored.rule_key, stored.scope, stored.match,
                                                stored.project))
                db.execute("INSERT INTO rules VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", _row(stored))
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        return stored

    def rules_for(self, project: str | None) -> list[Rule]:
        """The global rules and, when `project` is given, that project's rules."""
        with self._db() as db:
            rows = db.execute("SELECT * FROM rules WHERE scope = 'global' OR (scope = 'project' AND project = ?) "
                              "ORDER BY created_at, id", (project,)).fetchall()
        return [_rule(r) for r in rows]

    def all(self) -> list[Rule]:
        with self._db() as db:
            rows = db.execute("SELECT * FROM rules ORDER BY project IS NOT NULL, project, created_at, id").fetchall()
        return [_rule(r) for r in rows]

    def revoke(self, rule_id: str) -> bool:
        with self._db() as db:
            return db.execute("DELETE FROM rules WHERE id = ?", (rule_id,)).rowcount > 0

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


def _row(r: Rule) -> tuple[Any, ...]:
    return (r.id, r.action, r.tool, r.rule_key, r.label, r.scope, r.match, r.project, r.created_at)


def _rule(row: tuple[Any, ...]) -> Rule:
    return Rule(id=row[0], action=row[1], tool=row[2], rule_key=row[3], label=row[4], scope=row[5], match=row[6],
                project=row[7], created_at=row[8])


def rule_database(directory: str | None = None) -> RuleDatabase:
    """The process-wide `RuleDatabase` of a state dir (one connection shared by every session)."""
    return RuleDatabase.shared(state_dir(directory))  # type: ignore[return-value]
