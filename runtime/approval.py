"""How the runtime describes a tool call to the approval layer (`permissions.ToolApprovalDecorator`).

This is where workspace facts are gathered: every path a call touches is resolved through the workspace boundary
and classified, so the pure policy can decide without doing I/O.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from types import ModuleType
from typing import Any

import runtime.sandbox
from permissions.decorator import ApprovalSubject
from permissions.policy import CallFacts, PathFact
from runtime.secret_files import secret_reason
from runtime.tools.base import ToolCall, ToolContext, ToolRegistry, clear_call_scratch, visible
from runtime.workspace import PathError


def make_describer(registry: ToolRegistry) -> Callable[[ToolCall, ToolContext], Awaitable[ApprovalSubject]]:
    async def describe(call: ToolCall, ctx: ToolContext) -> ApprovalSubject:
        tool = registry.get(call.name)
        if tool is None:  # the executor refuses it anyway; ask rather than allow
            facts = CallFacts(call.name, "other", f"{call.name}:{call.raw_arguments}")
            return ApprovalSubject(facts, call.name, "other", call.arguments, f"`{call.name}`", call_id=call.id)
        ws = ctx.workspace
        path_facts: list[PathFact] = []
        held: list[str] = []  # files that may hold secrets: the call asks in every mode
        confined = tool.sandboxed and _sandbox().support().active
        for p, writes in tool.paths(call.arguments):
            try:
                r = ws.resolve(p)
            except PathError:
                continue  # the tool reports the bad path itself
            why = secret_reason(p, r.path, ws.display(r.path))
            if why is not None and why not in held:
                held.append(why)
            if confined and not writes and r.klass == "outside" and _sandbox().baseline_readable(r.path):
                continue  # the sandbox lets every command read it (`/usr/include`): nothing to approve
            path_facts.append(PathFact(r.path, r.klass, writes))
        held += [why for why in tool.unnamed_reads(call.arguments, ws) if why not in held]
        proven_read_only, dangerous = tool.analyse(call.arguments, ws)
        key = tool.rule_key(call.arguments, ws)
        hosts = _sandbox().network_hosts()
        unheld = _sandbox().network_unheld() if hosts is not None and tool.starts_process(call.arguments) else ""
        facts = CallFacts(
            tool=call.name,
            effect=tool.effect(call.arguments),
            rule_key=key,
            paths=tuple(path_facts),
            read_only_hint=tool.read_only_hint,
            proven_read_only=proven_read_only,
            dangerous=dangerous,
            portable_key=portable_key(key, ws.cwd),
            root=ws.cwd,
            secrets=tuple(held),
            network_hosts=hosts,
            network_unheld=unheld,
        )
        # A fresh description reads afresh: what the question shows is the file as it is now.
        clear_call_scratch(ctx.state, ctx.call_id)
        await tool.precheck(call.arguments, ctx)
        content = await tool.preview(call.arguments, ctx)
        # ACP's question carries no reason: the editor shows the call's content, so the reasons go there.
        if unheld and not proven_read_only:
            content = (_notice(f"This command gets the network, and {unheld}. Allow it if you trust it."), *content)
        if held:
            content = (_secret_notice(held), *content)
        return ApprovalSubject(
            facts=facts,
            # Model-made text: what a terminal or an editor would not show as itself is written as an escape.
            title=visible(tool.title(call.arguments, ws)),
            kind=tool.kind_for(call.arguments),
            raw_input=call.arguments,
            summary=visible(tool.summary(call.arguments, ws)),
            content=content,
            locations=tuple(tool.locations(call.arguments, ws)),
            call_id=call.id,
        )

    return describe


def _secret_notice(held: list[str]) -> dict[str, Any]:
    return _notice(
        f"{'; '.join(held)}. Once the model has read a secret, no redaction can follow it through a transform "
        "(tr, base64, pieces), so this asks in every mode."
    )


def _notice(text: str) -> dict[str, Any]:
    return {"type": "content", "content": {"type": "text", "text": visible(text)}}


def _sandbox() -> ModuleType:
    return runtime.sandbox


WORKSPACE_PLACEHOLDER = "<workspace>"


def portable_key(rule_key: str, root: str) -> str:
    """The rule key with the workspace root replaced by a placeholder, by path components (what an "everywhere"
    rule binds to: `npm test` at the root of any project, not in one directory)."""
    return re.sub(re.escape(root) + r"(?=/|:|\s|$)", WORKSPACE_PLACEHOLDER, rule_key)
