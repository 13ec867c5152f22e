"""The terminal host (`gatewright run`): one prompt through the very same runtime the ACP host uses.

Only the gateway and the event sink differ: approvals are asked as `Approve? [y/N]` on the terminal (only `y`/`yes`
approves; without a terminal nothing that asks is run, and the user is told it could not be asked), the assistant's
text goes to stdout and tool activity to stderr. With `--json` stdout carries one JSON object per event instead
(`JsonPrinter`); with `--record FILE` the transcript of the frames an editor would have exchanged is written as
`gatewright acp --record` writes it (`RunRecorder`).

What went wrong is said plainly, on stderr, in one line, and the exit code says which kind it was
(docs/configuration.md, "Exit codes"): 1 when the model or its provider failed (the provider's text and the URL), 2 for
a problem of usage or configuration, found before the first model call (no model, the chosen provider's key not set, a
transcript file that cannot be written), 3 when the turn stopped because an approval was rejected (also: not answered
within `GATEWRIGHT_PERMISSION_TIMEOUT`, or no terminal to ask on), 130 when interrupted. The approval prompt reads the
terminal without a thread, so Ctrl-C or a timeout there ends the run at once, without waiting for Enter.
"""

from __future__ import annotations

import difflib
import json
import os
import signal
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

import anyio

from permissions.gateway import NO_TERMINAL_TO_ASK, PermissionGateway, PermissionOutcome, PermissionRequest
from permissions.rules import Rule
from permissions.store import state_dir as resolve_state_dir
from runtime.events import (
    EventSink,
    NoticeEvent,
    PlanUpdated,
    RuntimeEvent,
    TextChunk,
    ThoughtChunk,
    ToolCallProgress,
    ToolCallStarted,
    UsageReported,
)
from runtime.loop import MODEL_FAILED, AuthRequired
from runtime.models import NO_MODEL_MESSAGE
from runtime.models.base import TextPart
from runtime.models.config import missing_key as missing_key_var
from runtime.models.config import missing_key_message
from runtime.processes import kill_all_process_groups
from runtime.recording import EDITOR_ONLY_UPDATES, TranscriptRecorder, transcript_meta
from runtime.session import Session, new_session_id, title_from
from runtime.store.live import open_store, store_new
from runtime.tools.base import content_text
from runtime.updates import MessageIds, asked_tool_call, event_to_update

if TYPE_CHECKING:
    from permissions.modes import ApprovalMode
    from runtime.models import ModelFactory

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_REJECTED, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
# Where the built-in providers send requests when no base URL is set (shown in errors; the clients own the real value).
DEFAULT_URLS = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com"}


@dataclass(kw_only=True, eq=False)
class RunSession(Session):
    """The session of one `gatewright run`: stored like any other (listed, resumed by `chat --resume`, audited under
    its id). The terminal is its gateway, and what it shows goes through the run's own sink."""

    gateway: TerminalGateway

    def _gateway(self) -> PermissionGateway:
        return self.gateway

    async def deliver(self, update: dict[str, Any]) -> None:
        pass  # `run` prints the runtime's events itself (`TerminalPrinter`, `JsonPrinter`)


class TerminalGateway:
    """Asks `Approve? [y/N]` on the terminal. Without a terminal on stdin, every question is a rejection.

    `observers` hear each question and its answer (the `--json` stream, the transcript)."""

    def __init__(self, out: TextIO = sys.stderr, inp: TextIO = sys.stdin, observers: tuple[Any, ...] = ()) -> None:
        self.out = out
        self.inp = inp
        self.observers = observers

    async def request(self, request: PermissionRequest) -> PermissionOutcome:
        for o in self.observers:
            o.question(request)
        outcome: PermissionOutcome | None = None
        try:
            outcome = await self._ask(request)
            return outcome
        finally:
            for o in self.observers:
                o.answer(request, outcome)

    async def _ask(self, request: PermissionRequest) -> PermissionOutcome:
        w = self.out.write
        w(f"\n• Approval required for {request.tool}: {request.title}\n")
        w(f"  why: {request.reason}\n")
        for c in request.content:
            if c.get("type") == "diff":
                w(_short_diff(c.get("oldText"), c.get("newText") or "", c.get("path", "")))
            elif text := content_text(c):  # e.g. the whole command, when the title cannot show all of it
                w("".join(f"  {line}\n" for line in text.splitlines()))
        if not self.inp.isatty():
            w("  Tool call requires approval but there is no terminal to ask on: not run.\n")
            self.out.flush()
            return PermissionOutcome.could_not_ask(NO_TERMINAL_TO_ASK)
        w("• Approve? [y/N] ")
        self.out.flush()
        try:
            line = await read_terminal_line(self.inp.fileno())
        except anyio.get_cancelled_exc_class():
            # Ctrl-C or the question's time limit: leave the prompt's line, the run ends without waiting for Enter.
            w("\n")
            self.out.flush()
            raise
        approved = line.strip().lower() in ("y", "yes")
        w("  Approved\n" if approved else "  Rejected\n")
        self.out.flush()
        return PermissionOutcome.selected("allow_once" if approved else "reject_once")


async def read_terminal_line(fd: int) -> str:
    """One line typed on the terminal (a canonical-mode read returns at Enter; "" at Ctrl-D). Waits in the event
    loop, not in a thread: a cancelled wait leaves nothing blocked on the terminal that would hold up the exit."""
    await anyio.wait_readable(fd)
    try:
        return os.read(fd, 4096).decode("utf-8", errors="replace")
    except OSError:
        return ""


def _short_diff(old: str | None, new: str, path: str, limit: int = 40) -> str:
    lines = list(difflib.unified_diff((old or "").splitlines(), new.splitlines(), path, path, lineterm=""))
    shown = lines[:limit]
    more = f"  … {len(lines) - limit} more diff lines\n" if len(lines) > limit else ""
    return "".join(f"  {ln}\n" for ln in shown) + more


WAITING_FOR_MODEL = "waiting for the model"


class TerminalPrinter:
    """What `gatewright run` shows: the reply on stdout; tool calls, plans, notices and a command's output as it runs
    on stderr; and, when stderr is a terminal, a status line while the turn waits (for the model, or for a command),
    with the elapsed time. The status line is drawn only at the start of a line and erased before anything else is
    written, so it never mixes with the reply."""

    SPIN = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"

    def __init__(self, out: TextIO = sys.stdout, err: TextIO = sys.stderr, *, live: bool | None = None) -> None:
        self.out, self.err = out, err
        self.titles: dict[str, str] = {}
        self.live = _isatty(err) if live is None else live
        # Until the model's first output the wait is for it (its reply, or a provider's first byte), not its thought.
        self.waiting: tuple[str, float] | None = (WAITING_FOR_MODEL, time.monotonic())
        self.asking = False
        self._drawn = False
        self._line_start = True  # the reply's last character was a newline (or nothing was written yet)
        self._shown: dict[str, str] = {}  # per call: the live output already printed
        self._frame = 0

    # ---- the status line -------------------------------------------------------------------------------------------
    def tick(self) -> None:
        """Redraw the status line (called a few times a second while the turn runs)."""
        if not self.live or self.waiting is None or self.asking or not self._line_start:
            return
        what, since = self.waiting
        self._frame += 1
        self.err.write(f"\r\x1b[K{self.SPIN[self._frame % len(self.SPIN)]} {what} {time.monotonic() - since:.1f} s")
        self.err.flush()
        self._drawn = True

    def _erase(self) -> None:
        if self._drawn:
            self.err.write("\r\x1b[K")
            self._drawn = False

    # ---- the gateway's observer hooks: a question owns the terminal while it is open ------------------------------
    def question(self, request: PermissionRequest) -> None:
        self._erase()
        self.err.flush()
        self.asking = True

    def answer(self, request: PermissionRequest, outcome: PermissionOutcome | None) -> None:
        self.asking = False

    def failed(self, message: str, url: str | None) -> None:
        self.waiting = None
        self._erase()

    def end_line(self) -> None:
        if not self._line_start:
            self.out.write("\n")
            self._line_start = True
        self.out.flush()

    def finished(self, stop_reason: str | None, code: int, session_id: str) -> None:
        self.waiting = None
        self._erase()
        if self.live:  # on a terminal: how to come back to it (a script has the id in --json's last event)
            self.err.write(
                f"\x1b[2msession {session_id}: `gatewright chat --resume {session_id}` continues it\x1b[0m\n"
            )
        self.err.flush()

    # ---- events ----------------------------------------------------------------------------------------------------
    async def __call__(self, ev: RuntimeEvent) -> None:
        self._erase()
        if isinstance(ev, TextChunk):
            self.waiting = None
            if ev.text:
                self.out.write(ev.text)
                self.out.flush()
                self._line_start = ev.text.endswith("\n")
            return
        if isinstance(ev, ThoughtChunk):
            if self.waiting is not None and self.waiting[0] == WAITING_FOR_MODEL:
                self.waiting = ("thinking", self.waiting[1])  # the model is thinking (not printed on the terminal)
            return
        if not self._line_start:
            self.out.write("\n")  # what follows starts on a line of its own
            self.out.flush()
            self._line_start = True
        if isinstance(ev, ToolCallStarted):
            # A subagent's calls are indented under the delegate call that runs them.
            depth = ((ev.meta or {}).get("gatewright") or {}).get("depth", 0)
            self.titles[ev.call_id] = ev.title
            self.err.write(f"{'  ' * depth}• {ev.title}\n")
            self.waiting = (f"running {_clip(ev.title, 50)}", time.monotonic())
        elif isinstance(ev, PlanUpdated):
            marks = {"completed": "[x]", "in_progress": "[>]", "pending": "[ ]"}
            self.err.write(
                "• Plan\n" + "".join(f"  {marks.get(e['status'], '[ ]')} {e['content']}\n" for e in ev.entries)
            )
        elif isinstance(ev, NoticeEvent):
            if ev.title != MODEL_FAILED:  # the run's last line says that one, with the URL
                mark = "⚠ " if ev.severity != "info" else ""
                self.err.write(f"{mark}{ev.title}" + (f": {ev.description}" if ev.description else "") + "\n")
        elif isinstance(ev, ToolCallProgress) and ev.status in ("completed", "failed"):
            mark = "✓" if ev.status == "completed" else "✗"
            self.err.write(f"  {mark} {self.titles.get(ev.call_id, ev.call_id)}\n")
            self._shown.pop(ev.call_id, None)
            if ev.status == "failed" and ev.content:
                for c in ev.content:
                    if text := content_text(c):
                        self.err.write(f"    {text.splitlines()[0][:300]}\n")
            self.waiting = (WAITING_FOR_MODEL, time.monotonic())
        elif (
            isinstance(ev, ToolCallProgress)
            and ev.content
            and isinstance(ev.raw_output, dict)
            and ev.raw_output.get("running")
        ):
            self._live_output(ev.call_id, str(ev.raw_output.get("output") or ""))
        self.err.flush()

    def _live_output(self, call_id: str, text: str) -> None:
        """A running command's output so far: print the complete lines not printed yet, indented."""
        shown = self._shown.get(call_id, "")
        new = text[len(shown) :] if text.startswith(shown) else text
        cut = new.rfind("\n") + 1
        if not cut:
            return
        for line in new[:cut].splitlines():
            self.err.write(f"    │ {line[:500]}\n")
        self._shown[call_id] = (shown + new[:cut]) if text.startswith(shown) else text[: len(text) - len(new) + cut]


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class JsonPrinter:
    """`--json`: one JSON object per line on stdout. `{"type": "update", "update": …}` carries each event as the ACP
    host would send it (a `session/update` SessionUpdate); `permission` a question and its answer; `error` a failure
    (also on stderr); `end` comes last, with the stop reason and the exit code."""

    def __init__(self, out: TextIO = sys.stdout) -> None:
        self.out = out
        self.messages = MessageIds()

    def _write(self, obj: dict[str, Any]) -> None:
        self.out.write(json.dumps(obj, ensure_ascii=False) + "\n")
        self.out.flush()

    async def __call__(self, ev: RuntimeEvent) -> None:
        self._write({"type": "update", "update": self.messages.tag(event_to_update(ev))})

    def question(self, request: PermissionRequest) -> None:
        pass

    def answer(self, request: PermissionRequest, outcome: PermissionOutcome | None) -> None:
        self._write(
            {
                "type": "permission",
                "toolCallId": request.call_id,
                "tool": request.tool,
                "title": request.title,
                "reason": request.reason,
                "answer": _answer_id(outcome),
                **({"unasked": outcome.unasked} if outcome is not None and outcome.unasked else {}),
            }
        )

    def failed(self, message: str, url: str | None) -> None:
        self._write({"type": "error", "message": message, "url": url})

    def end_line(self) -> None:
        pass

    def finished(self, stop_reason: str | None, code: int, session_id: str) -> None:
        self._write({"type": "end", "stopReason": stop_reason, "exitCode": code, "sessionId": session_id})


class RunRecorder:
    """`--record FILE` / `GATEWRIGHT_RECORD` in `run` and `chat`: the transcript (docs/transcripts.md) of the frames
    an editor would have exchanged with `gatewright acp` for these prompts: each `session/prompt` request, every
    `session/update`, each `session/request_permission` with its answer, and each prompt's response."""

    def __init__(self, path: str, meta: dict[str, Any], session_id: str) -> None:
        self.rec = TranscriptRecorder(path, meta)  # OSError: the caller reports it, before anything runs
        self.session_id = session_id
        self.messages = MessageIds()
        self._next_id = 0
        self._asking = 0  # the id of the open question (one at a time)
        self._prompts = 0
        self._prompt_id = "prompt"

    def prompt(self, text: str) -> None:
        self._prompts += 1
        self.messages.end()
        self._prompt_id = "prompt" if self._prompts == 1 else f"prompt-{self._prompts}"
        self.rec.record(
            "in",
            {
                "jsonrpc": "2.0",
                "id": self._prompt_id,
                "method": "session/prompt",
                "params": {"sessionId": self.session_id, "prompt": [{"type": "text", "text": text}]},
            },
        )

    def update(self, update: dict[str, Any]) -> None:
        """A record the session sent without a runtime event (a command's answer)."""
        if update.get("sessionUpdate") in EDITOR_ONLY_UPDATES:
            return
        self.rec.record(
            "out",
            {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": self.session_id, "update": update}},
        )

    async def __call__(self, ev: RuntimeEvent) -> None:
        self.rec.record(
            "out",
            {
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": {"sessionId": self.session_id, "update": self.messages.tag(event_to_update(ev))},
            },
        )

    def question(self, request: PermissionRequest) -> None:
        request_id = self._next_id
        self._next_id += 1
        self._asking = request_id
        self.rec.record(
            "out",
            {
                "jsonrpc": "2.0",
                "id": request_id,
                "method": "session/request_permission",
                "params": {
                    "sessionId": self.session_id,
                    "toolCall": asked_tool_call(request),
                    "options": [{"optionId": o.option_id, "name": o.name, "kind": o.kind} for o in request.options],
                },
            },
        )

    def answer(self, request: PermissionRequest, outcome: PermissionOutcome | None) -> None:
        if outcome is not None and outcome.unasked is not None:
            # As an editor that cannot show the question answers it (and the check replays it so).
            error = {"code": -32601, "message": f"Method not found: {outcome.unasked}"}
            self.rec.record("in", {"jsonrpc": "2.0", "id": self._asking, "error": error})
            return
        oid = _answer_id(outcome)
        result = {"outcome": {"outcome": "selected", "optionId": oid} if oid else {"outcome": "cancelled"}}
        self.rec.record("in", {"jsonrpc": "2.0", "id": self._asking, "result": result})

    def failed(self, message: str, url: str | None) -> None:
        pass  # the failure is in the conversation already (the notice the ACP host would show)

    def answered(self, stop_reason: str | None, auth_error: str | None = None) -> None:
        """The prompt's response."""
        if auth_error is not None:
            error = {"code": -32000, "message": f"Authentication required: {auth_error}"}
            self.rec.record("out", {"jsonrpc": "2.0", "id": self._prompt_id, "error": error})
        else:
            result = {"stopReason": stop_reason or "cancelled"}
            self.rec.record("out", {"jsonrpc": "2.0", "id": self._prompt_id, "result": result})

    def finished(self, stop_reason: str | None, code: int, auth_error: str | None = None) -> None:
        self.answered(stop_reason, auth_error)
        self.rec.close()

    def close(self) -> None:
        self.rec.close()


class RecordingGateway:
    """A gateway that records each question and its answer (`RunRecorder`) around another gateway."""

    def __init__(self, inner: PermissionGateway, recorder: RunRecorder) -> None:
        self.inner, self.recorder = inner, recorder

    async def request(self, request: PermissionRequest) -> PermissionOutcome:
        self.recorder.question(request)
        outcome: PermissionOutcome | None = None
        try:
            outcome = await self.inner.request(request)
        finally:
            self.recorder.answer(request, outcome)
        return outcome


def _answer_id(outcome: PermissionOutcome | None) -> str | None:
    if outcome is None or outcome.cancelled:
        return None
    return outcome.option_id or None


def _fanout(*sinks: EventSink) -> EventSink:
    async def emit(ev: RuntimeEvent) -> None:
        for sink in sinks:
            await sink(ev)

    return emit


def _stdout_to_devnull() -> None:
    """After a broken pipe: later writes (and the flush at exit) go nowhere instead of raising."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def missing_key(factory: ModelFactory, model_id: str | None = None) -> str | None:
    """The one-line problem when the model `model_id` (default: the factory's) needs a key that is not set, found
    as its client would find it at the first call (`runtime.models.config.missing_key`); None when nothing is
    missing."""
    entry = factory.entry(model_id or factory.default_id or "")
    settings = factory.config.provider(entry.provider) if entry is not None else None
    if entry is None or settings is None or missing_key_var(settings, factory.env) is None:
        return None
    return missing_key_message(settings, entry.spec)


def endpoint(model: Any) -> str | None:
    """The URL a provider model sends requests to, for error messages."""
    url = getattr(model, "url", None)  # the provider clients may name it themselves
    if isinstance(url, str) and url:
        return url
    settings = getattr(model, "settings", None)
    if settings is None:
        return None
    return getattr(settings, "base_url", None) or DEFAULT_URLS.get(getattr(settings, "kind", ""))


def _with_url(message: str, model: Any) -> tuple[str, str | None]:
    url = endpoint(model)
    name = getattr(model, "name", None)
    if url and url.rstrip("/") not in message:
        message += f" (model {name} at {url})" if name else f" (at {url})"
    return message, url


def run_prompt(
    prompt: str,
    *,
    cwd: str,
    factory: ModelFactory,
    mode: ApprovalMode,
    state_dir: str | None = None,
    record: str | None = None,
    json_events: bool = False,
    rules: tuple[Rule, ...] = (),
    additional_directories: tuple[str, ...] = (),
) -> int:
    # Configuration first: nothing is called, asked or written before these are known to be right.
    problem = missing_key(factory)
    if problem is not None:
        sys.stderr.write(f"gatewright: {problem}\n")
        return EXIT_USAGE
    model = factory.create()
    if model is None:
        sys.stderr.write(NO_MODEL_MESSAGE + "\n")
        return EXIT_USAGE
    sid = new_session_id()
    recorder = None
    if record:
        try:
            meta = transcript_meta(factory, mode, host="run", cwd=cwd, state_dir=state_dir)
            recorder = RunRecorder(record, meta, sid)
        except OSError as exc:
            sys.stderr.write(f"gatewright: cannot write the transcript {record}: {exc.strerror or exc}\n")
            return EXIT_USAGE
    printer: Any = JsonPrinter() if json_events else TerminalPrinter()
    observers = tuple(o for o in (printer, recorder) if o is not None)
    # The one composition root, as in the ACP host (through a stored `Session`, listed by `session/list` and
    # resumed by `chat --resume`); only the gateway and the sink are this host's.
    session = RunSession(
        id=sid,
        cwd=cwd,
        additional_directories=list(additional_directories),
        mode=mode,
        model=model,
        factory=factory,
        model_id=factory.default_id,
        model_choices=factory.choices(),
        state_dir=resolve_state_dir(state_dir),
        configured_rules=rules,
        gateway=TerminalGateway(observers=observers),
    )
    runtime = session.runtime
    store = open_store(state_dir)
    store_new(store, session)
    journal = session.journal
    assert journal is not None
    blocks = [{"type": "text", "text": prompt}]
    journal.record_prompt(blocks)
    session.title = title_from(blocks)
    store.save(sid, title=session.title, touch=False)
    sink = _fanout(printer, recorder) if recorder is not None else printer
    if recorder is not None:
        recorder.prompt(prompt)
    result: dict[str, Any] = {}

    async def emit(ev: RuntimeEvent) -> None:
        if isinstance(ev, UsageReported):
            ev = session.account(ev)
        journal.record(event_to_update(ev))
        try:
            await sink(ev)
        except BrokenPipeError:
            # Whoever read the output went away (`gatewright run … | head`): stop the turn as an interruption.
            _stdout_to_devnull()
            result["interrupted"] = True
            runtime.cancel()

    async def main() -> None:
        async with anyio.create_task_group() as tg:

            async def on_sigint() -> None:
                with anyio.open_signal_receiver(signal.SIGINT) as signals:
                    async for _ in signals:
                        result["interrupted"] = True
                        runtime.cancel()
                        return

            async def status_line() -> None:
                while True:
                    await anyio.sleep(0.1)
                    printer.tick()

            tg.start_soon(on_sigint)
            if isinstance(printer, TerminalPrinter) and printer.live:
                tg.start_soon(status_line)
            try:
                result["outcome"] = await runtime.run_turn([TextPart(prompt)], emit)
            except AuthRequired as exc:
                result["auth"] = str(exc)
            finally:
                with anyio.CancelScope(shield=True):
                    journal.sync()
                    await session.close()  # what the turn left (background processes, MCP servers) ends with it
            tg.cancel_scope.cancel()

    try:
        anyio.run(main)
    except KeyboardInterrupt:
        result["interrupted"] = True
    finally:
        journal.sync()
        store.close()
        kill_all_process_groups()
    if not json_events:
        try:
            printer.end_line()  # the reply's last line, ended (nothing when nothing was said: no stray empty line)
        except BrokenPipeError:
            _stdout_to_devnull()
    outcome = result.get("outcome")
    stop = getattr(outcome, "stop_reason", None)
    failure = result.get("auth") or getattr(outcome, "error", None)
    if result.get("interrupted") or stop == "cancelled":
        code = EXIT_INTERRUPTED
        stop = "cancelled"
    elif failure is not None:
        what = "authentication failed" if "auth" in result else "the model call failed"
        message, url = _with_url(str(failure), model)
        sys.stderr.write(f"gatewright: {what}: {message}\n")
        for o in observers:
            o.failed(message, url)
        code = EXIT_FAILED
    elif getattr(outcome, "blocked_by_approval", False):
        sys.stderr.write("gatewright: stopped because a tool call was not approved.\n")
        code = EXIT_REJECTED
    else:
        code = EXIT_OK
    sys.stderr.flush()
    try:
        printer.finished(stop, code, sid)
    except BrokenPipeError:
        _stdout_to_devnull()
    if recorder is not None:
        recorder.finished(stop, code, result.get("auth"))
    return code
