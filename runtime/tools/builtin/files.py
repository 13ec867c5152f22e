"""`read_file` and `write_file`: file access through the workspace boundary.

Reads stream the file line by line (no whole-file load), number the lines, refuse binary files and survive
non-UTF-8 bytes. Writes are atomic (see `runtime.workspace`) and show the editor a diff before and after.
"""

from __future__ import annotations

import codecs
import os
from collections.abc import Mapping
from typing import Any, BinaryIO

import anyio

from runtime.tools.base import Tool, ToolContext, ToolFailure, ToolResult, display_path
from runtime.tools.builtin import textio
from runtime.tools.builtin.paging import Page
from runtime.workspace import PathError, ResolvedPath, Workspace

DEFAULT_MAX_CHARS = 50_000
BINARY_SNIFF = 8192
MAX_DIFF_BYTES = 2 * 1024 * 1024
READ_PIECE = 64 * 1024  # bytes of a line read at once: a megabyte-long line is never held whole
_utf8 = codecs.getincrementaldecoder("utf-8")


def _resolve(ctx: ToolContext, path: str) -> ResolvedPath:
    try:
        return ctx.workspace.resolve(path)
    except PathError as exc:
        raise ToolFailure(str(exc), exc.error_type) from None


def read_text_for_diff(ws: Workspace, resolved: ResolvedPath, grants: frozenset[str]) -> str | None:
    """The current text of a file for a diff, or None when it does not exist (or is not text)."""
    if not os.path.lexists(resolved.path) or not os.path.isfile(resolved.path):
        return None
    try:
        data = ws.read_bytes(resolved, grants | {resolved.path}, limit=MAX_DIFF_BYTES + 1)
    except (PathError, OSError):
        return None
    if len(data) > MAX_DIFF_BYTES or b"\x00" in data[:BINARY_SNIFF]:
        return None
    return data.decode("utf-8", errors="replace")


class ReadFileTool(Tool):
    name = "read_file"
    kind = "read"
    path_effect = "read"
    description = (
        "Read a text file. Output lines are prefixed with their 1-based line number and a tab. Use startLine/endLine "
        "to read part of a large file; output is capped at maxChars characters (default 50000). A line longer than "
        "that is shown in pieces: the note at the end names the next call (startLine and startColumn) exactly."
    )

    def title(self, args: Mapping[str, Any], ws: Workspace) -> str:
        p = args.get("path")
        if not isinstance(p, str):
            return "Read file"
        rng = ""
        if isinstance(args.get("startColumn"), int) and args["startColumn"] > 1:
            rng = f" (line {args.get('startLine', 1)} from column {args['startColumn']})"
        elif args.get("startLine") or args.get("endLine"):
            rng = f" (lines {args.get('startLine', 1)}–{args.get('endLine', 'end')})"
        return f"Read {display_path(ws, p)}{rng}"

    def summary(self, args: Mapping[str, Any], ws: Workspace) -> str:
        return f"reading `{display_path(ws, str(args.get('path', '')))}`"

    def locations(self, args: Mapping[str, Any], ws: Workspace) -> list[dict[str, Any]]:
        locs = super().locations(args, ws)
        if locs and isinstance(args.get("startLine"), int):
            locs[0]["line"] = args["startLine"]
        return locs

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        resolved = _resolve(ctx, args["path"])
        start = int(args.get("startLine") or 1)
        end = args.get("endLine")
        if end is not None and end < start:
            raise ToolFailure(f"endLine ({end}) is before startLine ({start})", "InvalidArguments")
        page = Page(start, int(args.get("startColumn") or 1), int(args.get("maxChars") or DEFAULT_MAX_CHARS), args)
        if textio.editor_reads(ctx):
            return await self._read_via_editor(ctx, resolved, end, page)
        return await anyio.to_thread.run_sync(self._read, ctx, resolved, end, page)

    async def _read_via_editor(
        self, ctx: ToolContext, resolved: ResolvedPath, end: int | None, page: Page
    ) -> ToolResult:
        """`fs/read_text_file` (the editor's view, unsaved changes included) after the same boundary check."""
        shown = ctx.workspace.display(resolved.path)
        start = page.start
        # One stat, like the workspace boundary's own (synchronous) resolution of this path: cheaper than a thread.
        if os.path.isdir(resolved.path):  # noqa: ASYNC240
            textio.check(ctx, resolved)
            raise ToolFailure(f"{shown} is a directory", "IsADirectory")
        limit = None if end is None else end - start + 1
        text = await textio.read_lines_via_editor(ctx, resolved, start, limit)
        if text is None:
            raise ToolFailure(f"{shown} does not exist", "FileNotFound")
        if start == 1 and limit is None:
            textio.saw_text(ctx, resolved.path, text)
        else:
            textio.saw_lines(ctx, resolved.path, start, limit, text)
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        if end is not None:
            lines = lines[: end - start + 1]
        for i, line in enumerate(lines):
            if not page.feed(start + i, line.rstrip("\r"), True):
                break
        page.end_of_file()
        if not page.rows and not page.notes:
            page.notes.append(f"[{shown} is empty]" if start == 1 else f"[{shown} has no lines from line {start}]")
        raw_output = _raw_output(resolved.path, page) | {"via": "editor"}
        return ToolResult(page.text(), raw_output=raw_output, locations=({"path": resolved.path, "line": start},))

    def _read(self, ctx: ToolContext, resolved: ResolvedPath, end: int | None, page: Page) -> ToolResult:
        try:
            fd = ctx.workspace.open_read(resolved, ctx.grants)
        except PathError as exc:
            raise ToolFailure(str(exc), exc.error_type) from None
        shown = ctx.workspace.display(resolved.path)
        start = page.start
        with os.fdopen(fd, "rb") as f:
            textio.saw_disk(ctx, resolved.path, textio.stamp_of(os.fstat(f.fileno())))
            head = f.read(BINARY_SNIFF)
            if b"\x00" in head:
                size = os.fstat(f.fileno()).st_size
                raise ToolFailure(f"{shown} looks like a binary file ({size} bytes); not shown", "BinaryFile")
            f.seek(0)
            lines, bad_utf8, reached_end = _feed_from_disk(f, end, page)
        if lines < start and start > 1:
            page.notes.append(f"[{shown} has only {lines} lines; nothing to show from line {start}]")
        if bad_utf8:
            page.notes.append("[the file is not valid UTF-8; undecodable bytes are shown as U+FFFD]")
        if not page.rows and not page.notes:
            page.notes.append(f"[{shown} is empty]")
        raw_output = _raw_output(resolved.path, page) | {"complete": not page.truncated and reached_end}
        return ToolResult(page.text(), raw_output=raw_output, locations=({"path": resolved.path, "line": start},))


def _feed_from_disk(f: BinaryIO, end: int | None, page: Page) -> tuple[int, bool, bool]:
    """Feed `page` the file's lines from `page.start` (to `end`) in pieces of at most `READ_PIECE` bytes, so that no
    line is ever held whole. Returns the lines seen, whether some bytes were not UTF-8, and whether the read got to
    the end of the file (or of `end`) rather than stopping because the page was full."""
    lines, bad_utf8, in_line = 0, False, False  # in_line: a piece of line `lines + 1` was read, not yet its end
    decoder = _utf8(errors="replace")
    reached_end = True
    while True:
        raw = f.readline(READ_PIECE)
        if not raw:
            break
        ends = raw.endswith(b"\n")
        current = lines + 1
        lines, in_line = (current, False) if ends else (lines, True)
        if current < page.start:
            continue
        if end is not None and current > end:
            in_line = False
            break
        text = decoder.decode(raw[:-1] if ends else raw, final=ends)
        if ends:
            decoder.reset()
            text = text.removesuffix("\r")
        if text.count("\ufffd") > raw.count(b"\xef\xbf\xbd"):
            bad_utf8 = True
        if not page.feed(current, text, ends):
            reached_end, in_line = False, False
            break
    if in_line:  # the last line has no line break
        lines += 1
        if lines >= page.start:
            page.feed(lines, decoder.decode(b"", final=True), False)
    page.end_of_file()
    return lines, bad_utf8, reached_end


def _raw_output(path: str, page: Page) -> dict[str, Any]:
    out: dict[str, Any] = {
        "path": path,
        "startLine": page.start,
        "endLine": page.last_line,
        "truncated": page.truncated,
    }
    if page.start_column > 1:
        out["startColumn"] = page.start_column
    if page.next_call is not None:
        out["next"] = page.next_call
    return out


class WriteFileTool(Tool):
    name = "write_file"
    kind = "edit"
    path_effect = "write"
    description = (
        "Write a text file atomically. mode: overwrite (default) replaces the file, create fails if it exists, append "
        "adds to the end. Parent directories are created."
    )

    def title(self, args: Mapping[str, Any], ws: Workspace) -> str:
        p = args.get("path")
        if not isinstance(p, str):
            return "Write file"
        verb = {"create": "Create", "append": "Append to"}.get(str(args.get("mode")), "Write")
        return f"{verb} {display_path(ws, p)}"

    def summary(self, args: Mapping[str, Any], ws: Workspace) -> str:
        return f"writing this content to `{display_path(ws, str(args.get('path', '')))}`"

    async def preview(self, args: Mapping[str, Any], ctx: ToolContext) -> tuple[dict[str, Any], ...]:
        p, content = args.get("path"), args.get("content")
        if not isinstance(p, str) or not isinstance(content, str):
            return ()
        try:
            resolved = ctx.workspace.resolve(p)
        except PathError:
            return ()
        old = await anyio.to_thread.run_sync(read_text_for_diff, ctx.workspace, resolved, ctx.grants)
        new = (old or "") + content if args.get("mode") == "append" else content
        return ({"type": "diff", "path": resolved.path, "oldText": old, "newText": new},)

    async def precheck(self, args: Mapping[str, Any], ctx: ToolContext) -> None:
        # An overwrite of a file the model never read, or that changed since it did, is refused before the
        # question; a boundary problem is for the run to report (after approval, with its grants).
        if not isinstance(args.get("path"), str) or args.get("mode") in ("append", "create"):
            return
        try:
            resolved = ctx.workspace.resolve(args["path"])
            ctx.workspace.check(resolved, ctx.grants)
            if textio.editor_reads(ctx):
                textio.check_fresh(ctx, await textio.load(ctx, resolved, must_exist=False), must_have_read=True)
                return
            textio.check_fresh_on_disk(ctx, resolved, must_have_read=True)
        except (PathError, OSError):
            return
        except ToolFailure as exc:
            if exc.error_type in ("FileChanged", "NotRead"):
                raise

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        resolved = _resolve(ctx, args["path"])
        mode = args.get("mode") or "overwrite"
        content: str = args["content"]
        if textio.editor_writes(ctx):
            return await self._write_via_editor(ctx, resolved, mode, content)
        return await anyio.to_thread.run_sync(self._write, ctx, resolved, mode, content)

    async def _write_via_editor(self, ctx: ToolContext, resolved: ResolvedPath, mode: str, content: str) -> ToolResult:
        """`fs/write_text_file`, so the editor sees (and can review) the change; same boundary, same diff."""
        shown = ctx.workspace.display(resolved.path)
        before = await textio.load(ctx, resolved, must_exist=False, last_use=True)
        if mode == "create" and before.text is not None:
            raise ToolFailure(f"{resolved.path} already exists", "FileExists")
        if mode == "overwrite":
            textio.check_fresh(ctx, before, must_have_read=True)
        new_text = (before.text or "") + content if mode == "append" else content
        created = await textio.store(
            ctx,
            before,
            new_text,
            exclusive=(mode == "create"),
            seen=mode != "append" or textio.knows(ctx, resolved.path),
        )
        verb = "created" if created else ("appended to" if mode == "append" else "overwrote")
        n = len(content.encode("utf-8"))
        raw = {"path": resolved.path, "mode": mode, "created": created, "bytesWritten": n, "via": "editor"}
        return ToolResult(
            f"{verb} {shown} ({n} bytes written)",
            content=(textio.diff_content(resolved.path, before.text, new_text),),
            raw_output=raw,
            locations=({"path": resolved.path},),
        )

    def _write(self, ctx: ToolContext, resolved: ResolvedPath, mode: str, content: str) -> ToolResult:
        ws = ctx.workspace
        shown = ws.display(resolved.path)
        try:
            ws.check(resolved, ctx.grants)
            if mode == "overwrite":
                textio.check_fresh_on_disk(ctx, resolved, must_have_read=True)
            old = read_text_for_diff(ws, resolved, ctx.grants) if mode != "create" else None
            if os.path.isdir(resolved.path):
                raise ToolFailure(f"{shown} is a directory", "IsADirectory")
            if mode == "append" and os.path.exists(resolved.path):
                prior = ws.read_bytes(resolved, ctx.grants)
                data = prior + content.encode("utf-8")
                created = ws.write_atomic(resolved, data, grants=ctx.grants)
                new_text = (old + content) if old is not None else None
            else:
                data = content.encode("utf-8")
                created = ws.write_atomic(resolved, data, grants=ctx.grants, exclusive=(mode == "create"))
                new_text = content
        except PathError as exc:
            raise ToolFailure(str(exc), exc.error_type) from None
        except OSError as exc:
            raise ToolFailure(
                f"could not write {shown}: {exc.strerror or exc}; the old file is unchanged", "WriteFailed"
            ) from None
        # The model knows what it wrote (after an append, only if it knew the file before).
        textio.saw_written(ctx, resolved, new_text, seen=mode != "append" or textio.knows(ctx, resolved.path))
        verb = "created" if created else ("appended to" if mode == "append" else "overwrote")
        output = f"{verb} {shown} ({len(content.encode('utf-8'))} bytes written)"
        diff: tuple[dict[str, Any], ...] = ()
        if new_text is not None:
            diff = ({"type": "diff", "path": resolved.path, "oldText": old, "newText": new_text},)
        raw = {"path": resolved.path, "mode": mode, "created": created, "bytesWritten": len(content.encode("utf-8"))}
        return ToolResult(output, content=diff, raw_output=raw, locations=({"path": resolved.path},))
