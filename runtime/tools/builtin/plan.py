"""`update_plan`: the model's todo list, shown by the editor as the ACP agent plan.

Every call carries the complete list (ACP replaces the plan on each `plan` update, so a partial list would make
entries disappear in the editor). The tool sends a `PlanUpdated` event through the call's context; the runtime keeps
the last plan it sent (`AgentRuntime.plan`) so a session store can persist and restore it. Nothing outside the
session changes, so the call is a read as far as approval is concerned.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from runtime.events import PlanUpdated
from runtime.tools.base import Effect, Tool, ToolContext, ToolResult
from runtime.workspace import Workspace

DEFAULT_PRIORITY = "medium"


def plan_entries(args: Mapping[str, Any]) -> tuple[dict[str, Any], ...]:
    """ACP `PlanEntry` objects from validated arguments (every required field present, priority defaulted)."""
    return tuple(
        {
            "content": " ".join(str(e["content"]).split()),
            "priority": e.get("priority", DEFAULT_PRIORITY),
            "status": e["status"],
        }
        for e in args.get("entries", ())
    )


def plan_summary(entries: tuple[dict[str, Any], ...]) -> str:
    if not entries:
        return "Plan cleared."
    counts = Counter(e["status"] for e in entries)
    parts = [f"{counts[s]} {s.replace('_', ' ')}" for s in ("completed", "in_progress", "pending") if counts[s]]
    current = next((e["content"] for e in entries if e["status"] == "in_progress"), None)
    text = f"Plan updated: {len(entries)} entries ({', '.join(parts)})."
    return text + (f" Now: {current}" if current else "")


class UpdatePlanTool(Tool):
    name = "update_plan"
    kind = "think"
    read_only_hint = True
    description = (
        "Keep a short plan of the work, shown to the user as a checklist. Send the COMPLETE list every time (it "
        "replaces the previous one), with each entry's status: pending, in_progress or completed. Use it for tasks "
        "with several steps; mark a step in_progress before working on it and completed when done."
    )

    def effect(self, args: Mapping[str, Any]) -> Effect:
        return "read"

    def title(self, args: Mapping[str, Any], ws: Workspace) -> str:
        return "Update plan"

    def summary(self, args: Mapping[str, Any], ws: Workspace) -> str:
        return "plan updates"

    def rule_key(self, args: Mapping[str, Any], ws: Workspace) -> str:
        # The plan's content is not what a user approves or rejects: one rule covers every update.
        return "update_plan"

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        entries = plan_entries(args)
        if ctx.emit is not None:
            await ctx.emit(PlanUpdated(entries))
        text = plan_summary(entries)
        return ToolResult(text, content=({"type": "content", "content": {"type": "text", "text": text}},))
