"""What individual programs do: the tables and argv checks behind `permissions.shell`.

This module knows programs, not shell syntax. It receives one simple command as a list of `Word`s (already split and
unquoted by the parser walk), strips wrappers such as `env`, `sudo` or `xargs`, and judges the program that remains:
proven read-only or not, destructive, networked, an interpreter, or a runner of another command (`find -exec`,
`bash -c`, `eval`). Anything it does not recognise is judged "not read-only": the allowlist is the only way in.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Word:
    """One shell word. `text` is the unquoted value when `exact`, otherwise the word's source text.

    `option_safe` means that whatever the word expands to, every resulting argument starts with the same literal
    character, which is neither `-` nor `+`: an expansion cannot smuggle an option into the program.
    """

    text: str
    exact: bool
    option_safe: bool
    subst: bool = False
    expands: bool = False


@dataclass(slots=True)
class Verdict:
    """The judgement of one program invocation (mutable while it is being built)."""

    read_only: bool = True
    reasons: list[str] = field(default_factory=list)
    destructive: list[str] = field(default_factory=list)
    network: list[str] = field(default_factory=list)
    download: bool = False
    interpreter: bool = False
    stdin_script: bool = False
    dynamic: bool = False
    script: str | None = None
    nested: list[tuple[list[Word], str]] = field(default_factory=list)

    def deny(self, reason: str) -> None:
        self.read_only = False
        if reason not in self.reasons:
            self.reasons.append(reason)

    def destroy(self, reason: str) -> None:
        self.deny(reason)
        self.destructive.append(reason)

    def net(self, reason: str) -> None:
        self.deny(reason)
        self.network.append(reason)


@dataclass(slots=True)
class Unwrapped:
    """A simple command with its wrappers (`env`, `sudo`, `timeout` ...) taken off."""

    words: list[Word]
    wrappers: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    read_only: bool = True
    dynamic: bool = False
    stuck: bool = False


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


READ_ONLY = _names(
    "ls cat head tail wc grep egrep fgrep pwd echo printf true false which type stat du df cut tr diff cmp basename "
    "dirname realpath readlink uname whoami id env printenv jq test [ cd : command"
)
"""Programs that cannot change anything whatever their arguments (flag-checked programs live in `_CHECKERS`)."""

DESTRUCTIVE = {name: f"{name} deletes files" for name in ("rm", "rmdir", "shred", "unlink", "srm", "wipefs")}
DESTRUCTIVE |= {
    "dd": "dd can overwrite files and disks",
    "truncate": "truncate discards file contents",
    "mkfs": "formats a file system",
    "mke2fs": "formats a file system",
    "mkswap": "formats a file system",
    "fdisk": "repartitions a disk",
    "sfdisk": "repartitions a disk",
    "parted": "repartitions a disk",
    "shutdown": "stops the machine",
    "reboot": "stops the machine",
    "poweroff": "stops the machine",
    "halt": "stops the machine",
}
RECURSIVE_OWNERSHIP = {
    name: f"{name} -R changes ownership or permissions recursively" for name in ("chmod", "chown", "chgrp")
}
GIT_DESTRUCTIVE = {
    "reset": "git reset --hard discards changes",
    "clean": "git clean deletes untracked files",
    "push": "git push --force or --delete rewrites remote history",
    "checkout": "git checkout discards local changes",
    "restore": "git restore discards local changes",
    "branch": "git branch -D deletes branches",
    "stash": "git stash drop deletes stashed changes",
    "rm": "git rm deletes files",
}
OTHER_DESTRUCTIVE = (
    "find -delete deletes files",
    "rsync --delete deletes files",
    "runs a destructive program through another program",
)
DESTRUCTIVE_REASONS = frozenset(
    [*DESTRUCTIVE.values(), *RECURSIVE_OWNERSHIP.values(), *GIT_DESTRUCTIVE.values(), *OTHER_DESTRUCTIVE]
)
"""Every reason that marks a command destructive: the policy asks for these even in auto mode."""

DOWNLOADERS = _names("curl wget aria2c http https xh lftp ftp nc ncat netcat socat telnet scp sftp")
NETWORK = DOWNLOADERS | _names("ssh ping dig nslookup host traceroute npx uvx pnpx bunx")
NETWORK_SUBCOMMANDS = {
    "pip": {"install", "download", "index", "search"},
    "npm": {"install", "i", "ci", "add", "update", "up", "publish", "exec", "x", "view", "info", "create", "audit"},
    "pnpm": {"install", "i", "add", "update", "up", "dlx", "publish", "fetch"},
    "yarn": {"install", "add", "upgrade", "up", "dlx", "npm", "publish"},
    "bun": {"install", "i", "add", "x", "upgrade"},
    "uv": {"pip", "add", "sync", "lock", "tool", "run"},
    "cargo": {"install", "fetch", "update", "publish", "search", "add"},
    "go": {"get", "install", "mod"},
    "gem": {"install", "update", "fetch", "push"},
    "apt": {"install", "update", "upgrade", "download"},
    "apt-get": {"install", "update", "upgrade", "download"},
    "brew": {"install", "update", "upgrade", "fetch", "tap"},
    "conda": {"install", "create", "update"},
    "docker": {"pull", "push", "login", "run", "build"},
    "podman": {"pull", "push", "login", "run", "build"},
    "git": {"push", "fetch", "clone", "pull", "ls-remote", "submodule", "remote", "archive", "send-email"},
}
SHELLS = _names("sh bash zsh dash ksh ash mksh fish")
INTERPRETERS = SHELLS | _names("perl ruby node nodejs deno php lua luajit Rscript tclsh pwsh osascript source .")
_PYTHON = re.compile(r"^(python|pypy)[0-9.]*$")
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://|^git@[^:]+:", re.ASCII)
TRUSTED_DIRS = ("/bin/", "/usr/bin/", "/usr/local/bin/", "/sbin/", "/usr/sbin/")

SENSITIVE_VARIABLES = _names(
    "PATH IFS ENV BASH_ENV SHELLOPTS BASHOPTS PS4 PROMPT_COMMAND HOME XDG_CONFIG_HOME PAGER MANPAGER EDITOR VISUAL "
    "RIPGREP_CONFIG_PATH GCONV_PATH SUDO_ASKPASS SSH_ASKPASS BROWSER ZDOTDIR FPATH CDPATH GLOBIGNORE TERMINFO"
)
_SENSITIVE_PREFIXES = ("LD_", "DYLD_", "GIT_", "PYTHON", "LESS", "PERL", "RUBY", "NODE_", "BASH_FUNC_")
_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=", re.ASCII)


def is_sensitive_variable(name: str) -> bool:
    """True for variables that change which program runs or how (PATH, LD_PRELOAD, GIT_*, PAGER ...)."""
    return name in SENSITIVE_VARIABLES or name.startswith(_SENSITIVE_PREFIXES)


def program_name(word: Word) -> tuple[str, bool]:
    """The name to judge a program by, and whether that name is trustworthy (a bare name or a system path)."""
    text = word.text
    if "/" not in text:
        return text, True
    base = text.rsplit("/", 1)[1]
    return base, any(text == prefix + base for prefix in TRUSTED_DIRS)


# -- option helpers ----------------------------------------------------------------------------------------------


def _short(arg: str, letters: str) -> bool:
    """True when `arg` is a short-option cluster (`-abc`) containing any of `letters`."""
    return len(arg) > 1 and arg[0] == "-" and arg[1] != "-" and any(ch in letters for ch in arg[1:])


def _long(arg: str, *names: str) -> bool:
    """True when `arg` is `--name`, `--name=...` or an abbreviation of one (GNU and git accept unique prefixes)."""
    if not arg.startswith("--") or len(arg) == 2:
        return False
    stem = arg[2:].split("=", 1)[0]
    return any(name.startswith(stem) for name in names)


def _smuggling(prog: str, args: Sequence[Word], v: Verdict) -> None:
    if any(not a.exact and not a.option_safe for a in args):
        v.deny(f"an expanded argument could smuggle an option into {prog}")


def _rest_until(args: Sequence[Word], start: int, ends: tuple[str, ...]) -> list[Word]:
    out: list[Word] = []
    for a in args[start:]:
        if a.exact and a.text in ends:
            break
        out.append(a)
    return out


# -- wrappers ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Wrapper:
    short_flags: str = ""
    short_args: str = ""
    long_flags: frozenset[str] = frozenset()
    long_args: frozenset[str] = frozenset()
    positionals: int = 0
    read_only: bool = True
    why: str = ""


_WRAPPERS = {
    "env": _Wrapper("i0v", "uC", _names("ignore-environment null debug"), _names("unset chdir")),
    "sudo": _Wrapper(
        "AbEHnPSBN",
        "ugChprtTUDR",
        _names("preserve-env non-interactive askpass background set-home stdin"),
        _names("user group chdir prompt role type host other-user close-from login-class command-timeout"),
        read_only=False,
        why="runs as another user via sudo",
    ),
    "doas": _Wrapper("n", "uC", read_only=False, why="runs as another user via doas"),
    "nice": _Wrapper("", "n", long_args=_names("adjustment")),
    "nohup": _Wrapper(read_only=False, why="nohup may write nohup.out"),
    "timeout": _Wrapper("v", "sk", _names("preserve-status foreground verbose"), _names("signal kill-after"), 1),
    "time": _Wrapper("p"),
    "command": _Wrapper("p"),
    "exec": _Wrapper("cl", "a"),
    "setsid": _Wrapper("cfw"),
    "stdbuf": _Wrapper("", "ioe", long_args=_names("input output error")),
    "xargs": _Wrapper(
        "0rtpxo",
        "adEILnPs",
        _names("null no-run-if-empty verbose interactive exit open-tty show-limits"),
        _names("arg-file delimiter eof replace max-lines max-args max-procs max-chars process-slot-var"),
        read_only=False,
        why="xargs runs a command on input it cannot see",
    ),
}
_XARGS_OPTIONAL = "iel"  # `-i[replace]`, `-e[eof]`, `-l[lines]` take an optional value glued to the flag


def _skip_options(spec: _Wrapper, name: str, words: list[Word], i: int) -> int | None:
    """Index of the first word after `name`'s options, or None when an option is not understood."""
    while i < len(words):
        w = words[i]
        if not w.exact:
            return None
        t = w.text
        if t == "--":
            return i + 1
        if name == "nice" and re.fullmatch(r"-\d+", t):
            i += 1
            continue
        if name == "env" and t == "-":
            i += 1
            continue
        if t.startswith("--"):
            stem, eq, _ = t[2:].partition("=")
            if stem in spec.long_flags and not eq:
                i += 1
            elif stem in spec.long_args:
                i += 1 if eq else 2
            else:
                return None
            continue
        if len(t) < 2 or t[0] != "-":
            return i
        j = 1
        while j < len(t):
            ch = t[j]
            if ch in spec.short_flags:
                j += 1
            elif ch in spec.short_args:
                i += 0 if j + 1 < len(t) else 1  # value glued (`-uroot`) or in the next word
                break
            elif name == "xargs" and ch in _XARGS_OPTIONAL:
                break
            else:
                return None
        i += 1
    return i


def unwrap(words: list[Word]) -> Unwrapped:
    """Take wrappers off the front of a simple command. Unknown wrapper options stop unwrapping (fail closed)."""
    out = Unwrapped(list(words))
    while out.words and out.words[0].exact:
        name, trusted = program_name(out.words[0])
        spec = _WRAPPERS.get(name)
        if spec is None or not trusted:
            break
        ws = out.words
        if name == "command" and any(w.exact and _short(w.text, "vV") for w in ws[1:2]):
            break  # `command -v x` only looks a name up
        i = _skip_options(spec, name, ws, 1)
        if i is None:
            out.read_only = False
            out.stuck = True
            split = name == "env" and any(_short(w.text, "S") or _long(w.text, "split-string") for w in ws if w.exact)
            out.dynamic = split
            out.reasons.append("env -S splits a string into a command" if split else f"cannot tell what {name} runs")
            break
        if name == "env":
            while i < len(ws) and (m := _ASSIGNMENT.match(ws[i].text)):
                if is_sensitive_variable(m.group(1)):
                    out.read_only = False
                    out.reasons.append(f"sets {m.group(1)}, which changes what runs")
                i += 1
        i += spec.positionals
        if i >= len(ws):
            if name == "xargs":
                out.wrappers.append(name)
                out.words = [Word("echo", True, True)]
                out.read_only = False
                out.reasons.append(spec.why)
            break  # a wrapper with no command (`env`, `nice`) only prints
        out.wrappers.append(name)
        if not spec.read_only:
            out.read_only = False
            out.reasons.append(spec.why)
        out.words = ws[i:]
    return out


# -- program checks ----------------------------------------------------------------------------------------------


def _find(args: Sequence[Word], v: Verdict) -> None:
    _smuggling("find", args, v)
    for i, a in enumerate(args):
        t = a.text if a.exact else ""
        if t in ("-exec", "-execdir", "-ok", "-okdir"):
            v.deny("find -exec runs a program")
            v.nested.append((_rest_until(args, i + 1, (";", "+")), "find"))
        elif t == "-delete":
            v.destroy("find -delete deletes files")
        elif t in ("-fprint", "-fprint0", "-fprintf", "-fls"):
            v.deny("find -fprint writes a file")


def _fd(args: Sequence[Word], v: Verdict) -> None:
    _smuggling("fd", args, v)
    for i, a in enumerate(args):
        if a.exact and (_short(a.text, "xX") or _long(a.text, "exec", "exec-batch")):
            v.deny("fd -x runs a program")
            v.nested.append((_rest_until(args, i + 1, (";",)), "fd"))
            return


def _rg(args: Sequence[Word], v: Verdict) -> None:
    _smuggling("rg", args, v)
    for a in args:
        if a.exact and _long(a.text, "pre", "pre-glob", "hostname-bin"):
            v.deny("rg --pre runs a program")
        elif a.exact and (_short(a.text, "z") or _long(a.text, "search-zip")):
            v.deny("rg -z runs decompression programs")


_Check = Callable[[Sequence[Word], Verdict], None]


def _flags(prog: str, shorts: str, longs: tuple[str, ...], why: str) -> _Check:
    def check(args: Sequence[Word], v: Verdict) -> None:
        _smuggling(prog, args, v)
        if any(a.exact and ((shorts and _short(a.text, shorts)) or _long(a.text, *longs)) for a in args):
            v.deny(why)

    return check


def _sort(args: Sequence[Word], v: Verdict) -> None:
    _flags("sort", "o", ("output",), "sort -o writes a file")(args, v)
    if any(a.exact and _long(a.text, "compress-program") for a in args):
        v.deny("sort --compress-program runs a program")


def _uniq(args: Sequence[Word], v: Verdict) -> None:
    operands, skip, ended = 0, False, False
    for a in args:
        if not a.exact:
            v.deny("an expanded argument could change which file uniq writes")
            return
        t = a.text
        if skip:
            skip = False
        elif ended or t == "-" or not t.startswith("-"):
            operands += 1
        elif t == "--":
            ended = True
        elif t in ("-f", "-s", "-w") or t in ("--skip-fields", "--skip-chars", "--check-chars"):
            skip = True
    if operands > 1:
        v.deny("uniq writes its second operand")


def _date(args: Sequence[Word], v: Verdict) -> None:
    _smuggling("date", args, v)
    skip = False
    for a in args:
        t = a.text
        if skip:
            skip = False
        elif _short(t, "s") or _long(t, "set"):
            v.deny("date -s sets the clock")
        elif t in ("-d", "-f", "-r", "--date", "--file", "--reference"):
            skip = True
        elif not t.startswith(("-", "+")):
            v.deny("date with an operand sets the clock")


def _pager(args: Sequence[Word], v: Verdict) -> None:
    _smuggling("less", args, v)
    for a in args:
        t = a.text
        if t.startswith("+"):
            v.deny("a pager start-up command can run programs")
        elif _short(t, "oOk") or _long(t, "log-file", "LOG-FILE", "lesskey-file", "lesskey-src", "lesskey-content"):
            v.deny("pager options can write files or load key bindings")


_SED_SCRIPT = re.compile(r"(?:\d+|\$)(?:,(?:\d+|\$))?p|/(?:[^/\\\n]|\\[^\n])*/p")


def _sed(args: Sequence[Word], v: Verdict) -> None:
    quiet, scripts, operands = False, [], []
    it = iter(args)
    for a in it:
        if not a.exact:
            v.deny("an expanded argument could smuggle an option into sed")
            return
        t = a.text
        if t in ("-n", "--quiet", "--silent"):
            quiet = True
        elif t in ("-e", "--expression"):
            nxt = next(it, None)
            scripts.append(nxt.text if nxt is not None and nxt.exact else "\n")
        elif t.startswith("--expression="):
            scripts.append(t.split("=", 1)[1])
        elif t in ("-ne", "-en"):
            quiet = True
            nxt = next(it, None)
            scripts.append(nxt.text if nxt is not None and nxt.exact else "\n")
        elif t in ("-E", "-r", "-s", "-u", "-z", "--regexp-extended", "--separate", "--posix", "--sandbox"):
            continue
        elif _short(t, "i") or _long(t, "in-place"):
            v.deny("sed -i edits files in place")
            return
        elif t.startswith("-") and t != "-":
            v.deny("sed is read-only only as `sed -n 'Np'`")
            return
        else:
            operands.append(t)
    if not scripts and operands:
        scripts.append(operands.pop(0))
    if not quiet or not scripts or not all(_SED_SCRIPT.fullmatch(s) for s in scripts):
        v.deny("sed is read-only only as `sed -n 'Np'`")


_GIT_READ_ONLY = frozenset({"status", "diff", "log", "show", "branch", "rev-parse", "ls-files", "blame", "grep"})
_GIT_GLOBAL_FLAGS = _names("--no-pager -P --no-optional-locks --literal-pathspecs --no-replace-objects")
_GIT_BRANCH_FLAGS = _names(
    "-a --all -r --remotes -l --list -v -vv --verbose --show-current --no-color --color --column --no-column"
)


def _git(args: Sequence[Word], v: Verdict) -> None:
    i = 0
    while i < len(args) and args[i].exact and args[i].text.startswith("-"):
        t = args[i].text
        if t in ("-C", "-c"):
            if t == "-c":
                v.deny("git -c sets configuration that can run programs")
            i += 2
            continue
        if t not in _GIT_GLOBAL_FLAGS:
            v.deny("git option can point git at other configuration or programs")
        i += 1
    if i >= len(args) or not args[i].exact:
        v.deny("could not tell which git subcommand runs")
        return
    sub, rest = args[i].text, args[i + 1 :]
    texts = [a.text for a in rest if a.exact]
    if sub in NETWORK_SUBCOMMANDS["git"]:
        v.net(f"git {sub} uses the network")
    if sub not in _GIT_READ_ONLY:
        v.deny(f"git {sub} is not known to be read-only")
    _smuggling("git", rest, v)
    if sub in ("diff", "log", "show") and any(_long(t, "output", "ext-diff") for t in texts):
        v.deny(f"git {sub} --output writes a file")
    if sub == "grep" and any(_short(t, "O") or _long(t, "open-files-in-pager") for t in texts):
        v.deny("git grep -O runs a program")
    if sub == "branch":
        listing = any(t in ("-l", "--list") for t in texts)
        if any(t not in _GIT_BRANCH_FLAGS and (t.startswith("-") or not listing) for t in texts):
            v.deny("git branch with arguments changes branches")
        if any(t in ("-D", "--delete") or _short(t, "D") for t in texts):
            v.destroy(GIT_DESTRUCTIVE["branch"])
    destructive = {
        "reset": any(t in ("--hard", "--merge", "--keep") for t in texts),
        "clean": True,
        "push": any(
            _short(t, "fd") or _long(t, "force", "force-with-lease", "delete", "mirror") or t[:1] in "+:"
            for t in texts
            if t
        ),
        "checkout": any(t in ("--", ".", "-f", "--force") for t in texts),
        "restore": not {"--staged", "-S"} & set(texts) or bool({"--worktree", "-W"} & set(texts)),
        "stash": bool(texts) and texts[0] in ("drop", "clear"),
        "rm": "--cached" not in texts,
    }
    if destructive.get(sub):
        v.destroy(GIT_DESTRUCTIVE[sub])


def _shell(prog: str, args: Sequence[Word], v: Verdict) -> None:
    has_c, i = False, 0
    while i < len(args) and args[i].exact:
        t = args[i].text
        if t == "--":
            i += 1
            break
        if t in ("-o", "+o", "-O", "+O"):
            i += 2
            continue
        if t.startswith("--"):
            if t not in ("--noprofile", "--norc", "--login", "--posix"):
                v.deny(f"{prog} runs with an unusual option")
            i += 1
            continue
        if len(t) > 1 and t[0] in "-+":
            has_c = has_c or "c" in t[1:]
            i += 1
            continue
        break
    if not has_c:
        v.interpreter = True
        v.stdin_script = i >= len(args)
        v.deny(f"runs a {prog} script" if i < len(args) else f"runs {prog} on commands from its input")
    elif i < len(args) and args[i].exact:
        v.script = args[i].text
    else:
        v.interpreter = True
        v.dynamic = True


def _eval(args: Sequence[Word], v: Verdict) -> None:
    if all(a.exact for a in args):
        v.script = " ".join(a.text for a in args)
    else:
        v.dynamic = True


def _printf(args: Sequence[Word], v: Verdict) -> None:
    if args and (not args[0].option_safe or args[0].text.startswith("-v")):
        v.deny("printf -v sets a shell variable")


_CHECKERS: dict[str, _Check] = {
    "find": _find,
    "fd": _fd,
    "rg": _rg,
    "sort": _sort,
    "uniq": _uniq,
    "date": _date,
    "less": _pager,
    "more": _pager,
    "sed": _sed,
    "git": _git,
    "eval": _eval,
    "printf": _printf,
    "tree": _flags("tree", "oR", (), "tree -o writes a file"),
    "file": _flags("file", "C", ("compile",), "file -C writes a file"),
}


def _subcommand(args: Sequence[Word]) -> str | None:
    for a in args:
        if not a.exact:
            return None
        if not a.text.startswith("-"):
            return a.text
    return None


def _hidden_programs(args: Sequence[Word], v: Verdict) -> None:
    # Unknown programs often run their arguments (`setsid rm -rf x`, `watch curl ...`): assume they do.
    names = {a.text.rsplit("/", 1)[-1] for a in args if a.exact}
    if names & DESTRUCTIVE.keys():
        v.destroy("runs a destructive program through another program")
    if names & NETWORK:
        v.net("runs a network program through another program")


def judge(words: Sequence[Word], *, known: bool = True) -> Verdict:
    """Judge one unwrapped simple command whose program word is exact.

    `known=False` says unwrapping got stuck on an option it did not understand: the words are then only scanned for
    programs they might run.
    """
    v = Verdict()
    name, trusted = program_name(words[0])
    args = words[1:]
    if not trusted:
        v.deny("runs a program from a path")
    if _PYTHON.match(name) and len(args) >= 2 and args[0].text == "-m" and args[1].text == "pip":
        name, args = "pip", args[2:]
    if re.fullmatch(r"pip[0-9.]*", name):
        name = "pip"
    if not known:
        v.deny(f"{name} is not known to be read-only")
        _hidden_programs(args, v)
    elif name in SHELLS:
        _shell(name, args, v)
    elif _PYTHON.match(name) or name in INTERPRETERS:
        v.interpreter = True
        v.deny("sources a shell script" if name in ("source", ".") else f"runs {name} code")
    elif name in _CHECKERS:
        _CHECKERS[name](args, v)
    elif name in READ_ONLY:
        pass
    elif name in NETWORK:
        v.net(f"{name} uses the network")
        v.download = name in DOWNLOADERS
    elif name in DESTRUCTIVE:
        v.destroy(DESTRUCTIVE[name])
    elif name.startswith("mkfs"):
        v.destroy(DESTRUCTIVE["mkfs"])
    elif name in RECURSIVE_OWNERSHIP:
        recursive = any(a.exact and (_short(a.text, "R") or _long(a.text, "recursive")) for a in args)
        (v.destroy if recursive else v.deny)(RECURSIVE_OWNERSHIP[name] if recursive else f"{name} changes files")
    elif name == "rsync":
        if any(a.exact and _long(a.text, "delete", "del", "remove-source-files") for a in args):
            v.destroy("rsync --delete deletes files")
        if any(not a.exact or _URL.match(a.text) or re.match(r"^[^/]*:", a.text) for a in args):
            v.net("rsync copies to or from another machine")
        v.deny("rsync writes files")
    else:
        v.deny(f"{name} is not known to be read-only")
        _hidden_programs(args, v)
    if name in NETWORK_SUBCOMMANDS and name != "git" and _subcommand(args) in NETWORK_SUBCOMMANDS[name]:
        v.net(f"{name} {_subcommand(args)} uses the network")
    elif not v.read_only and not v.network and any(a.exact and _URL.match(a.text) for a in args):
        v.net(f"passes a URL to {name}")
    return v
