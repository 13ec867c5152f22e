"""Whole-text file access for the editing tools: through the editor when it advertised `fs`, else the disk.

Every path is resolved and checked by the workspace boundary first; the editor only ever sees absolute, checked
paths. A change is written only if the file still holds the text the change was computed from (compare before
write), so an edit never clobbers what the user or another tool changed in between: the model is told to re-read.
Disk text is decoded with `surrogateescape`, so bytes that are not UTF-8 survive an edit untouched.

What the model has seen of each file in this session is kept in the tool state (`Seen`: a digest of the editor's
text, or the disk's identity, size and mtime): a write over a file that changed since the model last read or wrote it
is refused with `FileChanged`, and `write_file` does not overwrite an existing file the model never read
(`NotRead`). `edit` and `apply_patch` match the text they change, so they need no earlier read, only a fresh one.

One call reads a file through the editor once: what the approval preview read is kept for the call (the call
scratch, cleared at each new description) and reused by the run, and the write after it is not preceded by another
`fs/read_text_file` unless this session wrote the file in between.
"""

from __future__ import annotations

import difflib
import hashlib
import os
from dataclasses import dataclass

import anyio

from runtime.tools.base import ToolContext, ToolFailure, call_scratch
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
    stat: DiskStamp | None = None  # the disk file's identity when it was read (disk channel)
    writes: int = 0  # how many times this session had written the file when it was read


DiskStamp = tuple[int, int, int, int]  # (device, inode, size, mtime in ns)

SEEN_KEY = "files_seen"
WRITES_KEY = "files_written"


@dataclass(frozen=True, slots=True)
class Seen:
    """What the model last saw of one file: the digest of the editor's whole text, or of the lines it read (a range
    read through the editor), or the disk file's stamp (disk channel)."""

    digest: str | None = None
    lines: tuple[int, int | None, str] | None = None  # (first line, line count or None for the rest, digest)
    stamp: DiskStamp | None = None


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", errors="surrogateescape"), digest_size=16).hexdigest()


def _norm_lines(text: str) -> list[str]:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [ln.rstrip("\r") for ln in lines]


def _lines_digest(lines: list[str]) -> str:
    return _digest("\n".join(lines))


def stamp_of(st: os.stat_result) -> DiskStamp:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def disk_stamp(path: str) -> DiskStamp | None:
    try:
        return stamp_of(os.stat(path))
    except OSError:
        return None


def _seen(ctx: ToolContext) -> dict[str, Seen]:
    seen: dict[str, Seen] = ctx.state.setdefault(SEEN_KEY, {})
    return seen


def _writes(ctx: ToolContext, path: str) -> int:
    writes: dict[str, int] = ctx.state.get(WRITES_KEY, {})
    return writes.get(path, 0)


def saw_text(ctx: ToolContext, path: str, text: str) -> None:
    """The model now knows the whole text of `path` as the editor has it (it read it, or wrote it)."""
    _seen(ctx)[path] = Seen(digest=_digest(text))


def saw_lines(ctx: ToolContext, path: str, start: int, limit: int | None, text: str) -> None:
    """The model read `limit` lines (None: to the end) from line `start` through the editor. Those lines are kept
    by digest; the rest of the file by the disk stamp (a command that rewrote it shows there)."""
    lines = _norm_lines(text)
    if limit is not None:
        lines = lines[:limit]
    _seen(ctx)[path] = Seen(lines=(start, limit, _lines_digest(lines)), stamp=disk_stamp(path))


def saw_disk(ctx: ToolContext, path: str, stamp: DiskStamp | None) -> None:
    """The model read or wrote `path` on disk; the stamp is the file's as it was then."""
    if stamp is None:
        _seen(ctx).pop(path, None)
    else:
        _seen(ctx)[path] = Seen(stamp=stamp)


def knows(ctx: ToolContext, path: str) -> bool:
    """Whether the model read or wrote `path` in this session."""
    return path in _seen(ctx)


def saw_written(
    ctx: ToolContext, resolved: ResolvedPath, text: str | None, *, deleted: bool = False, seen: bool = True
) -> None:
    """After this session wrote `text` to a file (or deleted it): the model knows what is there now (unless `seen`
    is False: an append to a file it never read), and what calls kept of the file is stale."""
    path = resolved.path
    counts: dict[str, int] = ctx.state.setdefault(WRITES_KEY, {})
    counts[path] = counts.get(path, 0) + 1
    if deleted or not seen:
        _seen(ctx).pop(path, None)
    elif editor_reads(ctx):
        if text is not None:
            saw_text(ctx, path, text)
    else:
        saw_disk(ctx, path, disk_stamp(path))


def _changed(seen: Seen, now: TextFile) -> bool:
    if seen.digest is not None:
        return now.text is None or _digest(now.text) != seen.digest
    if seen.lines is not None:
        if now.text is None:
            return True
        start, limit, digest = seen.lines
        lines = _norm_lines(now.text)[start - 1 :]
        if _lines_digest(lines if limit is None else lines[:limit]) != digest:
            return True
        return seen.stamp is not None and disk_stamp(now.resolved.path) != seen.stamp
    return now.stat != seen.stamp


def check_fresh(ctx: ToolContext, now: TextFile, *, must_have_read: bool = False) -> None:
    """Refuse a write over a file that changed since the model last read (or wrote) it in this session, and, with
    `must_have_read`, over an existing file it never read. A file that does not exist (any more) may be created.

    Raises:
        ToolFailure: `FileChanged` or `NotRead`, telling the model to read the file first.
    """
    if now.text is None and now.stat is None:
        return
    path = now.resolved.path
    shown = ctx.workspace.display(path)
    seen = _seen(ctx).get(path)
    if seen is None:
        if must_have_read:
            raise ToolFailure(
                f"{shown} exists and you have not read it in this session: read it with read_file "
                "first (or change part of it with edit or apply_patch), so that overwriting it loses "
                "nothing you have not seen",
                "NotRead",
            )
        return
    if _changed(seen, now):
        raise ToolFailure(
            f"{shown} changed since you last read it (the user or a command changed it): read it "
            "again with read_file and redo the change on its current content",
            "FileChanged",
        )


def check_fresh_on_disk(ctx: ToolContext, resolved: ResolvedPath, *, must_have_read: bool = False) -> None:
    """`check_fresh` for a write that does not read the file first (write_file on disk), by the disk stamp. The
    stamp comes from a no-follow open through the boundary, so a path swapped under us fails as such (PathError)."""
    stamp = None
    if os.path.lexists(resolved.path) and not os.path.isdir(resolved.path):
        fd = ctx.workspace.open_read(resolved, ctx.grants)
        try:
            stamp = stamp_of(os.fstat(fd))
        finally:
            os.close(fd)
    check_fresh(ctx, TextFile(resolved, None, False, stat=stamp), must_have_read=must_have_read)


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


def _disk_read(ctx: ToolContext, resolved: ResolvedPath) -> tuple[str | None, int | None, DiskStamp | None]:
    ws = ctx.workspace
    shown = ws.display(resolved.path)
    if not os.path.lexists(resolved.path):
        return None, None, None
    try:
        fd = ws.open_read(resolved, ctx.grants)
    except PathError as exc:
        raise ToolFailure(str(exc), exc.error_type) from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if st.st_size > MAX_EDIT_BYTES:
            raise ToolFailure(
                f"{shown} is {st.st_size} bytes, too large to edit (limit {MAX_EDIT_BYTES})", "FileTooLarge"
            )
        data = f.read(MAX_EDIT_BYTES + 1)
    if b"\x00" in data[:BINARY_SNIFF]:
        raise ToolFailure(f"{shown} looks like a binary file; it cannot be edited as text", "BinaryFile")
    return data.decode("utf-8", errors="surrogateescape"), st.st_mode & 0o7777, stamp_of(st)


def _verify_no_follow(ctx: ToolContext, resolved: ResolvedPath) -> bool:
    """Open the file the no-follow way (then close it) so the editor is never sent through a swapped symlink."""
    if not os.path.lexists(resolved.path):
        return False
    try:
        os.close(ctx.workspace.open_read(resolved, ctx.grants))
    except PathError as exc:
        raise ToolFailure(str(exc), exc.error_type) from None
    return True


async def _editor_read(
    ctx: ToolContext, resolved: ResolvedPath, line: int | None = None, limit: int | None = None
) -> str:
    assert ctx.editor is not None
    try:
        return await ctx.editor.read_text_file(resolved.path, line, limit)
    except EditorError as exc:
        raise ToolFailure(
            f"the editor could not read {ctx.workspace.display(resolved.path)}: {exc.message}", "EditorError"
        ) from None


async def read_lines_via_editor(
    ctx: ToolContext, resolved: ResolvedPath, line: int | None, limit: int | None
) -> str | None:
    """`fs/read_text_file` after the boundary check; None when the file does not exist on disk."""
    check(ctx, resolved)
    exists = await anyio.to_thread.run_sync(_verify_no_follow, ctx, resolved)
    if not exists:
        return None
    return await _editor_read(ctx, resolved, line, limit)


async def load(
    ctx: ToolContext, resolved: ResolvedPath, *, must_exist: bool = True, last_use: bool = False
) -> TextFile:
    """The current text of a file (None when missing and `must_exist` is False).

    Within one call the text is read once and kept (the call scratch) until the call's `run` takes it with
    `last_use=True`; a retried run reads afresh.
    """
    check(ctx, resolved)
    shown = ctx.workspace.display(resolved.path)
    # One stat, like the workspace boundary's own (synchronous) resolution of this path: cheaper than a thread.
    if os.path.isdir(resolved.path):  # noqa: ASYNC240
        raise ToolFailure(f"{shown} is a directory", "IsADirectory")
    scratch = call_scratch(ctx)
    key = ("text", resolved.path)
    kept: TextFile | None = scratch.pop(key, None) if last_use else scratch.get(key)
    if kept is not None and kept.writes == _writes(ctx, resolved.path):
        loaded = kept
    else:
        writes = _writes(ctx, resolved.path)
        if editor_reads(ctx):
            exists = await anyio.to_thread.run_sync(_verify_no_follow, ctx, resolved)
            text = await _editor_read(ctx, resolved) if exists else None
            loaded = TextFile(resolved, text, True, writes=writes)
        else:
            text, mode, stamp = await anyio.to_thread.run_sync(_disk_read, ctx, resolved)
            loaded = TextFile(resolved, text, False, mode, stamp, writes)
        if not last_use:
            scratch[key] = loaded
    if loaded.text is None and must_exist:
        raise ToolFailure(f"{shown} does not exist", "FileNotFound")
    return loaded


async def current_text(ctx: ToolContext, before: TextFile) -> str | None:
    """The file's text now, through the same channel as `before`. Through the editor, a text this call has just
    read is current unless this session wrote the file since (one `fs/read_text_file` per call); the disk, which
    costs no round trip, is always read again."""
    if before.via_editor:
        if before.writes == _writes(ctx, before.resolved.path):
            return before.text
        exists = await anyio.to_thread.run_sync(_verify_no_follow, ctx, before.resolved)
        return await _editor_read(ctx, before.resolved) if exists else None
    text, _, _ = await anyio.to_thread.run_sync(_disk_read, ctx, before.resolved)
    return text


async def store(
    ctx: ToolContext,
    before: TextFile,
    new_text: str,
    *,
    exclusive: bool = False,
    mode: int | None = None,
    verify: bool = True,
    seen: bool = True,
) -> bool:
    """Write `new_text` if the file still holds `before.text`. Returns True when the file was created.

    `verify=False` skips the compare (only for rolling back a change this call itself just made). `seen=False`:
    the model does not know the whole new text (it appended to a file it never read).

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
        raise ToolFailure(
            f"{shown} {what} since it was read (by the user or another tool); read it again and "
            "redo the change on the current content",
            "FileChanged",
        )
    if editor_writes(ctx):
        assert ctx.editor is not None
        try:
            await anyio.to_thread.run_sync(ctx.workspace.ensure_parent, resolved, ctx.grants)
            await ctx.editor.write_text_file(resolved.path, new_text)
        except PathError as exc:
            raise ToolFailure(str(exc), exc.error_type) from None
        except EditorError as exc:
            raise ToolFailure(f"the editor could not write {shown}: {exc.message}", "EditorError") from None
        saw_written(ctx, resolved, new_text, seen=seen)
        return before.text is None
    data = new_text.encode("utf-8", errors="surrogateescape")
    try:
        created = await anyio.to_thread.run_sync(
            lambda: ctx.workspace.write_atomic(resolved, data, grants=ctx.grants, exclusive=exclusive, mode=mode)
        )
    except PathError as exc:
        raise ToolFailure(str(exc), exc.error_type) from None
    except OSError as exc:
        raise ToolFailure(
            f"could not write {shown}: {exc.strerror or exc}; the old file is unchanged", "WriteFailed"
        ) from None
    saw_written(ctx, resolved, new_text, seen=seen)
    return created


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
    saw_written(ctx, before.resolved, None, deleted=True)


def diff_content(path: str, old: str | None, new: str) -> dict[str, object]:
    return {"type": "diff", "path": path, "oldText": old, "newText": new}


def unified_diff(path: str, old: str | None, new: str | None, context: int = 3, limit: int = 20_000) -> str:
    """A unified diff for the model's output (so it sees what changed), capped."""
    a = (old or "").splitlines(keepends=True)
    b = (new or "").splitlines(keepends=True)
    lines = difflib.unified_diff(
        a,
        b,
        f"a/{path}" if old is not None else "/dev/null",
        f"b/{path}" if new is not None else "/dev/null",
        n=context,
    )
    out = "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)
    if len(out) > limit:
        out = out[:limit] + f"\n[... diff truncated at {limit} characters ...]\n"
    return out
