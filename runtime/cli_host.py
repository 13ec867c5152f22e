"""The terminal host (`gatewright run`): one prompt through the very same runtime the ACP host uses.

Only the gateway and the event sink differ: approvals are asked as `Approve? [y/N]` on the terminal (only `y`/`yes`
approves; no terminal means rejected), the assistant's text goes to stdout and tool activity to stderr.
"""

from __future__ import annotations

import signal
import sys
from typing import TYPE_CHECKING, TextIO

import anyio
import anyio.to_thread

from permissions import ToolApprovalDecorator
from permissions.gateway import PermissionOutcome, PermissionRequest
from permissions.rules import Rule, RuleStore
from runtime.approval import make_describer
from runtime.context import SandboxInfo, SessionContext
from runtime.delegation import install_delegation
from runtime.events import PlanUpdated, RuntimeEvent, TextChunk, ThoughtChunk, ToolCallProgress, ToolCallStarted
from runtime.loop import AgentRuntime, AuthRequired, RuntimeOptions, ToolEnvironment
from runtime.models.base import TextPart
from runtime.tools.base import RoutingToolExecutor, ToolRegistry
from runtime.tools.builtin import builtin_tools
from runtime.tracing import RetryingExecutor
from runtime.workspace import Workspace

if TYPE_CHECKING:
    from permissions.modes import ApprovalMode
    from runtime.models import ModelFactory

EXIT_OK, EXIT_REJECTED, EXIT_INTERRUPTED, EXIT_FAILED = 0, 3, 130, 1


class TerminalGateway:
    """Asks `Approve? [y/N]` on the terminal. Without a terminal on stdin, every question is a rejection."""

    def __init__(self, out: TextIO = sys.stderr, inp: TextIO = sys.stdin) -> None:
        self.out = out
        self.inp = inp

    async def request(self, request: PermissionRequest) -> PermissionOutcome:
        w = self.out.write
        w(f"\n• Approval required for {request.tool}: {request.title}\n")
        w(f"  why: {request.reason}\n")
        for c in request.content:
            if c.get("type") == "diff":
                w(_short_diff(c.get("oldText"), c.get("newText") or "", c.get("path", "")))
        if not self.inp.isatty():
            w("  Tool call requires approval but no terminal is available: rejected.\n")
            self.out.flush()
            return PermissionOutcome.selected("reject_once")
        w("• Approve? [y/N] ")
        self.out.flush()
        line = await anyio.to_thread.run_sync(self.inp.readline, abandon_on_cancel=True)
        approved = line.strip().lower() in ("y", "yes")
        w("  Approved\n" if approved else "  Rejected\n")
        self.out.flush()
        return PermissionOutcome.selected("allow_once" if approved else "reject_once")


def _short_diff(old: str | None, new: str, path: str, limit: int = 40) -> str:
    import difflib

    lines = list(difflib.unified_diff((old or "").splitlines(), new.splitlines(), path, path, lineterm=""))
    shown = lines[:limit]
    more = f"  … {len(lines) - limit} more diff lines\n" if len(lines) > limit else ""
    return "".join(f"  {ln}\n" for ln in shown) + more


class TerminalPrinter:
    def __init__(self, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> None:
        self.out, self.err = out, err
        self.titles: dict[str, str] = {}

    async def __call__(self, ev: RuntimeEvent) -> None:
        if isinstance(ev, TextChunk):
            self.out.write(ev.text)
            self.out.flush()
        elif isinstance(ev, ThoughtChunk):
            pass  # thoughts are not printed on the terminal
        elif isinstance(ev, ToolCallStarted):
            # A subagent's calls are indented under the delegate call that runs them.
            depth = ((ev.meta or {}).get("gatewright") or {}).get("depth", 0)
            self.titles[ev.call_id] = ev.title
            self.err.write(f"{'  ' * depth}• {ev.title}\n")
        elif isinstance(ev, PlanUpdated):
            marks = {"completed": "[x]", "in_progress": "[>]", "pending": "[ ]"}
            self.err.write("• Plan\n" + "".join(f"  {marks.get(e['status'], '[ ]')} {e['content']}\n"
                                                for e in ev.entries))
        elif isinstance(ev, ToolCallProgress) and ev.status in ("completed", "failed"):
            mark = "✓" if ev.status == "completed" else "✗"
            self.err.write(f"  {mark} {self.titles.get(ev.call_id, ev.call_id)}\n")
            if ev.status == "failed" and ev.content:
                for c in ev.content:
                    text = c.get("content", {}).get("text") if c.get("type") == "content" else None
                    if text:
                        self.err.write(f"    {text.splitlines()[0][:300]}\n")
        self.err.flush()


def build_runtime(cwd: str, model, mode_ref: list[str], gateway, session_id: str = "cli",
                  state_dir: str | None = None, sandbox: SandboxInfo = None,
                  rules: tuple[Rule, ...] = ()) -> AgentRuntime:
    """The same construction as the ACP host: registry, routing and retrying executors, approval decorator, runtime,
    subagents. With a state dir, the project's and the global remembered rules apply and decisions are audited."""
    workspace = Workspace(cwd)
    registry = ToolRegistry(builtin_tools())
    options = RuntimeOptions()
    router = RoutingToolExecutor(registry, options.tool_call_timeout_ms / 1000)
    store, audit = RuleStore(configured=rules), None
    if state_dir is not None:
        from permissions.audit import audit_log
        from permissions.store import rule_database, state_dir_problem

        state_dir_problem(state_dir)  # an unwritable state dir is one line at start, not one per call
        store, audit = RuleStore(rule_database(state_dir), workspace.cwd, configured=rules), audit_log(state_dir)
    executor = ToolApprovalDecorator(RetryingExecutor(router, registry), gateway, make_describer(registry),
                                     lambda: mode_ref[0], store, audit)
    runtime = AgentRuntime(model=model, registry=registry, executor=executor,
                           environment=ToolEnvironment(session_id, workspace), options=options,
                           context=SessionContext(workspace.cwd, lambda: mode_ref[0], sandbox))
    install_delegation(runtime)
    return runtime


def run_prompt(prompt: str, *, cwd: str, factory: ModelFactory, mode: ApprovalMode,
               state_dir: str | None = None, rules: tuple[Rule, ...] = ()) -> int:
    from runtime.models import NO_MODEL_MESSAGE

    model = factory.create()
    if model is None:
        sys.stderr.write(NO_MODEL_MESSAGE + "\n")
        return EXIT_FAILED
    from permissions.store import state_dir as resolve_state_dir

    runtime = build_runtime(cwd, model, [mode], TerminalGateway(), state_dir=resolve_state_dir(state_dir), rules=rules)
    printer = TerminalPrinter()
    result: dict[str, object] = {}

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            async def on_sigint() -> None:
                with anyio.open_signal_receiver(signal.SIGINT) as signals:
                    async for _ in signals:
                        result["interrupted"] = True
                        runtime.cancel()
                        return

            tg.start_soon(on_sigint)
            try:
                result["outcome"] = await runtime.run_turn([TextPart(prompt)], printer)
            except AuthRequired as exc:
                sys.stderr.write(f"gatewright: authentication failed: {exc}\n")
                result["auth"] = True
            tg.cancel_scope.cancel()

    try:
        anyio.run(main)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    finally:
        from runtime.processes import kill_all_process_groups

        kill_all_process_groups()
    sys.stdout.write("\n")
    sys.stdout.flush()
    outcome = result.get("outcome")
    if result.get("interrupted") or getattr(outcome, "stop_reason", None) == "cancelled":
        return EXIT_INTERRUPTED
    if outcome is None:
        return EXIT_FAILED
    if getattr(outcome, "blocked_by_approval", False):
        sys.stderr.write("Stopped because tool approval was rejected.\n")
        return EXIT_REJECTED
    return EXIT_OK
