"""`SessionJournal`: writes one live session (editor or terminal) to the store as its turns go.

Every session-update record the session sends (`runtime.updates`) passes through `record` (the journal is the
session's only writer): message and thought chunks are coalesced in memory and written when something else happens,
every other update (tool calls and their updates, plans) is written at once. A run of chunks is one message: the
journal gives it its `messageId` (returned to the sender, stored with the message: `session/load` replays the id seen
live). The model context and the session state (mode, model, scripted position, steps, usage) are written between
steps (`before_step`, the runtime's hook, which also runs compaction) and when a turn ends, so a process killed
mid-turn loses at most the step it was in.

Updates that only describe the session's current state (modes, config options, commands, title, usage) are kept
in the session row instead of the replay log: `session/load` answers with the current state anyway.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING, Any

from runtime.compaction import CompactionSettings, Compactor
from runtime.models.base import Message, Usage
from runtime.models.scripted import ScriptedModel
from runtime.updates import CHUNK_KINDS, MessageIds, new_message_id

if TYPE_CHECKING:
    from runtime.events import EventSink
    from runtime.session import Session
    from runtime.store import SessionStore

log = logging.getLogger("gatewright.journal")

STATE_ONLY = (
    "available_commands_update",
    "current_mode_update",
    "config_option_update",
    "session_info_update",
    "usage_update",
)
_PLAIN_CHUNK = frozenset({"sessionUpdate", "messageId", "content"})


class SessionJournal:
    def __init__(
        self,
        store: SessionStore,
        session: Session,
        epoch: int = 0,
        persisted: list[Message] | None = None,
        state: dict[str, Any] | None = None,
    ) -> None:
        self.store = store
        self.session = session
        self.epoch = epoch
        # The history prefix already stored, as the very objects: a rewrite (compaction) shows as a changed prefix.
        self._persisted: list[Message] = list(persisted or [])
        self.messages = MessageIds()
        self._chunk_kind: str | None = None
        self._chunk_id = ""
        self._chunk_text: list[str] = []
        state = state or {}
        self.last_usage: dict[str, Any] | None = state.get("last_usage")
        self.compactor = Compactor(CompactionSettings.for_window(self.window()))
        self.compactor.failures = int(state.get("compaction_failures", 0))
        self.broken = False

    def window(self) -> int:
        info = getattr(self.session.model, "info", None)
        return int(getattr(info, "context_window", 0) or self.session.options.context_window)

    # ---- the replay log ------------------------------------------------------------------------------------------
    def record(self, update: dict[str, Any]) -> dict[str, Any]:
        """Keep what belongs to the conversation; returns the record to send (a text chunk with its `messageId`)."""
        kind = update.get("sessionUpdate")
        if kind == "usage_update":
            self.last_usage = update
            return update
        if kind in STATE_ONLY or kind == "compaction_update" and update.get("status") == "in_progress":
            return update
        content = update.get("content")
        if (
            kind in CHUNK_KINDS
            and isinstance(content, dict)
            and content.get("type") == "text"
            and update.keys() <= _PLAIN_CHUNK
        ):
            mid = self.record_text(str(kind), content.get("text", ""), update.get("messageId"))
            return {"sessionUpdate": kind, "messageId": mid, "content": content}
        self.messages.tag(update)
        self.flush()
        self._write([(str(kind), update)])
        return update

    def record_text(self, kind: str, text: str, message_id: str | None = None) -> str:
        """A streamed text chunk (the hot path of `record`): merged in memory with the chunks of the same message.
        Returns the message's id (`MessageIds`)."""
        mid = self.messages.of(kind, message_id)
        if mid != self._chunk_id or self._chunk_kind is None:
            self.flush()
            self._chunk_kind, self._chunk_id = kind, mid
        self._chunk_text.append(text)
        return mid

    def record_prompt(self, blocks: list[Any]) -> str:
        """The user's prompt, as the content blocks the client sent (replayed as `user_message_chunk`s of one
        message); returns its `messageId`."""
        self.flush()
        mid = self.messages.of("user_message_chunk", new_message_id())
        self._write(
            [
                ("user_message_chunk", {"sessionUpdate": "user_message_chunk", "messageId": mid, "content": b})
                for b in blocks
                if isinstance(b, dict)
            ]
        )
        return mid

    def flush(self) -> None:
        if self._chunk_kind is None:
            return
        kind, text = self._chunk_kind, "".join(self._chunk_text)
        self._chunk_kind, self._chunk_text = None, []
        if text:
            chunk = {"sessionUpdate": kind, "messageId": self._chunk_id, "content": {"type": "text", "text": text}}
            self._write([(kind, chunk)])

    def _write(self, events: list[tuple[str, dict[str, Any]]]) -> None:
        try:
            self.store.append_events(self.session.id, events)
        except Exception:  # a full disk must not break the turn; the session simply stops being durable
            self._failed()

    def _failed(self) -> None:
        if not self.broken:
            log.exception("the session store could not be written; session %s is no longer saved", self.session.id)
        self.broken = True

    # ---- model context and state ---------------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        s = self.session
        rt = s.runtime
        return {
            "model_position": s.model.position if isinstance(s.model, ScriptedModel) else None,
            "steps_taken": rt.steps_taken,
            "usage": dataclasses.asdict(rt.total_usage),
            "priced_usage": dataclasses.asdict(s.priced_usage),
            "cost": s.cost,
            "last_usage": self.last_usage,
            "compaction_failures": self.compactor.failures,
            "remember": s.rules.remember,
            "thought_level": s.thought_level,
            "auto_compact": s.auto_compact,
        }

    def sync(self) -> None:
        """Write the history that is not stored yet, and the session state, in one transaction."""
        self.flush()
        history = self.session.runtime.history
        n = len(self._persisted)
        try:
            if len(history) >= n and all(history[i] is self._persisted[i] for i in range(n)):
                self.store.append_messages(self.session.id, self.epoch, n, history[n:], self.state())
            else:
                self.epoch = self.store.replace_context(self.session.id, history, self.state())
        except Exception:
            self._failed()
            return
        self._persisted = list(history)

    def rewrite(self) -> None:
        """Store the whole current history as a new epoch (after it was changed outside a turn)."""
        self._persisted = []
        try:
            self.epoch = self.store.replace_context(self.session.id, self.session.runtime.history, self.state())
        except Exception:
            self._failed()
            return
        self._persisted = list(self.session.runtime.history)

    def save_settings(self) -> None:
        """Mode, model or where approvals are remembered changed: they are restored on load."""
        try:
            self.store.save(self.session.id, mode=self.session.mode, model_id=self.session.model_id, state=self.state())
        except Exception:
            self._failed()

    def save_title(self, title: str) -> None:
        try:
            self.store.save(self.session.id, title=title)
        except Exception:
            self._failed()

    async def before_step(self, emit: EventSink) -> None:
        """The runtime's hook between steps: compact if the context is near the window, then store the step."""
        self.flush()
        self.compactor.settings = CompactionSettings.for_window(self.window())
        if self.session.auto_compact:
            await self.compactor.maybe_compact(self.session.runtime, emit)
        self.sync()


def restore_state(session: Session, state: dict[str, Any]) -> None:
    """Put a stored state back into a freshly built session (before any turn runs)."""
    rt = session.runtime
    rt.steps_taken = int(state.get("steps_taken") or 0)
    rt.total_usage = _usage(state.get("usage"))
    session.priced_usage = _usage(state.get("priced_usage"))
    session.cost = float(state.get("cost") or 0.0)
    remember = state.get("remember")
    if isinstance(remember, str):
        try:
            session.set_remember(remember)
        except ValueError:
            pass  # an unknown stored value keeps the default (this session): never wider than asked
    session.auto_compact = state.get("auto_compact") is not False
    thought = state.get("thought_level")
    if isinstance(thought, str):
        try:
            session.set_thought_level(thought)
        except ValueError:
            pass  # the model or its configuration changed since: it thinks as configured
    position = state.get("model_position")
    if isinstance(position, int) and isinstance(session.model, ScriptedModel):
        session.model.position = position


def _usage(raw: Any) -> Usage:
    if not isinstance(raw, dict):
        return Usage()
    names = {f.name for f in dataclasses.fields(Usage)}
    return Usage(**{k: int(v) for k, v in raw.items() if k in names and isinstance(v, int)})
