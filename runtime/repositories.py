"""Repositories and agent settings a call creates: every `.git` and `.gatewright` in the workspace (at a root or
nested anywhere, ignored directories included), found before the next call runs, and the user asked whether to keep
each new one (not kept: removed).

Why: the sandbox protects such paths with Landlock rules and read-only bind mounts, and both only hold for paths
that exist when a command starts. A command may create `vendor/lib/.git` (or `.gatewright`) with a configuration
that names programs, and whatever uses it next (the user's git, an editor, gatewright's project commands) would run
them. So what a call creates is noticed right after it (and before each call that may write, for what background
processes and MCP servers do meanwhile), and until the user keeps it: it is protected like the others in every
command that starts (`protected()`), and the agent's own git does not use it (`RepositoryWatch.unsettled`).

How it stays cheap without inotify (not available everywhere, and limited per user): the first look lists the whole
tree once, every directory (a `.gitignore` says nothing about where a repository may hide), keeping each directory's
identity and ctime. A check then `lstat`s every known directory and lists again only those whose ctime changed (an
entry added, removed or renamed changes its directory's ctime, which, unlike mtime, nothing can set back), or whose
last change was too close to when it was listed for the clock to tell (`RACY_NS`); a directory that is new, or that
was replaced, is listed whole. Symlinks are never followed (a link named `.git` counts: it is an entry git would
read). `python -m bench --only repositories` measures a check on a 10,000-file workspace.
"""

from __future__ import annotations

import os
import shutil
import stat
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

import anyio.to_thread

from permissions.decorator import ApprovalCancelled, Ask
from permissions.gateway import PermissionOption, PermissionRequest
from runtime import processes
from runtime.sandbox.spec import PROTECTED_NAMES, git_dirs
from runtime.tools.base import ToolContext, ToolResult

RACY_NS = 1_000_000_000  # a directory changed this close to its listing is listed again at the next check
STATE_KEY = "gatewright.repositories"  # the session's watch, in `ToolContext.state`
KEEP, REMOVE = "keep", "remove"

Identity = tuple[int, int, int]  # (st_dev, st_ino, st_ctime_ns of a file or link; 0 for a directory)


@dataclass(slots=True)
class _Dir:
    identity: tuple[int, int]  # (st_dev, st_ino)
    ctime: int
    listed: int  # time.time_ns() just before it was listed
    subdirs: tuple[str, ...]
    protected: tuple[str, ...]  # its entries named like PROTECTED_NAMES


class Tree:
    """Every directory under the roots (symlinks not followed, protected directories not entered), and every entry
    named `.git` or `.gatewright` in them, kept up to date by `update`."""

    def __init__(self, roots: Sequence[str]) -> None:
        self.roots = tuple(roots)
        self.dirs: dict[str, _Dir] = {}
        self.entries: dict[str, Identity] = {}

    def update(self) -> dict[str, Identity]:
        """Bring the tree up to date; every protected entry now there, with its identity."""
        lstat, dirs, isdir = os.lstat, self.dirs, stat.S_ISDIR
        stack = list(self.roots)
        pop, extend = stack.pop, stack.extend
        while stack:
            path = pop()
            try:
                st = lstat(path)
            except OSError:
                self._forget(path)
                continue
            known = dirs.get(path)
            if (
                known is None
                or known.ctime != st.st_ctime_ns
                or known.identity != (st.st_dev, st.st_ino)
                or known.listed - known.ctime < RACY_NS
            ):
                if not isdir(st.st_mode):
                    self._forget(path)
                    continue
                known = self._list(path, (st.st_dev, st.st_ino), st.st_ctime_ns, known)
            prefix = path + "/"
            extend([prefix + name for name in known.subdirs])
        return dict(self.entries)

    def _list(self, path: str, identity: tuple[int, int], ctime: int, old: _Dir | None) -> _Dir:
        if old is not None and old.identity != identity:
            self._forget(path)  # another directory now: everything below is new
            old = None
        listed = time.time_ns()
        subdirs: list[str] = []
        protected: list[str] = []
        try:
            with os.scandir(path) as it:
                for e in it:
                    if e.name in PROTECTED_NAMES:
                        protected.append(e.name)
                        self.entries[os.path.join(path, e.name)] = _identity(e, identity[0])
                    elif e.is_dir(follow_symlinks=False):
                        subdirs.append(e.name)
        except OSError:
            pass  # unreadable: nothing below it is known (the sandbox cannot write what the agent cannot read)
        if old is not None:
            for name in set(old.subdirs) - set(subdirs):
                self._forget(os.path.join(path, name))
            for name in set(old.protected) - set(protected):
                self.entries.pop(os.path.join(path, name), None)
        d = self.dirs[path] = _Dir(identity, ctime, listed, tuple(subdirs), tuple(protected))
        return d

    def _forget(self, path: str) -> None:
        prefix = path.rstrip("/") + "/"
        for p in [p for p in self.dirs if p == path or p.startswith(prefix)]:
            del self.dirs[p]
        for p in [p for p in self.entries if p.startswith(prefix)]:
            del self.entries[p]


def _identity(e: os.DirEntry[str], dev: int) -> Identity:
    """A protected entry's identity: its inode, and for a file or link (a `.git` file naming where the repository
    is, a link to it) its ctime too, since one can be rewritten in place. A directory's ctime changes whenever git
    works in it, so a directory is its inode only: one removed and made again under the same inode number (which the
    sandbox prevents by keeping it read-only) looks like the same one."""
    if e.is_dir(follow_symlinks=False):
        return (dev, e.inode(), 0)
    try:
        return (dev, e.inode(), e.stat(follow_symlinks=False).st_ctime_ns)
    except OSError:
        return (dev, e.inode(), -1)


@dataclass(frozen=True, slots=True)
class Found:
    path: str
    identity: Identity


class RepositoryWatch:
    """One session's protected entries: those there at its start and those the user kept (`kept`), and new ones not
    decided yet (`pending`). Thread-safe: checks run on worker threads."""

    def __init__(self, roots: Sequence[str]) -> None:
        self.tree = Tree(roots)
        self.kept: dict[str, Identity] = {}
        self.pending: dict[str, Identity] = {}
        self._asking: set[str] = set()
        self._lock = threading.Lock()
        self._baseline: threading.Thread | None = None
        self._ready = False

    @property
    def is_ready(self) -> bool:
        """Whether the starting point was taken."""
        return self._ready

    def start(self) -> None:
        """Take the session's starting point on a thread (a new session's follow-up: no call has run yet)."""
        with self._lock:
            if self._baseline is None and not self._ready:
                self._baseline = threading.Thread(target=self.ready, name="gw-repositories", daemon=True)
                self._baseline.start()

    def ready(self) -> None:
        """Wait for (or take) the starting point: what exists before the first call that may write runs."""
        with self._lock:
            if not self._ready:
                self.kept = self.tree.update()
                self._ready = True

    def protected(self) -> tuple[str, ...]:
        """What the sandbox keeps read-only for them: every protected entry known to exist (kept or not decided
        yet); for a link named `.git`, where it leads (a link to a directory of the workspace would otherwise make
        that directory the repository, unprotected; a dangling one protects nothing); for a `.git` file, the
        repository it points to as well (a nested worktree's or submodule's)."""
        with self._lock:
            entries = [*self.kept, *self.pending]
        out: list[str] = []
        for path in entries:
            if os.path.islink(path):
                target = os.path.realpath(path)
                if os.path.exists(target):
                    out.append(target)
                continue
            out.append(path)
            if os.path.basename(path) == ".git" and os.path.isfile(path):
                out += git_dirs(os.path.dirname(path))
        return tuple(dict.fromkeys(out))

    def unsettled(self, path: str) -> bool:
        """Whether `path` is a protected entry that appeared and the user has not kept (yet)."""
        with self._lock:
            return path in self.pending

    def check(self) -> list[Found]:
        """Look for new entries (a new path, or a known one replaced by another file). Returns those nobody is asking
        about yet, now marked as being asked about."""
        self.ready()
        with self._lock:
            now = self.tree.update()
            for path in [p for p in self.kept if now.get(p) != self.kept[p]]:
                del self.kept[path]  # gone or replaced: a replacement is new
            for path in [p for p in self.pending if now.get(p) != self.pending[p]]:
                del self.pending[path]
            for path, identity in now.items():
                if path not in self.kept and path not in self.pending:
                    self.pending[path] = identity
            out = [Found(p, i) for p, i in self.pending.items() if p not in self._asking]
            self._asking.update(f.path for f in out)
            return out

    def keep(self, found: Found) -> None:
        with self._lock:
            self._asking.discard(found.path)
            if self.pending.get(found.path) == found.identity:
                del self.pending[found.path]
                self.kept[found.path] = found.identity

    def remove(self, found: Found) -> bool:
        """Delete what was found (only if it is still the same file); whether it is gone."""
        with self._lock:
            self._asking.discard(found.path)
            try:
                st = os.lstat(found.path)
            except FileNotFoundError:
                self.pending.pop(found.path, None)
                return True
            except OSError:
                return False
            if (st.st_dev, st.st_ino) != found.identity[:2]:
                return False  # replaced meanwhile: the next check finds the new one
            try:
                if stat.S_ISDIR(st.st_mode):
                    shutil.rmtree(found.path)  # (fd-based on Linux: a link planted inside is removed, not followed)
                else:
                    os.unlink(found.path)
            except OSError:
                return False
            self.pending.pop(found.path, None)
            return True

    def later(self, found: Found) -> None:
        """No decision (the turn was cancelled): it stays protected and unused, and is asked about again."""
        with self._lock:
            self._asking.discard(found.path)


def watch_of(state: dict[str, object]) -> RepositoryWatch | None:
    w = state.get(STATE_KEY)
    return w if isinstance(w, RepositoryWatch) else None


def protected_paths(ctx: ToolContext) -> tuple[str, ...]:
    """The protected entries of the call's session, for its sandbox (`build_spec(extra_protected=...)`)."""
    w = watch_of(ctx.state)
    return w.protected() if w is not None else ()


class RepositoryGuard:
    """The approval decorator's `CallWatch`: around every call that may write, new `.git` and `.gatewright` entries
    are looked for, and the user is asked about each through the decorator's own question path."""

    def __init__(self, watch: RepositoryWatch) -> None:
        self.watch = watch

    async def before(self, ctx: ToolContext, title: str, ask: Ask) -> None:
        # The first call that may write waits here for the session's starting point; and what background processes
        # and MCP servers made since the last check is decided before this call runs (while none runs, nothing but
        # a call can have made anything since the check after the last one).
        if not ctx.confinement.write:
            return
        if not self.watch.is_ready:
            await anyio.to_thread.run_sync(self.watch.ready)
        if processes.any_running():
            await self._settle(ctx, title, ask, before=True)

    async def after(self, ctx: ToolContext, title: str, result: ToolResult | None, ask: Ask) -> ToolResult | None:
        if not ctx.confinement.write:
            return result  # read-only: nothing can have been created
        told = await self._settle(ctx, title, ask, before=False)
        if result is None or not told:
            return result
        return replace(result, output=result.output + "\n" + "\n".join(told))

    async def _settle(self, ctx: ToolContext, title: str, ask: Ask, *, before: bool) -> list[str]:
        found = await anyio.to_thread.run_sync(self.watch.check)
        told: list[str] = []
        for f in found:
            shown = ctx.workspace.display(f.path)
            if _approved(f.path, ctx.confinement.extra_write):
                self.watch.keep(f)  # the call was approved for writing it
                continue
            try:
                answer = await ask(ctx, _question(ctx, title, shown, before=before))
            except ApprovalCancelled:
                self.watch.later(f)
                continue
            except BaseException:
                self.watch.later(f)
                raise
            if answer == KEEP:
                self.watch.keep(f)
                told.append(f"[{shown} appeared during this call; the user kept it]")
            else:
                gone = await anyio.to_thread.run_sync(self.watch.remove, f)
                how = "and it was removed" if gone else "but it could not be removed (it stays read-only)"
                told.append(f"[{shown} appeared during this call; the user did not keep it, {how}]")
        return told


def _approved(path: str, approved_writes: tuple[str, ...]) -> bool:
    prefix = path.rstrip("/") + "/"
    return any(a == path or a.startswith(prefix) for a in approved_writes)


def _question(ctx: ToolContext, title: str, shown: str, *, before: bool) -> PermissionRequest:
    what = "agent settings directory" if os.path.basename(shown) == ".gatewright" else "git repository"
    when = "appeared since the last call (a background process or a server made it)" if before else "appeared"
    why = (
        f"A new {what}, {shown}, {when}. Its configuration can name programs that run when git or gatewright use "
        f"it (hooks, filters), so until you keep it the sandbox keeps it read-only and the agent's own git does not "
        f"use it. Keep {shown}, or remove it with everything in it?"
    )
    return PermissionRequest(
        call_id=ctx.call_id,
        tool="repository",
        title=title,
        kind="other",
        raw_input={"path": shown},
        options=(
            PermissionOption(KEEP, f"Keep {shown}", "allow_once"),
            PermissionOption(REMOVE, f"Remove {shown}", "reject_once"),
        ),
        reason=f"keep the new {what} {shown}?",
        content=({"type": "content", "content": {"type": "text", "text": why}},),
    )
