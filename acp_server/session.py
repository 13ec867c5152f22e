"""One ACP session: its runtime, its approval mode, and the mapping from runtime events to `session/update`.

`AcpPermissionGateway` is the ACP implementation of `permissions.PermissionGateway`: it round-trips
`session/request_permission` so the editor owns the approval UI (and, where the editor shows forms, asks why a call
was declined). `AcpToolApprovalDecorator` is the approval decorator built with that gateway. A session's questions
to the user go through its `AcpElicitor` (`acp_server.elicitation`); `session/cancel` withdraws them.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import orjson

from acp_server.editor import AcpEditorBridge
from acp_server.elicitation import AcpElicitor
from permissions import ToolApprovalDecorator
from permissions.audit import audit_log
from permissions.decorator import AuditSink
from permissions.gateway import PermissionOutcome, PermissionRequest
from permissions.modes import MODES, ApprovalMode
from permissions.options import REASON_FORM, REASON_QUESTION, REMEMBER_CHOICES
from permissions.rules import Rule, RuleStore
from permissions.store import rule_database, state_dir_problem
from runtime.approval import make_describer
from runtime.context import SandboxInfo, SessionContext
from runtime.delegation import install_delegation
from runtime.elicitation import CannotAsk
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
from runtime.loop import AgentRuntime, RuntimeOptions, ToolEnvironment
from runtime.models.base import Usage
from runtime.processes import close_session as close_session_processes
from runtime.tools.base import RoutingToolExecutor, ToolExecutor, ToolRegistry
from runtime.tools.builtin import builtin_tools
from runtime.tracing import RetryingExecutor
from runtime.workspace import Workspace

if TYPE_CHECKING:
    from acp_server.journal import SessionJournal
    from acp_server.rpc import JsonRpcConnection
    from runtime.models.base import ModelClient
    from runtime.models.config import ModelEntry

log = logging.getLogger("gatewright.session")

REMEMBER_OPTION = "remember"  # the session config option "Remember approvals in"


class AcpPermissionGateway:
    """Asks the editor with `session/request_permission`. Anything but a valid selected option is not approval.

    With an elicitor that shows forms, it also asks why a call was declined (`ask_reason`)."""

    def __init__(self, conn: JsonRpcConnection, session_id: str, elicitor: AcpElicitor | None = None) -> None:
        self.conn = conn
        self.session_id = session_id
        self.elicitor = elicitor

    async def ask_reason(self, request: PermissionRequest) -> str | None:
        if self.elicitor is None or not self.elicitor.form:
            return None
        try:
            answer = await self.elicitor.ask_form(REASON_QUESTION, REASON_FORM, request.call_id or None)
        except CannotAsk as exc:
            log.info("could not ask why %s was declined: %s", request.call_id, exc.reason)
            return None
        reason = (answer.content or {}).get("reason") if answer.action == "accept" else None
        return reason if isinstance(reason, str) and reason.strip() else None

    async def request(self, request: PermissionRequest) -> PermissionOutcome:
        from acp_server.rpc import ClientError, ConnectionClosed

        params = {
            "sessionId": self.session_id,
            "toolCall": pending_tool_call(request.call_id, request.title, request.kind, request.raw_input,
                                          request.content, request.locations),
            "options": [{"optionId": o.option_id, "name": o.name, "kind": o.kind} for o in request.options],
        }
        try:
            answer = await self.conn.request("session/request_permission", params)
        except ConnectionClosed:
            return PermissionOutcome.cancel()
        except ClientError as exc:
            log.warning("the client answered session/request_permission with error %s; treating as rejected",
                        exc.code)
            return PermissionOutcome.selected("")
        return parse_permission_answer(answer, {o.option_id for o in request.options})


def parse_permission_answer(answer: Any, valid_ids: set[str]) -> PermissionOutcome:
    """Read `{"outcome": {"outcome": "selected", "optionId": …}}` or `{"outcome": {"outcome": "cancelled"}}`.

    Garbage, wrong types or an option id we did not offer are never an approval.
    """
    outcome = answer.get("outcome") if isinstance(answer, dict) else None
    if isinstance(outcome, dict):
        if outcome.get("outcome") == "cancelled":
            return PermissionOutcome.cancel()
        oid = outcome.get("optionId")
        if outcome.get("outcome") == "selected" and isinstance(oid, str) and oid in valid_ids:
            return PermissionOutcome.selected(oid)
    log.warning("unusable answer to session/request_permission; treating it as a rejection")
    return PermissionOutcome.selected("")


def AcpToolApprovalDecorator(
    delegate: ToolExecutor, conn: JsonRpcConnection, session_id: str, registry: ToolRegistry,
    mode: Callable[[], ApprovalMode], rules: RuleStore, audit: AuditSink | None = None,
    elicitor: AcpElicitor | None = None,
) -> ToolApprovalDecorator[Any, Any, Any]:
    return ToolApprovalDecorator(delegate, AcpPermissionGateway(conn, session_id, elicitor), make_describer(registry),
                                 mode, rules, audit)


def pending_tool_call(call_id: str, title: str, kind: str, raw_input: Any, content: Sequence[Any] | None,
                      locations: Sequence[Any] | None) -> dict[str, Any]:
    """A tool call about to run, as the `tool_call` update announces it and a permission request shows it."""
    out: dict[str, Any] = {"toolCallId": call_id, "title": title, "kind": kind, "status": "pending",
                           "rawInput": raw_input}
    if content:
        out["content"] = list(content)
    if locations:
        out["locations"] = list(locations)
    return out


def tool_call_frame(ev: ToolCallStarted) -> dict[str, Any]:
    upd: dict[str, Any] = {"sessionUpdate": "tool_call",
                           **pending_tool_call(ev.call_id, ev.title, ev.kind, ev.raw_input, ev.content, ev.locations)}
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


def event_to_update(ev: RuntimeEvent, notices: bool) -> dict[str, Any] | None:
    if isinstance(ev, TextChunk):
        return {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": ev.text}}
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
        text = f"\n\n{marker}{ev.title}" + (f": {ev.description}" if ev.description else "")
        return {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
    return None


@dataclass
class AcpSession:
    id: str
    cwd: str
    additional_directories: list[str]
    mode: ApprovalMode
    conn: JsonRpcConnection
    model: ModelClient | None
    client_caps: dict[str, Any]
    options: RuntimeOptions
    created_at: float = field(default_factory=time.time)
    title: str | None = None
    rules: RuleStore = field(default_factory=RuleStore)
    turn_lock: anyio.Lock = field(default_factory=anyio.Lock)
    closed: bool = False
    model_id: str | None = None
    model_choices: tuple[ModelEntry, ...] = ()
    cost: float = 0.0  # cumulative, in the currency of the models' configured prices
    priced_usage: Usage = field(default_factory=Usage)  # the part of runtime.total_usage already in `cost`
    state_dir: str | None = None  # None: no persisted rules and no audit log (in-process tests)
    journal: SessionJournal | None = None  # writes the session to the store as it goes (acp_server.journal)
    # Bumped by every cancel: a prompt queued before the cancel sees a different value and answers `cancelled`.
    cancel_epoch: int = 0
    active_prompt: Any = None  # the params of the prompt holding `turn_lock` (to tell it from queued ones)
    cancelled_prompts: list[Any] = field(default_factory=list)  # params of queued prompts cancelled by request
    mcp: Any = None  # runtime.mcp.manager.McpConnections, set by runtime.mcp.connect_servers
    # The sandbox state the model is told about (runtime.context): a one-line description or a callable giving it.
    sandbox: SandboxInfo = None
    configured_rules: tuple[Rule, ...] = ()  # the config file's [permissions] allow/deny (runtime.config)

    def __post_init__(self) -> None:
        self._chunk_prefixes: dict[str, bytes] = {}
        self.workspace = Workspace(self.cwd, self.additional_directories)
        # Questions to the user, only in the modes the editor advertised (None: nothing is ever asked).
        self.elicitor = AcpElicitor.from_capabilities(self.conn, self.id, self.client_caps)
        self.registry = ToolRegistry(builtin_tools())
        if self.elicitor is not None and self.elicitor.form:
            from runtime.tools.builtin.ask_user import AskUserTool

            self.registry.add(AskUserTool())  # a tool the editor cannot serve is not offered to the model
        audit = None
        if self.state_dir is not None:
            # Said once per process, in one line, if the state dir cannot be written (see permissions._sqlite).
            state_dir_problem(self.state_dir)
            # Project rules are keyed by the resolved workspace root; both files are opened at first use.
            self.rules = RuleStore(rule_database(self.state_dir), self.workspace.cwd, self.rules.remember,
                                   self.configured_rules)
            audit = audit_log(self.state_dir)
        elif self.configured_rules:
            self.rules = RuleStore(remember=self.rules.remember, configured=self.configured_rules)
        self.audit = audit
        router = RoutingToolExecutor(self.registry, self.options.tool_call_timeout_ms / 1000)
        # Retries sit under approval: an approved read is not asked again when a transient failure repeats it.
        executor = AcpToolApprovalDecorator(RetryingExecutor(router, self.registry), self.conn, self.id, self.registry,
                                            lambda: self.mode, self.rules, audit, self.elicitor)
        self.runtime = AgentRuntime(
            model=self.model,
            registry=self.registry,
            executor=executor,
            environment=ToolEnvironment(self.id, self.workspace, editor=AcpEditorBridge.from_capabilities(
                self.conn, self.id, self.client_caps), asker=self.elicitor),
            options=self.options,
            context=SessionContext(self.workspace.cwd, lambda: self.mode, self.sandbox),
        )
        install_delegation(self.runtime)

    async def emit(self, ev: RuntimeEvent) -> None:
        kind = type(ev)
        if kind is TextChunk or kind is ThoughtChunk:
            # The streaming hot path (every token): the frame is the session's constant prefix, the text encoded
            # once, and a constant suffix; the same bytes `send_update` would produce for this update, except that
            # chunks are not redacted: the model sees every secret redacted, so it cannot echo one (runtime.secrets).
            update_kind = "agent_message_chunk" if kind is TextChunk else "agent_thought_chunk"
            text: str = ev.text  # type: ignore[union-attr]
            if self.journal is not None:
                self.journal.record_text(update_kind, text)
            prefix = self._chunk_prefixes.get(update_kind)
            if prefix is None:
                prefix = self._chunk_prefixes[update_kind] = (
                    b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":' + orjson.dumps(self.id)
                    + b',"update":{"sessionUpdate":"' + update_kind.encode() + b'","content":{"type":"text","text":')
            data = prefix + orjson.dumps(text) + b"}}}}\n"
            if not self.conn.emit_encoded_nowait(data, self._chunk_frame, update_kind, text):
                await self.conn.emit_encoded(data, self._chunk_frame, update_kind, text)
            return
        if isinstance(ev, UsageReported):
            ev = self._account(ev)
        upd = event_to_update(ev, notices=False)
        if upd is not None:
            await self.send_update(upd)

    def _chunk_frame(self, update_kind: str, text: str) -> dict[str, Any]:
        """The object form of a fast-path chunk frame, for a transcript recorder."""
        return {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": self.id, "update": {
            "sessionUpdate": update_kind, "content": {"type": "text", "text": text}}}}

    def _account(self, ev: UsageReported) -> UsageReported:
        """Size the context by the current model and add this call's price, when the config knows prices."""
        info: ModelEntry | None = getattr(self.model, "info", None)
        if info is None:
            return ev
        total = self.runtime.total_usage
        p = self.priced_usage
        delta = Usage(total.input_tokens - p.input_tokens, total.output_tokens - p.output_tokens,
                      total.cached_read_tokens - p.cached_read_tokens,
                      total.cached_write_tokens - p.cached_write_tokens)
        self.priced_usage = total
        if info.prices is not None:
            self.cost += info.prices.cost(delta)
        priced = info.prices is not None or self.cost > 0
        return UsageReported(ev.input_tokens, ev.output_tokens, min(ev.context_used, info.context_window),
                             info.context_window, round(self.cost, 6) if priced else None,
                             info.prices.currency if info.prices else "USD")

    def set_model(self, model_id: str, model: ModelClient | None) -> None:
        """The runtime reads `model` at every model call, so the switch applies from the next call on."""
        self.model_id = model_id
        self.model = model
        self.runtime.model = model

    def cancel(self) -> None:
        """Cancel the running turn and every prompt queued before now."""
        self.cancel_epoch += 1
        if self.elicitor is not None:
            # First, so that an MCP server waiting on a question hears `cancel` before its tool call is cancelled.
            self.elicitor.cancel_all()
        self.runtime.cancel()

    async def send_update(self, update: dict[str, Any]) -> None:
        if self.journal is not None:
            self.journal.record(update)
        await self.conn.emit_frame({"jsonrpc": "2.0", "method": "session/update",
                                    "params": {"sessionId": self.id, "update": update}})

    # ---- modes and config options ---------------------------------------------------------------------------------
    def modes_state(self) -> dict[str, Any]:
        return {
            "currentModeId": self.mode,
            "availableModes": [{"id": m.id, "name": m.name, "description": m.description} for m in MODES],
        }

    def config_options(self) -> list[dict[str, Any]]:
        return [{
            "id": "mode",
            "name": "Approval mode",
            "description": "When gatewright asks before running a tool",
            "category": "mode",
            "type": "select",
            "currentValue": self.mode,
            "options": [{"value": m.id, "name": m.name, "description": m.description} for m in MODES],
        }] + ([{
            "id": "model",
            "name": "Model",
            "description": "The model answering this session; a switch applies from the next model call",
            "category": "model",
            "type": "select",
            "currentValue": self.model_id,
            "options": [{"value": m.id, "name": m.name, "description": m.description or m.spec}
                        for m in self.model_choices],
        }] if self.model_choices and self.model_id else []) + [{
            "id": REMEMBER_OPTION,
            "name": "Remember approvals in",
            "description": "Where an “Always allow” or “Always reject” answer is remembered; each question's labels "
                           "name the scope they use",
            "type": "select",
            "currentValue": self.rules.remember,
            "options": [{"value": v, "name": n, "description": d} for v, n, d in REMEMBER_CHOICES],
        }]

    def set_remember(self, value: str) -> None:
        """The "Remember approvals in" setting; it applies from the next question on.

        Raises:
            ValueError: not one of the setting's values.
        """
        if value not in {v for v, _, _ in REMEMBER_CHOICES}:
            raise ValueError(value)
        self.rules.remember = value  # type: ignore[assignment]

    async def close(self) -> None:
        self.closed = True
        self.cancel()
        # Background processes belong to the session: none outlives it.
        close_session_processes(self.id)
        if self.mcp is not None:
            from runtime.mcp import close_servers

            await close_servers(self)


def new_session_id() -> str:
    return "sess_" + uuid.uuid4().hex
