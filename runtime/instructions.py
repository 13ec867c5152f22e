"""Project instructions: which `AGENTS.md` files apply to a session, and to the files it touches.

The rules (as Codex does, with Claude Code's and Gemini CLI's loading of nested files when they are touched):
- In every directory, the instruction file is the first non-empty one of `AGENTS.md`, `CLAUDE.md`, `GEMINI.md`
  (the other tools' names are fallbacks, for projects that only have those); at the workspace root
  `.agents/AGENTS.md` comes right after `AGENTS.md` (where `update_agents_md` also reads).
- The *chain* goes from the project root (the nearest ancestor of the workspace holding `.git`; the workspace itself
  when there is none) down to the workspace root, outer first: a nearer file comes later and wins. It goes into the
  system prompt, at most `MAX_CHAIN_BYTES` in all (the rest of a cut file is left for the model to read).
- *Nested* files (in directories below the workspace root) apply to their own directory tree. They are listed in the
  system prompt, and their text is attached to the result of the first tool call of a conversation that touches a
  path under them (outer first, so again the nearest comes last and wins), at most `MAX_FILE_BYTES` each.
- A file is only read if it resolves (symlinks followed) inside the tree it belongs to and is a regular file: an
  `AGENTS.md` that links to a secret elsewhere is never sent to the model.

Cheap by design: `chain_signature()` is a few `stat` calls, made before every model call; a file is read again only
when its inode, size or modification time changed. The listing of nested files is one `rg --files` run (sandboxed,
read-only), made once per turn in a worker thread.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass

from runtime import processes
from runtime.tools.builtin.search import rg_binary

NAMES = ("AGENTS.md", "CLAUDE.md", "GEMINI.md")
ROOT_EXTRA = os.path.join(".agents", "AGENTS.md")
MAX_CHAIN_BYTES = 32 * 1024
MAX_FILE_BYTES = 32 * 1024
MAX_LISTED = 50
LIST_TIMEOUT_S = 5.0
_WALK_LIMIT = 5_000  # directories the pure-Python fallback looks at, without rg
_SKIP_WALK = frozenset({".git", "node_modules", ".venv", "venv", "__pycache__", "target", "dist", "build"})

Signature = tuple[int, int, int]  # inode, size, mtime in ns


@dataclass(frozen=True, slots=True)
class InstructionFile:
    path: str  # absolute, as found (not resolved: that is how it is shown)
    directory: str  # the directory tree it applies to
    text: str
    truncated: bool
    signature: Signature


def is_within(path: str, directory: str) -> bool:
    if path == directory:
        return True
    return path.startswith(directory if directory.endswith(os.sep) else directory + os.sep)


def project_root(workspace_root: str) -> str:
    """The nearest directory at or above the workspace that holds `.git` (a directory, or a worktree's file)."""
    d = workspace_root
    while True:
        if os.path.lexists(os.path.join(d, ".git")):
            return d
        parent = os.path.dirname(d)
        if parent == d:
            return workspace_root
        d = parent


def chain_directories(workspace_root: str) -> tuple[str, ...]:
    """The directories of the chain, project root first, workspace root last."""
    top = project_root(workspace_root)
    dirs = [workspace_root]
    d = workspace_root
    while d != top:
        d = os.path.dirname(d)
        dirs.append(d)
    return tuple(reversed(dirs))


def candidates(directory: str, *, at_root: bool) -> tuple[str, ...]:
    names = (NAMES[0], ROOT_EXTRA, *NAMES[1:]) if at_root else NAMES
    return tuple(os.path.join(directory, n) for n in names)


def _signature(path: str) -> Signature | None:
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(st.st_mode) or st.st_size == 0:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def signatures(paths: Iterable[str]) -> tuple[Signature | None, ...]:
    return tuple(_signature(p) for p in paths)


def read_instruction(directory: str, paths: Iterable[str], boundary: str, limit: int) -> InstructionFile | None:
    """The first usable file of `paths`: a non-empty regular file resolving inside `boundary`, at most `limit`
    bytes of it."""
    for path in paths:
        sig = _signature(path)
        if sig is None:
            continue
        real = os.path.realpath(path)
        if not is_within(real, os.path.realpath(boundary)):
            continue  # a link out of the project: never read
        try:
            fd = os.open(real, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                continue
            data = os.read(fd, limit + 1)
        except OSError:
            continue
        finally:
            os.close(fd)
        truncated = len(data) > limit
        text = data[:limit].decode("utf-8", errors="replace").strip()
        if not text:
            continue
        return InstructionFile(path, directory, text, truncated, sig)
    return None


# ---- nested files ----------------------------------------------------------------------------------------------------
def nested_directories(path: str, workspace_root: str) -> list[str]:
    """The directories strictly below the workspace root that contain `path` (itself when it is a directory),
    outermost first."""
    if not is_within(path, workspace_root) or path == workspace_root:
        return []
    d = path if os.path.isdir(path) else os.path.dirname(path)
    out: list[str] = []
    while d != workspace_root and is_within(d, workspace_root):
        out.append(d)
        d = os.path.dirname(d)
    return list(reversed(out))


def list_nested(workspace_root: str) -> list[str]:
    """The nested instruction files below the workspace root (relative paths, one per directory, sorted),
    honouring `.gitignore` as the search tools do. Never raises: a failed listing is an empty one."""
    try:
        found = _list_with_rg(workspace_root)
    except Exception:
        found = None
    if found is None:
        found = _list_by_walking(workspace_root)
    best: dict[str, str] = {}
    order = {n: i for i, n in enumerate(NAMES)}
    for rel in found:
        d, name = os.path.split(rel)
        if not d or name not in order or d == ".agents":
            continue
        if d not in best or order[name] < order[os.path.basename(best[d])]:
            best[d] = rel
    return sorted(best.values())


def _list_with_rg(root: str) -> list[str] | None:
    """The listing by rg (in the sandbox: it reads the workspace, writes nothing). None when rg cannot tell."""
    rg = rg_binary()
    if rg is None:
        return None
    types = [a for n in NAMES for a in ("--type-add", f"gwinstr:{n}")]
    proc = processes.run_captured(
        [rg, "--files", "--hidden", "--no-require-git", "--no-config", *types, "--type", "gwinstr"],
        cwd=root,
        env=processes.own_environ(),
        spec=processes.read_only_sandbox([root]),
        timeout=LIST_TIMEOUT_S,
    )
    if proc.timed_out or proc.returncode not in (0, 1):  # 1: nothing found
        return None
    out = []
    for line in proc.stdout.decode("utf-8", errors="replace").splitlines():
        rel = line.removeprefix("./")
        if rel and not (rel.startswith(".git/") or "/.git/" in rel):
            out.append(rel)
    return out


def _list_by_walking(root: str) -> list[str]:
    out: list[str] = []
    for seen, (d, dirs, files) in enumerate(os.walk(root)):
        if seen >= _WALK_LIMIT:
            break
        dirs[:] = sorted(x for x in dirs if x not in _SKIP_WALK)
        rel = os.path.relpath(d, root)
        out += [os.path.join(rel, n) for n in NAMES if n in files and rel != "."]
    return out
