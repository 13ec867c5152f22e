"""`apply_patch`: the `*** Begin Patch` envelope (Add, Update with `@@` anchors, Delete, Move), all-or-nothing.

Parsing and planning are pure (`parse_patch`, `apply_chunks`): every operation is validated against the files'
current text before anything is written. Hunks are located after their `@@` context lines; the lines a hunk
replaces are matched exactly first, then ignoring trailing whitespace, then ignoring surrounding whitespace and
typographic punctuation. Files keep their line-ending style (CRLF stays CRLF) and whether they end with a newline.
Paths go through the workspace boundary like any other tool's (an absolute path is never made relative). If a write
fails half-way, the files already written are restored.
"""

from __future__ import annotations

import difflib
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import anyio

from runtime.tools.base import Effect, Tool, ToolContext, ToolFailure, ToolResult, display_path
from runtime.tools.builtin import textio
from runtime.workspace import PathError, Workspace

BEGIN, END = "*** Begin Patch", "*** End Patch"
ADD, UPDATE, DELETE, MOVE, EOF_MARK = (
    "*** Add File:",
    "*** Update File:",
    "*** Delete File:",
    "*** Move to:",
    "*** End of File",
)


class PatchError(ToolFailure):
    def __init__(self, message: str) -> None:
        super().__init__(message + "\nNothing was changed: a patch applies completely or not at all.", "PatchFailed")


@dataclass(frozen=True, slots=True)
class Chunk:
    contexts: tuple[str, ...]  # `@@ text` anchors, in order
    lines: tuple[tuple[str, str], ...]  # (" " | "-" | "+", text)
    eof: bool = False

    @property
    def old(self) -> tuple[str, ...]:
        """Context and removed lines, as they should be in the file."""
        return tuple(t for op, t in self.lines if op != "+")

    @property
    def new(self) -> tuple[str, ...]:
        """Context and added lines, as they will be."""
        return tuple(t for op, t in self.lines if op != "-")


@dataclass(frozen=True, slots=True)
class FileOp:
    kind: Literal["add", "update", "delete"]
    path: str
    move_to: str | None = None
    lines: tuple[str, ...] = ()  # Add File content
    chunks: tuple[Chunk, ...] = ()


def parse_patch(text: str) -> list[FileOp]:
    """Parse the envelope. Raises `PatchError` with the line number of the first problem."""
    raw = [ln[:-1] if ln.endswith("\r") else ln for ln in text.strip().split("\n")]
    try:
        start = next(i for i, ln in enumerate(raw) if ln.strip() == BEGIN)
    except StopIteration:
        raise PatchError(f"the patch must start with '{BEGIN}'") from None
    try:
        end = max(i for i, ln in enumerate(raw) if ln.strip() == END)
    except ValueError:
        raise PatchError(f"the patch must end with '{END}'") from None
    if end <= start:
        raise PatchError(f"'{END}' comes before '{BEGIN}'")
    ops: list[FileOp] = []
    i = start + 1
    while i < end:
        line = raw[i]
        if not line.strip():
            i += 1
            continue
        head = line.rstrip()
        if head.startswith(ADD):
            path = _path(head, ADD, i)
            body: list[str] = []
            i += 1
            while i < end and not raw[i].startswith("*** "):
                if not raw[i].startswith("+"):
                    if not raw[i].strip() and (i + 1 >= end or raw[i + 1].startswith("*** ")):
                        i += 1
                        continue
                    raise PatchError(f"line {i + 1}: every line of '{ADD} {path}' must start with '+'")
                body.append(raw[i][1:])
                i += 1
            ops.append(FileOp("add", path, lines=tuple(body)))
        elif head.startswith(DELETE):
            ops.append(FileOp("delete", _path(head, DELETE, i)))
            i += 1
        elif head.startswith(UPDATE):
            path = _path(head, UPDATE, i)
            i += 1
            move_to = None
            if i < end and raw[i].rstrip().startswith(MOVE):
                move_to = _path(raw[i].rstrip(), MOVE, i)
                i += 1
            chunks, i = _parse_chunks(raw, i, end, path)
            if not chunks and move_to is None:
                raise PatchError(f"line {i}: '{UPDATE} {path}' has no hunks")
            ops.append(FileOp("update", path, move_to, chunks=tuple(chunks)))
        else:
            raise PatchError(f"line {i + 1}: expected '{ADD}', '{UPDATE}' or '{DELETE}', found {line[:80]!r}")
    if not ops:
        raise PatchError("the patch contains no file operations")
    return ops


def _path(line: str, marker: str, i: int) -> str:
    path = line[len(marker) :].strip()
    if not path:
        raise PatchError(f"line {i + 1}: '{marker}' needs a path")
    return path


def _parse_chunks(raw: list[str], i: int, end: int, path: str) -> tuple[list[Chunk], int]:
    chunks: list[Chunk] = []
    contexts: list[str] = []
    body: list[tuple[str, str]] = []

    def flush(eof: bool = False) -> None:
        nonlocal contexts, body
        if body or eof:
            chunks.append(Chunk(tuple(contexts), tuple(body), eof))
            contexts, body = [], []

    while i < end:
        line = raw[i]
        if line.rstrip() == EOF_MARK:
            flush(eof=True)
            i += 1
            continue
        if line.startswith("*** "):
            break
        if line.startswith("@@"):
            if body:
                flush()
            text = line[2:].strip()
            if text.endswith("@@") and text.startswith("-"):
                text = ""  # a unified-diff range header `@@ -1,3 +1,4 @@` carries no anchor text
            if text:
                contexts.append(text)
        elif line.startswith(("+", "-", " ")):
            body.append((line[0], line[1:]))
        elif line == "":
            body.append((" ", ""))
        else:
            raise PatchError(
                f"line {i + 1}: in '{UPDATE} {path}', a hunk line must start with ' ', '-' or '+' (found {line[:80]!r})"
            )
        i += 1
    flush()
    return chunks, i


# ---- applying ----------------------------------------------------------------------------------------------------
_PUNCT = str.maketrans(
    {
        "‐": "-",
        "‑": "-",
        "‒": "-",
        "–": "-",
        "—": "-",
        "−": "-",
        "‘": "'",
        "’": "'",
        "“": '"',
        "”": '"',
        " ": " ",
        "…": "...",
    }
)


def _loose(s: str) -> str:
    return unicodedata.normalize("NFC", s).translate(_PUNCT).strip()


_NORMALISERS: tuple[Callable[[str], str], ...] = (lambda s: s, str.rstrip, str.strip, _loose)


def _seek(lines: list[str], pattern: tuple[str, ...], start: int, eof: bool) -> int | None:
    n = len(pattern)
    if n > len(lines):
        return None
    for norm in _NORMALISERS:
        pat = [norm(p) for p in pattern]
        if eof:
            i = len(lines) - n
            if i >= start and all(norm(lines[i + j]) == pat[j] for j in range(n)):
                return i
        for i in range(start, len(lines) - n + 1):
            if all(norm(lines[i + j]) == pat[j] for j in range(n)):
                return i
    return None


def split_text(text: str) -> tuple[list[str], str, bool]:
    """(lines without line endings, the file's line ending, whether it ends with one)."""
    crlf = text.count("\r\n")
    eol = "\r\n" if crlf and crlf * 2 >= text.count("\n") else "\n"
    final = text.endswith("\n")
    body = text[:-1] if final else text
    lines = body.split("\n") if text else []
    if eol == "\r\n":
        lines = [ln[:-1] if ln.endswith("\r") else ln for ln in lines]
    return lines, eol, final


def apply_chunks(text: str, chunks: tuple[Chunk, ...], shown: str) -> str:
    lines, eol, final = split_text(text)
    edits: list[tuple[int, int, tuple[str, ...]]] = []
    cursor = 0
    for n, chunk in enumerate(chunks, 1):
        for anchor in chunk.contexts:
            found = _seek(lines, (anchor,), cursor, False)
            if found is None:
                raise PatchError(
                    f"hunk {n} of {shown} did not apply: its context line '@@ {anchor}' was not found"
                    + (" after the previous hunk" if cursor else "")
                )
            cursor = found + 1
        body = chunk.lines
        old = chunk.old
        if not old:
            at = cursor if chunk.contexts else len(lines)
            edits.append((at, 0, chunk.new))
            continue
        found = _seek(lines, old, cursor, chunk.eof)
        if found is None and body[-1] == (" ", ""):
            # A blank last context line often stands for the end of the file.
            body = body[:-1]
            old = old[:-1]
            found = _seek(lines, old, cursor, chunk.eof) if old else len(lines)
        if found is None:
            expected = "\n".join(f"  {ln}" for ln in chunk.old[:8])
            raise PatchError(
                f"hunk {n} of {shown} did not apply: these lines were not found"
                f"{' after the previous hunk' if cursor else ''}:\n{expected}\n"
                "Read the file again and use its exact current lines as context."
            )
        # Context lines keep the file's own text (a loose match must not rewrite their whitespace).
        new_lines: list[str] = []
        i = found
        for op, text in body:
            if op == " ":
                new_lines.append(lines[i])
            if op != "+":
                i += 1
            if op == "+":
                new_lines.append(text)
        edits.append((found, len(old), tuple(new_lines)))
        cursor = found + len(old)
    for at, count, new in sorted(edits, key=lambda e: e[0], reverse=True):
        lines[at : at + count] = list(new)
    if not lines:
        return ""
    return eol.join(lines) + (eol if final or not text else "")


@dataclass
class _Slot:
    before: textio.TextFile
    text: str | None  # planned content, None = absent


class ApplyPatchTool(Tool):
    name = "apply_patch"
    kind = "edit"
    description = (
        "Apply a patch to one or more files, all-or-nothing. Format:\n"
        "*** Begin Patch\n*** Add File: path\n+line\n*** Update File: path\n*** Move to: new/path (optional)\n"
        "@@ a line near the change, e.g. def foo():\n context line\n-removed line\n+added line\n"
        "*** Delete File: path\n*** End Patch\n"
        "Give about 3 unchanged lines of context around each change; '*** End of File' anchors a hunk at the end."
    )

    def effect(self, args: Mapping[str, Any]) -> Effect:
        return "write"

    def kind_for(self, args: Mapping[str, Any]) -> str:
        ops = self._ops(args)
        if ops and all(op.kind == "delete" for op in ops):
            return "delete"
        if ops and all(op.kind == "update" and op.move_to and not op.chunks for op in ops):
            return "move"
        return "edit"

    def _ops(self, args: Mapping[str, Any]) -> list[FileOp]:
        try:
            return parse_patch(str(args.get("patch", "")))
        except ToolFailure:
            return []

    def paths(self, args: Mapping[str, Any]) -> list[tuple[str, bool]]:
        out: list[tuple[str, bool]] = []
        for op in self._ops(args):
            out.append((op.path, True))
            if op.move_to:
                out.append((op.move_to, True))
        return out

    def title(self, args: Mapping[str, Any], ws: Workspace) -> str:
        ops = self._ops(args)
        if not ops:
            return "Apply patch"
        if len(ops) == 1:
            op = ops[0]
            shown = display_path(ws, op.path)
            if op.move_to:
                return f"Move {shown} → {display_path(ws, op.move_to)}"
            verb = {"add": "Create", "delete": "Delete", "update": "Patch"}[op.kind]
            return f"{verb} {shown}"
        names = ", ".join(display_path(ws, op.path) for op in ops[:3])
        return f"Patch {len(ops)} files: {names}{', …' if len(ops) > 3 else ''}"

    def summary(self, args: Mapping[str, Any], ws: Workspace) -> str:
        return "this patch"

    async def _plan(self, ops: list[FileOp], ctx: ToolContext, last_use: bool = False) -> dict[str, _Slot]:
        slots: dict[str, _Slot] = {}

        async def slot(path: str) -> _Slot:
            resolved = textio.resolve(ctx, path)
            if resolved.path not in slots:
                before = await textio.load(ctx, resolved, must_exist=False, last_use=last_use)
                textio.check_fresh(ctx, before)
                slots[resolved.path] = _Slot(before, before.text)
            return slots[resolved.path]

        for op in ops:
            s = await slot(op.path)
            shown = ctx.workspace.display(s.before.resolved.path)
            if op.kind == "add":
                if s.text is not None:
                    raise PatchError(f"cannot add {shown}: it already exists (use '{UPDATE}')")
                s.text = "\n".join(op.lines) + "\n" if op.lines else ""
            elif op.kind == "delete":
                if s.text is None:
                    raise PatchError(f"cannot delete {shown}: it does not exist")
                s.text = None
            else:
                if s.text is None:
                    raise PatchError(f"cannot update {shown}: it does not exist (use '{ADD}')")
                new = apply_chunks(s.text, op.chunks, shown)
                if op.move_to:
                    dest = await slot(op.move_to)
                    if dest is not s:
                        if dest.text is not None:
                            shown_dest = ctx.workspace.display(dest.before.resolved.path)
                            raise PatchError(f"cannot move {shown} to {shown_dest}: the destination exists")
                        dest.text = new
                        s.text = None
                        continue
                s.text = new
        return slots

    async def precheck(self, args: Mapping[str, Any], ctx: ToolContext) -> None:
        # Refused before the question only when a file it changes changed since the model read it.
        for op in self._ops(args):
            for path in (op.path, op.move_to) if op.move_to else (op.path,):
                try:
                    before = await textio.load(ctx, textio.resolve(ctx, path), must_exist=False)
                except (ToolFailure, PathError):
                    continue
                textio.check_fresh(ctx, before)

    async def preview(self, args: Mapping[str, Any], ctx: ToolContext) -> tuple[dict[str, Any], ...]:
        ops = self._ops(args)
        if not ops:
            return ()
        try:
            slots = await self._plan(ops, ctx)
        except ToolFailure:
            return ()
        return tuple(_diff(s) for s in slots.values() if s.text != s.before.text)

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        ops = parse_patch(args["patch"])
        slots = await self._plan(ops, ctx, last_use=True)
        changed = [s for s in slots.values() if s.text != s.before.text]
        moved_modes = {}
        for op in ops:
            if op.move_to:
                src = slots.get(textio.resolve(ctx, op.path).path)
                if src is not None and src.before.mode is not None:
                    moved_modes[textio.resolve(ctx, op.move_to).path] = src.before.mode
        writes = [s for s in changed if s.text is not None]
        deletes = [s for s in changed if s.text is None]
        done: list[_Slot] = []
        try:
            for s in writes:
                assert s.text is not None
                await textio.store(ctx, s.before, s.text, mode=moved_modes.get(s.before.resolved.path))
                done.append(s)
            for s in deletes:
                await textio.remove(ctx, s.before)
                done.append(s)
        except BaseException as exc:
            await self._rollback(ctx, done)
            if isinstance(exc, ToolFailure):
                raise ToolFailure(
                    f"{exc.message}\nThe patch was rolled back: no file was changed.", exc.error_type
                ) from None
            raise
        lines = []
        for s in changed:
            shown = ctx.workspace.display(s.before.resolved.path)
            if s.before.text is None:
                lines.append(f"A {shown}")
            elif s.text is None:
                lines.append(f"D {shown}")
            else:
                added, removed = _counts(s.before.text, s.text)
                lines.append(f"M {shown} (+{added} -{removed})")
        output = (
            f"applied patch: {len(changed)} file{'s' if len(changed) != 1 else ''} changed\n" + "\n".join(lines)
            if changed
            else "the patch changed nothing"
        )
        raw = {
            "files": [
                {
                    "path": s.before.resolved.path,
                    "operation": "add" if s.before.text is None else ("delete" if s.text is None else "update"),
                }
                for s in changed
            ]
        }
        return ToolResult(
            output,
            content=tuple(_diff(s) for s in changed),
            raw_output=raw,
            locations=tuple({"path": s.before.resolved.path} for s in changed),
        )

    async def _rollback(self, ctx: ToolContext, done: list[_Slot]) -> None:
        with anyio.CancelScope(shield=True):
            for s in reversed(done):
                try:
                    if s.before.text is None:
                        await textio.remove(
                            ctx, textio.TextFile(s.before.resolved, s.text, s.before.via_editor), verify=False
                        )
                    else:
                        await textio.store(ctx, s.before, s.before.text, verify=False)
                except ToolFailure:
                    continue


def _diff(s: _Slot) -> dict[str, Any]:
    return textio.diff_content(s.before.resolved.path, s.before.text, s.text if s.text is not None else "")


def _counts(old: str, new: str) -> tuple[int, int]:
    added = removed = 0
    for line in difflib.unified_diff(old.splitlines(), new.splitlines(), n=0, lineterm=""):
        if line.startswith("+") and not line.startswith("+++"):
            added += 1
        elif line.startswith("-") and not line.startswith("---"):
            removed += 1
    return added, removed
