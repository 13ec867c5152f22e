"""Runtime events as session-update records: the one mapping from `runtime.events` to the record shape.

The record shape is ACP's `SessionUpdate` on purpose: the session store keeps a conversation as these records
(`runtime.store.journal`), `session/load` sends them back as they are, the ACP host sends them live, and
`gatewright run --json` prints them. So a session started in one host replays exactly in another.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, assert_never

from runtime.events import (
    CompactionEvent,
    NoticeEvent,
    PlanUpdated,
    RuntimeEvent,
    TextChunk,
    ThoughtChunk,
    ToolCallProgress,
    ToolCallStarted,
    UsageReported,
)

if TYPE_CHECKING:
    from permissions.gateway import PermissionRequest

NOTICE_META = "notice"  # `_meta.gatewright.notice` of the message chunk that carries a notice as text


def iso8601(ts: float) -> str:
    """A moment as ACP writes it (`updatedAt`): ISO 8601, UTC, milliseconds."""
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def info_update(title: str | None = None, updated_at: float | None = None) -> dict[str, Any]:
    """`session_info_update`: the title (when it is set) and the moment of the session's last activity."""
    upd: dict[str, Any] = {"sessionUpdate": "session_info_update"}
    if title is not None:
        upd["title"] = title
    upd["updatedAt"] = iso8601(time.time() if updated_at is None else updated_at)
    return upd


def new_compaction_id() -> str:
    """A `compactionId`: one compaction of a session's context, from its start to its end."""
    return "cmp_" + uuid.uuid4().hex


def new_message_id() -> str:
    """A `messageId`: the chunks of one message share it, and a new id starts a new message."""
    return "msg_" + uuid.uuid4().hex


CHUNK_KINDS = frozenset({"agent_message_chunk", "agent_thought_chunk", "user_message_chunk"})
_STATE_KINDS = frozenset(
    {
        "available_commands_update",
        "current_mode_update",
        "config_option_update",
        "session_info_update",
        "usage_update",
        "compaction_update",
    }
)


class MessageIds:
    """Which message a streamed text chunk belongs to (its `messageId`): a run of chunks of one kind is one message;
    anything else the conversation shows between them (a tool call, a plan) ends it. A chunk that already has an id
    (the agent's own words: `message_chunk(text, id)`) is a message of its own."""

    __slots__ = ("_id", "_kind")

    def __init__(self) -> None:
        self._kind: str | None = None
        self._id = ""

    def of(self, kind: str, given: str | None = None) -> str:
        if given is not None:
            self._kind = None  # the next streamed chunk starts a new message
            return given
        if kind != self._kind:
            self._kind, self._id = kind, new_message_id()
        return self._id

    def end(self) -> None:
        """The message being streamed is over (a new prompt came): the next chunk starts another."""
        self._kind = None

    def tag(self, update: dict[str, Any]) -> dict[str, Any]:
        """A record with its `messageId`, if it is a text chunk; any other record of the conversation ends the
        message being streamed."""
        kind = update.get("sessionUpdate")
        if kind in CHUNK_KINDS:
            if "messageId" in update:
                return {**update, "messageId": self.of(str(kind), update["messageId"])}
            return {"sessionUpdate": kind, "messageId": self.of(str(kind)), **update}
        if kind not in _STATE_KINDS:
            self._kind = None
        return update


def pending_tool_call(
    call_id: str,
    title: str,
    kind: str,
    raw_input: Any,
    content: Sequence[Any] | None,
    locations: Sequence[Any] | None,
    name: str | None = None,
) -> dict[str, Any]:
    """A tool call about to run, as the `tool_call` update announces it and a permission request shows it; `name` is
    the tool's name as the model called it."""
    out: dict[str, Any] = {"toolCallId": call_id, "title": title}
    if name:
        out["name"] = name
    out |= {"kind": kind, "status": "pending", "rawInput": raw_input}
    if content:
        out["content"] = list(content)
    if locations:
        out["locations"] = list(locations)
    return out


def tool_call_frame(ev: ToolCallStarted) -> dict[str, Any]:
    upd: dict[str, Any] = {
        "sessionUpdate": "tool_call",
        **pending_tool_call(ev.call_id, ev.title, ev.kind, ev.raw_input, ev.content, ev.locations, ev.name),
    }
    if ev.meta:
        upd["_meta"] = ev.meta
    return upd


def tool_update_frame(ev: ToolCallProgress) -> dict[str, Any]:
    upd: dict[str, Any] = {"sessionUpdate": "tool_call_update", "toolCallId": ev.call_id}
    if ev.status is not None:
        upd["status"] = ev.status
    if ev.title is not None:
        upd["title"] = ev.title
    if ev.content is not None:
        upd["content"] = list(ev.content)
    if ev.locations is not None:
        upd["locations"] = list(ev.locations)
    if ev.raw_output is not None:
        upd["rawOutput"] = ev.raw_output
    if ev.meta:
        upd["_meta"] = ev.meta
    return upd


def asked_tool_call(request: PermissionRequest) -> dict[str, Any]:
    """The `toolCall` of a permission question: the pending call as its `tool_call` update announced it."""
    return pending_tool_call(
        request.call_id,
        request.title,
        request.kind,
        request.raw_input,
        request.content,
        request.locations,
        request.tool,
    )


def message_chunk(text: str, message_id: str | None = None) -> dict[str, Any]:
    """The agent's text as a message chunk. The model's text is streamed without an id (the session's journal gives
    it the id of the message it belongs to); the agent's own words (a command's reply, a notice) are a message of their
    own."""
    if message_id is None:
        return {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
    return {"sessionUpdate": "agent_message_chunk", "messageId": message_id, "content": {"type": "text", "text": text}}


def notice_text(ev: NoticeEvent) -> str:
    marker = "⚠ " if ev.severity != "info" else ""
    return f"\n\n{marker}{ev.title}" + (f": {ev.description}" if ev.description else "")


def notice_record(ev: NoticeEvent) -> dict[str, Any]:
    """A notice as the conversation keeps it: a message of its own, in words (what a client without
    `session.notices` is shown), with the notice itself under `_meta.gatewright.notice` (`acp_server.updates`
    turns it into a `notice` or a compaction for a client that advertises those)."""
    notice: dict[str, Any] = {"severity": ev.severity, "title": ev.title}
    if ev.description:
        notice["description"] = ev.description
    if ev.compaction:
        notice["compaction"] = ev.compaction
    return {**message_chunk(notice_text(ev), new_message_id()), "_meta": {"gatewright": {NOTICE_META: notice}}}


def compaction_record(ev: CompactionEvent) -> dict[str, Any]:
    """ACP's `compaction_update`: the compaction's state, with its summary once it has one."""
    upd: dict[str, Any] = {"sessionUpdate": "compaction_update", "compactionId": ev.compaction_id, "status": ev.status}
    if ev.summary:
        upd["summary"] = [{"type": "text", "text": ev.summary}]
    if ev.error:
        upd["error"] = ev.error
    return upd


def event_to_update(ev: RuntimeEvent) -> dict[str, Any]:
    if isinstance(ev, TextChunk):
        return message_chunk(ev.text)
    if isinstance(ev, ThoughtChunk):
        return {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": ev.text}}
    if isinstance(ev, ToolCallStarted):
        return tool_call_frame(ev)
    if isinstance(ev, ToolCallProgress):
        return tool_update_frame(ev)
    if isinstance(ev, UsageReported):
        upd: dict[str, Any] = {"sessionUpdate": "usage_update", "used": ev.context_used, "size": ev.context_size}
        if ev.cost is not None:
            upd["cost"] = {"amount": ev.cost, "currency": ev.currency}
        return upd
    if isinstance(ev, PlanUpdated):
        return {"sessionUpdate": "plan", "entries": list(ev.entries)}
    if isinstance(ev, NoticeEvent):
        return notice_record(ev)
    if isinstance(ev, CompactionEvent):
        return compaction_record(ev)
    assert_never(ev)  # every runtime event has its record: mypy checks the cases are exhaustive
