"""Whole-text file access for the editing tools: through the editor when it advertised `fs`, else the disk.

Every path is resolved and checked by the workspace boundary first; the editor only ever sees absolute, checked
paths. A change is written only if the file still holds the text the change was computed from (compare before
write), so an edit never clobbers what the user or another tool changed in between: the model is told to re-read.
Disk text is decoded with `surrogateescape`, so bytes that are not UTF-8 survive an edit untouched.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import anyio

from runtime.tools.base import ToolContext, ToolFailure
from runtime.workspace import PathError, ResolvedPath

MAX_EDIT_BYTES = 10 * 1024 * 1024
BINARY_SNIFF = 8192


class EditorError(Exception):
    """The editor answered an `fs/*` or `terminal/*` request with an error (or the connection closed)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True, slots=True)
class TextFile:
    """A file's text as a change was based on it. `text` is None when the file did not exist."""

    resolved: ResolvedPath
    text: str | None
    via_editor: bool
    mode: int | None = None  # permission bits on disk, to carry over a move


def resolve(ctx: ToolContext, path: str) -> ResolvedPath:
    try:
        return ctx.workspace.resolve(path)
    except PathError as exc:
        raise ToolFailure(str(exc), exc.error_type) from None


def check(ctx: ToolContext, resolved: ResolvedPath) -> None:
    try:
        ctx.workspace.check(resolved, ctx.grants)
    except PathError as exc:
        raise ToolFailure(str(exc), exc.error_type) from None


def editor_reads(ctx: ToolContext) -> bool:
    return ctx.editor is not None and bool(getattr(ctx.editor, "can_read", False))


def editor_writes(ctx: ToolContext) -> bool:
    return ctx.editor is not None and bool(getattr(ctx.editor, "can_write", False))


def _disk_read(ctx: ToolContext, resolved: ResolvedPath) -> tuple[str | None, int | None]:
    ws = ctx.workspace
    shown = ws.display(resolved.path)
    if not os.path.lexists(resolved.path):
        return None, None
    try:
        fd = ws.open_read(resolved, ctx.grants)
    except PathError as exc:
        raise ToolFailure(str(exc), exc.error_type) from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if st.st_size > MAX_EDIT_BYTES:
            raise ToolFailure(f"{shown} is {st.st_size} bytes, too large to edit (limit {MAX_EDIT_BYTES})",
                              "FileTooLarge")
        data = f.read(MAX_EDIT_BYTES + 1)
    if b"\x00" in data[:BINARY_SNIFF]:
        raise ToolFailure(f"{shown} looks like a binary file; it cannot be edited as text", "BinaryFile")
    return data.decode("utf-8", errors="surrogateescape"), st.st_mode & 0o7777


def _verify_no_follow(ctx: ToolContext, resolved: ResolvedPath) -> bool:
    """Open the file the no-follow way (then close it) so the editor is never sent through a swapped symlink."""
    if not os.path.lexists(resolved.path):
        return False
    try:
        os.close(ctx.workspace.open_read(resolved, ctx.grants))
    except PathError as exc:
        raise ToolFailure(str(exc), exc.error_type) from None
    return True


async def _editor_read(ctx: ToolContext, resolved: ResolvedPath, line: int | None = None,
                       limit: int | None = None) -> str:
    assert ctx.editor is not None
    try:
        return await ctx.editor.read_text_file(resolved.path, line, limit)
    except EditorError as exc:
        raise ToolFailure(f"the editor could not read {ctx.workspace.display(resolved.path)}: {exc.message}",
                          "EditorError") from None


async def read_lines_via_editor(ctx: ToolContext, resolved: ResolvedPath, line: int | None,
                                limit: int | None) -> str | None:
    """`fs/read_text_file` after the boundary check; None when the file does not exist on disk."""
    check(ctx, resolved)
    exists = await anyio.to_thread.run_sync(_verify_no_follow, ctx, resolved)
    if not exists:
        return None
    return await _editor_read(ctx, resolved, line, limit)


async def load(ctx: ToolContext, resolved: ResolvedPath, *, must_exist: bool = True) -> TextFile:
    """The current text of a file (None when missing and `must_exist` is False)."""
    check(ctx, resolved)
    shown = ctx.workspace.display(resolved.path)
    if os.path.isdir(resolved.path):
        raise ToolFailure(f"{shown} is a directory", "IsADirectory")
    if editor_reads(ctx):
        exists = await anyio.to_thread.run_sync(_verify_no_follow, ctx, resolved)
        text = await _editor_read(ctx, resolved) if exists else None
        mode = None
        via_editor = True
    else:
        text, mode = await anyio.to_thread.run_sync(_disk_read, ctx, resolved)
        via_editor = False
    if text is None and must_exist:
        raise ToolFailure(f"{shown} does not exist", "FileNotFound")
    return TextFile(resolved, text, via_editor, mode)


async def current_text(ctx: ToolContext, before: TextFile) -> str | None:
    """Read the file again through the same channel as `before`."""
    if before.via_editor:
        exists = await anyio.to_thread.run_sync(_verify_no_follow, ctx, before.resolved)
        return await _editor_read(ctx, before.resolved) if exists else None
    text, _ = await anyio.to_thread.run_sync(_disk_read, ctx, before.resolved)
    return text


async def store(ctx: ToolContext, before: TextFile, new_text: str, *, exclusive: bool = False,
                mode: int | None = None, verify: bool = True) -> bool:
    """Write `new_text` if the file still holds `before.text`. Returns True when the file was created.

    `verify=False` skips the compare (only for rolling back a change this call itself just made).

    Raises:
        ToolFailure: `FileChanged` when the file changed since it was read; boundary and disk errors.
    """
    resolved = before.resolved
    shown = ctx.workspace.display(resolved.path)
    check(ctx, resolved)
    now = await current_text(ctx, before) if verify else before.text
    if now != before.text:
        if exclusive and now is not None:
            raise ToolFailure(f"{shown} already exists", "FileExists")
        what = "was created" if before.text is None else ("was deleted" if now is None else "changed")
        raise ToolFailure(f"{shown} {what} since it was read (by the user or another tool); read it again and "
                          "redo the change on the current content", "FileChanged")
    if editor_writes(ctx):
        assert ctx.editor is not None
        try:
            await anyio.to_thread.run_sync(ctx.workspace.ensure_parent, resolved, ctx.grants)
            await ctx.editor.write_text_file(resolved.path, new_text)
        except PathError as exc:
            raise ToolFailure(str(exc), exc.error_type) from None
        except EditorError as exc:
            raise ToolFailure(f"the editor could not write {shown}: {exc.message}", "EditorError") from None
        return before.text is None
    data = new_text.encode("utf-8", errors="surrogateescape")
    try:
        return await anyio.to_thread.run_sync(
            lambda: ctx.workspace.write_atomic(resolved, data, grants=ctx.grants, exclusive=exclusive, mode=mode))
    except PathError as exc:
        raise ToolFailure(str(exc), exc.error_type) from None
    except OSError as exc:
        raise ToolFailure(f"could not write {shown}: {exc.strerror or exc}; the old file is unchanged",
                          "WriteFailed") from None


async def remove(ctx: ToolContext, before: TextFile, *, verify: bool = True) -> None:
    """Delete a file (always on disk: ACP has no delete) if it still holds `before.text`."""
    shown = ctx.workspace.display(before.resolved.path)
    now = await current_text(ctx, before) if verify else before.text
    if now != before.text:
        raise ToolFailure(f"{shown} changed since it was read; read it again and redo the change", "FileChanged")
    try:
        await anyio.to_thread.run_sync(ctx.workspace.delete, before.resolved, ctx.grants)
    except PathError as exc:
        raise ToolFailure(str(exc), exc.error_type) from None
    except OSError as exc:
        raise ToolFailure(f"could not delete {shown}: {exc.strerror or exc}", "WriteFailed") from None


def diff_content(path: str, old: str | None, new: str) -> dict[str, object]:
    return {"type": "diff", "path": path, "oldText": old, "newText": new}


def unified_diff(path: str, old: str | None, new: str | None, context: int = 3, limit: int = 20_000) -> str:
    """A unified diff for the model's output (so it sees what changed), capped."""
    import difflib

    a = (old or "").splitlines(keepends=True)
    b = (new or "").splitlines(keepends=True)
    lines = difflib.unified_diff(a, b, f"a/{path}" if old is not None else "/dev/null",
                                 f"b/{path}" if new is not None else "/dev/null", n=context)
    out = "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)
    if len(out) > limit:
        out = out[:limit] + f"\n[... diff truncated at {limit} characters ...]\n"
    return out
