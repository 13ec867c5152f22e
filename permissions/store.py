"""Persisted remembered rules: `permissions.db` in the state dir (project and global scopes).

Several editor windows (several `gatewright acp` processes) and the `gatewright permissions` command share one state
dir, so the file is SQLite in WAL mode with a busy timeout: a rule added or revoked by one process is seen by the
others at their next decision (rules are read per decision, never cached). `sqlite3` is imported when the database
is first used, never on the `initialize` path.

Reading fails closed: a rules file that exists but cannot be read (corrupt, a directory in its place, a row that does
not make sense) raises `RulesUnreadable`, which `RuleStore` turns into "unknown", never into "no rules". Only a file
that does not exist, and cannot exist because the state dir cannot be written, reads as no rules (and none can be
saved there).
"""

from __future__ import annotations

import os
import secrets
from typing import TYPE_CHECKING, Any

from permissions.rules import Rule
from permissions.shared_sqlite import LazyDatabase, known_state_dir_problem, state_dir_problem

if TYPE_CHECKING:
    pass

__all__ = [
    "AUDIT_FILE",
    "RULES_FILE",
    "RuleDatabase",
    "RulesUnreadable",
    "known_state_dir_problem",
    "rule_database",
    "state_dir",
    "state_dir_problem",
]

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
    `~/.local/state/gatewright` (docs/configuration.md, "The state dir")."""
    chosen = explicit or os.environ.get("GATEWRIGHT_STATE_DIR")
    if chosen:
        return os.path.abspath(os.path.expanduser(chosen))
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "gatewright")


class RulesUnreadable(Exception):
    """The rules file exists but cannot be read: which rules it holds is unknown. `reason` is one line."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


UNREADABLE = "the remembered rules cannot be read: every tool call asks until the file is repaired or removed"
UNSAVED = "remembered rules cannot be saved: approvals are remembered for this session only"


class RuleDatabase(LazyDatabase):
    """The project and global rules under one state dir. Safe to share between sessions of one process."""

    schema = _SCHEMA

    def __init__(self, directory: str) -> None:
        super().__init__(os.path.join(directory, RULES_FILE))
        self.can_save = True  # False once the file proved impossible to create or write

    def add(self, rule: Rule) -> Rule:
        """Persist a project or global rule, giving it a short id that is easy to type (`p-3fa9c2`)."""
        if rule.scope == "session":
            raise ValueError("session rules are not persisted")
        stored = Rule(
            f"p-{secrets.token_hex(3)}",
            rule.action,
            rule.tool,
            rule.rule_key,
            rule.label,
            rule.scope,
            rule.match,
            rule.project if rule.scope == "project" else None,
            rule.created_at,
        )
        try:
            with self._db() as db:
                # Remembering the same thing twice keeps one rule: the newer decision replaces the older one.
                db.execute("BEGIN IMMEDIATE")
                try:
                    db.execute(
                        "DELETE FROM rules WHERE tool = ? AND rule_key = ? AND scope = ? AND match = ? "
                        "AND project IS ?",
                        (stored.tool, stored.rule_key, stored.scope, stored.match, stored.project),
                    )
                    db.execute("INSERT INTO rules VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", _row(stored))
                    db.execute("COMMIT")
                except BaseException:
                    db.execute("ROLLBACK")
                    raise
        except Exception as exc:
            self.can_save = False
            self._failed(exc, UNSAVED)
            raise
        return stored

    def rules_for(self, project: str | None) -> list[Rule]:
        """The global rules and, when `project` is given, that project's rules.

        Raises:
            RulesUnreadable: the file exists (or may) but cannot be read.
        """
        return self._read(
            "SELECT * FROM rules WHERE scope = 'global' OR (scope = 'project' AND project = ?) ORDER BY created_at, id",
            (project,),
        )

    def all(self) -> list[Rule]:
        """Every rule (for `gatewright permissions list`).

        Raises:
            RulesUnreadable: the file exists (or may) but cannot be read.
        """
        return self._read("SELECT * FROM rules ORDER BY project IS NOT NULL, project, created_at, id", ())

    def _read(self, sql: str, args: tuple[Any, ...]) -> list[Rule]:
        try:
            with self._db() as db:
                rows = db.execute(sql, args).fetchall()
            rules = [_rule(r) for r in rows]
        except Exception as exc:
            if _cannot_exist(self.path):
                # No rules file, and none can be created here: there are no remembered rules, and none can be saved.
                self.can_save = False
                self._failed(exc, UNSAVED)
                return []
            raise RulesUnreadable(self._failed(exc, UNREADABLE)) from exc
        self._worked()
        return rules

    def revoke(self, rule_id: str) -> bool:
        """Forget a rule; False when there is no such rule.

        Raises:
            RulesUnreadable: the file cannot be read or written.
        """
        try:
            with self._db() as db:
                return db.execute("DELETE FROM rules WHERE id = ?", (rule_id,)).rowcount > 0
        except Exception as exc:
            if _cannot_exist(self.path):
                return False
            raise RulesUnreadable(self._failed(exc, UNREADABLE)) from exc


def _row(r: Rule) -> tuple[Any, ...]:
    return (r.id, r.action, r.tool, r.rule_key, r.label, r.scope, r.match, r.project, r.created_at)


def _rule(row: tuple[Any, ...]) -> Rule:
    """A stored row as a rule; a row that does not make sense makes the whole file unreadable (fail closed)."""
    rid, action, tool, key, label, scope, match, project, created = row
    if not (
        action in ("allow", "deny")
        and scope in ("project", "global")
        and match == "exact"
        and all(isinstance(v, str) and v for v in (rid, tool, key))
        and isinstance(label, str)
        and (project is None or isinstance(project, str))
        and (scope == "global" or project)
        and isinstance(created, (int, float))
    ):
        raise ValueError(f"a stored rule does not make sense: {rid!r}")
    return Rule(
        id=rid,
        action=action,
        tool=tool,
        rule_key=key,
        label=label,
        scope=scope,
        match=match,
        project=project,
        created_at=float(created),
    )


def _cannot_exist(path: str) -> bool:
    """Whether `path` certainly does not exist (its parent is missing or not a directory). An error that hides the
    answer (a permission problem) is not certainty."""
    try:
        os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return True
    except OSError:
        return False
    return False


def rule_database(directory: str | None = None) -> RuleDatabase:
    """The process-wide `RuleDatabase` of a state dir (one connection shared by every session)."""
    return RuleDatabase.shared(state_dir(directory))
