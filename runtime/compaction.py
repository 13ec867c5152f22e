"""Compaction: when the context nears the model's window, older turns become one checkpoint message.

The checkpoint is written by the session's own model (goal, constraints, progress done / in progress / blocked, key
decisions, next steps, critical context); the most recent turns stay verbatim. It runs between steps (the runtime's
`before_step` hook), so a single long turn is compacted too, and on `/compact`. A cut never separates an assistant
message from the results of its tool calls. When the summary call fails, the oldest tool outputs are dropped
instead; after three failed summaries in a row, automatic compaction stops asking the model (only the fallback runs)
until a summary succeeds again.

Tokens are estimated as characters / 4: cheap, provider-neutral, and only used to decide *when* to compact.

With the scripted model, the summary call consumes the next script entry like any model call: its `text` is the
summary (a JSON checkpoint object, or free text); an `error` entry makes the summary fail.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import anyio
import orjson

from runtime.events import CompactionEvent, EventSink, NoticeEvent, UsageReported
from runtime.models.base import (
    AssistantMessage,
    Message,
    ModelError,
    ModelRequest,
    TextDelta,
    TextPart,
    ToolResultMessage,
    UserMessage,
)
from runtime.store.codec import message_text
from runtime.updates import new_compaction_id

if TYPE_CHECKING:
    from runtime.loop import AgentRuntime

log = logging.getLogger("gatewright.compaction")

CHECKPOINT_HEADER = "[Checkpoint: a summary of the earlier part of this conversation]"
DROPPED = "[tool output dropped to save context: {n} characters]"
MAX_FAILURES = 3
_SECTIONS = (
    ("goal", "Goal"),
    ("constraints", "Constraints"),
    ("progress", "Progress"),
    ("keyDecisions", "Key decisions"),
    ("nextSteps", "Next steps"),
    ("criticalContext", "Critical context"),
)

SUMMARY_SYSTEM = (
    "You compress a coding agent's conversation into a checkpoint that lets the agent continue the work without the "
    "original messages. Answer with one JSON object and nothing else, with these keys: goal (string), constraints "
    "(list of strings), progress (object with done, inProgress, blocked: lists of strings), keyDecisions (list), "
    "nextSteps (list), criticalContext (list: file paths, names, exact values, errors that must not be lost)."
)


@dataclass(frozen=True, slots=True)
class CompactionSettings:
    context_window: int
    reserve_tokens: int  # kept free for the next answer: compaction starts above window - reserve
    keep_recent_tokens: int  # the newest turns kept verbatim

    @classmethod
    def for_window(cls, window: int) -> CompactionSettings:
        return cls(window, min(16_384, window // 8), min(20_000, window // 4))

    @property
    def threshold(self) -> int:
        return self.context_window - self.reserve_tokens


@dataclass(frozen=True, slots=True)
class CompactionResult:
    method: Literal["summary", "dropped_tool_outputs", "none"]
    tokens_before: int
    tokens_after: int
    summarised: int = 0  # messages folded into the checkpoint
    error: str | None = None
    checkpoint: str = ""  # the checkpoint message's text, when a summary was written

    @property
    def compacted(self) -> bool:
        return self.method != "none"

    def event(self, compaction_id: str) -> CompactionEvent:
        """How the compaction ended, as a client that shows compactions is told (`compaction_update`)."""
        if not self.compacted:
            return CompactionEvent(compaction_id, "failed", error=self.error or "nothing could be compacted")
        if self.method == "summary":
            return CompactionEvent(compaction_id, "completed", summary=self.checkpoint)
        summary = f"The oldest tool outputs were dropped (about {self.tokens_before} → {self.tokens_after} tokens)."
        if self.error:
            summary += f" No summary was written: {self.error}."
        return CompactionEvent(compaction_id, "completed", summary=summary)


def estimate_tokens(messages: list[Message] | tuple[Message, ...], overhead_chars: int = 0) -> int:
    return (sum(len(message_text(m)) + 16 for m in messages) + overhead_chars) // 4


def cut_index(history: list[Message], keep_recent_tokens: int) -> int | None:
    """Where the kept part starts: a message that is not a tool result (so calls and results stay together), at
    least 1 (something is summarised), at most the start of the newest step (the latest results stay verbatim)."""
    cuts = [i for i in range(1, len(history)) if not isinstance(history[i], ToolResultMessage)]
    if not cuts:
        return None
    kept = 0
    best = cuts[-1]
    for i in range(len(history) - 1, 0, -1):
        kept += estimate_tokens([history[i]])
        if kept > keep_recent_tokens:
            break
        if i in cuts:
            best = i
    return best


def render_transcript(messages: list[Message], max_chars: int) -> str:
    lines: list[str] = []
    for m in messages:
        if isinstance(m, UserMessage):
            lines.append(f"USER: {message_text(m)}")
        elif isinstance(m, AssistantMessage):
            if m.text:
                lines.append(f"ASSISTANT: {m.text}")
            lines += [f"TOOL CALL {c.name}: {c.arguments[:2000]}" for c in m.tool_calls]
        else:
            out = m.output if len(m.output) <= 2000 else m.output[:1500] + " […] " + m.output[-400:]
            lines.append(f"TOOL RESULT {m.name}{' (error)' if m.is_error else ''}: {out}")
    text = "\n".join(lines)
    if len(text) > max_chars:  # keep both ends: the goal is at the start, the state of the work at the end
        half = max_chars // 2
        text = text[:half] + "\n[…]\n" + text[-half:]
    return text


def render_checkpoint(summary: str) -> str:
    """The checkpoint message text: the JSON sections as Markdown, or the summary as given when it is not JSON."""
    doc: Any = None
    raw = summary.strip()
    if "{" in raw:
        with contextlib.suppress(orjson.JSONDecodeError):
            doc = orjson.loads(raw[raw.index("{") : raw.rindex("}") + 1])
    if not isinstance(doc, dict):
        return f"{CHECKPOINT_HEADER}\n\n{raw}"
    out = [CHECKPOINT_HEADER]
    for key, title in _SECTIONS:
        value = doc.get(key)
        if not value:
            continue
        out.append(f"\n## {title}")
        if isinstance(value, dict):
            for sub, label in (("done", "Done"), ("inProgress", "In progress"), ("blocked", "Blocked")):
                items = value.get(sub) or []
                out += [f"- {label}: {item}" for item in (items if isinstance(items, list) else [items])]
        elif isinstance(value, list):
            out += [f"- {item}" for item in value]
        else:
            out.append(str(value))
    return "\n".join(out)


class Compactor:
    """Compaction state for one session (the failure streak)."""

    def __init__(self, settings: CompactionSettings) -> None:
        self.settings = settings
        self.failures = 0

    def overhead_chars(self, runtime: AgentRuntime) -> int:
        return len(runtime.current_system_prompt()) + sum(
            len(t.description) + len(orjson.dumps(t.parameters)) for t in runtime.tool_schemas()
        )

    def tokens(self, runtime: AgentRuntime) -> int:
        return estimate_tokens(runtime.history, self.overhead_chars(runtime))

    async def maybe_compact(self, runtime: AgentRuntime, emit: EventSink) -> CompactionResult | None:
        """Compact when the context is over the threshold; the `before_step` hook of a session."""
        if self.tokens(runtime) <= self.settings.threshold:
            return None
        if cut_index(runtime.history, self.settings.keep_recent_tokens) is None:
            return None  # nothing to compact yet: not an attempt the user is shown
        cid = new_compaction_id()
        await emit(CompactionEvent(cid, "in_progress"))
        try:
            result = await self.compact(runtime, use_model=self.failures < MAX_FAILURES)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await emit(CompactionEvent(cid, "cancelled"))
            raise
        await emit(result.event(cid))
        if not result.compacted:
            return result
        sizes = f"about {result.tokens_before} → {result.tokens_after} tokens"
        if result.method == "summary":
            what = f"{result.summarised} earlier messages summarised into a checkpoint"
        else:
            what = "the oldest tool outputs were dropped"
            if result.error:
                what = f"the summary failed ({result.error}), so {what}"
        fallback = result.method != "summary" and result.error is not None  # the summary failed
        await emit(
            NoticeEvent("warning" if fallback else "info", "Context compacted", f"{what} ({sizes}).", compaction=cid)
        )
        await emit(UsageReported(0, 0, result.tokens_after, self.settings.context_window))
        return result

    async def compact(self, runtime: AgentRuntime, *, use_model: bool = True) -> CompactionResult:
        history = runtime.history
        before = self.tokens(runtime)
        cut = cut_index(history, self.settings.keep_recent_tokens)
        if cut is None:
            return CompactionResult("none", before, before, error="nothing to compact yet")
        error: str | None = "summaries paused after repeated failures"
        if use_model and runtime.model is not None:
            try:
                summary = await self._summarise(runtime, history[:cut])
            except ModelError as exc:
                summary, error = "", exc.message
            if summary.strip():
                self.failures = 0
                rendered = render_checkpoint(summary)
                checkpoint = UserMessage((TextPart(rendered),))
                recent = history[cut:]
                bridge = (
                    [AssistantMessage("Understood; I will continue from this checkpoint.")]
                    if isinstance(recent[0], UserMessage)
                    else []
                )
                history[:] = [checkpoint, *bridge, *recent]
                return CompactionResult("summary", before, self.tokens(runtime), summarised=cut, checkpoint=rendered)
            error = error if error != "summaries paused after repeated failures" else "the summary was empty"
            self.failures += 1
            log.warning("compaction summary failed (%d in a row): %s", self.failures, error)
        return self._drop_tool_outputs(runtime, before, error)

    async def _summarise(self, runtime: AgentRuntime, old: list[Message]) -> str:
        assert runtime.model is not None
        transcript = render_transcript(old, max_chars=max(4_000, self.settings.threshold * 2))
        request = ModelRequest(
            SUMMARY_SYSTEM,
            (UserMessage((TextPart("Write the checkpoint JSON for this conversation so far:\n\n" + transcript),)),),
            (),
            runtime.env.session_id,
        )
        parts: list[str] = []
        async with contextlib.aclosing(runtime.model.stream(request)) as stream:
            async for ev in stream:
                if isinstance(ev, TextDelta):
                    parts.append(ev.text)
        return "".join(parts)

    def _drop_tool_outputs(self, runtime: AgentRuntime, before: int, error: str | None) -> CompactionResult:
        """The fallback: replace the oldest tool outputs (never the newest step's) until under the threshold."""
        history = runtime.history
        last_step = max((i for i, m in enumerate(history) if not isinstance(m, ToolResultMessage)), default=0)
        changed = False
        for i in range(last_step):
            if self.tokens(runtime) <= self.settings.threshold:
                break
            m = history[i]
            if isinstance(m, ToolResultMessage) and len(m.output) > 200:
                history[i] = ToolResultMessage(m.call_id, m.name, DROPPED.format(n=len(m.output)), m.is_error)
                changed = True
        after = self.tokens(runtime)
        return CompactionResult("dropped_tool_outputs" if changed else "none", before, after, error=error)
