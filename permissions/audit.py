"""The audit log: one row per tool call decision, in `audit.db` in the state dir (`gatewright audit` shows it).

A row says which call (session, call id, tool), what it was (an argument summary with secrets redacted), what was
decided (allow / ask / deny), by what (`mode:<mode>`, `rule:<id>`, `user`), which option the user chose, how it
ended (`ran`, `completed`, `failed`, `rejected`, `declined`, `denied`, `cancelled`, `timeout`, `unasked`: the user
could not be asked) and how long asking and running took. Rows are written when the decision is made and completed
when the call ends, so a crash mid-call still leaves the decision on record. Writing the log never breaks a call,
and never fails silently: the first failure is said once on stderr (one line), and `AuditLog.problem` keeps it for
`/status`.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from typing import Any

from permissions.redaction import redact
from permissions.shared_sqlite import LazyDatabase
from permissions.store import AUDIT_FILE, state_dir

_SCHEMA = """
CREATE TABLE IF NOT EXISTS audit (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    ts REAL NOT NULL,
    session_id TEXT NOT NULL,
    call_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    summary TEXT NOT NULL,
    decision TEXT NOT NULL,
    decided_by TEXT NOT NULL,
    reason TEXT NOT NULL,
    option TEXT,
    outcome TEXT NOT NULL,
    ask_ms INTEGER,
    run_ms INTEGER,
    project TEXT
);
CREATE INDEX IF NOT EXISTS audit_by_session ON audit (session_id, seq);
"""
_FIELDS = (
    "seq",
    "ts",
    "session_id",
    "call_id",
    "tool",
    "summary",
    "decision",
    "decided_by",
    "reason",
    "option",
    "outcome",
    "ask_ms",
    "run_ms",
    "project",
)


WHOLE = ("command",)  # what decides a command's effect is kept whole, however long (redacted like the rest)
WHOLE_MAX = 100_000  # a bound for the pathological case, said in the row


def summarize_arguments(raw_input: Any, limit: int = 300) -> str:
    """A redacted view of a call's arguments: a command whole (what was approved is what is audited), long other
    strings (file contents, patches) by their length, and the rest cut at `limit` characters."""

    def short(v: Any) -> Any:
        if isinstance(v, str):
            return v if len(v) <= 200 else f"<{len(v)} characters>"
        if isinstance(v, dict):
            return {k: short(x) for k, x in v.items()}
        if isinstance(v, list):
            return [short(x) for x in v[:20]]
        return v

    def whole(v: str) -> str:
        return v if len(v) <= WHOLE_MAX else v[:WHOLE_MAX] + f"… <{len(v) - WHOLE_MAX} more characters>"

    # File content is not needed to audit a decision and may itself hold secrets.
    kept = 0
    if isinstance(raw_input, dict):
        shown = {}
        for k, v in raw_input.items():
            if k in WHOLE and isinstance(v, str):
                shown[k] = whole(v)
                kept += len(shown[k])
            elif k in ("content", "new_string", "old_string", "patch", "input") and isinstance(v, str):
                shown[k] = f"<{len(v)} characters>"
            else:
                shown[k] = short(v)
    else:
        shown = short(raw_input)
    text = redact(json.dumps(shown, ensure_ascii=False, sort_keys=True))
    limit += kept * 2  # a command's escapes (quotes, newlines) may double it in JSON
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True, slots=True)
class AuditEntry:
    seq: int
    ts: float
    session_id: str
    call_id: str
    tool: str
    summary: str
    decision: str
    decided_by: str
    reason: str
    option: str | None
    outcome: str
    ask_ms: int | None
    run_ms: int | None
    project: str | None

    def as_dict(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in _FIELDS}


NOT_WRITTEN = "the audit log cannot be written: permission decisions are not being recorded"


class AuditLog(LazyDatabase):
    """Appends decisions to `audit.db`; `begin` returns a row handle that `end` completes."""

    schema = _SCHEMA

    def __init__(self, directory: str) -> None:
        super().__init__(os.path.join(directory, AUDIT_FILE))

    def begin(
        self,
        *,
        session_id: str,
        call_id: str,
        tool: str,
        summary: str,
        decision: str,
        decided_by: str,
        reason: str,
        option: str | None = None,
        outcome: str = "pending",
        ask_ms: int | None = None,
        project: str | None = None,
    ) -> int | None:
        try:
            with self._db() as db:
                cur = db.execute(
                    "INSERT INTO audit (ts, session_id, call_id, tool, summary, decision, decided_by, reason, option,"
                    " outcome, ask_ms, project) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        time.time(),
                        session_id,
                        call_id,
                        tool,
                        redact(summary),
                        decision,
                        decided_by,
                        redact(reason),
                        option,
                        outcome,
                        ask_ms,
                        project,
                    ),
                )
                seq = cur.lastrowid
        except Exception as exc:  # auditing never breaks a call; it says (once) that it is not recording
            self._failed(exc, NOT_WRITTEN)
            return None
        self._worked()
        return seq

    def end(self, seq: int | None, outcome: str, run_ms: int | None = None) -> None:
        if seq is None:
            return
        try:
            with self._db() as db:
                db.execute("UPDATE audit SET outcome = ?, run_ms = ? WHERE seq = ?", (outcome, run_ms, seq))
        except Exception as exc:  # auditing never breaks a call; it says (once) that it is not recording
            self._failed(exc, NOT_WRITTEN)

    def entries(
        self, *, limit: int = 50, session_id: str | None = None, project: str | None = None
    ) -> list[AuditEntry]:
        """The newest `limit` entries (oldest first), optionally of one session or one project."""
        where, args = [], []
        if session_id:
            where.append("session_id = ?")
            args.append(session_id)
        if project:
            where.append("project = ?")
            args.append(project)
        # Only fixed column conditions are joined here; every value is a bound parameter.
        sql = "SELECT * FROM audit" + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY seq DESC LIMIT ?"  # noqa: S608
        if not os.path.exists(self.path):
            return []
        with self._db() as db:
            rows = db.execute(sql, (*args, max(1, limit))).fetchall()
        return [AuditEntry(*r) for r in reversed(rows)]


def audit_log(directory: str | None = None) -> AuditLog:
    """The process-wide `AuditLog` of a state dir."""
    return AuditLog.shared(state_dir(directory))
