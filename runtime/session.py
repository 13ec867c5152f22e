"""`Session`: one conversation's state, the same in every host (the editor's ACP session, the terminal's chat).

A session holds its settings (approval mode, model, where "always" answers are remembered), its title, its cost, its
journal (the session store, written as it goes) and its agent, assembled by the one composition root
(`runtime.assembly.build_runtime`). A host subclasses it and supplies what only a host knows:

    _gateway()          how the approval decorator asks a human
    _editor()           the editor's file system and terminals, if any (default: none)
    _asker()            how the agent asks the user a question (runtime.elicitation), if it can (default: it cannot)
    deliver(update)     show a session-update record (a command's reply, a title) to the user
    announce(...)       tell the user's client that the mode or the settings changed (default: nothing to tell)

and, usually, its own `emit` (the runtime's event sink) for the streaming path. Everything a prompt does before the
model is asked (an empty prompt, a slash command, the title) is `plan_prompt`, shared by both hosts.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio.to_thread

from permissions.modes import MODES
from permissions.options import REMEMBER_CHOICES
from runtime import commands, settings
from runtime.assembly import build_runtime
from runtime.events import RuntimeEvent, UsageReported
from runtime.loop import RuntimeOptions
from runtime.mcp import close_servers
from runtime.models.base import TextPart, Usage
from runtime.processes import close_session as close_session_processes
from runtime.updates import event_to_update, info_update, message_chunk, new_message_id

if TYPE_CHECKING:
    from permissions.gateway import PermissionGateway
    from permissions.modes import ApprovalMode
    from permissions.rules import Rule, Scope
    from runtime.context import SandboxInfo
    from runtime.elicitation import UserAsker
    from runtime.mcp.manager import McpConnections
    from runtime.models import ModelFactory
    from runtime.models.base import ModelClient, UserPart
    from runtime.models.config import ModelEntry
    from runtime.models.thinking import Level
    from runtime.store.journal import SessionJournal
    from runtime.tools.base import EditorBridge

TITLE_CHARS = 80


def new_session_id() -> str:
    return "sess_" + uuid.uuid4().hex


def runtime_options() -> RuntimeOptions:
    """Runtime options for a new session; `GATEWRIGHT_CONTEXT_WINDOW` overrides the window of models that do not
    declare one (the scripted model), which is how tests make compaction happen with small conversations."""
    window = settings.current().get("GATEWRIGHT_CONTEXT_WINDOW")
    return RuntimeOptions(context_window=window) if window else RuntimeOptions()


def title_from(blocks: list[Any]) -> str | None:
    """A session's title: the first non-empty line of its first prompt's text, in at most `TITLE_CHARS`."""
    text = next(
        (
            b["text"]
            for b in blocks
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str) and b["text"].strip()
        ),
        None,
    )
    if text is None:
        return None
    line = " ".join(next(ln for ln in text.splitlines() if ln.strip()).split())
    return line if len(line) <= TITLE_CHARS else line[: TITLE_CHARS - 1].rstrip() + "…"


@dataclass(kw_only=True, eq=False)
class Session:
    id: str
    cwd: str
    mode: ApprovalMode
    model: ModelClient | None
    options: RuntimeOptions = field(default_factory=runtime_options)
    additional_directories: list[str] = field(default_factory=list)
    factory: ModelFactory | None = None  # makes the models a `/model` switch may choose
    model_id: str | None = None
    model_choices: tuple[ModelEntry, ...] = ()
    thought_level: str | None = None  # how hard the model thinks (runtime.models.thinking); None: as configured
    auto_compact: bool = True  # compact the context when it nears the window (`/compact` works either way)
    remember: Scope = "session"  # where "always" answers are remembered, at the start
    state_dir: str | None = None  # None: no persisted rules and no audit log (in-process tests)
    created_at: float = field(default_factory=time.time)
    title: str | None = None
    closed: bool = False
    cost: float = 0.0  # cumulative, in the currency of the models' configured prices
    priced_usage: Usage = field(default_factory=Usage)  # the part of runtime.total_usage already in `cost`
    journal: SessionJournal | None = None  # writes the session to the store as it goes (runtime.store.journal)
    mcp: McpConnections | None = None  # set by runtime.mcp.connect_servers
    # The sandbox state the model is told about (runtime.context): a one-line description or a callable giving it.
    sandbox: SandboxInfo = None
    configured_rules: tuple[Rule, ...] = ()  # the config file's [permissions] allow/deny (runtime.config)

    def __post_init__(self) -> None:
        self.parts = build_runtime(
            session_id=self.id,
            cwd=self.cwd,
            additional_directories=self.additional_directories,
            model=self.model,
            gateway=self._gateway(),
            mode=lambda: self.mode,
            state_dir=self.state_dir,
            remember=self.remember,
            options=self.options,
            editor=self._editor(),
            configured_rules=self.configured_rules,
            sandbox=self.sandbox,
            asker=self._asker(),
        )
        self.runtime = self.parts.runtime
        self.registry = self.parts.registry
        self.workspace = self.parts.workspace
        self.rules = self.parts.rules
        self.audit = self.parts.audit

    # ---- what a host supplies ------------------------------------------------------------------------------------
    def _gateway(self) -> PermissionGateway:
        raise NotImplementedError

    def _editor(self) -> EditorBridge | None:
        return None

    def _asker(self) -> UserAsker | None:
        return None

    async def deliver(self, update: dict[str, Any]) -> None:
        """Show one session-update record to the user (it is already in the journal, if it belongs there)."""
        raise NotImplementedError

    async def announce(self, *, mode: bool = False, config: bool = False) -> None:
        """The approval mode (`mode`) or another setting (`config`) changed; a host with a client to tell, tells it."""

    # ---- output --------------------------------------------------------------------------------------------------
    async def emit(self, ev: RuntimeEvent) -> None:
        """The runtime's event sink: journal the event's record, then deliver it."""
        if isinstance(ev, UsageReported):
            ev = self.account(ev)
        await self.send_update(event_to_update(ev))

    async def send_update(self, update: dict[str, Any]) -> None:
        """Journal a record (the store decides what it keeps; a text chunk gets its message's id), then deliver it."""
        if self.journal is not None:
            update = self.journal.record(update)
        await self.deliver(update)

    async def say(self, text: str, *, keep: bool = True) -> None:
        """The agent's own text to the user (a command's reply), a message of its own; `keep=False`: not part of
        the conversation."""
        if keep:
            await self.send_update(message_chunk(text, new_message_id()))
        else:
            await self.deliver(message_chunk(text, new_message_id()))

    def account(self, ev: UsageReported) -> UsageReported:
        """Size the context by the current model and add this call's price, when the config knows prices."""
        info: ModelEntry | None = getattr(self.model, "info", None)
        if info is None:
            return ev
        total = self.runtime.total_usage
        p = self.priced_usage
        delta = Usage(
            total.input_tokens - p.input_tokens,
            total.output_tokens - p.output_tokens,
            total.cached_read_tokens - p.cached_read_tokens,
            total.cached_write_tokens - p.cached_write_tokens,
        )
        self.priced_usage = total
        if info.prices is not None:
            self.cost += info.prices.cost(delta)
        priced = info.prices is not None or self.cost > 0
        return UsageReported(
            ev.input_tokens,
            ev.output_tokens,
            min(ev.context_used, info.context_window),
            info.context_window,
            round(self.cost, 6) if priced else None,
            info.prices.currency if info.prices else "USD",
        )

    # ---- settings ------------------------------------------------------------------------------------------------
    def set_mode(self, mode_id: str) -> None:
        """Read by the approval decorator at the next decision.

        Raises:
            ValueError: not a mode.
        """
        if mode_id not in {m.id for m in MODES}:
            raise ValueError(mode_id)
        self.mode = mode_id

    def set_model(self, model_id: str, model: ModelClient | None, thought: str | None = None) -> None:
        """The runtime reads `model` at every model call, so the switch applies from the next call on."""
        self.model_id = model_id
        self.model = model
        self.runtime.model = model
        self.thought_level = thought

    def thought_levels(self) -> tuple[tuple[Level, ...], str]:
        """The current model's thinking levels and the one it thinks at (none: it does not think)."""
        if self.factory is None:
            return (), ""
        levels, configured = self.factory.thought_levels(self.model_id)
        return levels, self.thought_level or configured

    def set_thought_level(self, level: str) -> None:
        """From the next model call on, the model thinks at `level`.

        Raises:
            ValueError: not one of the current model's levels.
        """
        if self.factory is None or self.model_id is None or level not in {lv.value for lv in self.thought_levels()[0]}:
            raise ValueError(level)
        self.set_model(self.model_id, self.factory.create(self.model_id, level), level)

    def set_remember(self, value: str) -> None:
        """The "Remember approvals in" setting; it applies from the next question on.

        Raises:
            ValueError: not one of the setting's values.
        """
        if value not in {v for v, _, _ in REMEMBER_CHOICES}:
            raise ValueError(value)
        self.rules.remember = value

    def host_commands(self) -> tuple[commands.Command, ...]:
        """Commands only this host answers (the chat's `/exit`), listed by `/help` after the shared ones."""
        return ()

    def save_settings(self) -> None:
        if self.journal is not None:
            self.journal.save_settings()

    # ---- life ----------------------------------------------------------------------------------------------------
    def cancel(self) -> None:
        """Cancel the running turn: the model stream, the running tools and their processes (the turn's scope)."""
        self.runtime.cancel()

    async def close(self) -> None:
        self.closed = True
        self.cancel()
        # Background processes belong to the session: none outlives it; nor does a look at the workspace (git, rg)
        # started for a turn that never came.
        if self.runtime.context is not None:
            await anyio.to_thread.run_sync(self.runtime.context.close)
        close_session_processes(self.id)
        if self.mcp is not None:
            await close_servers(self)


@dataclass(frozen=True, slots=True)
class PromptPlan:
    """What to do with a prompt: it was answered here (`stop` set), or run a turn with `parts`."""

    parts: list[UserPart]
    stop: str | None = None


EMPTY_PROMPT_REPLY = "The prompt was empty, so nothing was sent to the model. Type a request, or `/help` for commands."


async def plan_prompt(session: Session, blocks: list[Any], parts: list[UserPart]) -> PromptPlan:
    """Record the prompt, give the session its title, and answer here what is no request for the model: an empty
    prompt, a built-in command, a `/name` that is no command. A project command becomes its expanded template."""
    if commands.is_empty(blocks):
        # Nothing to record or to send: the answer is not part of the conversation.
        await session.say(EMPTY_PROMPT_REPLY, keep=False)
        return PromptPlan(parts, "end_turn")
    journal = session.journal
    if journal is not None:
        journal.record_prompt(blocks)
    parsed = commands.parse(blocks)
    command = None
    text = None
    if parsed is not None:
        available = commands.available(session.cwd)
        command = next((c for c in available if c.name == parsed[0]), None)
        if command is None:
            text = commands.unknown_reply(parsed[0], available)
    if command is not None and command.template is None:
        text = await commands.run_builtin(session, command.name, parsed[1] if parsed else "")
    if text is not None:
        await session.say(text)
        if journal is not None:
            journal.sync()
        return PromptPlan(parts, "end_turn")
    if session.title is None:
        title = title_from(blocks)
        if title:
            session.title = title
            if journal is not None:
                journal.save_title(title)
            await session.deliver(info_update(title))
    if command is not None and command.template is not None:
        return PromptPlan([TextPart(commands.expand(command.template, parsed[1] if parsed else ""))])
    return PromptPlan(parts)
