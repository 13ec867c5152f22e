"""What the model knows about where it works: the system prompt of every model call of a session and its subagents.

`SessionContext.system_prompt(base)` is the runtime's base prompt (`runtime/prompts/system.md`, or a subagent's),
then the project instructions (`runtime.instructions`: the `AGENTS.md` chain and the list of nested ones), then the
environment: workspace, operating system, shell, date, git branch and whether there are uncommitted changes,
approval mode and sandbox state. Stable parts come first, so a provider's prompt cache keeps most of it.

When things are looked at (measured: see docs/agent.md, "What the model is told"):
- before every model call: the instruction files are `stat`ed (re-read only when one changed), and the mode and the
  sandbox description are asked for; an unchanged prompt is the cached string;
- once per turn (`enter_turn`, in a worker thread): the date, `git status` and the listing of nested instruction
  files. A subagent's turn inside the session's turn reuses them. A host may start that look early (`look_early`
  before the session exists, `prefetch` once it does): a turn starting within `PREFETCH_FRESH_S` of it uses it
  instead of looking again, so a new session's first prompt does not wait for two processes before its first model
  call.

`attachments(paths, seen)` gives the text of the nested instruction files covering paths a tool call touched that
this conversation has not seen yet (the loop adds it to the tool result the model reads).
"""

from __future__ import annotations

import datetime
import functools
import logging
import os
import platform
import re
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

import anyio
import anyio.to_thread

from permissions.modes import MODES
from permissions.shell import FILTERS_OFF_FAILED, git_without_filters, read_only_git_env
from runtime import instructions as ins
from runtime import processes, secrets
from runtime.instructions import InstructionFile, Signature
from runtime.processes import SandboxError
from runtime.repositories import RepositoryWatch
from runtime.sandbox import support
from runtime.sandbox.spec import git_dirs

log = logging.getLogger("gatewright.context")

GIT_TIMEOUT_S = 2.0
PREFETCH_FRESH_S = 1.0  # how old a prefetched look may be for a turn to use it as "the state at its start"
SHELL_LINE = "`/bin/bash -c COMMAND` (the `bash` tool)"

SandboxInfo = Callable[[], str] | str | None


@dataclass(frozen=True, slots=True)
class GitState:
    line: str  # e.g. "branch `main`, uncommitted changes"


@functools.cache
def os_description() -> str:
    """e.g. "Linux 6.8.0-45-generic (x86_64), Ubuntu 24.04.1 LTS"; computed once per process."""
    text = f"{platform.system()} {platform.release()} ({platform.machine()})"
    try:
        with open("/etc/os-release", encoding="utf-8") as f:
            pretty = next((ln.split("=", 1)[1].strip().strip('"') for ln in f if ln.startswith("PRETTY_NAME=")), None)
        if pretty:
            text += f", {pretty}"
    except OSError:
        pass
    return text


def git_state(root: str) -> GitState:
    """The branch and whether the work tree has uncommitted changes, from one `git status`.

    git runs as every process the agent starts: in the sandbox, read-only and without network (it may read the
    workspace and the repository holding it), with none of the session's environment (no keys), and with every
    program a repository can configure switched off (`read_only_git_env`: fsmonitor, hooks, pagers, credential
    helpers, ssh; and each filter driver the configuration defines, listed first by a `git config` in the same
    sandbox: `git_without_filters`).
    It does not look inside nested repositories (`--ignore-submodules=dirty`: a submodule's own `git status` would
    read that repository's configuration; a gitlink moved to another commit still counts as a change), shows no
    patch (so no diff driver, textconv or external diff is involved), and takes no locks. Where the system has no
    sandbox, the switching off is what holds.
    """
    env = read_only_git_env(processes.own_environ())
    env["LC_ALL"] = "C"
    if shutil.which("git", path=env.get("PATH", os.defpath)) is None:
        return GitState("unknown (git is not installed)")
    argv = git_without_filters("status", "--porcelain=v2", "--branch", "--ignore-submodules=dirty", "--no-renames")
    try:
        proc = processes.run_captured(
            argv,
            cwd=root,
            env=env,
            spec=processes.read_only_sandbox([root], repository_reads(root)),
            timeout=GIT_TIMEOUT_S,
        )
    except SandboxError as exc:
        return GitState(f"unknown (git could not be started in the sandbox: {exc})")
    except OSError as exc:
        return GitState(f"unknown ({exc.strerror or exc})")
    if proc.timed_out or proc.returncode != 0:
        if not proc.timed_out and b"not a git repository" in proc.stderr.split(b"\n", 1)[0]:
            return GitState("not a git repository")
        return _git_failed(proc, "git config" if proc.returncode == FILTERS_OFF_FAILED else "git status")
    head, oid, dirty = None, None, False
    for line in proc.stdout.decode("utf-8", errors="replace").splitlines():
        if line.startswith("# branch.head "):
            head = line.removeprefix("# branch.head ")
        elif line.startswith("# branch.oid "):
            oid = line.removeprefix("# branch.oid ")
        elif line and not line.startswith("#"):
            dirty = True
    where = f"detached HEAD at {oid[:12]}" if head == "(detached)" and oid else f"branch `{head or '?'}`"
    if oid == "(initial)":
        where += " (no commits yet)"
    return GitState(f"{where}, {'uncommitted changes' if dirty else 'clean'}")


def _git_failed(proc: processes.Captured, what: str) -> GitState:
    if proc.timed_out:
        return GitState(f"unknown (`{what}` took longer than {GIT_TIMEOUT_S:g} s)")
    err = proc.stderr.decode("utf-8", errors="replace").strip().splitlines()
    return GitState(f"unknown (`{what}` failed" + (f": {err[0][:200]})" if err else ")"))


def repository_reads(root: str) -> list[str]:
    """What git must read beyond the workspace: the work tree of the repository holding it when that starts above
    it (a workspace opened in a subdirectory of a project), where a `.git` file points (a worktree's or a
    submodule's repository, which the sandbox's build already grants for a root's own `.git`), and the user's own
    configuration with the files it includes."""
    top = ins.project_root(root)
    return [*([top, *git_dirs(top)] if top != root else []), *user_config_files()]


_SECTION = re.compile(r"^\s*\[\s*(include|includeif)\b", re.IGNORECASE)
_PATH = re.compile(r"^\s*path\s*=\s*(.*?)\s*$", re.IGNORECASE)


def user_config_files(depth: int = 3) -> list[str]:
    """The user's global git configuration files and the files their `[include]` and `[includeIf …]` sections name
    (a `~/.gitconfig` that includes `~/.gitconfig.local`, followed `depth` levels): git reads them for every
    command, and the sandbox grants the home's git configuration only. A repository's own includes are not
    followed: they are the repository's choice, not the user's. A file this reads wrongly is at worst one more read
    for a process that writes nothing, or a look that fails."""
    home = os.path.expanduser("~")
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    todo = [p for p in (os.path.join(home, ".gitconfig"), os.path.join(xdg, "git", "config")) if os.path.isfile(p)]
    found = list(todo)
    for _ in range(depth):
        nxt: list[str] = []
        for path in todo:
            try:
                with open(path, encoding="utf-8", errors="replace") as f:
                    lines = f.read(1 << 20).splitlines()
            except OSError:
                continue
            inside = False
            for line in lines:
                if line.lstrip().startswith("["):
                    inside = bool(_SECTION.match(line))
                elif inside and (m := _PATH.match(line)):
                    value = m.group(1).split(" #")[0].split(" ;")[0].strip().strip('"')
                    target = os.path.expanduser(value)
                    target = os.path.join(os.path.dirname(path), target) if not os.path.isabs(target) else target
                    if os.path.isfile(target) and target not in found:
                        found.append(target)
                        nxt.append(target)
        todo = nxt
    return found


class _Look:
    """One look at the workspace (`git status`, the nested listing), each on a thread of its own, started now; then
    (`after`) the session's repository watch takes its starting point, once git no longer waits for the CPU."""

    def __init__(self, root: str, git: Callable[[], GitState], after: Callable[[], None] | None = None) -> None:
        self.after = after
        self.started = time.monotonic()
        self.git: GitState | None = None
        self.nested: tuple[str, ...] | None = None
        self._threads = [
            threading.Thread(target=self._git, args=(git,), daemon=True, name="gw-look-git"),
            threading.Thread(target=self._nested, args=(root,), daemon=True, name="gw-look-nested"),
        ]
        for t in self._threads:
            t.start()

    def _git(self, git: Callable[[], GitState]) -> None:
        self.git = git()
        if self.after is not None:
            self.after()

    def _nested(self, root: str) -> None:
        self.nested = tuple(ins.list_nested(root))

    @property
    def done(self) -> bool:
        return not any(t.is_alive() for t in self._threads)

    def join(self) -> None:
        for t in self._threads:
            t.join()


_early: dict[str, _Look] = {}
_early_lock = threading.Lock()


def look_early(root: str) -> None:
    """Start the first turn's look at a workspace whose session is about to be made, so that it runs beside the
    session's assembly (ACP's `session/new` calls this before it builds the session: 2 ms for a process's later
    sessions, ~200 ms for its first) instead of after it; the session's `prefetch` adopts it. Nothing of the
    workspace can have changed meanwhile: no call of that session has run yet."""
    real = os.path.realpath(root)
    look = _Look(real, lambda: git_state(real))
    with _early_lock:
        _early[real] = look  # an older one nobody adopted finishes on its own


def _adopt_early(root: str) -> _Look | None:
    with _early_lock:
        look = _early.pop(root, None)
    if look is None or time.monotonic() - look.started > PREFETCH_FRESH_S:
        return None
    return look


class SessionContext:
    """The context of one session. `mode` is read at every model call; `sandbox` is the sandbox state's one-line
    description (a string, or a callable asked at every model call; None: not reported by this host)."""

    def __init__(
        self,
        workspace_root: str,
        mode: Callable[[], str],
        sandbox: SandboxInfo = None,
        *,
        git: bool = True,
        today: Callable[[], datetime.date] = datetime.date.today,
        repositories: RepositoryWatch | None = None,
        additional_roots: Sequence[str] = (),
    ) -> None:
        self.root = workspace_root
        self.repositories = repositories
        # The other roots of a multi-root workspace (ACP `additionalDirectories`, `--add-dir`): each is the workspace
        # as much as the first; relative paths resolve in the first. Each root's own AGENTS.md applies to it.
        self.extra_roots = tuple(r for r in additional_roots if r != workspace_root)
        self._extra_paths = tuple(ins.candidates(r, at_root=True) for r in self.extra_roots)
        self.extra_git: tuple[tuple[str, GitState], ...] = ()
        self.mode = mode
        self.sandbox = sandbox
        self.git_enabled = git
        self._today = today
        self.chain_dirs = ins.chain_directories(workspace_root)
        self._chain_paths = tuple(ins.candidates(d, at_root=d == workspace_root) for d in self.chain_dirs)
        self._flat_paths = tuple(p for ps in (*self._chain_paths, *self._extra_paths) for p in ps)
        self._chain_sig: tuple[Signature | None, ...] | None = None
        self._chain: tuple[InstructionFile, ...] = ()
        self.nested: tuple[str, ...] = ()
        self.date = ""
        self.git = GitState("not looked at yet")
        self._turns = 0
        self._refreshed = False
        self._cache: dict[str, tuple[tuple[object, ...], str]] = {}
        self._prefetched: _Look | None = None

    # ---- per turn ------------------------------------------------------------------------------------------------
    async def enter_turn(self) -> None:
        """Refresh date, git state and the nested listing, unless a turn is already running (a subagent's).

        `git status` and the listing are two processes: they run side by side in worker threads (on a 50,000-file
        repository about 80 ms and 25 ms)."""
        self._turns += 1
        if self._turns > 1 and self._refreshed:
            return
        look, self._prefetched = self._prefetched, None
        if look is not None and time.monotonic() - look.started <= PREFETCH_FRESH_S:
            if not look.done:
                await anyio.to_thread.run_sync(look.join)
            if look.git is not None and look.nested is not None and not self.extra_roots:  # (None: a thread failed)
                self.git, self.nested = look.git, look.nested
                self._refresh_date()
                self._refreshed = True
                return
        async with anyio.create_task_group() as tg:
            tg.start_soon(anyio.to_thread.run_sync, self._refresh_git)
            tg.start_soon(anyio.to_thread.run_sync, self._refresh_nested)
        self._refresh_date()
        self._refreshed = True

    def prefetch(self) -> None:
        """Start the next turn's look at the workspace now, on threads (see the module docstring), or adopt the one
        the host started before this session existed (`look_early`)."""
        if self._prefetched is not None:
            return
        after = self.repositories.start if self.repositories is not None else None
        look = _adopt_early(self.root)
        if look is None:
            self._prefetched = _Look(self.root, lambda: self._git_state(self.root), after)
            return
        self._prefetched = look
        if after is not None:
            look.after = after
            if look.git is not None:  # git was done before `after` was set: start it here (it runs once)
                after()

    def close(self) -> None:
        """The session ends: a prefetched look still running is waited for (its processes are bounded by their
        timeouts), so none outlives the session."""
        look, self._prefetched = self._prefetched, None
        if look is not None:
            look.join()

    def exit_turn(self) -> None:
        self._turns = max(0, self._turns - 1)

    def refresh(self) -> None:
        """The per-turn refresh, synchronously."""
        self._refresh_git()
        self._refresh_nested()
        self._refresh_date()
        self._refreshed = True

    def _refresh_date(self) -> None:
        self.date = self._today().strftime("%Y-%m-%d (%A)")

    def _refresh_git(self) -> None:
        self.git = self._git_state(self.root)
        self.extra_git = tuple((r, self._git_state(r)) for r in self.extra_roots) if self.git_enabled else ()

    def _git_state(self, root: str) -> GitState:
        if not self.git_enabled:
            return GitState("not reported")
        if self.repositories is not None and self.repositories.unsettled(os.path.join(root, ".git")):
            # A repository a call made, not kept (yet): the agent's own git does not use it.
            return GitState("not looked at (the workspace's .git appeared during this session and was not kept)")
        return git_state(root)

    def _refresh_nested(self) -> None:
        self.nested = tuple(ins.list_nested(self.root))

    # ---- per model call ----------------------------------------------------------------------------------------
    def system_prompt(self, base: str) -> str:
        self._check_chain()
        if not self._refreshed:  # a runtime driven without turns (tests, tools): look once
            self.refresh()
        key = (self._chain_sig, self.nested, self.date, self.git, self.extra_git, self._mode(), self._sandbox())
        cached = self._cache.get(base)
        if cached is not None and cached[0] == key:
            return cached[1]
        text = "\n\n".join(part for part in (base, self._instructions_section(), self._environment_section()) if part)
        self._cache[base] = (key, text)
        return text

    def _check_chain(self) -> None:
        sig = ins.signatures(self._flat_paths)
        if sig == self._chain_sig:
            return
        self._chain_sig = sig
        files: list[InstructionFile] = []
        budget = ins.MAX_CHAIN_BYTES
        top = self.chain_dirs[0]
        for d, paths in zip(self.chain_dirs, self._chain_paths, strict=True):
            if budget <= 0:
                break
            f = ins.read_instruction(d, paths, top, budget)
            if f is not None:
                f = replace(f, text=secrets.redact_text(f.text))  # a key pasted into AGENTS.md goes no further
                files.append(f)
                budget -= len(f.text.encode("utf-8"))
        for root, paths in zip(self.extra_roots, self._extra_paths, strict=True):
            f = ins.read_instruction(root, paths, root, max(0, budget)) if budget > 0 else None
            if f is not None:
                files.append(replace(f, text=secrets.redact_text(f.text)))
                budget -= len(f.text.encode("utf-8"))
        self._chain = tuple(files)

    def _mode(self) -> str:
        try:
            return str(self.mode())
        except Exception:
            return "unknown"

    def _sandbox(self) -> str:
        s = self.sandbox
        if s is None:  # the processes this session starts run under this process's sandbox
            return support().describe()
        if isinstance(s, str):
            return s
        try:
            return str(s())
        except Exception as exc:  # a failing probe must not break the turn; say so
            log.debug("sandbox description failed", exc_info=True)
            return f"unknown ({type(exc).__name__})"

    def display(self, path: str) -> str:
        if ins.is_within(path, self.root):
            return os.path.relpath(path, self.root)
        return path

    def _instructions_section(self) -> str:
        out = ["# Project instructions"]
        if not self._chain:
            out.append("There is no AGENTS.md (nor CLAUDE.md or GEMINI.md) for the workspace root.")
        for f in self._chain:
            scope = (
                "the whole workspace"
                if f.directory == self.root and not self.extra_roots
                else f"the workspace root {f.directory}"
                if f.directory == self.root or f.directory in self.extra_roots
                else f"the whole project at {f.directory}, this workspace included"
            )
            out.append(f"## {self.display(f.path)} (applies to {scope})\n\n{f.text}")
            if f.truncated:
                out.append(
                    f"[{self.display(f.path)} is longer than the {ins.MAX_CHAIN_BYTES // 1024} KiB shown here: "
                    "read the rest with read_file before relying on it]"
                )
        if self.nested:
            shown = ", ".join(f"`{p}`" for p in self.nested[: ins.MAX_LISTED])
            more = f" and {len(self.nested) - ins.MAX_LISTED} more" if len(self.nested) > ins.MAX_LISTED else ""
            out.append(
                "Nested instruction files, each for its own directory tree: " + shown + more + ". The text of "
                "one is attached to the result of your first tool call that touches a path under it; before "
                "working under one in another way (for example through bash), read it."
            )
        return "\n\n".join(out)

    def _environment_section(self) -> str:
        lines = [
            "# Environment",
            f"- Workspace root: {self.root} (relative paths resolve here)",
            *(
                [
                    "- Also workspace roots (the workspace as much as the first; use absolute paths there): "
                    + ", ".join(self.extra_roots)
                ]
                if self.extra_roots
                else []
            ),
            f"- Operating system: {os_description()}",
            f"- Shell: commands run with {SHELL_LINE}",
            f"- Date: {self.date}",
            f"- Git: {self.git.line} (at the start of this turn)",
            *(f"- Git in {root}: {state.line}" for root, state in self.extra_git),
            f"- Approval mode: {_mode_line(self._mode())}",
            f"- Sandbox: {self._sandbox()}",
        ]
        return "\n".join(lines)

    # ---- nested instructions for touched paths -----------------------------------------------------------------
    def attachments(self, paths: Iterable[str], seen: dict[str, Signature]) -> str:
        """The nested instruction files covering `paths` (resolved, absolute) that `seen` (path → signature of the
        version the conversation has) lacks; `seen` is updated. Empty when there is nothing new."""
        found: list[InstructionFile] = []
        for path in paths:
            root = next((r for r in (self.root, *self.extra_roots) if ins.is_within(path, r)), self.root)
            for d in ins.nested_directories(path, root):
                f = ins.read_instruction(d, ins.candidates(d, at_root=False), d, ins.MAX_FILE_BYTES)
                if f is None or seen.get(f.path) == f.signature or any(g.path == f.path for g in found):
                    continue
                seen[f.path] = f.signature
                found.append(f)
        parts = []
        for f in found:
            rel = self.display(f.path)
            scope = self.display(f.directory) + "/"
            cut = f"\n[cut at {ins.MAX_FILE_BYTES // 1024} KiB: read {rel} for the rest]" if f.truncated else ""
            text = secrets.redact_text(f.text)
            parts.append(
                f'<project-instructions file="{rel}">\nInstructions for files under {scope} (from {rel}; '
                f"they add to the workspace's instructions and win where they disagree):\n\n{text}{cut}\n"
                "</project-instructions>"
            )
        return ("\n\n" + "\n\n".join(parts)) if parts else ""


def _mode_line(mode: str) -> str:
    info = next((m for m in MODES if m.id == mode), None)
    return f"`{mode}`: {info.description}" if info else f"`{mode}`"
