"""`glob` and `grep`: find files by name and lines by regex, honouring `.gitignore`, fast on large trees.

Both run ripgrep (the `ripgrep` wheel ships `rg`) inside the search base, which is opened through the workspace
boundary without following symlinks and handed to `rg` as its working directory (so a directory swapped for a link
after the check cannot redirect the search); `rg` itself never follows symlinks. rg runs in the sandbox, as every
process the agent starts: it reads the workspace and the outside paths the call was allowed, writes nothing and
reaches no network (`search_sandbox`). Without `rg`, a pure-Python walk
with a small `.gitignore` matcher does the same job more slowly. Results are sorted by path so runs are repeatable.

grep is two-pass: `rg --files-with-matches` over the tree (parallel, tiny output, stops reading a file at its first
match) says which files match, then the first files in path order are searched again with `rg --json` for just
enough lines, so results are deterministic without giving up ripgrep's parallel walk.
"""

from __future__ import annotations

import base64
import functools
import os
import re
import shutil
import sys
import sysconfig
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import anyio
import orjson

from permissions.secret_files import is_secret_file_name
from runtime import secrets
from runtime.processes import Captured, SandboxError, own_environ, read_only_sandbox, run_captured
from runtime.sandbox import SandboxSpec
from runtime.secret_files import value_in_file
from runtime.tools.base import Effect, Tool, ToolContext, ToolFailure, ToolResult, digest, display_path
from runtime.tools.builtin import textio
from runtime.workspace import PathError, ResolvedPath, Workspace

MAX_LINE_CHARS = 300
SKIP_DIRS = frozenset({".git"})
# Matching files checked for a secret value they hold; past this many, the count of matching files is a lower bound.
SECRET_CHECK_LIMIT = 2000


def _quoted(pattern: object) -> str:
    """A pattern in a title: in plain double quotes (clients show titles as plain text, not Markdown)."""
    return f'"{pattern}"'


@functools.cache
def rg_binary() -> str | None:
    """The ripgrep binary: the wheel's next to this Python first (a pyenv shim on PATH costs 50 ms a call)."""
    candidates: tuple[Callable[[], str | None], ...] = (
        lambda: os.path.join(os.path.dirname(sys.executable), "rg"),  # a venv's bin: no need to load sysconfig's data
        lambda: os.path.join(sysconfig.get_path("scripts"), "rg"),  # (~2 ms, on the first prompt's path)
        lambda: shutil.which("rg"),
    )
    for candidate in candidates:
        cand = candidate()
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    return None


# What every rg call honours. `.git` is left out in Python where rg only lists names (glob, and grep with a name
# filter) instead of with rg's `--glob !.git`: any override glob is matched against every path rg walks, which cost
# ~25% of a 50,000-file listing, while walking a `.git` directory's few hundred entries costs well under 1%.
_RG_LIST = ("--hidden", "--no-require-git", "--no-config")
_RG_COMMON = (*_RG_LIST, "--glob", "!.git", "--with-filename")  # searching contents: .git is never read


def _run_rg(args: list[str], cwd_fd: int, cwd: str, spec: SandboxSpec, timeout: float = 60.0) -> Captured:
    """rg, as every process the agent starts, in the sandbox (`search_sandbox`), in the verified directory `cwd_fd`."""
    rg = rg_binary()
    assert rg is not None
    try:
        res = run_captured([rg, *args], cwd=cwd, cwd_fd=cwd_fd, env=own_environ(), spec=spec, timeout=timeout)
    except SandboxError as exc:
        raise ToolFailure(f"the search could not be started in the sandbox: {exc}", "SandboxError") from None
    if res.timed_out:
        raise ToolFailure(f"the search took longer than {timeout:g} s; narrow it with path or include", "Timeout")
    return res


def search_sandbox(ctx: ToolContext) -> SandboxSpec:
    """Where a search's rg may read: the workspace and the outside paths the call was allowed (it writes nothing,
    reaches no network)."""
    return read_only_sandbox(ctx.workspace.roots, ctx.confinement.extra_read)


# ---- globs -------------------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=256)
def glob_regex(pattern: str) -> re.Pattern[str]:
    """A glob as a regex over '/'-separated relative paths: `**` spans directories (zero or more, so `**/*.py` also
    matches `a.py`), `*` and `?` stay within one name, `[...]` and `{a,b}` work as in shells."""
    out: list[str] = []
    i, n = 0, len(pattern)
    depth = 0
    while i < n:
        c = pattern[i]
        if c == "*":
            if pattern.startswith("**", i):
                at_start = i == 0 or pattern[i - 1] == "/"
                i += 2
                if at_start and i < n and pattern[i] == "/":
                    out.append("(?:.*/)?")
                    i += 1
                elif at_start and i == n:
                    out.append(".*")
                else:
                    out.append("[^/]*")
                continue
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = pattern.find("]", i + 2 if pattern.startswith("[!", i) or pattern.startswith("[^", i) else i + 1)
            if j == -1:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1 : j]
                if body[:1] in ("!", "^"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = j
        elif c == "{":
            depth += 1
            out.append("(?:")
        elif c == "}" and depth:
            depth -= 1
            out.append(")")
        elif c == "," and depth:
            out.append("|")
        else:
            out.append(re.escape(c))
        i += 1
    if depth:
        return re.compile(re.escape(pattern) + r"\Z")
    return re.compile("".join(out) + r"\Z")


def name_filter(pattern: str) -> list[str]:
    """rg arguments that keep only files whose *name* can match the glob's last component.

    A file type, not `--glob`: a `--glob` that matches overrides `.gitignore` in rg, a type filter does not.
    """
    last = pattern.rsplit("/", 1)[-1]
    if not last or "**" in last or ":" in last or ("," in last and "{" not in last) or last.startswith("!"):
        return []
    return ["--type-add", f"gwsel:{last}", "--type", "gwsel"]


def _in_git_dir(path: str) -> bool:
    """A `.git` directory (or a submodule's `.git` file) is never listed, at any depth."""
    return path == ".git" or path.startswith(".git/") or "/.git/" in path or path.endswith("/.git")


def _name_filter_is_exact(pattern: str) -> bool:
    """True when rg's name filter (`name_filter`) already decides the whole pattern, so the listing needs no second
    match in Python: `**/NAME` with NAME made only of literal characters and `*`, which mean the same in rg's globs
    as in `glob_regex` (case-sensitive; a name has no `/` for `*` to cross)."""
    if not pattern.startswith("**/"):
        return False
    name = pattern[3:]
    return bool(name) and bool(name_filter(pattern)) and not any(c in name for c in "/?[]{}\\!") and "**" not in name


def include_regex(include: str) -> re.Pattern[str]:
    """grep's `include`: a name glob matches at any depth; a glob with a '/' matches the relative path."""
    return glob_regex(include if "/" in include else "**/" + include)


class _Ignore:
    """A small `.gitignore` matcher for the fallback walk: per-directory files, `!` negation, `/` anchoring,
    trailing `/` for directories."""

    def __init__(self) -> None:
        self.rules: list[tuple[str, re.Pattern[str], bool, bool]] = []  # (base, regex, negated, dir_only)

    def load(self, base: str, path: str) -> None:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                lines = f.read().splitlines()
        except OSError:
            return
        for line in lines:
            line = line.rstrip()
            if not line or line.startswith("#"):
                continue
            neg = line.startswith("!")
            if neg:
                line = line[1:]
            dir_only = line.endswith("/")
            line = line[:-1] if dir_only else line
            anchored = "/" in line
            line = line.lstrip("/")
            pat = line if anchored else "**/" + line
            self.rules.append((base, glob_regex(pat), neg, dir_only))

    def ignored(self, rel: str, is_dir: bool) -> bool:
        verdict = False
        for base, rx, neg, dir_only in self.rules:
            if dir_only and not is_dir:
                continue
            if base and not rel.startswith(base + "/"):
                continue
            sub = rel[len(base) + 1 :] if base else rel
            if rx.match(sub):
                verdict = not neg
        return verdict


def _literal_ignored(base: str, literal: list[str]) -> bool:
    """Whether an ignore file on the way says one of these directories is ignored (then the whole tree is listed and
    filtered instead, since rg started inside an ignored directory would not know)."""
    ignore = _Ignore()
    for i in range(len(literal)):
        rel_dir = "/".join(literal[:i])
        for name in (".gitignore", ".ignore", ".rgignore"):
            ignore.load(rel_dir, os.path.join(base, rel_dir, name))
        if ignore.ignored("/".join(literal[: i + 1]), True):
            return True
    return False


def walk_files(root: str) -> Iterator[str]:
    """Relative paths of the files under `root` the way `rg --files --hidden` lists them (no symlinks followed)."""
    ignore = _Ignore()
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        abs_dir = os.path.join(root, rel_dir) if rel_dir else root
        ignore.load(rel_dir, os.path.join(abs_dir, ".gitignore"))
        try:
            entries = list(os.scandir(abs_dir))
        except OSError:
            continue
        for e in entries:
            rel = f"{rel_dir}/{e.name}" if rel_dir else e.name
            if e.is_dir(follow_symlinks=False):
                if e.name not in SKIP_DIRS and not ignore.ignored(rel, True):
                    stack.append(rel)
            elif e.is_file(follow_symlinks=False) and e.name not in SKIP_DIRS and not ignore.ignored(rel, False):
                yield rel  # (a `.git` file is a submodule's or worktree's pointer: skipped like the directory)


def _open_base(ctx: ToolContext, path: str | None) -> tuple[ResolvedPath, int]:
    resolved = textio.resolve(ctx, path or ".")
    try:
        if os.path.isfile(resolved.path):
            return resolved, -1
        return resolved, ctx.workspace.open_dir(resolved, ctx.grants)
    except PathError as exc:
        raise ToolFailure(str(exc), exc.error_type) from None


class _SearchTool(Tool):
    kind = "search"
    read_only_hint = True

    def effect(self, args: Mapping[str, Any]) -> Effect:
        return "read"

    def paths(self, args: Mapping[str, Any]) -> list[tuple[str, bool]]:
        p = args.get("path")
        return [(p if isinstance(p, str) and p else ".", False)]

    def locations(self, args: Mapping[str, Any], ws: Workspace) -> list[dict[str, Any]]:
        return []

    def rule_key(self, args: Mapping[str, Any], ws: Workspace) -> str:
        # The directory searched and what is searched for (the label names the pattern): another pattern is another
        # call, since it decides what reaches the model.
        p = args.get("path") or "."
        try:
            where = ws.resolve(p).path if isinstance(p, str) else "?"
        except PathError:
            where = "?"
        return f"{self.name}:{where}:{digest(args)}"


class GlobTool(_SearchTool):
    name = "glob"
    description = (
        "Find files by name pattern, e.g. '**/*.py' (any depth, the base directory included) or 'src/*.ts'. Honours "
        ".gitignore and skips .git. Paths are relative to the search base (path, default the workspace), sorted."
    )

    def title(self, args: Mapping[str, Any], ws: Workspace) -> str:
        where = args.get("path")
        suffix = f" in {display_path(ws, where)}" if isinstance(where, str) and where not in ("", ".") else ""
        return f"Find {_quoted(args.get('pattern', ''))}{suffix}"

    def summary(self, args: Mapping[str, Any], ws: Workspace) -> str:
        return f"finding files `{args.get('pattern', '')}`"

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        pattern: str = args["pattern"].strip()
        max_results = int(args.get("maxResults") or 1000)
        resolved, fd = _open_base(ctx, args.get("path"))
        if fd < 0:
            raise ToolFailure(f"{ctx.workspace.display(resolved.path)} is a file, not a directory", "NotADirectory")
        try:
            files, exact = await anyio.to_thread.run_sync(
                self._list, resolved.path, fd, search_sandbox(ctx), pattern.removeprefix("./")
            )
        finally:
            os.close(fd)
        if exact:
            files.sort()
            matches = files
        else:
            rx = glob_regex(pattern.removeprefix("./"))
            matches = sorted(f for f in files if rx.match(f))
        total = len(matches)
        shown_base = ctx.workspace.display(resolved.path)
        base_label = "the workspace" if resolved.path == ctx.workspace.cwd else f"{shown_base}/"
        truncated = total > max_results
        matches = matches[:max_results]
        if not matches:
            output = f"no files match `{pattern}` under {base_label}"
        else:
            head = f"{total} file{'s' if total != 1 else ''} match `{pattern}` under {base_label}"
            if resolved.path != ctx.workspace.cwd:
                head += f" (paths relative to {shown_base}/)"
            if truncated:
                head += f"; showing the first {max_results}"
            output = head + ":\n" + "\n".join(matches)
        raw = {"pattern": pattern, "path": resolved.path, "matches": matches, "count": total, "truncated": truncated}
        return ToolResult(output, raw_output=raw)

    def _list(self, base: str, fd: int, spec: SandboxSpec, pattern: str = "") -> tuple[list[str], bool]:
        """The files under `base` that may match `pattern`, and whether they all do (no further filtering)."""
        if rg_binary() is None:
            return list(walk_files(base)), False
        # A literal leading directory (`src/**/*.ts`) is where the walk starts: no need to list the rest of the tree.
        parts = pattern.split("/")
        literal = []
        for part in parts[:-1]:
            if any(c in part for c in "*?[{") or part in ("", ".", ".."):
                break
            literal.append(part)
        sub_fd = fd
        if literal and literal[0] not in SKIP_DIRS and not _literal_ignored(base, literal):
            try:
                sub_fd = fd
                for part in literal:  # no-follow, like every other open inside the boundary
                    nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=sub_fd)
                    if sub_fd != fd:
                        os.close(sub_fd)
                    sub_fd = nxt
            except OSError:
                if sub_fd != fd:
                    os.close(sub_fd)
                return [], True  # the literal directory does not exist (or is a symlink): nothing can match
        prefix = "/".join(literal) + "/" if sub_fd != fd else ""
        try:
            # rg pre-filters on the file name (a superset of the matches); the full pattern is decided in Python.
            proc = _run_rg(
                ["--files", *_RG_LIST, *name_filter(pattern), "--null"],
                sub_fd,
                os.path.join(base, *literal) if prefix else base,
                spec,
            )
        finally:
            if sub_fd != fd:
                os.close(sub_fd)
        err = proc.stderr.decode(errors="replace")
        if proc.returncode not in (0, 1) and not proc.stdout and err.strip() and "No files were searched" not in err:
            raise ToolFailure(f"listing files failed: {err[:500]}", "SearchFailed")
        listing = proc.stdout.decode("utf-8", errors="surrogateescape")
        names = listing.split("\0")
        if names and not names[-1]:
            names.pop()
        if ".git" in listing:
            names = [n for n in names if not _in_git_dir(n)]
        if prefix:
            names = [prefix + p for p in names]
        return names, _name_filter_is_exact(pattern)


class GrepTool(_SearchTool):
    name = "grep"
    description = (
        "Search file contents with a regular expression (Rust/PCRE-like syntax). Honours .gitignore, skips binary "
        "files and .git. include limits files by name glob (e.g. '*.ts'). Output lines are 'path:line: text', paths "
        "relative to the workspace, long lines clipped. A search of a directory never looks into files that may hold "
        "secrets (.env, keys, credentials, files holding a configured key); name such a file as path to search it "
        "(the user is asked)."
    )

    def title(self, args: Mapping[str, Any], ws: Workspace) -> str:
        where = args.get("path")
        suffix = f" in {display_path(ws, where)}" if isinstance(where, str) and where not in ("", ".") else ""
        inc = f" ({args['include']})" if args.get("include") else ""
        return f"Search {_quoted(args.get('pattern', ''))}{suffix}{inc}"

    def summary(self, args: Mapping[str, Any], ws: Workspace) -> str:
        return f"searching for `{args.get('pattern', '')}`"

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        pattern: str = args["pattern"]
        max_results = int(args.get("maxResults") or 100)
        resolved, fd = _open_base(ctx, args.get("path"))
        is_file = fd < 0
        if is_file:
            textio.check(ctx, resolved)
            try:  # the no-follow open refuses a file swapped for a symlink since it was resolved
                os.close(ctx.workspace.open_read(resolved, ctx.grants))
            except PathError as exc:
                raise ToolFailure(str(exc), exc.error_type) from None
            parent = ctx.workspace.resolve(os.path.dirname(resolved.path))
            try:
                fd = ctx.workspace.open_dir(parent, ctx.grants | {parent.path})
            except PathError as exc:
                raise ToolFailure(str(exc), exc.error_type) from None
            base, only = parent.path, os.path.basename(resolved.path)
        else:
            base, only = resolved.path, None
        try:
            if rg_binary() is not None:
                hits, truncated, files = await anyio.to_thread.run_sync(
                    self._rg, pattern, args, base, fd, only, max_results, search_sandbox(ctx)
                )
            else:
                hits, truncated, files = await anyio.to_thread.run_sync(
                    self._python, pattern, args, base, only, max_results
                )
        finally:
            os.close(fd)
        ws = ctx.workspace
        lines = []
        for rel, lineno, text in hits:
            shown = ws.display(os.path.join(base, rel))
            lines.append(f"{shown}:{lineno}: {_clip(text)}")
        at_least = "at least " if files >= SECRET_CHECK_LIMIT and secrets.REGISTRY.labelled() else ""
        in_files = f"{at_least}{files} file{'s' if files != 1 else ''}"
        if not hits:
            output = f"no matches for `{pattern}`"
        elif truncated:
            output = (
                f"showing the first {len(hits)} matching lines; {in_files} match (narrow with path or include, "
                "or raise maxResults):\n" + "\n".join(lines)
            )
        else:
            output = f"{len(hits)} matching line{'s' if len(hits) != 1 else ''} in {in_files}:\n" + "\n".join(lines)
        raw = {
            "pattern": pattern,
            "path": resolved.path,
            "filesMatched": files,
            "truncated": truncated,
            "matches": [{"path": os.path.join(base, r), "line": n, "text": _clip(t)} for r, n, t in hits],
        }
        locs = tuple({"path": os.path.join(base, r), "line": n} for r, n, _ in hits[:50])
        return ToolResult(output, raw_output=raw, locations=locs)

    @staticmethod
    def _flags(args: Mapping[str, Any]) -> tuple[list[str], bool]:
        """rg's flags, and whether `.git` is left to the caller to drop: with a name filter, `.git`'s files are at
        most walked, never read, so the costly `--glob !.git` override is left out (see `_RG_LIST`)."""
        names = name_filter(str(args["include"])) if args.get("include") else []
        flags = [*_RG_LIST, "--with-filename", *names] if names else list(_RG_COMMON)
        if args.get("caseInsensitive"):
            flags.append("--ignore-case")
        return flags, bool(names)

    def _rg(
        self,
        pattern: str,
        args: Mapping[str, Any],
        base: str,
        fd: int,
        only: str | None,
        max_results: int,
        spec: SandboxSpec,
    ) -> tuple[list[tuple[str, int, str]], bool, int]:
        """(hits in path order, whether more matching lines exist, how many files match)."""
        flags, drop_git = self._flags(args)
        target = [only] if only else []
        # Pass 1: which files match (parallel; rg stops reading a file at its first match).
        listed = _run_rg(
            ["--files-with-matches", "--null", "--no-messages", *flags, "-e", pattern, "--", *target], fd, base, spec
        )
        err = listed.stderr.decode(errors="replace").strip()
        # rc 2 without a message (or "No files were searched") only means a name filter left nothing to search.
        if listed.returncode == 2 and not listed.stdout and err and "No files were searched" not in err:
            raise ToolFailure(f"grep failed: {err[:800]}", "InvalidPattern" if "regex" in err else "SearchFailed")
        files = sorted(
            p.decode("utf-8", errors="surrogateescape").removeprefix("./") for p in listed.stdout.split(b"\0") if p
        )
        if drop_git and b".git" in listed.stdout:
            files = [f for f in files if not _in_git_dir(f)]
        include = args.get("include")
        if include and not only:
            rx = include_regex(str(include))
            files = [f for f in files if rx.match(f)]
        if not only:
            files = _without_secrets(base, files)
        if not files:
            return [], False, 0
        # Pass 2: the lines, from the first files in path order; one more than needed tells whether there is more.
        chosen = files[:max_results]
        res = _run_rg(
            ["--json", "--no-messages", *flags, "--max-count", str(max_results + 1), "-e", pattern, "--", *chosen],
            fd,
            base,
            spec,
        )
        by_file: dict[str, list[tuple[str, int, str]]] = {}
        for line in res.stdout.splitlines():
            if b'"type":"match"' not in line[:20]:
                continue
            data = orjson.loads(line)["data"]
            path = _rg_text(data["path"]).removeprefix("./")
            by_file.setdefault(path, []).append((path, data["line_number"], _rg_text(data["lines"])))
        hits: list[tuple[str, int, str]] = []
        for name in chosen:
            hits.extend(sorted(by_file.get(name, []), key=lambda h: h[1]))
        more = len(hits) > max_results or len(files) > len(chosen)
        return hits[:max_results], more, len(files)

    def _python(
        self, pattern: str, args: Mapping[str, Any], base: str, only: str | None, max_results: int
    ) -> tuple[list[tuple[str, int, str]], bool, int]:
        try:
            rx = re.compile(pattern, re.IGNORECASE if args.get("caseInsensitive") else 0)
        except re.error as exc:
            raise ToolFailure(f"invalid regular expression: {exc}", "InvalidPattern") from None
        include = include_regex(str(args["include"])) if args.get("include") else None
        names = [only] if only else [n for n in sorted(walk_files(base)) if not is_secret_file_name(n)]
        held = [v for v, _ in secrets.REGISTRY.labelled()]
        hits: list[tuple[str, int, str]] = []
        total = files = 0
        for rel in names:
            if include is not None and not include.match(rel):
                continue
            try:
                with open(os.path.join(base, rel), "rb") as f:
                    data = f.read()
            except OSError:
                continue
            if b"\x00" in data[:8192] or (not only and any(v in data for v in held)):
                continue
            found = False
            for n, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
                if rx.search(line):
                    total += 1
                    found = True
                    if len(hits) < max_results:
                        hits.append((rel, n, line))
            files += found
        return hits, total > len(hits), files


def _without_secrets(base: str, files: list[str]) -> list[str]:
    """The matching files a directory search may show: no well-known secret file (by name, as listed under `base`)
    and none that holds a registered secret value. Dropped whatever the pattern, so which files were left out says
    nothing about what they hold; the first `SECRET_CHECK_LIMIT` are checked for values, and when more match, the
    rest are not shown (the count is then a lower bound) rather than shown unchecked."""
    files = [f for f in files if not is_secret_file_name(f)]
    if not secrets.REGISTRY.labelled():
        return files
    return [f for f in files[:SECRET_CHECK_LIMIT] if value_in_file(os.path.join(base, f)) is None]


def _rg_text(v: Mapping[str, Any]) -> str:
    if "text" in v:
        return str(v["text"])
    return base64.b64decode(v.get("bytes", "")).decode("utf-8", errors="replace")


def _clip(text: str) -> str:
    text = text.rstrip("\r\n")
    if len(text) <= MAX_LINE_CHARS:
        return text
    return text[:MAX_LINE_CHARS] + f" [… {len(text) - MAX_LINE_CHARS} more characters]"
