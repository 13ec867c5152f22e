"""Subagents: delegate tools that run a child `AgentRuntime` under a `HandoffPolicy` enforced at execution time.

A delegate call (`delegate_explore`, `delegate_task`) runs a child runtime with its own history, the session's model
client (read at the moment of the call) and a view of the parent's tools filtered by the policy. The filter is real
on both sides: the child's registry only exposes allowed tools, and the child's executor refuses any other name
before the call reaches approval. Every child call then goes through the session's own executor, so the same
approval decorator, gateway, mode and remembered rules govern it: the editor is asked about a child's write exactly
as about the parent's.

The child's tool calls appear on the parent's session under session-wide ids (`<parentCallId>/<childCallId>`) with
`_meta: {"gatewright": {"parentToolCallId": …, "depth": n}}`; its text and thoughts stay inside and its final answer
becomes the delegate call's result. Depth, session and the sink travel with the task in a context variable, so they
hold under parallel tool calls (each call runs in its own task with its own copy of the context).

A child never outlives the parent's turn: it runs inside the delegate call, so a cancel of the turn cancels it (and
closes its announced calls), and its time limit cancels it the same way. It cannot ask for permission after the
prompt ended because nothing of it runs after the call returned.

With the scripted model (`--model scripted:PATH`) a child shares the session's `ScriptedModel`: its model calls
consume the next entries of the session's script, in the order the calls are made (the parent's entry with the
delegate call, then the child's entries, then the parent's again). Parallel delegate calls interleave by scheduling
order, so scripts should not rely on that order.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any, Literal

import anyio

from permissions.decorator import ApprovalCancelled, ApprovalRejected
from runtime.events import EventSink, RuntimeEvent, ToolCallProgress, ToolCallStarted
from runtime.loop import AgentRuntime, ToolEnvironment, TurnOutcome
from runtime.models.base import AssistantMessage, TextPart
from runtime.prompts import prompt
from runtime.tools.base import (
    Effect,
    Tool,
    ToolCall,
    ToolContext,
    ToolExecutor,
    ToolFailure,
    ToolRegistry,
    ToolResult,
    cap_output,
)
from runtime.tracing import META_KEY, find_trace
from runtime.workspace import Workspace

OnFailure = Literal["fail", "fallback"]
MAX_TASK_CHARS = 40_000


def default_input_filter(text: str) -> str | None:
    """Control characters out (they are never part of a task), length capped; an empty task is refused."""
    cleaned = "".join(ch for ch in text if ch in "\n\t" or ch >= " ")
    if not cleaned.strip():
        return None
    return cleaned[:MAX_TASK_CHARS]


@dataclass(frozen=True, slots=True)
class HandoffPolicy:
    """What a subagent may do, checked when the delegate call runs (never only in the prompt).

    `allowed_tools=None` means every tool of the parent; `denied_tools` wins over it. `max_depth` counts handoffs (the
    session's runtime is depth 0, its subagents depth 1). `timeout_millis=0` leaves only the per-call timeout.
    `on_denied` / `on_error`: `fail` makes the delegate call fail; `fallback` hands the task back to the caller as a
    normal result, asking it to do the work itself.
    """

    enabled: bool = True
    allowed_tools: frozenset[str] | None = None
    denied_tools: frozenset[str] = frozenset()
    max_depth: int = 1
    timeout_millis: int = 600_000
    input_filter: Callable[[str], str | None] = default_input_filter
    on_denied: OnFailure = "fail"
    on_error: OnFailure = "fail"
    max_turn_requests: int = 30

    def allows_tool(self, name: str) -> bool:
        if name in self.denied_tools:
            return False
        return self.allowed_tools is None or name in self.allowed_tools

    def denial(self, depth: int) -> str | None:
        if not self.enabled:
            return "subagent handoff is disabled"
        if depth > self.max_depth:
            return f"handoff depth {depth} exceeds maxDepth {self.max_depth}"
        return None


@dataclass(frozen=True, slots=True)
class SubagentSpec:
    tool_name: str
    label: str
    description: str
    system_prompt: str
    policy: HandoffPolicy


def _child_prompt(name: str) -> str:
    """A subagent's own prompt (`runtime/prompts/<name>.md`) and the rules every subagent shares; the session's context
    (project instructions, environment) is added to it at every model call, as for the session itself."""
    return prompt(name) + "\n\n" + prompt("subagent")


EXPLORE = SubagentSpec(
    tool_name="delegate_explore",
    label="explore",
    description=(
        "Hand a read-only investigation to a subagent with its own context: it can read files, glob and grep, but "
        "cannot change anything or run commands. Use it to answer a question about the code base without filling "
        "your own context. Give a self-contained question; you get back its report."
    ),
    system_prompt=_child_prompt("explore"),
    policy=HandoffPolicy(
        allowed_tools=frozenset({"read_file", "glob", "grep"}), timeout_millis=180_000, max_turn_requests=20
    ),
)

TASK = SubagentSpec(
    tool_name="delegate_task",
    label="task",
    description=(
        "Hand a self-contained task to a subagent with its own context and the same tools as you (except plans, "
        "questions to the user and further delegation). Its tool calls are approved like yours. You get back its "
        "report of what it did."
    ),
    system_prompt=_child_prompt("task"),
    # A child does not see the conversation, so the user would not know what its questions are about: it reports
    # back, and the parent asks.
    policy=HandoffPolicy(denied_tools=frozenset({"update_plan", "ask_user", "delegate_task", "delegate_explore"})),
)

DEFAULT_SUBAGENTS: tuple[SubagentSpec, ...] = (EXPLORE, TASK)


# ---- context that travels with the task ---------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class DelegationFrame:
    """Where a piece of work runs: its session, its handoff depth, the delegate call it serves, the runtime whose
    tools are running, and the session's own sink (every subagent's events go there, never through another child)."""

    session_id: str
    depth: int
    call_id: str
    runtime: AgentRuntime
    emit: EventSink


_FRAME: ContextVar[DelegationFrame | None] = ContextVar("gatewright_delegation_frame", default=None)


def current_frame() -> DelegationFrame | None:
    """The delegation this task runs in, or None in the session's own runtime (depth 0)."""
    return _FRAME.get()


# ---- the child's tools ----------------------------------------------------------------------------------------------
class FilteredRegistry(ToolRegistry):
    """A live view of the parent's tools (tools added later, e.g. MCP, appear) restricted by the policy."""

    def __init__(self, base: ToolRegistry, allows: Callable[[str], bool]) -> None:
        super().__init__()
        self._base = base
        self._allows = allows

    def add(self, tool: Tool) -> None:
        raise TypeError("a subagent's tools are a view of its parent's; add tools to the parent")

    def remove(self, name: str) -> None:
        raise TypeError("a subagent's tools are a view of its parent's")

    def get(self, name: str) -> Tool | None:
        return self._base.get(name) if self._allows(name) else None

    def is_exposed(self, name: str) -> bool:
        return self._allows(name) and self._base.is_exposed(name)

    def names(self) -> list[str]:
        return [n for n in self._base.names() if self._allows(n)]

    def tools(self) -> list[Tool]:
        return [t for t in self._base.tools() if self._allows(t.name)]


class SubagentExecutor:
    """The child's executor: refuses any tool the child does not expose, then hands the call, under its session-wide
    id, to the session's own executor (approval decorator included)."""

    def __init__(self, delegate: ToolExecutor, registry: ToolRegistry, prefix: str) -> None:
        self.delegate = delegate
        self.registry = registry
        self.prefix = prefix

    async def execute(self, call: ToolCall, ctx: ToolContext) -> ToolResult:
        if not self.registry.is_exposed(call.name):
            raise ToolFailure(f"tool {call.name!r} is not available to this subagent", "ToolNotFound")
        wire = self.prefix + call.id
        return await self.delegate.execute(replace(call, id=wire), replace(ctx, call_id=wire))

    def trace_for(self, call_id: str) -> Any | None:
        return find_trace(self.delegate, self.prefix + call_id)


class _ChildSink:
    """Forwards the child's tool call events to the session, renamed and linked to the delegate call; keeps a short
    account of them for the delegate call's trace. Text, thoughts, plan and usage stay inside the child."""

    def __init__(self, emit: EventSink, prefix: str, parent_call_id: str, depth: int) -> None:
        self.emit = emit
        self.prefix = prefix
        self.link = {"parentToolCallId": parent_call_id, "depth": depth}
        self.calls: dict[str, dict[str, Any]] = {}
        self.started: list[tuple[str, Any]] = []  # (tool, arguments) of calls that began to run

    async def __call__(self, ev: RuntimeEvent) -> None:
        if not isinstance(ev, ToolCallStarted | ToolCallProgress):
            return
        wire = self.prefix + ev.call_id
        meta = dict(ev.meta or {})
        meta[META_KEY] = {**meta.get(META_KEY, {}), **self.link}
        if isinstance(ev, ToolCallStarted):
            self.calls[wire] = {"toolCallId": wire, "name": ev.name, "status": "pending", "_input": ev.raw_input}
        elif ev.status is not None and wire in self.calls:
            entry = self.calls[wire]
            if ev.status == "in_progress" and entry["status"] == "pending":
                self.started.append((entry["name"], entry["_input"]))
            entry["status"] = ev.status
        await self.emit(replace(ev, call_id=wire, meta=meta))

    def account(self) -> list[dict[str, Any]]:
        return [{k: v for k, v in c.items() if k != "_input"} for c in self.calls.values()]


async def _drop(ev: RuntimeEvent) -> None:
    return None


# ---- the delegate tools ---------------------------------------------------------------------------------------------
class DelegateTool(Tool):
    """One kind of subagent. Bound to the session's runtime (depth 0); deeper calls find their runtime in the frame."""

    kind = "other"

    def __init__(self, spec: SubagentSpec, root: AgentRuntime) -> None:
        self.spec = spec
        self.root = root
        self.name = spec.tool_name
        self.description = spec.description

    def effect(self, args: Mapping[str, Any]) -> Effect:
        # The handoff itself only runs a model; every call the child makes is approved on its own.
        return "read"

    def title(self, args: Mapping[str, Any], ws: Workspace) -> str:
        task = str(args.get("task", "")).strip().splitlines()
        head = task[0] if task else ""
        return f"Subagent ({self.spec.label}): {head[:80]}{'…' if len(head) > 80 else ''}"

    def summary(self, args: Mapping[str, Any], ws: Workspace) -> str:
        return f"`{self.name}` with this task"

    def timeout_seconds(self, args: Mapping[str, Any]) -> float | None:
        ms = self.spec.policy.timeout_millis
        return ms / 1000 if ms > 0 else None

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        policy = self.spec.policy
        frame = current_frame()
        if frame is not None and frame.session_id != ctx.session_id:
            raise ToolFailure("the delegation context belongs to another session", "HandoffDenied")
        parent = frame.runtime if frame is not None else self.root
        depth = (frame.depth if frame is not None else 0) + 1
        emit = frame.emit if frame is not None else (ctx.emit or _drop)
        text = str(args["task"]) + (f"\n\nContext:\n{args['context']}" if args.get("context") else "")

        reason = policy.denial(depth)
        task = policy.input_filter(text) if reason is None else None
        if reason is None and task is None:
            reason = "the handoff input filter refused the task"
        if reason is not None or task is None:
            return self._give_back(policy.on_denied, "HandoffDenied", reason or "denied", text, depth)

        prefix = ctx.call_id + "/"
        registry = FilteredRegistry(parent.registry, policy.allows_tool)
        child = AgentRuntime(
            model=parent.model,
            registry=registry,
            executor=SubagentExecutor(self.root.executor, registry, prefix),
            environment=ToolEnvironment(
                ctx.session_id, parent.env.workspace, editor=parent.env.editor, state=parent.env.state
            ),
            options=replace(parent.options, max_turn_requests=policy.max_turn_requests),
            system_prompt=self.spec.system_prompt,
            context=parent.context,  # the same project instructions and environment as the session
        )
        child.sandbox_told = True  # the session told the user already
        sink = _ChildSink(emit, prefix, ctx.call_id, depth)
        outcome: TurnOutcome | None = None
        failure: str | None = None
        token = _FRAME.set(DelegationFrame(ctx.session_id, depth, ctx.call_id, child, emit))
        try:
            limit = policy.timeout_millis / 1000 if policy.timeout_millis > 0 else math.inf
            with anyio.move_on_after(limit) as deadline:
                try:
                    outcome = await child.run_turn([TextPart(task)], sink)
                except Exception as exc:  # e.g. the provider refused our credentials
                    failure = f"{type(exc).__name__}: {exc}"
        finally:
            _FRAME.reset(token)
            parent.add_usage(child.total_usage)

        if deadline.cancelled_caught:
            msg = f"the {self.spec.label} subagent did not finish within {policy.timeout_millis} ms and was stopped"
            if any(self._side_effecting(name, a) for name, a in sink.started):
                msg += "; some of its changes may have been applied: check the current state before repeating the task"
            return self._give_back(policy.on_error, "HandoffTimeout", msg, text, depth)
        if outcome is not None and outcome.blocked_by_approval:
            raise ApprovalRejected(f"a call of the {self.spec.label} subagent was rejected by the user")
        if outcome is not None and outcome.stop_reason == "cancelled":
            raise ApprovalCancelled()
        if failure is None and outcome is not None and outcome.error:
            failure = f"the model call failed: {outcome.error}"
        if failure is not None or outcome is None:
            return self._give_back(
                policy.on_error,
                "HandoffFailed",
                f"the {self.spec.label} subagent failed: {failure or 'no outcome'}",
                text,
                depth,
            )
        return self._report(child, outcome, sink, depth)

    def _side_effecting(self, name: str, args: Any) -> bool:
        tool = self.root.registry.get(name)
        try:
            return tool is None or tool.effect(args if isinstance(args, dict) else {}) != "read"
        except Exception:
            return True

    def _report(self, child: AgentRuntime, outcome: TurnOutcome, sink: _ChildSink, depth: int) -> ToolResult:
        answer = next(
            (m.text for m in reversed(child.history) if isinstance(m, AssistantMessage) and m.text.strip()), ""
        )
        text = answer.strip() or "(the subagent gave no answer)"
        if outcome.stop_reason != "end_turn":
            text += f"\n\n(The subagent stopped early: {outcome.stop_reason}; its report may be incomplete.)"
        calls = sink.account()
        raw = {
            "subagent": self.spec.label,
            "stopReason": outcome.stop_reason,
            "depth": depth,
            "modelCalls": child.steps_taken,
            "toolCalls": len(calls),
        }
        u = child.total_usage
        trace = {**raw, "calls": calls, "usage": {"inputTokens": u.input_tokens, "outputTokens": u.output_tokens}}
        return ToolResult(
            text,
            content=({"type": "content", "content": {"type": "text", "text": cap_output(text, 20_000)}},),
            raw_output=raw,
            trace=trace,
        )

    def _give_back(self, on: OnFailure, error_type: str, reason: str, text: str, depth: int) -> ToolResult:
        if on == "fail":
            raise ToolFailure(reason, error_type)
        out = f"The {self.spec.label} subagent was not used ({reason}). Do the task yourself instead:\n{text}"
        return ToolResult(
            out,
            raw_output={
                "subagent": self.spec.label,
                "fallback": True,
                "errorType": error_type,
                "reason": reason,
                "depth": depth,
            },
        )


def install_delegation(runtime: AgentRuntime, specs: tuple[SubagentSpec, ...] = DEFAULT_SUBAGENTS) -> list[Tool]:
    """Expose the delegate tools in the session's registry, bound to its runtime. Returns the tools added."""
    tools: list[Tool] = [DelegateTool(spec, runtime) for spec in specs]
    for t in tools:
        runtime.registry.add(t)
    return tools
