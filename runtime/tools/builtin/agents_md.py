"""`update_agents_md`: read, replace or append to the project's `AGENTS.md` at the workspace root.

Reads fall back to `.agents/AGENTS.md` when the root file does not exist; writes always go to the root file. The
file is reached through the same boundary and write path as every other file tool (an `AGENTS.md` that is a
symlink out of the workspace is outside, so it asks), writes are atomic and the result carries the diff.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from runtime.tools.base import Effect, Tool, ToolContext, ToolFailure, ToolResult, digest
from runtime.tools.builtin import textio
from runtime.workspace import Workspace

ROOT_FILE = "AGENTS.md"
FALLBACK_FILE = os.path.join(".agents", "AGENTS.md")
MAX_READ_CHARS = 100_000


class UpdateAgentsMdTool(Tool):
    name = "update_agents_md"
    kind = "edit"
    description = (
        "Read (default), replace (action=write) or append to the project's AGENTS.md at the workspace root: the "
        "standing instructions for agents working in this project. Keep it short and factual."
    )

    @staticmethod
    def _action(args: Mapping[str, Any]) -> str:
        return str(args.get("action") or "read")

    def effect(self, args: Mapping[str, Any]) -> Effect:
        return "read" if self._action(args) == "read" else "write"

    def paths(self, args: Mapping[str, Any]) -> list[tuple[str, bool]]:
        return [(ROOT_FILE, self._action(args) != "read")]

    def title(self, args: Mapping[str, Any], ws: Workspace) -> str:
        return {"read": "Read AGENTS.md", "write": "Rewrite AGENTS.md", "append": "Append to AGENTS.md"}.get(
            self._action(args), "Update AGENTS.md"
        )

    def summary(self, args: Mapping[str, Any], ws: Workspace) -> str:
        return "this change to `AGENTS.md`" if self._action(args) != "read" else "reading `AGENTS.md`"

    def rule_key(self, args: Mapping[str, Any], ws: Workspace) -> str:
        # The new content decides the effect (AGENTS.md instructs every later session): a rule binds to it.
        action = self._action(args)
        return f"update_agents_md:{action}" + (f":{digest(args.get('content'))}" if action != "read" else "")

    def _root(self, ctx: ToolContext) -> str:
        return os.path.join(ctx.workspace.cwd, ROOT_FILE)

    async def _new_text(self, args: Mapping[str, Any], ctx: ToolContext) -> tuple[textio.TextFile, str]:
        action = self._action(args)
        content = args.get("content")
        if not isinstance(content, str):
            raise ToolFailure(f"update_agents_md: action {action!r} needs content", "InvalidArguments")
        before = await textio.load(ctx, textio.resolve(ctx, self._root(ctx)), must_exist=False)
        if action == "write":
            new = content
        else:
            old = before.text or ""
            sep = "" if not old or old.endswith("\n") else "\n"
            new = old + sep + content
        if new and not new.endswith("\n"):
            new += "\n"
        return before, new

    async def preview(self, args: Mapping[str, Any], ctx: ToolContext) -> tuple[dict[str, Any], ...]:
        if self._action(args) == "read":
            return ()
        try:
            before, new = await self._new_text(args, ctx)
        except ToolFailure:
            return ()
        return (textio.diff_content(before.resolved.path, before.text, new),)

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        action = self._action(args)
        if action == "read":
            for rel in (ROOT_FILE, FALLBACK_FILE):
                f = await textio.load(ctx, textio.resolve(ctx, os.path.join(ctx.workspace.cwd, rel)), must_exist=False)
                if f.text is not None:
                    text = f.text
                    if len(text) > MAX_READ_CHARS:
                        text = text[:MAX_READ_CHARS] + f"\n[... truncated at {MAX_READ_CHARS} characters ...]\n"
                    shown = ctx.workspace.display(f.resolved.path)
                    return ToolResult(
                        f"{shown}:\n{text}" if text.strip() else f"{shown} is empty",
                        raw_output={"path": f.resolved.path, "exists": True},
                        locations=({"path": f.resolved.path},),
                    )
            return ToolResult(
                "there is no AGENTS.md in the workspace root yet (action=write creates it)",
                raw_output={"path": self._root(ctx), "exists": False},
            )
        before, new = await self._new_text(args, ctx)
        if new == before.text:
            return ToolResult(
                "AGENTS.md already has this content; nothing changed",
                raw_output={"path": before.resolved.path, "changed": False},
            )
        created = await textio.store(ctx, before, new)
        verb = "created" if created else ("appended to" if action == "append" else "rewrote")
        path = before.resolved.path
        return ToolResult(
            f"{verb} AGENTS.md ({len(new.encode('utf-8'))} bytes)",
            content=(textio.diff_content(path, before.text, new),),
            raw_output={"path": path, "action": action, "created": created},
            locations=({"path": path},),
        )
