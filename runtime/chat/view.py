"""What `gatewright chat` shows: the runtime's events rendered with rich, as they stream.

The screen has two parts. What is final is printed once, into the terminal's scrollback: the reply's finished
Markdown blocks, each tool call's last line (status, title, elapsed time), plans, notices, the usage line. What is
still moving lives in one live region at the bottom, redrawn in place: the reply's unfinished block, the tail of the
model's thinking (dimmed), the tool calls still running with their time so far, and a status line ("Waiting for the
model… 3s") whenever the turn waits. A thought collapses into one dimmed line when the reply or a tool call starts;
Ctrl-T at the prompt shows the last turn's thoughts in full (and keeps them shown).

While a permission question is open the live region is taken down (`hold`) and anything final that happens meanwhile
(a parallel call finishing) is printed after the answer, so nothing is drawn over the question.
"""

from __future__ import annotations

import difflib
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.markdown import Markdown
from rich.spinner import Spinner
from rich.text import Text

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
from runtime.tools.base import content_text

if TYPE_CHECKING:
    from runtime.loop import TurnOutcome
    from runtime.models.base import Usage

CODE_THEME = "monokai"
DIFF_LINES = 40  # at most this many diff lines under a question or an edit
OUTPUT_LINES = 6  # the last lines of a failed call's message
THOUGHT_TAIL = 3  # lines of a running thought kept in view
DRAW_S = 1 / 30  # streamed chunks redraw the live region at most this often (the ticker draws the rest)
LIVE_CHARS = 6_000  # the unfinished block is shown by its end: the live region is one screen at most


def stable_split(text: str) -> tuple[str, str]:
    """Split streamed Markdown into its finished blocks and the block still being written: the cut is the last blank
    line outside a code fence (a block is final once a blank line follows it)."""
    in_fence = False
    cut = pos = 0
    for line in text.splitlines(keepends=True):
        pos += len(line)
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            in_fence = not in_fence
        elif not in_fence and not stripped and line.endswith("\n"):
            cut = pos
    return text[:cut], text[cut:]


def live_tail(text: str, limit: int = LIVE_CHARS) -> str:
    """The end of an unfinished block, small enough to redraw at every chunk: the live region only shows its last
    screenful anyway. Cut at a line (or word) boundary; a code fence left open by the cut is opened again."""
    if len(text) <= limit:
        return text
    start = len(text) - limit
    nl = text.find("\n", start)
    start = nl + 1 if 0 <= nl < start + limit // 2 else max(text.find(" ", start) + 1, start)
    dropped = text[:start]
    fences = sum(1 for ln in dropped.splitlines() if ln.strip().startswith(("```", "~~~")))
    return ("```\n" if fences % 2 else "…") + text[start:]


def diff_text(old: str | None, new: str, path: str, limit: int = DIFF_LINES) -> Text:
    """A unified diff, coloured: removed lines red, added green, hunk headers cyan."""
    lines = list(difflib.unified_diff((old or "").splitlines(), new.splitlines(), path, path, lineterm=""))
    out = Text()
    for ln in lines[:limit]:
        style = (
            "bold"
            if ln.startswith(("+++", "---"))
            else "green"
            if ln.startswith("+")
            else "red"
            if ln.startswith("-")
            else "cyan"
            if ln.startswith("@@")
            else ""
        )
        out.append("  " + ln + "\n", style=style)
    if len(lines) > limit:
        out.append(f"  … {len(lines) - limit} more diff lines\n", style="dim")
    return out


def diffs_of(content: Any) -> list[Text]:
    return [
        diff_text(c.get("oldText"), c.get("newText") or "", c.get("path", ""))
        for c in content or ()
        if isinstance(c, dict) and c.get("type") == "diff"
    ]


def texts_of(content: Any) -> list[str]:
    return [text for c in content or () if (text := content_text(c)) is not None]


def elapsed(seconds: float) -> str:
    return f"{seconds:.1f}s" if seconds < 60 else f"{int(seconds // 60)}m{int(seconds % 60):02d}s"


def tokens(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 10_000 else f"{n:,}"


def inline_code(text: str, style: str = "") -> Text:
    """`text` with its Markdown code spans shown as code (bold, without the backticks), the rest in `style`: how
    gatewright's own one-line messages (notices, tool errors) read on a terminal."""
    out = Text(style=style)
    parts = text.split("`")
    if len(parts) % 2 == 0:  # an unpaired backtick: not Markdown, shown as written
        return Text(text, style=style)
    for i, part in enumerate(parts):
        out.append(part, style="bold" if i % 2 else None)
    return out


@dataclass
class _Call:
    title: str
    depth: int
    kind: str
    started: float = field(default_factory=time.monotonic)
    running: float | None = None  # when it got past approval
    diff_shown: bool = False


class ChatView:
    """Renders one session's events. `console` is rich's (a terminal; tests give it a file)."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(highlight=False)
        self.show_thoughts = False  # Ctrl-T: thoughts in full instead of one collapsed line
        self.last_thoughts: list[str] = []  # the thoughts of the last turn, for Ctrl-T
        self._live: Live | None = None
        self._held = 0
        self._pending: list[RenderableType] = []
        self._text = ""
        self._thought = ""
        self._thought_started = 0.0
        self._calls: dict[str, _Call] = {}
        self._turn_started = 0.0
        self._waiting_since = 0.0
        self._next_draw = 0.0
        self.last_usage: UsageReported | None = None

    # ---- the live region -----------------------------------------------------------------------------------------
    def _print(self, *items: RenderableType) -> None:
        if self._held:
            self._pending.extend(items)
            return
        if self._live is not None:
            # Printed above the live region, which is then drawn again: with what it holds now, not a stale view.
            self._live.update(self._live_view(), refresh=False)
            self._live.console.print(*items)
        else:
            self.console.print(*items)

    def _live_view(self) -> RenderableType:
        parts: list[RenderableType] = []
        if self._thought:
            if self.show_thoughts:
                parts.append(Text(self._thought, style="dim italic"))
            else:
                tail = self._thought.rstrip().splitlines()[-THOUGHT_TAIL:]
                parts.append(Text("\n".join(tail), style="dim italic"))
        if self._text:
            parts.append(Markdown(live_tail(self._text), code_theme=CODE_THEME))
        now = time.monotonic()
        for c in self._calls.values():
            since = c.running if c.running is not None else c.started
            what = "running" if c.running is not None else "waiting"
            parts.append(
                Text.assemble("  " * c.depth, ("◌ ", "yellow"), c.title, (f"  {what} {elapsed(now - since)}", "dim"))
            )
        if not self._text or self._calls:
            label = "Waiting for the model" if not self._calls else "Working"
            if self._thought:
                label = "Thinking"
            parts.append(
                Spinner(
                    "dots",
                    Text.assemble(
                        (f" {label}… ", "cyan"),
                        (elapsed(now - self._waiting_since), "dim"),
                        ("  ctrl-c cancels", "dim"),
                    ),
                )
            )
        return Group(*parts)

    def _refresh(self, *, streamed: bool = False) -> None:
        if self._live is None or self._held:
            return
        now = time.monotonic()
        if streamed and now < self._next_draw:
            return
        self._live.update(self._live_view(), refresh=True)
        # A slow terminal or a big block: wait at least twice as long as the drawing took before the next one.
        done = time.monotonic()
        self._next_draw = done + max(DRAW_S, 2 * (done - now))

    def tick(self) -> None:
        """Called a few times a second during a turn: the spinner and the elapsed times move."""
        self._refresh()

    @property
    def turning(self) -> bool:
        """Whether a model turn is being shown (from `start_turn` to `end_turn`)."""
        return bool(self._turn_started)

    def start_turn(self) -> None:
        self._turn_started = self._waiting_since = time.monotonic()
        self._text = self._thought = ""
        self._calls.clear()
        self.last_thoughts = []
        self._start_live()

    def _start_live(self) -> None:
        if self._live is None and self.console.is_terminal:
            # No refresh thread: the turn's ticker redraws from the event loop.
            self._live = Live(
                self._live_view(),
                console=self.console,
                auto_refresh=False,
                transient=True,
                vertical_overflow="ellipsis",
                redirect_stdout=False,
                redirect_stderr=False,
            )
            self._live.start()

    def _stop_live(self) -> None:
        if self._live is not None:
            self._live.update(Text(""), refresh=True)
            self._live.stop()
            self._live = None

    def hold(self) -> None:
        """A question is about to be asked: take the live region down; final lines wait."""
        self._held += 1
        if self._held == 1:
            self._flush_text(final=True)
            self._stop_live()

    def release(self) -> None:
        self._held -= 1
        if self._held == 0:
            pending, self._pending = self._pending, []
            for item in pending:
                self.console.print(item)
            self._waiting_since = time.monotonic()
            if self._turn_started:
                self._start_live()

    def end_turn(
        self, outcome: TurnOutcome | None, turn_usage: Usage | None, session_usage: Usage, cost: float
    ) -> None:
        self._collapse_thought()
        self._flush_text(final=True)
        self._calls.clear()
        self._stop_live()
        took = time.monotonic() - self._turn_started if self._turn_started else None
        self._turn_started = 0.0
        if outcome is not None and outcome.stop_reason == "cancelled":
            self.console.print(Text("■ Cancelled.", style="yellow"))
        elif outcome is not None and outcome.blocked_by_approval:
            self.console.print(Text("■ Stopped: a tool call was not approved.", style="yellow"))
        elif outcome is not None and outcome.stop_reason in ("max_tokens", "max_turn_requests", "refusal"):
            self.console.print(Text(f"■ Stopped: {outcome.stop_reason.replace('_', ' ')}.", style="yellow"))
        self.console.print(self.usage_line(turn_usage, session_usage, cost, took))

    def usage_line(self, turn: Usage | None, total: Usage, cost: float, took: float | None = None) -> Text:
        """How long the turn took, the tokens of the turn and the session, context and cost: only what the model
        reported (the scripted model without `usage` reports none, and "0 in · 0 out" would say something false)."""
        bits = [f"{took:.1f} s"] if took is not None else []
        if turn is not None and (turn.input_tokens or turn.output_tokens):
            bits.append(f"{tokens(turn.input_tokens)} in · {tokens(turn.output_tokens)} out")
        if total.input_tokens or total.output_tokens:
            bits.append(f"session {tokens(total.input_tokens)} in · {tokens(total.output_tokens)} out")
        u = self.last_usage
        if u is not None and u.context_size:
            bits.append(f"context {round(100 * u.context_used / u.context_size)}% of {tokens(u.context_size)}")
        if cost or (u is not None and u.cost is not None):
            currency = u.currency if u is not None else "USD"
            bits.append(f"cost {cost:.4f} {currency}")
        return Text("  " + " · ".join(bits), style="dim")

    # ---- events --------------------------------------------------------------------------------------------------
    async def __call__(self, ev: RuntimeEvent) -> None:
        self.event(ev)

    def event(self, ev: RuntimeEvent) -> None:
        if isinstance(ev, TextChunk):
            self._collapse_thought()
            self._text += ev.text
            self._flush_text(final=False)
        elif isinstance(ev, ThoughtChunk):
            if not self._thought:
                self._thought_started = time.monotonic()
            self._thought += ev.text
        elif isinstance(ev, ToolCallStarted):
            self._collapse_thought()
            self._flush_text(final=True)
            depth = int(((ev.meta or {}).get("gatewright") or {}).get("depth", 0) or 0)
            self._calls[ev.call_id] = _Call(ev.title, depth, ev.kind)
        elif isinstance(ev, ToolCallProgress):
            self._progress(ev)
        elif isinstance(ev, PlanUpdated):
            self._collapse_thought()
            self._flush_text(final=True)
            self._plan(ev.entries)
        elif isinstance(ev, NoticeEvent):
            self._collapse_thought()
            self._flush_text(final=True)
            style = "dim" if ev.severity == "info" else "yellow" if ev.severity == "warning" else "red"
            mark = "" if ev.severity == "info" else "⚠ "
            self._print(inline_code(f"{mark}{ev.title}" + (f": {ev.description}" if ev.description else ""), style))
        elif isinstance(ev, UsageReported):
            self.last_usage = ev
        self._waiting_since = time.monotonic() if not self._calls else self._waiting_since
        self._refresh(streamed=isinstance(ev, TextChunk | ThoughtChunk))

    def _progress(self, ev: ToolCallProgress) -> None:
        call = self._calls.get(ev.call_id)
        if call is None:
            return
        if ev.title:
            call.title = ev.title
        if ev.status == "in_progress" and call.running is None:
            call.running = time.monotonic()
        if ev.status not in ("completed", "failed"):
            return
        del self._calls[ev.call_id]
        took = time.monotonic() - (call.running if call.running is not None else call.started)
        ok = ev.status == "completed"
        indent = "  " * call.depth
        self._print(
            Text.assemble(
                indent, ("✓ " if ok else "✗ ", "green" if ok else "red"), call.title, (f"  {elapsed(took)}", "dim")
            )
        )
        if ok and not call.diff_shown:
            for d in diffs_of(ev.content):
                self._print(d)
        if not ok:
            # gatewright's own messages (a tool error) write names in Markdown code spans; a program's output is
            # shown as it is.
            ours = isinstance(ev.raw_output, dict) and "errorType" in ev.raw_output
            for text in texts_of(ev.content)[:1]:
                lines = text.strip().splitlines()
                shown = "\n".join(f"{indent}    {ln[:300]}" for ln in lines[:OUTPUT_LINES])
                more = f"\n{indent}    … {len(lines) - OUTPUT_LINES} more lines" if len(lines) > OUTPUT_LINES else ""
                self._print(inline_code(shown + more, "red dim") if ours else Text(shown + more, style="red dim"))

    def diff_shown(self, call_id: str) -> None:
        """The question about this call showed its diff: the finished call does not show it again."""
        call = self._calls.get(call_id)
        if call is not None:
            call.diff_shown = True

    def _plan(self, entries: Any) -> None:
        marks = {"completed": ("☑", "green"), "in_progress": ("▶", "cyan"), "pending": ("☐", "")}
        out = Text("Plan\n", style="bold")
        for e in entries:
            mark, style = marks.get(e.get("status"), ("☐", ""))
            out.append(f"  {mark} ", style=style)
            out.append(str(e.get("content", "")) + "\n", style="dim" if e.get("status") == "completed" else "")
        self._print(out)

    def _collapse_thought(self) -> None:
        if not self._thought:
            return
        thought, self._thought = self._thought.strip(), ""
        self.last_thoughts.append(thought)
        took = elapsed(time.monotonic() - self._thought_started)
        if self.show_thoughts:
            self._print(Text(thought, style="dim italic"))
        else:
            words = len(thought.split())
            self._print(
                Text(f"∴ Thought for {took} ({words} words; ctrl-t at the prompt shows it)", style="dim italic")
            )

    def _flush_text(self, *, final: bool) -> None:
        """Print the finished Markdown blocks of the reply (all of it, when `final`)."""
        if not self._text:
            return
        done, rest = (self._text, "") if final else stable_split(self._text)
        if done.strip():
            self._print(Markdown(done, code_theme=CODE_THEME))
        if done:
            self._text = rest

    # ---- outside a turn ------------------------------------------------------------------------------------------
    def reply(self, text: str) -> None:
        """A local answer (a command's reply, a notice) as Markdown."""
        self._print(Markdown(text.strip(), code_theme=CODE_THEME))

    def thoughts(self) -> RenderableType:
        if not self.last_thoughts:
            return Text("(no thoughts in the last turn)", style="dim")
        return Text("\n\n".join(self.last_thoughts), style="dim italic")

    def history(self, records: Any) -> None:
        """A stored conversation, compactly: prompts, replies as Markdown, each tool call's final line."""
        text = ""
        titles: dict[str, str] = {}

        def flush() -> None:
            nonlocal text
            if text.strip():
                self.console.print(Markdown(text, code_theme=CODE_THEME))
            text = ""

        for r in records:
            kind = r.get("sessionUpdate")
            content = r.get("content")
            if kind == "agent_message_chunk" and isinstance(content, dict):
                text += str(content.get("text", ""))
            elif kind == "user_message_chunk" and isinstance(content, dict):
                flush()
                if content.get("type") == "text":
                    self.console.print(Text.assemble(("› ", "bold cyan"), str(content.get("text", "")).strip()))
            elif kind == "tool_call":
                flush()
                titles[str(r.get("toolCallId"))] = str(r.get("title", ""))
            elif kind == "tool_call_update" and r.get("status") in ("completed", "failed"):
                ok = r.get("status") == "completed"
                title = r.get("title") or titles.get(str(r.get("toolCallId")), "")
                self.console.print(Text.assemble(("✓ " if ok else "✗ ", "green" if ok else "red"), str(title)))
            elif kind == "plan":
                flush()
                self._plan(r.get("entries") or [])
        flush()
