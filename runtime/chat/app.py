"""`gatewright chat`: an interactive session in the current directory, on the very same runtime as `gatewright acp`.

The session is a `runtime.session.Session` like the editor's: the same composition root, approvals, remembered rules,
audit log, sandbox and session store. Only the host's parts are this module's: the approval question on the terminal
(`runtime.chat.ask`), the rendering (`runtime.chat.view`), the input line (`runtime.chat.prompt`), and Ctrl-C.

A session is stored from its first prompt on (so an opened-and-left chat leaves no empty session behind), under the
same ids `session/list` shows; `--continue` resumes the latest session of this directory, `--resume ID` a given one
(an editor's too), after showing what it held. Ctrl-C during a turn cancels it as `session/cancel` does (the model
stream, the running tools and their processes) and returns to the prompt; a second Ctrl-C while the cancel is under
way stops everything at once. SIGTERM and SIGHUP end the chat the same way, with the session saved.
"""

from __future__ import annotations

import functools
import signal
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import anyio
from rich.text import Text

from permissions.modes import parse_mode
from permissions.store import state_dir as resolve_state_dir
from runtime.chat.ask import TerminalChooser
from runtime.chat.prompt import EXIT, ChatPrompt
from runtime.chat.view import ChatView, inline_code
from runtime.cli_host import RecordingGateway, RunRecorder, missing_key
from runtime.commands import Command
from runtime.events import RuntimeEvent, TextChunk, ThoughtChunk, UsageReported
from runtime.loop import AuthRequired
from runtime.models import NO_MODEL_MESSAGE
from runtime.models.base import TextPart, Usage
from runtime.processes import kill_all_process_groups
from runtime.recording import transcript_meta
from runtime.session import Session, new_session_id, plan_prompt
from runtime.store.live import latest, open_store, replay_records, revive, store_new
from runtime.updates import event_to_update

if TYPE_CHECKING:
    from collections.abc import Callable

    from permissions.gateway import PermissionGateway
    from permissions.rules import Rule
    from runtime.loop import TurnOutcome
    from runtime.models import ModelFactory
    from runtime.store import SessionStore
    from runtime.store.sessions import SessionRecord

EXIT_OK, EXIT_USAGE = 0, 2
TICK_S = 0.125  # how often the live region moves while a turn waits
LEAVE_COMMANDS = ("/exit", "/quit")


@dataclass(kw_only=True, eq=False)
class ChatSession(Session):
    view: ChatView
    read_key: Callable[..., Any] | None = None  # tests answer questions without a terminal
    on_question_cancel: Callable[[], None] = field(default=lambda: None)
    recorder: RunRecorder | None = None  # `--record FILE`: the frames an editor would have exchanged

    def host_commands(self) -> tuple[Command, ...]:
        return (Command("exit", "Leave the chat (also /quit, Ctrl-D); the session is saved"),)

    def _gateway(self) -> PermissionGateway:
        chooser = TerminalChooser(self.view, lambda: self.on_question_cancel(), self.read_key)
        return chooser if self.recorder is None else RecordingGateway(chooser, self.recorder)

    async def emit(self, ev: RuntimeEvent) -> None:
        if self.recorder is not None:
            await self.recorder(ev)
        if isinstance(ev, TextChunk | ThoughtChunk):
            if self.journal is not None:
                self.journal.record_text(
                    "agent_message_chunk" if isinstance(ev, TextChunk) else "agent_thought_chunk", ev.text
                )
            self.view.event(ev)
            return
        if isinstance(ev, UsageReported):
            ev = self.account(ev)
        if self.journal is not None:
            self.journal.record(event_to_update(ev))
        self.view.event(ev)

    async def deliver(self, update: dict[str, Any]) -> None:
        if self.recorder is not None:
            self.recorder.update(update)
        content = update.get("content")
        if update.get("sessionUpdate") == "agent_message_chunk" and isinstance(content, dict):
            self.view.reply(str(content.get("text", "")))


class Chat:
    """One chat: the prompt loop over one session."""

    def __init__(self, session: ChatSession, store: SessionStore, *, stored: bool, prompt: Any = None) -> None:
        self.session = session
        self.store = store
        self.stored = stored
        self.view = session.view
        self.prompt = prompt
        self.in_turn = False
        self.cancelling = False
        self.leaving = False
        self._turn_scope: anyio.CancelScope | None = None
        session.on_question_cancel = self.cancel_turn

    # ---- the loop ------------------------------------------------------------------------------------------------
    async def run(self) -> int:
        if self.prompt is None:
            self.prompt = ChatPrompt(self.session.cwd, self.session.state_dir, self.toolbar, self.show_thoughts)
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._signals, tg.cancel_scope)
            try:
                while not self.leaving:
                    text = await self.prompt.read()
                    if text is EXIT or str(text).strip() in LEAVE_COMMANDS:
                        break
                    await self.turn(str(text))
            finally:
                tg.cancel_scope.cancel()
        return EXIT_OK

    async def turn(self, text: str) -> TurnOutcome | None:
        """One prompt: local commands are answered here, anything else is a model turn."""
        session = self.session
        if not self.stored and text.strip():
            store_new(self.store, session)
            self.stored = True
        self.in_turn, self.cancelling = True, False
        outcome: TurnOutcome | None = None
        before = session.runtime.total_usage
        recorder = session.recorder
        if recorder is not None:
            recorder.prompt(text)
        answered: tuple[str | None, str | None] = ("cancelled", None)  # for the recording: stop reason, auth error
        try:
            with anyio.CancelScope() as scope:
                self._turn_scope = scope
                plan = await plan_prompt(session, [{"type": "text", "text": text}], [TextPart(text)])
                if plan.stop is not None:
                    answered = (plan.stop, None)
                    return None
                if session.model is None:
                    await session.say(NO_MODEL_MESSAGE)
                    answered = ("end_turn", None)
                    return None
                if self.cancelling:
                    return None
                self.view.start_turn()
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._tick)
                    try:
                        outcome = await session.runtime.run_turn(plan.parts, session.emit)
                        answered = (outcome.stop_reason, None)
                    except AuthRequired as exc:
                        self.view.reply(f"**Authentication failed:** {exc}")
                        answered = (None, str(exc))
                    finally:
                        tg.cancel_scope.cancel()
        finally:
            if recorder is not None:
                recorder.answered(*answered)
            self._turn_scope = None
            self.in_turn = False
            if session.journal is not None:
                session.journal.sync()
            if self.view.turning:
                total = session.runtime.total_usage
                used = Usage(total.input_tokens - before.input_tokens, total.output_tokens - before.output_tokens)
                self.view.end_turn(outcome, used, total, session.cost)
        return outcome

    async def _tick(self) -> None:
        while True:
            self.view.tick()
            await anyio.sleep(TICK_S)

    # ---- Ctrl-C and friends --------------------------------------------------------------------------------------
    def cancel_turn(self) -> None:
        """Cancel the running turn as `session/cancel` does: the model stream, the tools, their processes."""
        if not self.in_turn:
            return
        if self.cancelling:
            # Asked twice: whatever still holds the turn up is stopped now.
            kill_all_process_groups()
            if self._turn_scope is not None:
                self._turn_scope.cancel()
            return
        self.cancelling = True
        self.session.cancel()
        if not self.session.runtime.running and self._turn_scope is not None:
            self._turn_scope.cancel()  # a command (e.g. /compact) rather than a model turn

    async def _signals(self, scope: anyio.CancelScope) -> None:
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGHUP) as signals:
            async for signum in signals:
                if signum == signal.SIGINT:
                    self.cancel_turn()
                    continue
                # The terminal went away or we were asked to stop: leave, with the session saved (and nothing more
                # written to a terminal that may be gone).
                self.leaving = True
                self.view.console.quiet = True
                self.cancel_turn()
                self.cancel_turn()
                scope.cancel()
                return

    # ---- around the loop -----------------------------------------------------------------------------------------
    def toolbar(self) -> str:
        s = self.session
        where = s.title or s.id
        return f"{s.mode} · {s.model_id or 'no model'} · {where[:60]} · /help · ctrl-d leaves"

    def show_thoughts(self) -> None:
        self.view.show_thoughts = not self.view.show_thoughts
        self.view.console.print(self.view.thoughts())
        state = "shown in full" if self.view.show_thoughts else "collapsed"
        self.view.console.print(f"[dim](thoughts are {state} from now on; ctrl-t switches)[/dim]")

    async def close(self) -> None:
        session = self.session
        with anyio.CancelScope(shield=True):
            await session.close()
            if session.journal is not None:
                session.journal.sync()
        if session.recorder is not None:
            session.recorder.close()
        kill_all_process_groups()


def _banner(view: ChatView, session: ChatSession, continued: bool) -> None:
    what = "continuing" if continued else "new session"
    view.console.print(
        Text.assemble(("gatewright chat", "bold"), f" · {what} ", (session.id, "dim"), f" · {session.cwd}")
    )
    view.console.print(
        Text(
            f"mode {session.mode} · model {session.model_id or 'none'} · /help lists the commands, "
            "ctrl-c cancels a turn, ctrl-d or /exit leaves",
            style="dim",
        )
    )


def _stored(
    store: SessionStore, view: ChatView, cwd: str, resume: str | None, continue_latest: bool
) -> SessionRecord | None | Literal[False]:
    """The stored session to continue (None: a new one), or False after saying that `resume` names none."""
    if resume is not None:
        rec = store.get(resume)
        if rec is None:
            sys.stderr.write(
                f"gatewright: no stored session {resume[:100]!r} (`gatewright chat --continue` resumes "
                "the latest one of this directory)\n"
            )
            return False
        return rec
    if continue_latest:
        rec = latest(store, cwd)
        if rec is None:
            view.console.print("[dim]No earlier session in this directory: starting a new one.[/dim]")
        return rec
    return None


def _resumed(
    view: ChatView,
    session: ChatSession,
    rec: SessionRecord,
    cwd: str,
    model_given: bool,
    mode: str | None,
) -> None:
    """Say what a resumed session comes back with where it differs from what it stored; `mode`: switch to it."""
    if rec.model_id and session.model_id != rec.model_id:
        why = "" if model_given else f" ({rec.model_id} cannot be used here)"
        view.console.print(Text.assemble((f"model: {session.model_id}, was {rec.model_id}", "bold"), why))
    if mode is not None and session.mode != mode:
        was = session.mode
        session.set_mode(mode)
        session.save_settings()
        view.console.print(Text(f"mode: {mode}, was {was}", style="bold"))
    if rec.cwd != cwd:
        view.console.print(f"[dim]This session was started in {rec.cwd}; it continues here, in {cwd}.[/dim]")


def run_chat(
    *,
    cwd: str,
    factory: ModelFactory,
    mode: str,
    state_dir: str | None,
    resume: str | None = None,
    continue_latest: bool = False,
    rules: tuple[Rule, ...] = (),
    model_given: bool = False,
    mode_given: bool = False,
    record: str | None = None,
    additional_directories: tuple[str, ...] = (),
) -> int:
    """The `chat` command. Configuration problems are one line on stderr and exit 2, before anything is shown.

    A resumed session comes back on its stored model (and mode); `model_given` (`--model` or `GATEWRIGHT_MODEL`)
    switches it to the factory's default, and `mode_given` (`--mode`, `GATEWRIGHT_MODE`) to `mode`; the chat says so."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        sys.stderr.write("gatewright: chat needs a terminal; for scripts and pipes use `gatewright run`\n")
        return EXIT_USAGE
    store = open_store(state_dir)
    resolved = resolve_state_dir(state_dir)
    view = ChatView()
    recorder = None
    rec = _stored(store, view, cwd, resume, continue_latest)
    if rec is False:
        return EXIT_USAGE
    stored = factory.adopt(rec.model_id) if rec is not None else None
    model_id = factory.default_id if model_given or stored is None else stored
    problem = missing_key(factory, model_id) if model_id is not None else NO_MODEL_MESSAGE
    if problem is not None:
        store.close()
        sys.stderr.write(problem + "\n" if problem is NO_MODEL_MESSAGE else f"gatewright: {problem}\n")
        return EXIT_USAGE
    sid = rec.id if rec is not None else new_session_id()
    if record:
        try:
            meta = transcript_meta(factory, mode, host="chat", cwd=cwd, state_dir=state_dir)
            recorder = RunRecorder(record, meta, sid)
        except OSError as exc:
            store.close()
            sys.stderr.write(f"gatewright: cannot write the transcript {record}: {exc.strerror or exc}\n")
            return EXIT_USAGE
    make = functools.partial(ChatSession, view=view, configured_rules=rules, recorder=recorder)
    if rec is not None:
        session = revive(
            store,
            rec,
            make,
            cwd=cwd,
            factory=factory,
            default_mode=mode,
            state_dir=resolved,
            model_id=model_id,
            additional_directories=additional_directories,
        )
        _banner(view, session, True)
        _resumed(view, session, rec, cwd, model_given, mode if mode_given else None)
        view.console.rule("[dim]earlier in this session[/dim]", style="dim")
        view.history(replay_records(store.events(rec.id)))
        view.console.rule(style="dim")
    else:
        model = factory.create()
        session = make(
            id=sid,
            cwd=cwd,
            additional_directories=list(additional_directories),
            mode=parse_mode(mode),
            model=model,
            factory=factory,
            model_id=factory.default_id if model else None,
            model_choices=factory.choices(),
            state_dir=resolved,
        )
        _banner(view, session, False)
    chat = Chat(session, store, stored=rec is not None)

    async def main() -> int:
        try:
            return await chat.run()
        finally:
            await chat.close()

    try:
        code = anyio.run(main)
    except KeyboardInterrupt:  # a Ctrl-C outside the loop's handler (start-up, shut-down)
        code = EXIT_OK
    finally:
        kill_all_process_groups()
    if chat.stored:
        view.console.print(
            inline_code(f"Session {session.id} is saved: `gatewright chat --continue` comes back to it.", "dim")
        )
    store.close()
    return code
