"""Runtime events as session-update records: the one mapping from `runtime.events` to the record shape.

The record shape is ACP's `SessionUpdate` on purpose: the session store keeps a conversation as these records
(`runtime.store.journal`), `session/load` sends them back as they are, the ACP host sends them live, and
`gatewright run --json` prints them. So a session started in one host replays exactly in another.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, assert_never

from runtime.events import (
    NoticeEvent,
    PlanUpdated,
    RuntimeEvent,
    TextChunk,
    ThoughtChunk,
    ToolCallProgress,
    ToolCallStarted,
    UsageReported,
)


def pending_tool_call(
    call_id: str, title: str, kind: str, raw_input: Any, content: Sequence[Any] | None, locations: Sequence[Any] | None
) -> dict[str, Any]:
    """A tool call about to run, as the `tool_call` update announces it and a permission request shows it."""
    out: dict[str, Any] = {
        "toolCallId": call_id,
        "title": title,
        "kind": kind,
        "status": "pending",
        "rawInput": raw_input,
    }
    if content:
        out["content"] = list(content)
    if locations:
        out["locations"] = list(locations)
    return out


def tool_call_frame(ev: ToolCallStarted) -> dict[str, Any]:
    upd: dict[str, Any] = {
        "sessionUpdate": "tool_call",
        **pending_tool_call(ev.call_id, ev.title, ev.kind, ev.raw_input, ev.content, ev.locations),
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


def message_chunk(text: str) -> dict[str, Any]:
    """The agent's text (a reply of a local command, a notice) as a message chunk."""
    return {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}


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
        marker = "⚠ " if ev.severity != "info" else ""
        return message_chunk(f"\n\n{marker}{ev.title}" + (f": {ev.description}" if ev.description else ""))
    assert_never(ev)  # every runtime event has its record: mypy checks the cases are exhaustive
