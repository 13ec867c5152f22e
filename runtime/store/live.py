"""Live sessions and the store, the same for every host: open the store, start a stored session, bring a stored one
back to life, and the records that replay it.

A session started by `gatewright chat` and one started by an editor are the same rows in the same file, so either
host can continue the other's: `revive` rebuilds the session (settings, model context, usage, the scripted model's
position) with the host's own `Session` class, and `replay_records` is what the user sees again (the editor gets
them as `session/update`s from `session/load`; the terminal prints them).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from permissions.modes import parse_mode
from permissions.store import state_dir as resolve_state_dir
from permissions.store import state_dir_problem
from runtime.models.base import AssistantMessage, ToolResultMessage
from runtime.store.journal import SessionJournal, restore_state
from runtime.store.sessions import SessionRecord, SessionStore

if TYPE_CHECKING:
    from runtime.models import ModelFactory
    from runtime.models.base import Message
    from runtime.session import Session

log = logging.getLogger("gatewright.sessions")

S = TypeVar("S", bound="Session")

INTERRUPTED_CALL = "Interrupted: the agent stopped before this call finished."


def open_store(state_dir: str | None) -> SessionStore:
    """The session store of a state dir. If the state dir cannot be written, sessions live in an in-memory database
    for the life of the process (said once, in one line, for everything kept there: sessions, rules, audit)."""
    if state_dir_problem(resolve_state_dir(state_dir)) is not None:
        return SessionStore(":memory:")
    try:
        return SessionStore.in_state_dir(state_dir)
    except Exception as exc:
        log.warning("cannot open the session store (%s); sessions will last only for this process", exc)
        return SessionStore(":memory:")


def store_new(store: SessionStore, session: Session) -> None:
    """A new session: its row in the store, and its journal."""
    store.create(
        SessionRecord(
            session.id, session.cwd, session.mode, tuple(session.additional_directories), model_id=session.model_id
        )
    )
    attach(store, session)


def attach(
    store: SessionStore, session: Session, epoch: int = 0, state: dict[str, Any] | None = None
) -> SessionJournal:
    """Attach a journal (returned); the session's current history is what the store holds."""
    journal = session.journal = SessionJournal(store, session, epoch, session.runtime.history, state)
    session.runtime.before_step = journal.before_step
    return journal


def revive(
    store: SessionStore,
    rec: SessionRecord,
    make: Callable[..., S],
    *,
    cwd: str,
    factory: ModelFactory | None,
    default_mode: str,
    state_dir: str | None,
    new_id: str | None = None,
    model_id: str | None = None,
    additional_directories: Sequence[str] | None = None,
) -> S:
    """Build a live session from its stored record with the host's constructor `make` (a `Session` subclass taking
    the `Session` fields as keywords): settings, model context, usage, scripted position. The model is `model_id`
    when given (the user asked for it), else the stored one when `factory` can make it, else the factory's default."""
    if factory is not None and model_id is None:
        model_id = factory.adopt(rec.model_id) or factory.default_id
    model = factory.create(model_id) if factory and model_id else None
    try:
        mode = parse_mode(rec.mode)
    except ValueError:
        mode = parse_mode(default_mode)
    session = make(
        id=new_id or rec.id,
        cwd=cwd,
        additional_directories=list(rec.additional_dirs if additional_directories is None else additional_directories),
        mode=mode,
        model=model,
        model_id=model_id if model else None,
        factory=factory,
        model_choices=factory.choices() if factory else (),
        title=rec.title,
        state_dir=state_dir,
    )
    epoch, stored = store.context(rec.id)
    session.runtime.history = repaired(stored)
    restore_state(session, rec.state)
    journal = attach(store, session, epoch, rec.state)
    if session.runtime.history is not stored:
        journal.rewrite()
    roots = tuple(session.additional_directories)
    if cwd != rec.cwd or roots != rec.additional_dirs:
        store.save(rec.id, cwd=cwd, additional_dirs=roots, touch=False)
    return session


def latest(store: SessionStore, cwd: str) -> SessionRecord | None:
    """The session of this directory that was used last (what `gatewright chat --continue` resumes)."""
    records, _ = store.list(cwd, None, 1)
    return records[0] if records else None


def replay_records(events: list[tuple[str, dict[str, Any]]]) -> Iterator[dict[str, Any]]:
    """What a stored session showed, in order: user chunks, agent and thought chunks, each tool call followed by one
    `tool_call_update` with its final status and content (a call that never finished, because the process died, is
    shown as failed), plans."""
    last_update: dict[str, int] = {}
    final: dict[str, dict[str, Any]] = {}
    for i, (kind, data) in enumerate(events):
        if kind == "tool_call_update":
            cid = str(data.get("toolCallId"))
            last_update[cid] = i
            final.setdefault(cid, {}).update({k: v for k, v in data.items() if k != "sessionUpdate"})
    for i, (kind, data) in enumerate(events):
        if kind == "tool_call_update":
            cid = str(data.get("toolCallId"))
            if last_update[cid] == i:
                yield _finished({"sessionUpdate": kind, **final[cid]})
            continue
        yield data
        if kind == "tool_call" and str(data.get("toolCallId")) not in last_update:
            yield _finished({"sessionUpdate": "tool_call_update", "toolCallId": data.get("toolCallId")})


def _finished(update: dict[str, Any]) -> dict[str, Any]:
    """A tool call that never reached a final status was cut short by the agent stopping: show it as failed."""
    if update.get("status") in ("completed", "failed"):
        return update
    return {
        **update,
        "status": "failed",
        "content": [{"type": "content", "content": {"type": "text", "text": INTERRUPTED_CALL}}],
    }


def repaired(history: list[Message]) -> list[Message]:
    """Give every stored tool call a result, so the context is valid for every provider."""
    answered = {m.call_id for m in history if isinstance(m, ToolResultMessage)}
    out: list[Message] = []
    for m in history:
        out.append(m)
        if isinstance(m, AssistantMessage):
            out += [
                ToolResultMessage(c.id or "", c.name, "interrupted: the agent stopped before this call finished", True)
                for c in m.tool_calls
                if (c.id or "") not in answered
            ]
    return out if len(out) != len(history) else history
