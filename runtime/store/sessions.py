"""`SessionStore`: durable sessions (metadata, the replay log, the model context) in the shared SQLite file.

Everything is written as a turn goes (one short `BEGIN IMMEDIATE` transaction per write) so that a killed process
loses at most the step it was in. Two kinds of data per session:

- `events`: what the user saw, as host-level update payloads (kind + JSON), replayed by `session/load`. The store
  does not interpret them, so hosts may put any per-tool-call JSON (`_meta`, traces) in them.
- `messages`: the runtime history the model sees, by epoch. Appends go to the current epoch at the history index;
  a rewrite (compaction, a refused prompt dropped from context) writes a new epoch and drops the old one.

Nothing secret is ever given to the store: callers store ACP frames and model messages, never env values, headers
or keys; and every JSON column and title is written with the values of the secret registry (`runtime.secrets`)
redacted, so a key that reached a frame or a message anyway (pasted into a prompt, echoed by the model) is not kept.
"""

from __future__ import annotations

import base64
import builtins
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import orjson

from runtime import secrets
from runtime.models.base import Message
from runtime.store import db
from runtime.store.codec import decode_message, encode_message
from runtime.updates import iso8601

DEFAULT_PAGE_SIZE = 50


@dataclass(frozen=True, slots=True)
class SessionRecord:
    id: str
    cwd: str
    mode: str
    additional_dirs: tuple[str, ...] = ()
    title: str | None = None
    created_at: float = 0.0
    updated_at: float = 0.0
    model_id: str | None = None
    context_epoch: int = 0
    state: dict[str, Any] = field(default_factory=dict)
    parent_id: str | None = None

    @property
    def updated_iso(self) -> str:
        return iso8601(self.updated_at)


class CursorError(ValueError):
    """A `session/list` cursor this store did not make."""


def _encode_cursor(updated_at: float, sid: str) -> str:
    return base64.urlsafe_b64encode(orjson.dumps([updated_at, sid])).decode().rstrip("=")


def _decode_cursor(cursor: str) -> tuple[float, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        ts, sid = orjson.loads(raw)
        if isinstance(ts, int | float) and not isinstance(ts, bool) and isinstance(sid, str):
            return float(ts), sid
    except Exception:  # noqa: S110 - any garbage is the same error to the caller, raised below
        pass
    raise CursorError("not a cursor from this agent")


def _json(value: Any) -> str:
    return secrets.redacted_json(value).decode()


def _message(message: Message) -> str:
    text = encode_message(message)
    if secrets.json_has_secret(text):
        text = orjson.dumps(secrets.redact(orjson.loads(text))).decode()
    return text


def _text(value: str | None) -> str | None:
    return None if value is None else secrets.redact_text(value)


_COLUMNS = "id, cwd, mode, additional_dirs, title, created_at, updated_at, model_id, context_epoch, state, parent_id"


def _record(row: Sequence[Any]) -> SessionRecord:
    return SessionRecord(
        row[0],
        row[1],
        row[2],
        tuple(orjson.loads(row[3])),
        row[4],
        row[5],
        row[6],
        row[7],
        row[8],
        orjson.loads(row[9]),
        row[10],
    )


class SessionStore:
    """One process's connection to the store. Safe to share between the tasks of one event loop."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self.conn = db.connect(path)

    @classmethod
    def in_state_dir(cls, state_dir: str | Path | None) -> SessionStore:
        base = Path(state_dir) if state_dir else db.default_state_dir()
        return cls(base / db.DB_NAME)

    def close(self) -> None:
        self.conn.close()

    # ---- sessions ------------------------------------------------------------------------------------------------
    def create(self, rec: SessionRecord) -> SessionRecord:
        now = time.time()
        rec = replace(rec, created_at=rec.created_at or now, updated_at=rec.updated_at or now)
        with db.write(self.conn) as c:
            c.execute(
                f"INSERT INTO sessions ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?)",  # noqa: S608
                (
                    rec.id,
                    rec.cwd,
                    rec.mode,
                    _json(list(rec.additional_dirs)),
                    _text(rec.title),
                    rec.created_at,
                    rec.updated_at,
                    rec.model_id,
                    rec.context_epoch,
                    _json(rec.state),
                    rec.parent_id,
                ),
            )
        return rec

    def get(self, sid: str) -> SessionRecord | None:
        row = self.conn.execute(f"SELECT {_COLUMNS} FROM sessions WHERE id = ?", (sid,)).fetchone()  # noqa: S608
        return _record(row) if row else None

    def save(
        self,
        sid: str,
        *,
        title: str | None = None,
        mode: str | None = None,
        model_id: str | None = None,
        state: dict[str, Any] | None = None,
        cwd: str | None = None,
        additional_dirs: tuple[str, ...] | None = None,
        touch: bool = True,
    ) -> None:
        """Update the given fields (None = unchanged) and, with `touch`, the session's `updated_at`."""
        sets: list[str] = []
        args: list[Any] = []
        for column, value in (
            ("title", _text(title)),
            ("mode", mode),
            ("model_id", model_id),
            ("cwd", cwd),
            ("additional_dirs", _json(list(additional_dirs)) if additional_dirs is not None else None),
            ("state", _json(state) if state is not None else None),
        ):
            if value is not None:
                sets.append(f"{column} = ?")
                args.append(value)
        if touch:
            sets.append("updated_at = ?")
            args.append(time.time())
        if not sets:
            return
        with db.write(self.conn) as c:
            c.execute(f"UPDATE sessions SET {', '.join(sets)} WHERE id = ?", (*args, sid))  # noqa: S608 - fixed names

    def delete(self, sid: str) -> bool:
        with db.write(self.conn) as c:
            return c.execute("DELETE FROM sessions WHERE id = ?", (sid,)).rowcount > 0

    def list(
        self, cwd: str | None = None, cursor: str | None = None, limit: int = DEFAULT_PAGE_SIZE
    ) -> tuple[list[SessionRecord], str | None]:
        """Newest first; `cursor` continues after the last session of the previous page.

        Raises:
            CursorError: the cursor is not one this store made.
        """
        where: list[str] = []
        args: list[Any] = []
        if cwd is not None:
            where.append("cwd = ?")
            args.append(cwd)
        if cursor:
            ts, sid = _decode_cursor(cursor)
            where.append("(updated_at < ? OR (updated_at = ? AND id < ?))")
            args += [ts, ts, sid]
        sql = f"SELECT {_COLUMNS} FROM sessions"  # noqa: S608 - constant columns; values are bound
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY updated_at DESC, id DESC LIMIT ?"
        rows = [_record(r) for r in self.conn.execute(sql, (*args, limit + 1))]
        more = len(rows) > limit
        rows = rows[:limit]
        return rows, (_encode_cursor(rows[-1].updated_at, rows[-1].id) if more and rows else None)

    def fork(self, sid: str, new_id: str) -> SessionRecord | None:
        """Copy a session (metadata, replay log, current context) under a new id, in one transaction."""
        now = time.time()
        with db.write(self.conn) as c:
            row = c.execute(f"SELECT {_COLUMNS} FROM sessions WHERE id = ?", (sid,)).fetchone()  # noqa: S608
            if row is None:
                return None
            src = _record(row)
            rec = replace(src, id=new_id, created_at=now, updated_at=now, parent_id=sid, context_epoch=0)
            c.execute(
                f"INSERT INTO sessions ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?)",  # noqa: S608
                (
                    rec.id,
                    rec.cwd,
                    rec.mode,
                    _json(list(rec.additional_dirs)),
                    rec.title,
                    now,
                    now,
                    rec.model_id,
                    0,
                    _json(rec.state),
                    sid,
                ),
            )
            c.execute(
                "INSERT INTO events (session_id, seq, kind, data, at) "
                "SELECT ?, seq, kind, data, at FROM events WHERE session_id = ?",
                (new_id, sid),
            )
            c.execute(
                "INSERT INTO messages (session_id, epoch, seq, data) "
                "SELECT ?, 0, seq, data FROM messages WHERE session_id = ? AND epoch = ?",
                (new_id, sid, src.context_epoch),
            )
        return rec

    # ---- the replay log ------------------------------------------------------------------------------------------
    def append_events(self, sid: str, events: Iterable[tuple[str, dict[str, Any]]]) -> None:
        items = list(events)
        if not items:
            return
        now = time.time()
        with db.write(self.conn) as c:
            # The next seq is read under the write lock: two processes appending to one session never collide.
            seq = c.execute("SELECT COALESCE(MAX(seq), -1) + 1 FROM events WHERE session_id = ?", (sid,)).fetchone()[0]
            c.executemany(
                "INSERT INTO events (session_id, seq, kind, data, at) VALUES (?,?,?,?,?)",
                [(sid, seq + i, kind, _json(data), now) for i, (kind, data) in enumerate(items)],
            )
            c.execute("UPDATE sessions SET updated_at = ? WHERE id = ?", (now, sid))

    def events(self, sid: str) -> builtins.list[tuple[str, dict[str, Any]]]:  # `list` is a method here
        return [
            (kind, orjson.loads(data))
            for kind, data in self.conn.execute(
                "SELECT kind, data FROM events WHERE session_id = ? ORDER BY seq", (sid,)
            )
        ]

    # ---- the model context ---------------------------------------------------------------------------------------
    def append_messages(
        self, sid: str, epoch: int, start: int, messages: Sequence[Message], state: dict[str, Any] | None = None
    ) -> None:
        """Write `messages` at history indexes `start…` of `epoch`, with the session state, in one transaction."""
        now = time.time()
        with db.write(self.conn) as c:
            c.executemany(
                "INSERT OR REPLACE INTO messages (session_id, epoch, seq, data) VALUES (?,?,?,?)",
                [(sid, epoch, start + i, _message(m)) for i, m in enumerate(messages)],
            )
            if state is not None:
                c.execute("UPDATE sessions SET state = ?, updated_at = ? WHERE id = ?", (_json(state), now, sid))

    def replace_context(self, sid: str, messages: Sequence[Message], state: dict[str, Any] | None = None) -> int:
        """Store `messages` as the whole context in a new epoch and drop the older ones; returns the new epoch."""
        now = time.time()
        with db.write(self.conn) as c:
            row = c.execute("SELECT context_epoch FROM sessions WHERE id = ?", (sid,)).fetchone()
            epoch = (row[0] if row else 0) + 1
            c.executemany(
                "INSERT INTO messages (session_id, epoch, seq, data) VALUES (?,?,?,?)",
                [(sid, epoch, i, _message(m)) for i, m in enumerate(messages)],
            )
            c.execute("DELETE FROM messages WHERE session_id = ? AND epoch < ?", (sid, epoch))
            c.execute("UPDATE sessions SET context_epoch = ?, updated_at = ? WHERE id = ?", (epoch, now, sid))
            if state is not None:
                c.execute("UPDATE sessions SET state = ? WHERE id = ?", (_json(state), sid))
        return epoch

    def context(self, sid: str) -> tuple[int, builtins.list[Message]]:
        """The current epoch and its messages in history order."""
        row = self.conn.execute("SELECT context_epoch FROM sessions WHERE id = ?", (sid,)).fetchone()
        if row is None:
            return 0, []
        epoch = row[0]
        return epoch, [
            decode_message(d)
            for (d,) in self.conn.execute(
                "SELECT data FROM messages WHERE session_id = ? AND epoch = ? ORDER BY seq", (sid, epoch)
            )
        ]
