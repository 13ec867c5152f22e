"""`AgentRuntime.run_turn`: the turn loop that drives model ⇄ tools, identical in every host.

One turn: append the user's prompt, then repeat (call the model, stream its text and thoughts, run the tool calls it
proposed through the decorated executor, feed results back in call order) until the model stops calling tools, a
limit is hit, an approval is rejected, or the turn is cancelled. Everything the user should see leaves as a typed
event through the host's sink; the host never sees an event for a turn after `run_turn` returned.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

import anyio
import anyio.lowlevel
import orjson

from permissions.decorator import ApprovalCancelled, ApprovalDeclined, ApprovalDenied, ApprovalRejected
from runtime import secrets
from runtime.elicitation import UserAsker
from runtime.events import (
    EventSink,
    NoticeEvent,
    PlanUpdated,
    RuntimeEvent,
    TextChunk,
    ToolCallProgress,
    ToolCallStarted,
    UsageReported,
)
from runtime.models.base import (
    AssistantMessage,
    Finished,
    Message,
    ModelClient,
    ModelError,
    ModelRequest,
    TextDelta,
    ThoughtDelta,
    ToolCallEvent,
    ToolCallRequest,
    ToolResultMessage,
    ToolSchema,
    Usage,
    UserMessage,
    UserPart,
)
from runtime.prompts import prompt
from runtime.sandbox import support
from runtime.sanitizer import normalise, tool_error, validate
from runtime.tools.base import (
    EditorBridge,
    ToolCall,
    ToolContext,
    ToolExecutor,
    ToolFailure,
    ToolRegistry,
    ToolResult,
    cap_output,
    clear_call_scratch,
    visible,
)
from runtime.tracing import META_KEY, CallRecord, check_output, find_trace, jsonable_trace, new_operation_id, wire_meta
from runtime.workspace import PathError, Workspace

if TYPE_CHECKING:
    from runtime.context import SessionContext
    from runtime.instructions import Signature

log = logging.getLogger(__name__)

StopReason = Literal["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"]
UNASKED_HELP = (
    "Calls that need your approval are not run. The approval mode decides which calls run without asking "
    "(--mode, /mode, the mode option); remembered rules and [permissions] allow in the config file too."
)
MODEL_FAILED = "The model call failed"  # the title of the notice a failed model call ends its turn with

# The base of every session's system prompt (runtime/prompts/system.md); the session's `SessionContext` adds the
# project instructions and the environment to it at every model call.
DEFAULT_SYSTEM_PROMPT = prompt("system")


@dataclass(frozen=True, slots=True)
class RuntimeOptions:
    max_turn_requests: int = 50
    max_parallel_tool_calls: int = 4
    tool_call_timeout_ms: int = 600_000
    max_tool_output_chars: int = 50_000
    context_window: int = 128_000


@dataclass(frozen=True, slots=True)
class TurnOutcome:
    stop_reason: StopReason
    blocked_by_approval: bool = False
    error: str | None = None
    usage: Usage = field(default_factory=Usage)


# Called between steps (before every model call, the step already counted): the host persists what the step
# finished and may compact the history here, which is how compaction works in the middle of a long turn.
StepHook = Callable[[EventSink], Awaitable[None]]


class AuthRequired(Exception):
    """The model provider refused our credentials; the ACP host answers `auth_required` (-32000)."""


@dataclass
class ToolEnvironment:
    """Session-level facts every tool context is built from."""

    session_id: str
    workspace: Workspace
    editor: EditorBridge | None = None
    state: dict[str, Any] = field(default_factory=dict)
    asker: UserAsker | None = None  # how tools (and MCP servers) ask the user, when the host can


@dataclass
class _CallSlot:
    call: ToolCallRequest
    index: int
    started: bool = False
    finished: bool = False
    result: ToolResultMessage | None = None
    scope: anyio.CancelScope | None = None
    record: CallRecord | None = None
    # Set once the call is past approval (running, or finished): the next call may only ask after it, so the user
    # sees permission questions in call order while approved calls still run in parallel.
    past_approval: anyio.Event = field(default_factory=anyio.Event)


class AgentRuntime:
    def __init__(
        self,
        *,
        model: ModelClient | None,
        registry: ToolRegistry,
        executor: ToolExecutor,
        environment: ToolEnvironment,
        options: RuntimeOptions | None = None,
        system_prompt: str = DEFAULT_SYSTEM_PROMPT,
        context: SessionContext | None = None,
    ) -> None:
        self.model = model
        self.registry = registry
        self.executor = executor
        self.env = environment
        self.options = options or RuntimeOptions()
        self.system_prompt = system_prompt
        # Project instructions and environment, added to `system_prompt` at every model call (None: the bare prompt).
        self.context = context
        # The nested instruction files this conversation has been shown (path → the version it saw).
        self.instructions_seen: dict[str, Signature] = {}
        self.history: list[Message] = []
        self._scope: anyio.CancelScope | None = None
        self._cancel_requested = False
        self.total_usage = Usage()
        self._rejections: list[str] = []  # what the user refused in the current step
        # The plan as last sent to the client (complete list of ACP plan entries): kept here so a session store can
        # persist and restore it.
        self.plan: tuple[dict[str, Any], ...] = ()
        # Awaited at the start of every turn, inside its cancel scope (e.g. MCP servers still starting get a bounded
        # chance to expose their tools before the first model call).
        self.before_turn: list[Callable[[], Awaitable[None]]] = []
        # Model calls made in this session: the <step> of `tool_step_<step>_<index>`, so that normalised ids stay
        # unique within the session (ACP requires unique tool call ids per session).
        self.steps_taken = 0
        self.before_step: StepHook | None = None
        self._turn_message: Message | None = None
        # Without an OS sandbox the session says so once, at its first turn (a subagent's runtime never does).
        self.sandbox_told = False
        self.unasked_told = False  # the user was told that the host could not ask them
        self._sandbox_said = ""  # what the session was last told about the sandbox

    # ---- control -------------------------------------------------------------------------------------------------
    def cancel(self) -> None:
        """Cancel the running turn, if any (idempotent; safe to call from any task)."""
        self._cancel_requested = True
        if self._scope is not None:
            self._scope.cancel()

    @property
    def running(self) -> bool:
        return self._scope is not None

    def add_usage(self, u: Usage) -> None:
        """Count usage spent on this runtime's behalf elsewhere (e.g. by a subagent) into its total."""
        self._add_usage(u)

    def current_system_prompt(self) -> str:
        """The system prompt the next model call sends."""
        return self.context.system_prompt(self.system_prompt) if self.context is not None else self.system_prompt

    def tool_schemas(self) -> tuple[ToolSchema, ...]:
        return tuple(ToolSchema(t.name, t.description, t.schema) for t in self.registry.tools())

    async def _tell_sandbox(self, emit: EventSink) -> None:
        """Once per session, and again when the sandbox changed since (a helper restarted weaker): what is missing."""
        found = support()
        told = found.describe() + found.note
        if told == self._sandbox_said:
            return
        first = not self._sandbox_said
        self._sandbox_said = told
        if found.complete and (first or not found.note):
            return
        title = "No sandbox" if not found.active else "Weaker sandbox" if not found.complete else "Sandbox restarted"
        text = found.describe()
        if found.note:
            text += f" ({found.note})"
        if not found.complete:
            text += ". Commands ask for approval more often (see /status)"
        await emit(NoticeEvent("warning", title, text + "."))

    # ---- the turn ------------------------------------------------------------------------------------------------
    async def run_turn(self, parts: list[UserPart], emit: EventSink) -> TurnOutcome:
        if self.model is None:
            raise ModelError("no model configured")
        self._cancel_requested = False
        start_len = len(self.history)
        self.history.append(UserMessage(tuple(parts)))
        self._turn_message = self.history[-1]
        open_calls: dict[str, _CallSlot] = {}
        outcome: TurnOutcome | None = None
        try:
            with anyio.CancelScope() as scope:
                self._scope = scope
                if self._cancel_requested:
                    scope.cancel()
                try:
                    if not self.sandbox_told or self._sandbox_said:
                        self.sandbox_told = True
                        await self._tell_sandbox(emit)
                    if self.context is not None:
                        await self.context.enter_turn()
                    for hook in list(self.before_turn):
                        await hook()
                    outcome = await self._loop(emit, open_calls, start_len)
                finally:
                    self._scope = None
                    if self.context is not None:
                        self.context.exit_turn()
        except anyio.get_cancelled_exc_class():
            # Cancelled from outside (a subagent's parent turn, or its time limit): still close every announced
            # call, so the client never keeps a call pending that nothing will finish.
            with anyio.CancelScope(shield=True):
                await self._close_cancelled(emit, open_calls)
            raise
        if outcome is None or scope.cancelled_caught or self._cancel_requested:
            with anyio.CancelScope(shield=True):
                await self._close_cancelled(emit, open_calls)
            return TurnOutcome("cancelled", usage=self.total_usage)
        return outcome

    def _keeping_plan(self, emit: EventSink) -> EventSink:
        async def sink(ev: RuntimeEvent) -> None:
            if isinstance(ev, PlanUpdated):
                self.plan = ev.entries
            await emit(ev)

        return sink

    async def _loop(self, emit: EventSink, open_calls: dict[str, _CallSlot], start_len: int) -> TurnOutcome:
        assert self.model is not None
        for _ in range(self.options.max_turn_requests):
            step = self.steps_taken
            self.steps_taken += 1
            if self.before_step is not None:
                await self.before_step(emit)
            request = ModelRequest(
                self.current_system_prompt(), tuple(self.history), self.tool_schemas(), self.env.session_id
            )
            text: list[str] = []
            thinking: list[str] = []
            calls: list[ToolCallRequest] = []
            finished: Finished | None = None
            try:
                # aclosing: a cancelled turn closes the provider's HTTP stream at once, not at garbage collection.
                async with contextlib.aclosing(self.model.stream(request)) as stream:
                    async for ev in stream:
                        # A model's TextDelta/ThoughtDelta is the runtime's TextChunk/ThoughtChunk: passed on as is.
                        if type(ev) is TextDelta:
                            if ev.text:
                                text.append(ev.text)
                                await emit(ev)
                        elif type(ev) is ThoughtDelta:
                            if ev.text:
                                thinking.append(ev.text)
                                await emit(ev)
                        elif isinstance(ev, ToolCallEvent):
                            calls.append(ev.call)
                        elif isinstance(ev, Finished):
                            finished = ev
            except ModelError as exc:
                # A provider's error text may quote what it was sent (a key, a configured header).
                reason = secrets.redact_text(exc.message)
                if exc.auth:
                    raise AuthRequired(reason) from None
                if text or thinking or calls:
                    self.history.append(AssistantMessage("".join(text), "".join(thinking)))
                # A notice, not model text: the ACP host shows it in the conversation ("⚠ The model call failed:
                # …"), the terminal host on stderr.
                await emit(NoticeEvent("error", MODEL_FAILED, reason))
                return TurnOutcome("end_turn", error=reason, usage=self.total_usage)
            finished = finished or Finished("tool_use" if calls else "end_turn")
            self._add_usage(finished.usage)
            if finished.usage.input_tokens or finished.usage.output_tokens:
                await emit(
                    UsageReported(
                        finished.usage.input_tokens,
                        finished.usage.output_tokens,
                        finished.usage.input_tokens + finished.usage.output_tokens,
                        self.options.context_window,
                    )
                )
            calls = normalise(step, calls)
            if finished.stop in ("max_tokens", "refusal"):
                if finished.stop == "refusal":
                    # ACP: the refused prompt and everything after it leave the context of the next prompt.
                    # (found by identity: a compaction between steps may have moved it)
                    at = next((i for i, m in enumerate(self.history) if m is self._turn_message), start_len)
                    del self.history[at:]
                else:
                    self.history.append(AssistantMessage("".join(text), "".join(thinking), (), finished.provider_state))
                return TurnOutcome(finished.stop, usage=self.total_usage)
            self.history.append(
                AssistantMessage("".join(text), "".join(thinking), tuple(calls), finished.provider_state)
            )
            if not calls:
                return TurnOutcome("end_turn", usage=self.total_usage)
            self._rejections = []
            rejected = await self._run_tools(step, calls, emit, open_calls)
            if rejected:
                # Say what was refused: the turn stops here, and the user should know why.
                refused = "; ".join(dict.fromkeys(self._rejections)) or "a tool call was rejected"
                await emit(TextChunk(f"\n\nStopped: {refused}."))
                return TurnOutcome("end_turn", blocked_by_approval=True, usage=self.total_usage)
        return TurnOutcome("max_turn_requests", usage=self.total_usage)

    def _add_usage(self, u: Usage) -> None:
        t = self.total_usage
        self.total_usage = Usage(
            t.input_tokens + u.input_tokens,
            t.output_tokens + u.output_tokens,
            t.cached_read_tokens + u.cached_read_tokens,
            t.cached_write_tokens + u.cached_write_tokens,
            t.thought_tokens + u.thought_tokens,
        )

    # ---- tools ---------------------------------------------------------------------------------------------------
    async def _run_tools(
        self, step: int, calls: list[ToolCallRequest], emit: EventSink, open_calls: dict[str, _CallSlot]
    ) -> bool:
        slots = [_CallSlot(c, i) for i, c in enumerate(calls)]
        validated: list[ToolCall | ToolFailure] = []
        for slot in slots:
            open_calls[slot.call.id or ""] = slot
            try:
                validated.append(validate(slot.call, slot.index, self.registry))
            except ToolFailure as exc:
                validated.append(exc)
            await emit(self._started_event(slot.call, validated[-1]))
        rejected = anyio.Event()
        limiter = anyio.CapacityLimiter(max(1, self.options.max_parallel_tool_calls))

        async def run_one(slot: _CallSlot, item: ToolCall | ToolFailure) -> None:
            try:
                with anyio.CancelScope() as own:
                    slot.scope = own
                    if slot.index > 0:
                        await slots[slot.index - 1].past_approval.wait()
                    if rejected.is_set():
                        own.cancel()
                    async with limiter:
                        await self._execute_slot(slot, item, emit, rejected, slots)
            finally:
                slot.past_approval.set()
            if own.cancelled_caught and slot.result is None:
                # Stopped because a sibling was rejected: it never ran.
                await self._finish(
                    slot,
                    emit,
                    "failed",
                    "not run: another tool call in this step was rejected",
                    is_error=True,
                    error_type="NotRun",
                )

        async with anyio.create_task_group() as tg:
            for slot, item in zip(slots, validated, strict=True):
                tg.start_soon(run_one, slot, item)
        for slot in slots:
            assert slot.result is not None
            self.history.append(slot.result)
            open_calls.pop(slot.call.id or "", None)
        return rejected.is_set()

    def _started_event(self, call: ToolCallRequest, item: ToolCall | ToolFailure) -> ToolCallStarted:
        tool = self.registry.get(call.name)
        args: Any = item.arguments if isinstance(item, ToolCall) else _raw_input(call)
        title, kind = call.name or "tool", "other"
        locations: tuple[dict[str, Any], ...] = ()
        if tool is not None:
            kind = tool.kind
            try:
                kind = tool.kind_for(args if isinstance(args, dict) else {})
                title = visible(tool.title(args if isinstance(args, dict) else {}, self.env.workspace))
                locations = tuple(tool.locations(args, self.env.workspace)) if isinstance(item, ToolCall) else ()
            except Exception:  # a title must never break a turn
                log.debug("title failed for %s", call.name, exc_info=True)
        return ToolCallStarted(call.id or "", call.name, title, kind, args, locations)

    async def _execute_slot(
        self,
        slot: _CallSlot,
        item: ToolCall | ToolFailure,
        emit: EventSink,
        rejected: anyio.Event,
        slots: list[_CallSlot],
    ) -> None:
        call = slot.call
        cid = call.id or ""
        if isinstance(item, ToolFailure):
            await self._finish(slot, emit, "failed", item.message, is_error=True, error_type=item.error_type)
            return
        hidden = await self._overwrites_a_hidden_secret(item)
        if hidden is not None:
            await self._finish(
                slot,
                emit,
                "failed",
                f"not run: {hidden} holds a secret that was shown to you as "
                f"{secrets.REDACTED}; writing {secrets.REDACTED} would destroy it. Change the file "
                "around that part (e.g. an edit whose old_string does not include it)",
                is_error=True,
                error_type="SecretHidden",
            )
            return

        async def started(meta: dict[str, Any] | None) -> None:
            # `meta`: why the approval layer let the call run (mode, rule or user), shown in the update's `_meta`.
            if slot.started:  # a retried call starts once
                return
            slot.started = True
            slot.past_approval.set()
            await emit(ToolCallProgress(cid, status="in_progress", meta=meta))

        async def progress(partial: ToolResult) -> None:
            # What a running call shows meanwhile passes the same redaction as its result.
            await emit(
                ToolCallProgress(
                    cid,
                    status="in_progress",
                    content=secrets.redact(partial.content) or None,
                    raw_output=secrets.redact(partial.raw_output),
                )
            )

        slot.record = CallRecord(cid, new_operation_id())
        ctx = ToolContext(
            self.env.session_id,
            cid,
            self.env.workspace,
            editor=self.env.editor,
            state=self.env.state,
            progress=progress,
            started=started,
            operation_id=slot.record.operation_id,
            record=slot.record,
            emit=self._keeping_plan(emit),  # plans come from tools: keep the latest one
            asker=self.env.asker,
        )
        try:
            try:
                result = await self.executor.execute(item, ctx)
            finally:
                clear_call_scratch(ctx.state, cid)
        except ApprovalRejected as exc:
            rejected.set()
            self._rejections.append(exc.reason)
            if exc.unasked and not self.unasked_told:
                self.unasked_told = True  # once a session: the host will not be able to ask the next time either
                await emit(NoticeEvent("warning", exc.unasked[:1].upper() + exc.unasked[1:], UNASKED_HELP))
            for other in slots:  # calls still waiting for approval are not run
                if other is not slot and not other.started and other.scope is not None:
                    other.scope.cancel()
            await self._finish(
                slot,
                emit,
                "failed",
                f"not run: {exc.reason}",
                is_error=True,
                error_type="ApprovalRejected",
                meta=exc.meta,
                shown=refusal_for_user(exc),
            )
            return
        except ApprovalDenied as exc:  # includes ApprovalDeclined: the model is told and the turn goes on
            await self._finish(
                slot,
                emit,
                "failed",
                exc.reason,
                is_error=True,
                error_type=exc.error_type,
                meta=exc.meta,
                shown=refusal_for_user(exc),
            )
            return
        except ToolFailure as exc:
            await self._finish(slot, emit, "failed", exc.message, is_error=True, error_type=exc.error_type)
            return
        except PathError as exc:
            await self._finish(slot, emit, "failed", str(exc), is_error=True, error_type=exc.error_type)
            return
        except ApprovalCancelled:
            # The editor cancelled the question because the turn is being cancelled: cancel the whole turn.
            self.cancel()
            await anyio.lowlevel.checkpoint()
            return
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as exc:
            incident = uuid.uuid4().hex[:8]
            log.exception("tool %s crashed (incident %s)", call.name, incident)
            await self._finish(
                slot,
                emit,
                "failed",
                f"{type(exc).__name__}: the tool crashed (incident {incident})",
                is_error=True,
                error_type=type(exc).__name__,
            )
            return
        try:
            text = check_output(result.output)
        except ToolFailure as exc:
            await self._finish(slot, emit, "failed", exc.message, is_error=True, error_type=exc.error_type)
            return
        note = "" if result.is_error else self._instructions_for(item)
        await self._finish(
            slot,
            emit,
            "failed" if result.is_error else "completed",
            text,
            is_error=result.is_error,
            result=result,
            note=note,
        )

    def _instructions_for(self, call: ToolCall) -> str:
        """Nested AGENTS.md text for the paths a successful call touched, the first time this conversation meets it."""
        tool = self.registry.get(call.name)
        if self.context is None or tool is None:
            return ""
        try:
            resolved = []
            for p, _ in tool.paths(call.arguments):
                try:
                    r = self.env.workspace.resolve(p)
                except PathError:
                    continue
                if r.klass != "outside":
                    resolved.append(r.path)
            return self.context.attachments(resolved, self.instructions_seen) if resolved else ""
        except Exception:  # instructions are a help: they never fail a call
            log.debug("nested instructions for %s failed", call.name, exc_info=True)
            return ""

    async def _overwrites_a_hidden_secret(self, call: ToolCall) -> str | None:
        """A write carrying the redaction marker into a file that holds a registered secret: the model saw the file
        redacted (see `_finish`), and writing back what it saw would replace the user's key with the marker.
        Returns the file's display path. Only calls whose arguments hold the marker pay for a look at the file."""
        if secrets.REDACTED not in call.raw_arguments and secrets.REDACTED not in str(call.arguments):
            return None
        tool = self.registry.get(call.name)
        if tool is None:
            return None
        ws = self.env.workspace
        for path, writes in tool.paths(call.arguments):
            if not writes:
                continue
            try:
                real = ws.resolve(path).path
            except PathError:
                continue
            if await anyio.to_thread.run_sync(_file_has_secret, real):
                return ws.display(real)
        return None

    async def _finish(
        self,
        slot: _CallSlot,
        emit: EventSink,
        status: Literal["completed", "failed"],
        text: str,
        *,
        is_error: bool,
        error_type: str = "ToolFailed",
        result: ToolResult | None = None,
        meta: dict[str, Any] | None = None,
        shown: str | None = None,
        note: str = "",
    ) -> None:
        """`text` is what the model reads; `shown`, when given, is what the user sees instead (a refusal is told to
        the model as an instruction, and to the user as what happened); `note` is attached for the model only."""
        call = slot.call
        cid = call.id or ""
        # The one place a tool's result becomes what the model reads and what the editor and the store get: a
        # secret the agent knows of (a key a file or /proc holds, an MCP server's own token) goes no further.
        text = secrets.redact_text(text)
        if result is not None and secrets.secret_values():
            result = replace(
                result,
                content=secrets.redact(result.content),
                title=secrets.redact(result.title),
                raw_output=secrets.redact(result.raw_output),
                trace=secrets.redact(result.trace),
            )
        if is_error and result is None:
            output = tool_error(error_type, text, call.name, cid)
            seen = shown or text
            content: tuple[dict[str, Any], ...] = ({"type": "content", "content": {"type": "text", "text": seen}},)
            raw_output: Any = {"error": seen, "errorType": error_type}
        else:
            # `note` (instructions attached for the model) comes after the cap: a long output never cuts it off.
            output = cap_output(text, self.options.max_tool_output_chars) + note
            content = (
                result.content
                if result and result.content
                else ({"type": "content", "content": {"type": "text", "text": cap_output(text, 20_000)}},)
            )
            raw_output = result.raw_output if result else None
        trace = None
        if slot.record is not None:  # it reached the executor: a trace may exist, kept by the tool or an executor
            kept = find_trace(self.executor, cid)  # always read: an executor forgets a trace once it is read
            trace = jsonable_trace(result.trace if result is not None and result.trace is not None else kept)
        # The model reads `output` only; the operation id, attempts and trace travel beside it for the store.
        slot.result = ToolResultMessage(
            cid, call.name, output, is_error, meta=slot.record.meta(trace) if slot.record else None
        )
        slot.finished = True
        with anyio.CancelScope(shield=True):
            await emit(
                ToolCallProgress(
                    cid,
                    status=status,
                    content=content,
                    raw_output=raw_output,
                    title=result.title if result else None,
                    locations=result.locations if result else None,
                    meta=_merge_meta(wire_meta(slot.record, trace), meta),
                )
            )

    async def _close_cancelled(self, emit: EventSink, open_calls: dict[str, _CallSlot]) -> None:
        """After a cancel: close every announced call and keep the history well-formed for the next turn."""
        for slot in open_calls.values():
            if slot.result is None:
                cid = slot.call.id or ""
                text = "cancelled by the user before it finished"
                if slot.started and self._side_effecting(slot.call):
                    # It was running: the change may have landed even though the answer was lost.
                    op = slot.record.operation_id if slot.record else "?"
                    text += (
                        "; its outcome is unknown: it may have partly or fully taken effect. Check the current "
                        f"state before repeating it (operation {op})"
                    )
                slot.result = ToolResultMessage(
                    cid, slot.call.name, text, True, meta=slot.record.meta() if slot.record else None
                )
                await emit(
                    ToolCallProgress(
                        cid,
                        status="failed",
                        content=({"type": "content", "content": {"type": "text", "text": "Cancelled"}},),
                    )
                )
        if open_calls:
            for slot in sorted(open_calls.values(), key=lambda s: s.index):
                assert slot.result is not None
                self.history.append(slot.result)
        open_calls.clear()

    def _side_effecting(self, call: ToolCallRequest) -> bool:
        tool = self.registry.get(call.name)
        args = _raw_input(call)
        try:
            return tool is None or tool.effect(args if isinstance(args, dict) else {}) != "read"
        except Exception:  # an effect we cannot establish is not a read
            return True


def refusal_for_user(exc: ApprovalRejected | ApprovalDenied) -> str:
    """What the editor shows for a call that approval stopped: what happened, in the user's terms (the model gets
    the instruction-style text in its TOOL_ERROR)."""
    info = (exc.meta or {}).get(META_KEY, {}) if isinstance(exc.meta, dict) else {}
    if isinstance(exc, ApprovalDeclined):
        if exc.said:
            return f"Declined: not run. The agent was told to try another way, and why: “{exc.said}”."
        return "Declined: not run. The agent was told to try another way."
    if isinstance(exc, ApprovalRejected):
        if exc.unasked:
            return f"{exc.reason[:1].upper()}{exc.reason[1:]}. The turn stopped here."
        if info.get("by") == "timeout":
            return "Not run: the permission question was not answered in time."
        if info.get("by") == "user" and "option" in info:  # the answer to the question was a rejection
            return "Rejected: not run. The turn stopped here."
        return f"Not run: {exc.reason}. The turn stopped here."
    return f"Not run: {exc.reason}."


def _file_has_secret(path: str, limit: int = 4 << 20) -> bool:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return secrets.has_secret(f.read(limit))
    except OSError:
        return False


def _merge_meta(traced: dict[str, Any] | None, approval: dict[str, Any] | None) -> dict[str, Any] | None:
    """One `_meta.gatewright` from the call's trace (only when notable) and the approval decision (if any)."""
    if not approval:
        return traced
    if not traced:
        return approval
    return {**traced, META_KEY: {**traced.get(META_KEY, {}), **approval.get(META_KEY, {})}}


def _raw_input(call: ToolCallRequest) -> Any:
    try:
        return orjson.loads(call.arguments)
    except Exception:
        return call.arguments
