"""Which files a call touches may hold secrets: the facts the policy asks on (`CallFacts.secrets`).

A file is a secret file when its name is a well-known one (`permissions.secret_files`: `.env`, `*.pem`,
`.aws/credentials`...), as written or where it resolves, or when it holds the whole value of a secret the agent knows
of (`runtime.secrets`: a provider's key, a token in the environment, an MCP server's env value) under any name.
Reading such a file asks in every mode, because once the model has a value no redaction follows it through a
transform.

The content check must be cheap, since every file a call names is checked before the call is decided: only regular
files (a FIFO or a device is never read; the open does not block), up to `SCAN_LIMIT` bytes, read in chunks and
searched for each value's bytes (memchr-fast): 20 µs for a 4 KB file, 0.27 ms for 1 MB, against 9 µs to resolve the
path alone (`python -m bench --only secrets`). A larger file is checked in its first `SCAN_LIMIT` bytes only
(docs/secrets.md says so).
"""

from __future__ import annotations

import fnmatch
import glob
import os
import stat
from collections.abc import Sequence

from permissions.secret_files import is_secret_file_name, is_secret_name, why_secret_name
from permissions.shell_words import expand
from runtime import secrets

SCAN_LIMIT = 16 << 20
_CHUNK = 1 << 20


def value_in_file(path: str) -> str | None:
    """Where the secret value `path` holds comes from (`OPENAI_API_KEY`), or None: not a regular file, unreadable,
    or holding none of the registered values in its first `SCAN_LIMIT` bytes."""
    values = secrets.REGISTRY.labelled()
    if not values:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0))
    except OSError:
        return None
    # Read in chunks, not mapped: a file truncated while it is mapped would kill the agent with SIGBUS. Each chunk
    # keeps the tail of the one before, so a value across the boundary is found.
    overlap = max(len(v) for v, _ in values) - 1
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        tail, read = b"", 0
        while read < SCAN_LIMIT:
            chunk = os.read(fd, min(_CHUNK, SCAN_LIMIT - read))
            if not chunk:
                break
            read += len(chunk)
            data = tail + chunk
            for value, label in values:
                if value in data:
                    return label
            tail = data[-overlap:] if overlap else b""
    except OSError:
        return None
    finally:
        os.close(fd)
    return None


def secret_reason(given: str, real: str, shown: str) -> str | None:
    """Why reading the existing file `given` (resolved: `real`) may put a secret in the model's context, in the words
    a question shows (`shown` is the resolved path as the user reads it), or None."""
    if not os.path.isfile(real):
        return None  # a directory, a file that does not exist yet, a device: nothing to read a secret from
    if is_secret_file_name(given):
        return why_secret_name(given)
    if is_secret_file_name(real):
        return f"{why_secret_name(given)} (it leads to `{shown}`)"
    label = value_in_file(real)
    return None if label is None else f"`{given}` holds the value of {label}"


# ---- what a command reads without naming it --------------------------------------------------------------------
WALK_LIMIT = 20_000  # entries a recursive reader's tree is walked for; past it, the tree is taken to hold one
_GLOB_CHARS = frozenset("*?[")
_GREPS = frozenset({"grep", "egrep", "fgrep", "zgrep"})
_SEARCHERS = frozenset({"rg", "ag", "ack", "ack-grep"})
_RG_HIDDEN = frozenset({"--hidden", "-.", "-uu", "-uuu", "--no-ignore-hidden"})


def _recursive_dirs(argv: Sequence[str], cwd: str) -> list[str] | None:
    """The directories `argv` reads every file under (grep -r, rg, ag, ack, diff -r), or None when it reads none."""
    name = os.path.basename(argv[0]) if argv else ""
    args = list(argv[1:])
    shorts = "".join(a[1:] for a in args if a.startswith("-") and not a.startswith("--"))
    if name in _GREPS:
        recursive = (
            "r" in shorts
            or "R" in shorts
            or any(a in ("--recursive", "--dereference-recursive", "--directories=recurse") for a in args)
        )
    elif name == "diff":
        recursive = "r" in shorts or "--recursive" in args
    else:
        recursive = name in _SEARCHERS
    if not recursive:
        return None
    operands = [a for a in args if not a.startswith("-")]
    if name != "diff" and not {"-e", "-f", "--regexp", "--file"} & set(args):
        operands = operands[1:]  # the pattern
    if not operands:
        return [cwd]  # a search without a path reads the working directory
    return [os.path.normpath(os.path.join(cwd, a)) for a in operands if os.path.isdir(os.path.join(cwd, a))]


def _secret_names_under(top: str, skip_hidden: bool, limit: int = 3) -> tuple[list[str], bool]:
    """Up to `limit` well-known secret files under `top` (relative to it), and whether the walk was cut short."""
    found: list[str] = []
    seen = 0
    for dirpath, dirs, files in os.walk(top):
        dirs[:] = [d for d in dirs if d != ".git" and not (skip_hidden and d.startswith("."))]
        seen += len(dirs) + len(files)
        parent = os.path.basename(dirpath)
        for f in files:
            if is_secret_name(f, parent) and not (skip_hidden and f.startswith(".")):
                rel = os.path.relpath(dirpath, top)
                found.append(f if rel == "." else os.path.join(rel, f))
                if len(found) == limit:
                    return found, False
        if seen > WALK_LIMIT:
            return found, True
    return found, False


def _expands_to_secret(word: str, cwd: str) -> str | None:
    """Why the source text `word` may expand to a well-known secret file in `cwd` (as bash would expand it: braces,
    quotes, `~+`, then globs), or None."""
    for text in expand(word) or ():
        if text.startswith("~+") and (len(text) == 2 or text[2] == "/"):
            text = cwd + text[2:]  # `~+` is the shell's working directory
        matches = _glob(text, cwd) if _GLOB_CHARS & set(text) else [text]
        for m in matches:
            full = os.path.join(cwd, m)
            if not os.path.isfile(full):
                continue
            shown = os.path.relpath(full, cwd) if not os.path.isabs(m) else m
            if is_secret_file_name(m) or is_secret_file_name(os.path.realpath(full)):
                return f"{why_secret_name(shown)} (`{word}` may expand to it)"
    return None


def _glob(pattern: str, cwd: str) -> list[str]:
    try:
        return glob.glob(pattern, root_dir=cwd)[:200]
    except (OSError, ValueError):
        return []


_GIT_READERS = frozenset({"show", "log", "diff", "blame", "annotate", "cat-file", "grep", "whatchanged"})
_GIT_VALUED = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace"})


def _git_reads(argv: Sequence[str], cwd: str) -> list[str]:
    """Well-known secret files a git command reads from the repository by pathspec or `REV:PATH` (`git show
    HEAD:.env`, `git log -p -- .env`): they need not exist in the working tree, so names are checked; a pathspec
    pattern (`'*env'`, `':(icase).ENV'`, an exclusion `':!README.md'`) is matched against the secret files of the
    working tree, as git would match the tracked ones."""
    words = list(argv[1:])
    k = 0
    while k < len(words) and words[k].startswith("-"):
        k += 2 if words[k] in _GIT_VALUED else 1
    if k >= len(words) or words[k] not in _GIT_READERS:
        return []
    out = []
    present: list[str] | None = None
    for word in words[k + 1 :]:
        if word.startswith("-"):
            continue
        spec = word.split(":", 1)[1] if ":" in word and not word.startswith(":") else word
        if spec and is_secret_file_name(spec):
            out.append(f"{why_secret_name(spec)} (`git {words[k]}` reads it from the repository)")
        elif spec.startswith(":") or _GLOB_CHARS & set(spec):
            if present is None:
                present, _ = _secret_names_under(cwd, skip_hidden=False, limit=200)
            hit = next((f for f in present if _pathspec_matches(spec, f)), None)
            if hit is not None:
                out.append(f"{why_secret_name(hit)} (`git {words[k]}` reads what `{word}` matches)")
    return out


def _pathspec_matches(spec: str, path: str) -> bool:
    """Whether a git pathspec may match `path` (relative, `/`-separated): a pattern as git's default wildcard
    matching reads it (`*` crosses `/`), case-insensitively under `:(icase)`; any other magic, or an exclusion,
    may match anything."""
    if spec.startswith(":"):
        if not spec.startswith(":("):
            return True  # `:!x`, `:^x`, `:/x`: an exclusion or a top-relative spec may take in any file
        magic, _, rest = spec[2:].partition(")")
        words = {m.strip() for m in magic.split(",")}
        if words - {"icase", "glob", "literal", "top"}:
            return True
        if "icase" in words:
            spec, path = rest.lower(), path.lower()
        else:
            spec = rest
        if "literal" in words:
            return spec == path
    return fnmatch.fnmatchcase(path, spec) or fnmatch.fnmatchcase(os.path.basename(path), spec)


def unnamed_reads(commands: Sequence[Sequence[str]], cwd: str, opaque: bool) -> list[str]:
    """Reasons a command line may read a well-known secret file it does not name: a word that expands to one (only
    when the analysis found words it cannot see through, `opaque`: a glob, braces, `$'...'` quoting, `~+`), a
    recursive reader whose tree holds one, or git reading one from the repository."""
    out: list[str] = []
    for argv in commands:
        if opaque:
            for word in argv[1:]:
                reason = _expands_to_secret(word, cwd)
                if reason is not None:
                    out.append(reason)
        if argv and os.path.basename(argv[0]) == "git":
            out += _git_reads(argv, cwd)
        dirs = _recursive_dirs(argv, cwd)
        for top in dirs or ():
            hidden_too = os.path.basename(argv[0]) not in _SEARCHERS or bool(_RG_HIDDEN & set(argv))
            found, cut = _secret_names_under(top, skip_hidden=not hidden_too)
            where = os.path.relpath(top, cwd)
            prog = f"`{os.path.basename(argv[0])}`"
            if cut:
                out.append(f"{prog} reads more files under `{where}` than can be checked for secrets")
            elif found:
                listed = ", ".join(f"`{os.path.join(where, f) if where != '.' else f}`" for f in found)
                out.append(f"{prog} reads every file under `{where}`, which holds {listed}: they may hold secrets")
    return list(dict.fromkeys(out))
