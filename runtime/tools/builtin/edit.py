"""`edit`: replace an exact string in one file, once (unique match) or everywhere (`replaceAll`).

The match is exact; when the file uses CRLF line endings and the model wrote LF, the strings are matched and written
in the file's own style, so the file keeps its line endings. Errors say what to do next: how many matches were found
and that more surrounding context makes the match unique. The write is atomic (or goes through the editor after a
compare-before-write check) and the result carries the diff.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runtime.tools.base import Tool, ToolContext, ToolFailure, ToolResult, display_path
from runtime.tools.builtin import textio
from runtime.workspace import PathError, Workspace


@dataclass(frozen=True, slots=True)
class Replacement:
    new_text: str
    count: int
    first_line: int


def replace_exact(text: str, old: str, new: str, replace_all: bool, shown: str) -> Replacement:
    """Compute the edited text, or raise a `ToolFailure` the model can act on."""
    if old == new:
        raise ToolFailure("old_string and new_string are identical; nothing to change", "NoChange")
    if old not in text and "\r\n" in text and "\n" in old and "\r\n" not in old:
        old, new = old.replace("\n", "\r\n"), new.replace("\n", "\r\n")
    count = text.count(old)
    if count == 0:
        hint = ""
        stripped = old.strip()
        if stripped and stripped in text:
            hint = " (it does occur with different leading/trailing whitespace; copy the exact text from read_file)"
        raise ToolFailure(
            f"old_string was not found in {shown}{hint}; read the file and copy the exact text, including indentation",
            "NoMatch",
        )
    if count > 1 and not replace_all:
        raise ToolFailure(
            f"old_string is not unique in {shown}: found {count} occurrences. Include more "
            "surrounding lines to make it unique, or set replaceAll to true to change every one",
            "AmbiguousMatch",
        )
    first_line = text[: text.index(old)].count("\n") + 1
    new_text = text.replace(old, new) if replace_all else text.replace(old, new, 1)
    return Replacement(new_text, count if replace_all else 1, first_line)


class EditTool(Tool):
    name = "edit"
    kind = "edit"
    path_effect = "write"
    description = (
        "Replace exact text in a file. old_string must match the file exactly (including indentation) and be unique, "
        "unless replaceAll is true. Read the file first. For several changes or new files prefer apply_patch."
    )

    def title(self, args: Mapping[str, Any], ws: Workspace) -> str:
        p = args.get("path")
        return f"Edit {display_path(ws, p)}" if isinstance(p, str) else "Edit file"

    def summary(self, args: Mapping[str, Any], ws: Workspace) -> str:
        return f"this edit to `{display_path(ws, str(args.get('path', '')))}`"

    async def _compute(
        self, args: Mapping[str, Any], ctx: ToolContext, last_use: bool = False
    ) -> tuple[textio.TextFile, Replacement]:
        resolved = textio.resolve(ctx, args["path"])
        before = await textio.load(ctx, resolved, last_use=last_use)
        assert before.text is not None
        textio.check_fresh(ctx, before)
        shown = ctx.workspace.display(resolved.path)
        rep = replace_exact(before.text, args["old_string"], args["new_string"], bool(args.get("replaceAll")), shown)
        return before, rep

    async def precheck(self, args: Mapping[str, Any], ctx: ToolContext) -> None:
        # Only a file that changed since the model read it is refused before the question; anything else (a path
        # outside the workspace, not approved yet; no match) is for the preview and the run to report.
        if not isinstance(args.get("path"), str):
            return
        try:
            before = await textio.load(ctx, textio.resolve(ctx, args["path"]))
        except (ToolFailure, PathError):
            return
        textio.check_fresh(ctx, before)

    async def preview(self, args: Mapping[str, Any], ctx: ToolContext) -> tuple[dict[str, Any], ...]:
        if not all(isinstance(args.get(k), str) for k in ("path", "old_string", "new_string")):
            return ()
        try:
            # A path outside the workspace is not read before it is approved: no diff is shown for it then.
            before, rep = await self._compute(args, ctx)
        except (ToolFailure, PathError):
            return ()
        return (textio.diff_content(before.resolved.path, before.text, rep.new_text),)

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        before, rep = await self._compute(args, ctx, last_use=True)
        await textio.store(ctx, before, rep.new_text)
        path = before.resolved.path
        shown = ctx.workspace.display(path)
        noun = "occurrence" if rep.count == 1 else "occurrences"
        output = (
            f"edited {shown}: replaced {rep.count} {noun} (first at line {rep.first_line})\n"
            + textio.unified_diff(shown, before.text, rep.new_text)
        )
        raw = {"path": path, "replacements": rep.count, "line": rep.first_line}
        return ToolResult(
            output,
            content=(textio.diff_content(path, before.text, rep.new_text),),
            raw_output=raw,
            locations=({"path": path, "line": rep.first_line},),
        )
