"""The one composition root: `build_runtime` assembles the agent of one session, the same way for every host.

What it builds, in this order (the executor stack reads from the inside out):

    registry        the built-in tools (or the caller's), `ask_user` when the host can show the user a form, then
                    the delegate tools bound to this runtime
    router          RoutingToolExecutor: runs only exposed tools, with the session's tool-call time limit
    retrying        RetryingExecutor: retries transient failures of reads; it sits *under* approval, so an approved
                    read is not asked again when a transient failure repeats it
    approval        ToolApprovalDecorator: decides (mode, remembered rules), asks the host's gateway, audits; its
                    watch (runtime.repositories) asks about every `.git` and `.gatewright` a call creates
    runtime         AgentRuntime: the turn loop over the model, the registry and that executor, with the session's
                    context (runtime.context: what the model is told about the workspace, the mode, the sandbox)

The config file's `[permissions]` rules (`configured_rules`) always apply; with a state dir, the project's and the
global remembered rules apply too (`permissions.store`) and every decision is
audited (`permissions.audit`); without one (in-process tests), rules last for the session and nothing is audited.

A host passes in only what differs between hosts: the permission gateway (the editor's `session/request_permission`, or
the terminal's question), the editor bridge (the editor's file system and terminals, if it advertised them), the asker
(how to put a question to the user, if the host can: `runtime.elicitation`), and at each turn its event sink. MCP
servers are connected later, per session, by `runtime.mcp.connect_servers`, which adds their tools to this registry and
makes every turn wait (bounded) for servers still starting.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from permissions.audit import audit_log
from permissions.decorator import ToolApprovalDecorator
from permissions.rules import RuleStore
from permissions.store import rule_database as shared_rule_database
from permissions.store import state_dir_problem
from runtime import settings
from runtime.approval import make_describer
from runtime.context import SessionContext
from runtime.delegation import DEFAULT_SUBAGENTS, SubagentSpec, install_delegation
from runtime.loop import AgentRuntime, RuntimeOptions, ToolEnvironment
from runtime.repositories import STATE_KEY as REPOSITORIES_KEY
from runtime.repositories import RepositoryGuard, RepositoryWatch
from runtime.tools.base import RoutingToolExecutor, Tool, ToolCall, ToolContext, ToolExecutor, ToolRegistry, ToolResult
from runtime.tools.builtin import builtin_tools
from runtime.tools.builtin.ask_user import AskUserTool
from runtime.tracing import RetryingExecutor, RetryPolicy
from runtime.workspace import Workspace

if TYPE_CHECKING:
    from permissions.decorator import AuditSink
    from permissions.gateway import PermissionGateway
    from permissions.modes import ApprovalMode
    from permissions.rules import Rule, Scope
    from permissions.store import RuleDatabase
    from runtime.context import SandboxInfo
    from runtime.elicitation import UserAsker
    from runtime.models.base import ModelClient
    from runtime.tools.base import EditorBridge


@dataclass(frozen=True, slots=True, eq=False)
class SessionRuntime:
    """The assembled agent of one session: the runtime and the parts a host or a command needs to reach."""

    runtime: AgentRuntime
    registry: ToolRegistry
    workspace: Workspace
    rules: RuleStore
    audit: AuditSink | None
    approval: ToolApprovalDecorator[ToolCall, ToolContext, ToolResult]
    delegates: tuple[Tool, ...]


def build_runtime(
    *,
    session_id: str,
    cwd: str,
    model: ModelClient | None,
    gateway: PermissionGateway,
    mode: Callable[[], ApprovalMode],
    additional_directories: Sequence[str] = (),
    state_dir: str | None = None,
    remember: Scope = "session",
    editor: EditorBridge | None = None,
    options: RuntimeOptions | None = None,
    tools: Sequence[Tool] | None = None,
    subagents: tuple[SubagentSpec, ...] = DEFAULT_SUBAGENTS,
    retry: RetryPolicy | None = None,
    rule_database: RuleDatabase | None = None,
    audit: AuditSink | None = None,
    question_timeout: float | None | Literal["settings"] = "settings",
    wrap_router: Callable[[ToolExecutor], ToolExecutor] | None = None,
    configured_rules: tuple[Rule, ...] = (),
    sandbox: SandboxInfo = None,
    context: bool = True,
    asker: UserAsker | None = None,
) -> SessionRuntime:
    """Build the agent of one session.

    Args:
        session_id: the session's id (tool contexts, the audit log, background processes are keyed by it).
        cwd, additional_directories: the workspace roots.
        model: the model client, or None (a turn then fails with "no model configured"; hosts say so first).
        gateway: how the approval decorator asks a human.
        mode: the session's approval mode, read at every decision (so a switch applies to the next call).
        state_dir: where remembered rules and the audit log live (`permissions.store.state_dir` resolves it);
            None keeps rules in memory and audits nothing.
        remember: the session's "Remember approvals in" setting.
        editor: the editor's file system and terminals, if the client advertised them.
        tools: the tools the model sees before delegation (default: the built-ins).
        rule_database, audit: explicit files instead of the state dir's shared ones (tests that close their own).
        question_timeout: seconds a question may stay unanswered (default: GATEWRIGHT_PERMISSION_TIMEOUT, checked).
        wrap_router: a test seam around the router (e.g. a flaky executor under the retries).
        configured_rules: the config file's `[permissions]` allow/deny rules (runtime.config).
        sandbox: the sandbox state the model is told about (a line, or a callable giving it; None: probed).
        context: False leaves the model's system prompt without the session's context (in-process tests).
        asker: how tools and MCP servers ask the user (None: nothing is asked, and `ask_user` is not offered).
    """
    opts = options or RuntimeOptions()
    private = [*settings.agent_private_paths(), *([str(state_dir)] if state_dir is not None else [])]
    workspace = Workspace(cwd, list(additional_directories), private)
    registry = ToolRegistry(list(tools) if tools is not None else builtin_tools())
    if tools is None and asker is not None and asker.form:
        registry.add(AskUserTool())  # a tool the host cannot serve is never offered to the model
    if state_dir is not None:
        # Said once per process, in one line, if the state dir cannot be written (see permissions.shared_sqlite).
        state_dir_problem(state_dir)
        # Both files are opened at first use.
        rule_database = rule_database or shared_rule_database(state_dir)
        audit = audit or audit_log(state_dir)
    # Project rules are keyed by the resolved workspace root (each root of a multi-root workspace is one).
    rules = RuleStore(
        rule_database,
        workspace.cwd if rule_database is not None else None,
        remember,
        configured_rules,
        other_roots=workspace.roots[1:],
    )
    router: ToolExecutor = RoutingToolExecutor(registry, opts.tool_call_timeout_ms / 1000)
    if wrap_router is not None:
        router = wrap_router(router)
    # Every `.git` and `.gatewright` of the workspace: protected in every command, and a new one asked about.
    repositories = RepositoryWatch(workspace.roots)
    approval = ToolApprovalDecorator(
        RetryingExecutor(router, registry, retry),
        gateway,
        make_describer(registry),
        mode,
        rules,
        audit,
        question_timeout=settings.permission_timeout() if question_timeout == "settings" else question_timeout,
        watch=RepositoryGuard(repositories),
    )
    runtime = AgentRuntime(
        model=model,
        registry=registry,
        executor=approval,
        environment=ToolEnvironment(
            session_id, workspace, editor=editor, asker=asker, state={REPOSITORIES_KEY: repositories}
        ),
        options=opts,
        context=SessionContext(
            workspace.cwd, mode, sandbox, repositories=repositories, additional_roots=workspace.roots[1:]
        )
        if context
        else None,
    )
    delegates = install_delegation(runtime, subagents)
    return SessionRuntime(runtime, registry, workspace, rules, audit, approval, tuple(delegates))
