"""Typed events the runtime emits during a turn. Both hosts consume the same events: the ACP host maps them to
`session/update` notifications, the terminal host prints them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

ToolStatus = Literal["pending", "in_progress", "completed", "failed"]


# The two chunk records are made once per streamed token (by the model, as its TextDelta/ThoughtDelta, and passed on
# as they are), so they are not `frozen`: a frozen dataclass's __init__ assigns through object.__setattr__, which
# costs more than the rest of the record (0.22 vs 0.13 µs). Treat them as immutable all the same.
@dataclass(slots=True)
class TextChunk:
    text: str


@dataclass(slots=True)
class ThoughtChunk:
    text: str


@dataclass(frozen=True, slots=True)
class ToolCallStarted:
    call_id: str
    name: str
    title: str
    kind: str
    raw_input: Any
    locations: tuple[dict[str, Any], ...] = ()
    content: tuple[dict[str, Any], ...] = ()
    meta: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class ToolCallProgress:
    """A change to an announced tool call. Only the fields that are not None changed."""

    call_id: str
    status: ToolStatus | None = None
    title: str | None = None
    content: tuple[dict[str, Any], ...] | None = None
    locations: tuple[dict[str, Any], ...] | None = None
    raw_output: Any = None
    meta: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class UsageReported:
    input_tokens: int
    output_tokens: int
    context_used: int
    context_size: int
    cost: float | None = None
    currency: str = "USD"


@dataclass(frozen=True, slots=True)
class PlanUpdated:
    entries: tuple[dict[str, Any], ...] = field(default=())


@dataclass(frozen=True, slots=True)
class NoticeEvent:
    """Something the user should know that is not the model's words: no sandbox, an MCP server that failed, a
    compaction (`compaction` names it: a client shown the compaction itself needs no notice of it)."""

    severity: Literal["info", "warning", "error"]
    title: str
    description: str = ""
    compaction: str | None = None


CompactionStatus = Literal["in_progress", "completed", "failed", "cancelled"]


@dataclass(frozen=True, slots=True)
class CompactionEvent:
    """A compaction of the model's context started (`in_progress`) or ended; `summary` is what the older messages
    became, as the user may read it (a checkpoint, or what was dropped)."""

    compaction_id: str
    status: CompactionStatus
    summary: str | None = None
    error: str | None = None


RuntimeEvent = (
    TextChunk
    | ThoughtChunk
    | ToolCallStarted
    | ToolCallProgress
    | UsageReported
    | PlanUpdated
    | NoticeEvent
    | CompactionEvent
)
EventSink = Callable[[RuntimeEvent], Awaitable[None]]
