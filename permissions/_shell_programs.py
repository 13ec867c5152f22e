"""What individual programs do: the tables and argv checks behind `permissions.shell`.

This module knows programs, not shell syntax. It receives one simple command as a list of `Word`s (already split and
unquoted by the parser walk), strips wrappers such as `env`, `sudo` or `xargs`, and judges the program that remains:
proven read-only or not, destructive, networked, an interpreter, or a runner of another command (`find -exec`,
`bash -c`, `eval`). Anything it does not recognise is judged "not read-only": the allowlist is the only way in.
It also knows which words of a program name files (`named_paths`), and the environment under which the git
commands it proves read-only run no program a repository configures (`READ_ONLY_GIT_ENV`).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from permissions._inline_scripts import script_effects


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
    splits: bool = False  # an unquoted expansion, glob or brace: bash may make several words of it, or none
    tilde: bool = False  # starts with an unquoted `~`, which bash replaces with a home directory
    fd_path: bool = False  # a lone process substitution: bash passes a /dev/fd path, never a file of the workspace


@dataclass(frozen=True, slots=True)
class NamedPath:
    """A path a command names: the literal text as written (unquoted, unresolved; `~` and `~/...` stand for the
    home directory, anything else relative is relative to the call's cwd), and whether the command may write it."""

    text: str
    writes: bool


# How a named path is used: only read, written, as the command's proof says (read when the command is proven
# read-only, written otherwise), or as the whole command line's proof says (a directory later commands run in).
READS, WRITES, BY_PROOF, BY_LINE = "read", "write", "proof", "line"


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
    dialect: str = "bash"  # how the shell that runs `script` reads it: "bash", or "sh" (a POSIX shell such as dash)
    nested: list[tuple[list[Word], str]] = field(default_factory=list)
    paths: list[tuple[str, str]] = field(default_factory=list)  # (text, use) found by the program's own check
    own_paths: bool = False  # the check named the program's paths itself; the generic scan stays out
    opaque: bool = False  # the program touches paths no word names (`cd -`, `--files0-from`)
    unknown: bool = False  # a program this module does not know (or one from a path): what it does is not analysed

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
    start: int = 0  # index of `words[0]` among the words of the original command


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
CONFIGURED_PROGRAMS = "the repository configures"
"""Every reason that holds only because git may run a program its repository configures ends with these words."""


def is_configured_program_reason(reason: str) -> bool:
    """Whether a reason is only "git may run a program the repository configures" (which a read-only sandbox
    contains: such a program can then write nothing and reach no network)."""
    return CONFIGURED_PROGRAMS in reason


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
    "RIPGREP_CONFIG_PATH GCONV_PATH SUDO_ASKPASS SSH_ASKPASS BROWSER ZDOTDIR FPATH CDPATH GLOBIGNORE TERMINFO "
    "BASH_CMDS BASH_ALIASES EXECIGNORE LOCPATH TEXTDOMAIN TEXTDOMAINDIR"
)
"""`BASH_CMDS[ls]=./x` fills the command hash table, `EXECIGNORE` hides programs, `LOCPATH` supplies locales,
`TEXTDOMAINDIR` message catalogs (bash expands the translation of `$"..."`)."""
_SENSITIVE_PREFIXES = ("LD_", "DYLD_", "GIT_", "PYTHON", "LESS", "PERL", "RUBY", "NODE_", "BASH_FUNC_")
_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=", re.ASCII)
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)
INTEGER_VARIABLES = _names("BASHPID EUID HISTCMD OPTIND PPID RANDOM SRANDOM UID")
"""Variables bash gives the integer attribute (`declare -p`): assigning one evaluates the value as arithmetic, so
`RANDOM='a[$(cmd)]'` runs `cmd`."""
_LOCALE_VARIABLE = re.compile(r"LC_[A-Z_]+|LANG|LANGUAGE", re.ASCII)
# Locales that read bytes as ASCII does. Under a multibyte locale such as zh_CN.GBK, bash reads the rest of the
# script differently (`"中\"` ends a string there), so the parser's view of later lines would be wrong.
_ASCII_LOCALE = re.compile(r"C|POSIX|C\.[Uu][Tt][Ff]-?8|[A-Za-z]{2,3}(?:_[A-Za-z]{2})?\.(?:UTF-8|utf8)(?:@\w+)?|")


def is_sensitive_variable(name: str) -> bool:
    """True for variables that change which program runs or how (PATH, LD_PRELOAD, GIT_*, PAGER ...)."""
    return name in SENSITIVE_VARIABLES or name.startswith(_SENSITIVE_PREFIXES)


def assignment_risk(name: str, value: Word | None) -> str | None:
    """Why assigning `value` to `name` is not harmless, or None. `value=None` stands for a value nobody knows
    (a `for` loop variable, a `{name}>` redirection, a name being unset)."""
    if is_sensitive_variable(name):
        return f"sets {name}, which changes what runs"
    known = value.text if value is not None and value.exact else None
    if name in INTEGER_VARIABLES and not (known is not None and re.fullmatch(r"[0-9]*", known)):
        return f"assigns {name}, whose value bash evaluates as arithmetic"
    if _LOCALE_VARIABLE.fullmatch(name) and not (known is not None and _ASCII_LOCALE.fullmatch(known)):
        return f"sets {name} to a locale in which bash may read the command differently"
    return None


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


# -- paths -------------------------------------------------------------------------------------------------------

_TILDE_PREFIX = re.compile(r"~[^/]+")


def looks_like_path(text: str) -> bool:
    """True for text that names a file whatever the program: absolute, home-relative, `.`/`..`, or with a `/`."""
    if not text or _URL.match(text):
        return False
    return text in (".", "..") or text.startswith(("/", "~")) or "/" in text


def path_text(word: Word) -> str | None:
    """The path to report for a literal word, or None when nobody can know it (`~user`, `~+`, `~-`): a quoted
    leading `~` is a file name in the cwd, not the home directory."""
    text = word.text
    if not text.startswith("~"):
        return text
    if not word.tilde:
        return "./" + text
    return None if _TILDE_PREFIX.match(text) else text


def _join(base: str, path: str) -> str:
    """`path` as seen from the cwd when a program runs it from `base` (`git -C base`, `env -C base`)."""
    if not base or path.startswith(("/", "~")):
        return path
    return posixpath.join(base, path)


def _option_paths(text: str) -> list[str]:
    """Candidate paths inside an option word: the value of `--opt=VALUE`, or a value glued to short options
    (`-o/tmp/x`, `-I../include`: every suffix that looks like a path, since the letters are not known here)."""
    if text.startswith("--"):
        value = text.partition("=")[2]
        return [value] if looks_like_path(value) else []
    stop = next((k for k, ch in enumerate(text) if ch in "/~."), len(text))
    return [text[k:] for k in range(2, min(stop, 12) + 1) if looks_like_path(text[k:])]


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
        if name in ("env", "exec") and (why := _clears_environment(name, ws[1:i])):
            # The runtime runs proven read-only commands with variables that disarm configured programs
            # (`READ_ONLY_GIT_ENV`); a command that drops them is not read-only.
            out.read_only = False
            out.reasons.append(why)
        if name == "env":
            while i < len(ws) and (m := _ASSIGNMENT.match(ws[i].text)):
                why = assignment_risk(m.group(1), Word(ws[i].text[m.end() :], ws[i].exact, ws[i].option_safe))
                if why:
                    out.read_only = False
                    out.reasons.append(why)
                i += 1
        i += spec.positionals
        if i >= len(ws):
            if name == "xargs":
                out.wrappers.append(name)
                out.words = [Word("echo", True, True)]
                out.start += len(ws)  # `echo` stands in for a program no word names
                out.read_only = False
                out.reasons.append(spec.why)
            break  # a wrapper with no command (`env`, `nice`) only prints
        out.wrappers.append(name)
        if not spec.read_only:
            out.read_only = False
            out.reasons.append(spec.why)
        out.words = ws[i:]
        out.start += i
    return out


def _clears_environment(name: str, options: Sequence[Word]) -> str | None:
    """Why `env`/`exec` options drop variables from the environment (`env -i`, `env -u GIT_...`, `exec -c`)."""
    for k, w in enumerate(options):
        t = w.text
        if name == "exec":
            if _short(t, "c"):
                return "exec -c clears the environment"
            continue
        if t == "-" or _short(t, "i") or _long(t, "ignore-environment"):
            return "env -i clears the environment"
        unset = None
        if t.startswith("--unset="):
            unset = t.split("=", 1)[1]
        elif t == "--unset" or (t.startswith("-") and not t.startswith("--") and t.endswith("u")):
            unset = options[k + 1].text if k + 1 < len(options) and options[k + 1].exact else "?"
        elif _short(t, "u"):
            unset = t[t.index("u") + 1 :]
        if unset is not None and (unset == "?" or is_sensitive_variable(unset) or not IDENTIFIER.fullmatch(unset)):
            return f"env -u {unset} removes a variable that changes what runs"
    return None


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


# -- git ---------------------------------------------------------------------------------------------------------

_GIT_CONFIG_OVERRIDES = (
    ("core.fsmonitor", "false"),  # run by every command that reads the index (status, ls-files, grep ...)
    ("core.hooksPath", "/dev/null"),  # post-index-change, reference-transaction ... hooks
    ("core.pager", "cat"),
    ("log.showSignature", "false"),  # verifying a signature runs gpg.program
    ("gpg.program", "false"),  # `%G?` in a format, or in the repository's format.pretty, still verifies
    ("gpg.openpgp.program", "false"),
    ("gpg.x509.program", "false"),
    ("gpg.ssh.program", "false"),
    ("safe.bareRepository", "explicit"),  # a bare repository inside the workspace is not found by `git -C dir`
    ("submodule.recurse", "false"),  # submodules bring configuration of their own
    ("protocol.allow", "never"),
    ("core.sshCommand", "false"),  # (no transport is allowed at all; should one be, it runs no ssh program)
    ("credential.helper", ""),  # an empty value empties the list of helpers
    ("status.submoduleSummary", "false"),  # `git submodule summary` would run in each submodule
)


def _git_environment() -> dict[str, str]:
    env = {"GIT_CONFIG_COUNT": str(len(_GIT_CONFIG_OVERRIDES))}
    for i, (key, value) in enumerate(_GIT_CONFIG_OVERRIDES):
        env[f"GIT_CONFIG_KEY_{i}"] = key
        env[f"GIT_CONFIG_VALUE_{i}"] = value
    # Variables beat configuration where configuration cannot: `pager.<command>` beats core.pager, and the
    # repository's protocol.<name>.allow beats protocol.allow (a partial clone's lazy fetch runs core.sshCommand).
    env["GIT_PAGER"] = "cat"
    env["GIT_ALLOW_PROTOCOL"] = ""  # an empty list: no transport at all
    env["GIT_NO_LAZY_FETCH"] = "1"
    env["GIT_OPTIONAL_LOCKS"] = "0"  # no opportunistic rewrite of the index
    env["GIT_TERMINAL_PROMPT"] = "0"
    return env


READ_ONLY_GIT_ENV: Mapping[str, str] = MappingProxyType(_git_environment())
"""Environment overrides under which the git commands this module proves read-only run no program a repository
configures (core.fsmonitor, hooks, pagers, gpg.program, lazy fetches over ssh, embedded bare repositories).

The proof of every git command depends on it: the runtime applies it to every command proven read-only (not only
to the ones that name git, since a script may run git too), preferably through `read_only_git_env`, which keeps
configuration the user passes in GIT_CONFIG_COUNT. Commands cannot take it off: GIT_* assignments, `unset`,
`env -i`/`-u` and `exec -c` are never proven read-only. Git subcommands that run diff, textconv or filter drivers
(status, diff, blame, show and log with patches) are not proven at all: driver names come from the repository's
`.gitattributes`, so no fixed environment can disarm them (git 2.39 has no GIT_ATTR_SOURCE); the agent's own
`git status` switches off each driver its configuration defines (`git_without_filters`).
"""


def read_only_git_env(environ: Mapping[str, str]) -> dict[str, str]:
    """`environ` with `READ_ONLY_GIT_ENV` applied. Configuration entries the environment already passes in
    GIT_CONFIG_COUNT/KEY_n/VALUE_n are kept and ours follow them, so ours win (git reads them in order)."""
    out = dict(environ)
    count = environ.get("GIT_CONFIG_COUNT", "")
    base = int(count) if count.isdigit() and int(count) < 10_000 else 0
    for i, (key, value) in enumerate(_GIT_CONFIG_OVERRIDES):
        out[f"GIT_CONFIG_KEY_{base + i}"] = key
        out[f"GIT_CONFIG_VALUE_{base + i}"] = value
    out.update((k, v) for k, v in READ_ONLY_GIT_ENV.items() if not k.startswith("GIT_CONFIG_"))
    out["GIT_CONFIG_COUNT"] = str(base + len(_GIT_CONFIG_OVERRIDES))
    return out


# What switches one filter driver off: no clean, smudge or long-running `process` command, and not required (a
# required filter without a command fails the git command instead of running one).
FILTER_DRIVER_OFF = (("clean", ""), ("smudge", ""), ("process", ""), ("required", "false"))

# Lists the filter drivers the configuration defines (git's own parser, includes and every configuration file git
# reads taken into account: a second parser could disagree with it; reading configuration runs no program), adds
# FILTER_DRIVER_OFF for each to GIT_CONFIG_COUNT/KEY_n/VALUE_n, then runs `git "$@"`. Configuration keys never hold a
# newline, so one per line is exact; `set -f` and a newline IFS split them without globbing. Exit 125: the listing
# failed (its message on stderr).
_FILTERS_OFF = r"""keys=$(git config --name-only --get-regexp '^filter\.') || [ $? -eq 1 ] || exit 125
n=${GIT_CONFIG_COUNT:-0}
set -f
IFS='
'
for key in $keys; do
    name=${key#*.}
    name=${name%.*}
@SETS@
done
export GIT_CONFIG_COUNT=$n
exec git "$@"
"""
FILTERS_OFF_FAILED = 125


def git_without_filters(*args: str) -> list[str]:
    """The argv that runs `git ARGS` with every filter driver of the repository's configuration switched off, for
    a git command that reads work tree files (`git status` reads a tracked file again, through its driver, when its
    stat data changed): a driver's name comes from the work tree's `.gitattributes`, so no fixed environment can
    switch them off. Apply `read_only_git_env` to its environment for everything else."""
    sets = "\n".join(
        f'    export "GIT_CONFIG_KEY_$n=filter.$name.{var}" "GIT_CONFIG_VALUE_$n={value}"; n=$((n + 1))'
        for var, value in FILTER_DRIVER_OFF
    )
    return ["/bin/sh", "-c", _FILTERS_OFF.replace("@SETS@", sets), "sh", *args]


_GIT_GLOBAL_FLAGS = _names("--no-pager -P --no-optional-locks --literal-pathspecs --no-replace-objects")
_GIT_LOCATION_OPTIONS = _names("--git-dir --work-tree --namespace --super-prefix --config-env --exec-path")
_GIT_BRANCH_FLAGS = _names(
    "-a --all -r --remotes -l --list -v -vv --verbose --show-current --no-color --color --column --no-column"
)
# What git subcommands without patches accept (an allowlist: patches, pickaxe and --textconv run diff drivers).
_GIT_LOG_FLAGS = _names(
    "--oneline --graph --all --branches --tags --remotes --merges --no-merges --first-parent --reverse "
    "--relative-date --abbrev-commit --no-abbrev-commit --no-abbrev --stat --shortstat --numstat --name-only "
    "--name-status --summary --follow --topo-order --date-order --author-date-order --left-right --cherry-pick "
    "--cherry-mark --boundary --ancestry-path --simplify-by-decoration --no-color --parents --children --source "
    "--mailmap --use-mailmap --no-mailmap --no-walk --full-history --no-renames --decorate --no-decorate "
    "--regexp-ignore-case --extended-regexp --fixed-strings --basic-regexp --perl-regexp --invert-grep --all-match "
    "--no-notes --notes --dense --sparse --walk-reflogs --find-renames --find-copies --no-expand-tabs --color "
    "--count --objects --in-commit-order --no-object-names --timestamp --exclude-first-parent-only --no-patch "
    "-s -i -E -F -P -z -M -C -g"
)
_GIT_LOG_VALUES = _names(
    "-n --max-count --skip --since --after --until --before --author --committer --grep --date --exclude --glob "
    "--encoding --max-parents --min-parents --decorate-refs --decorate-refs-exclude --diff-filter"
)
_GIT_LOG_GLUED = _names("--format --pretty --abbrev --decorate --color --stat --branches --tags --remotes --notes")
_GIT_OPTIONS: dict[str, tuple[frozenset[str], frozenset[str], frozenset[str]]] = {
    # subcommand: (flags, options whose value may follow as the next word, options whose value must be glued)
    "log": (_GIT_LOG_FLAGS, _GIT_LOG_VALUES, _GIT_LOG_GLUED),
    "rev-list": (_GIT_LOG_FLAGS, _GIT_LOG_VALUES, _GIT_LOG_GLUED),
    "show": (_GIT_LOG_FLAGS, _GIT_LOG_VALUES, _GIT_LOG_GLUED),
    "ls-files": (
        _names(
            "-c --cached -d --deleted -o --others -i --ignored -s --stage -u --unmerged -k --killed -z -t -v -f "
            "--directory --no-empty-directory --eol --deduplicate --full-name --error-unmatch --exclude-standard "
            "--sparse --debug"
        ),
        _names("-x --exclude -X --exclude-from --exclude-per-directory --with-tree --abbrev --format"),
        frozenset(),
    ),
    "ls-tree": (
        _names("-d -r -t -l --long -z --name-only --name-status --object-only --full-name --full-tree"),
        _names("--abbrev --format"),
        frozenset(),
    ),
    "cat-file": (_names("-t -s -e -p --allow-unknown-type"), frozenset(), frozenset()),
    "show-ref": (
        _names("--head --heads --tags -d --dereference -s --hash --verify -q --quiet"),
        frozenset(),
        _names("--abbrev --hash"),
    ),
    "for-each-ref": (
        _names("--shell --perl --python --tcl --ignore-case --include-root-refs"),
        _names("--format --sort --count --points-at --merged --no-merged --contains --no-contains --exclude"),
        frozenset(),
    ),
    "describe": (
        _names("--tags --all --long --contains --exact-match --first-parent --always --debug"),
        _names("--abbrev --match --exclude --candidates"),
        frozenset(),
    ),
    "merge-base": (_names("-a --all --octopus --independent --is-ancestor --fork-point"), frozenset(), frozenset()),
}
_GIT_INSPECT = frozenset(_GIT_OPTIONS) | _names(
    "status diff blame rev-parse grep shortlog whatchanged diff-tree diff-files diff-index show-branch name-rev "
    "count-objects check-ignore check-attr var help version verify-commit verify-tag cherry range-diff"
)
"""Subcommands that never write the repository (whatever programs its configuration may make them run)."""
_GIT_LISTINGS = {
    "tag": ("-l", "--list"),
    "stash": ("list", "show"),
    "remote": ("-v", "--verbose", "show", "get-url"),
    "config": ("-l", "--list", "--get", "--get-all", "--get-regexp", "--get-urlmatch"),
    "worktree": ("list",),
    "notes": ("list", "show"),
    "reflog": ("show",),
}
"""Subcommands that only read when called with one of these arguments (or, for `_GIT_LISTS_BARE`, with none)."""
_GIT_LISTS_BARE = _names("tag remote notes reflog")


def _git_option_problem(sub: str, rest: Sequence[Word]) -> str | None:
    """Why the options of `git sub` leave the allowlist, or None."""
    flags, values, glued = _GIT_OPTIONS[sub]
    skip = False
    for a in rest:
        t = a.text if a.exact else ""
        if skip or not t.startswith("-") or t == "-":
            skip = False
            continue
        if t == "--":
            return None
        stem, eq, value = t.partition("=")
        if stem in ("--format", "--pretty") and "%G" in value:
            return f"git {sub} --format=%G verifies signatures with a program"
        if eq and (stem in values or stem in glued):
            continue
        if not eq and t in flags:
            continue
        if not eq and t in values:
            skip = True
            continue
        if "-n" in values and re.fullmatch(r"-n?[0-9]+", t):
            continue
        if t in ("-p", "-u") or _long(t, "patch", "textconv", "ext-diff"):
            return f"git {sub} {stem} runs diff drivers the repository configures"
        return f"git {sub} {stem} is not known to be read-only"
    return None


_Texts = Sequence[str]
_GitRule = tuple[Callable[[_Texts], bool], str]


def _any(match: Callable[[str], bool]) -> Callable[[_Texts], bool]:
    return lambda texts: any(match(t) for t in texts)


def _always(texts: _Texts) -> bool:
    return True


def _branch_changes(texts: _Texts) -> bool:
    """`git branch` lists with known flags (`-v`, `-a`...), and with names only after `-l`/`--list`."""
    listing = any(t in ("-l", "--list") for t in texts)
    return any(t not in _GIT_BRANCH_FLAGS and (t.startswith("-") or not listing) for t in texts)


_WRITES_OUTPUT: _GitRule = (_any(lambda t: _long(t, "output")), "--output writes a file")
_GIT_RULES: dict[str, tuple[_GitRule, ...]] = {
    # subcommand: (when its words match, why it is not proven read-only), checked in order
    "diff": (_WRITES_OUTPUT, (_always, "runs diff and filter drivers the repository configures")),
    "log": (_WRITES_OUTPUT,),
    "show": (
        _WRITES_OUTPUT,
        (
            lambda texts: not {"-s", "--no-patch"} & set(texts),
            "runs diff drivers the repository configures (unless it shows no patch: -s)",
        ),
    ),
    "status": ((_always, "runs filter drivers the repository configures"),),
    "blame": ((_always, "runs textconv and filter drivers the repository configures"),),
    "ls-files": (
        (_any(lambda t: _short(t, "m") or _long(t, "modified")), "-m runs filter drivers the repository configures"),
    ),
    "describe": (
        (_any(lambda t: _long(t, "dirty", "broken")), "--dirty runs filter drivers the repository configures"),
    ),
    "grep": (
        (_any(lambda t: _long(t, "textconv")), "--textconv runs textconv drivers the repository configures"),
        (_any(lambda t: _short(t, "O") or _long(t, "open-files-in-pager")), "-O runs a program"),
        (
            _any(lambda t: _long(t, "recurse-submodules", "ext-grep")),
            "--recurse-submodules reads the configuration of submodules",
        ),
    ),
    "branch": ((_branch_changes, "with arguments changes branches"),),
}
"""What makes a git subcommand leave the read-only proof, in the order it is checked; each reason follows `git SUB `.
A subcommand with an options allowlist (`_GIT_OPTIONS`) is then held to it; `_GIT_ANY_OPTIONS` accept the rest."""
_GIT_ANY_OPTIONS = _names("grep branch rev-parse")


def _git_subcommand(sub: str, rest: Sequence[Word]) -> str | None:
    """Why `git sub rest` is not proven read-only, or None."""
    texts = [a.text for a in rest if a.exact]
    why = next((f"git {sub} {why}" for matches, why in _GIT_RULES.get(sub, ()) if matches(texts)), None)
    if why is not None or sub in _GIT_ANY_OPTIONS:
        return why
    if sub in _GIT_OPTIONS:
        return _git_option_problem(sub, rest)
    return f"git {sub} is not known to be read-only"


def _git_inspects(sub: str, rest: Sequence[Word]) -> bool:
    """True when `git sub rest` cannot write the repository (so it names no `.git` as written)."""
    if sub in _GIT_INSPECT:
        return sub != "branch" or _git_subcommand(sub, rest) is None
    if sub in _GIT_LISTINGS:
        first = next((a for a in rest if not (a.exact and a.text in ("-q", "--quiet"))), None)
        if first is None:
            return sub in _GIT_LISTS_BARE  # a bare `git stash` stashes
        return first.exact and first.text in _GIT_LISTINGS[sub]
    return False


_GIT_OUTPUT_OPTIONS = frozenset({"-o", "--output", "--output-directory"})
"""Options whose value git writes (`diff/log/show --output=F`, `archive -o F`, `format-patch -o DIR`): the path is
written even by a subcommand that otherwise only reads, so a protected or outside target asks."""
_GIT_GLUED_OUTPUT = _names("archive format-patch")  # `-oFILE`
_GIT_TEXT_OPTIONS = ("--message=", "--format=", "--pretty=", "--grep=", "--author=")
"""Options whose `=VALUE` is text, never a path (a message may well contain a `/`)."""
_SKIP = "skip"

_GIT_DESTROYS: dict[str, Callable[[_Texts], bool]] = {
    "reset": _any(lambda t: t in ("--hard", "--merge", "--keep")),
    "clean": _always,
    "push": _any(
        lambda t: _short(t, "fd") or _long(t, "force", "force-with-lease", "delete", "mirror") or t[:1] in "+:"
    ),
    "checkout": _any(lambda t: t in ("--", ".", "-f", "--force")),
    "restore": lambda texts: not {"--staged", "-S"} & set(texts) or bool({"--worktree", "-W"} & set(texts)),
    "stash": lambda texts: bool(texts) and texts[0] in ("drop", "clear"),
    "rm": lambda texts: "--cached" not in texts,
    "branch": _any(lambda t: t in ("-D", "--delete") or _short(t, "D")),
}
"""When a subcommand destroys work (its reason is `GIT_DESTRUCTIVE[sub]`)."""


@dataclass(slots=True)
class _GitPlace:
    """What git's options before the subcommand say: the directory it runs in (`-C`, joined), the paths they name,
    whether git finds its usual repository and configuration (`located`), and where the subcommand's word is."""

    base: str = ""
    located: bool = True
    named: list[str] = field(default_factory=list)
    index: int = 0


def _git_location(args: Sequence[Word], v: Verdict) -> _GitPlace:
    place = _GitPlace()
    while place.index < len(args) and args[place.index].exact and args[place.index].text.startswith("-"):
        t = args[place.index].text
        if t in ("-C", "-c"):
            _git_dash_c(t, args[place.index + 1] if place.index + 1 < len(args) else None, v, place)
        elif t.partition("=")[0] in _GIT_LOCATION_OPTIONS:
            _git_elsewhere(t, args, v, place)
        else:
            if t not in _GIT_GLOBAL_FLAGS:
                v.deny("git option can point git at other configuration or programs")
                place.located = False
            place.index += 1
    return place


def _git_dash_c(option: str, value: Word | None, v: Verdict, place: _GitPlace) -> None:
    """`-C DIR` (git runs in DIR) or `-c KEY=VALUE` (configuration, which can name programs)."""
    place.index += 2
    if value is None or not value.exact:
        # An unquoted `$X` after -C could split into `. -c core.pager=...`.
        v.deny(f"an expanded argument could smuggle an option into git {option}")
        place.located, v.opaque = False, True
    elif option == "-c":
        v.deny("git -c sets configuration that can run programs")
        place.located = False
    elif value.text:
        where = path_text(value)
        if where is None:
            v.opaque = True
        else:
            place.base = _join(place.base, where)
            place.named.append(place.base)


def _git_elsewhere(option: str, args: Sequence[Word], v: Verdict, place: _GitPlace) -> None:
    """`--git-dir`, `--work-tree`, `--exec-path`...: another repository, configuration or set of programs."""
    v.deny("git option can point git at other configuration or programs")
    place.located = False
    stem, eq, value = option.partition("=")
    takes_next = not eq and stem != "--exec-path"
    following = place.index + 1
    where = value if eq else (args[following].text if takes_next and following < len(args) else "")
    if stem in ("--git-dir", "--work-tree", "--exec-path") and where:
        place.named.append(_join(place.base, where))
    place.index += 2 if takes_next else 1


def _git(args: Sequence[Word], v: Verdict) -> None:
    v.own_paths = True
    place = _git_location(args, v)
    if place.index >= len(args) or not args[place.index].exact:
        v.deny("could not tell which git subcommand runs")
        v.opaque = v.opaque or place.index < len(args)
        v.paths += [(p, WRITES) for p in place.named] + [(_join(place.base, ".git"), WRITES)]
        return
    sub, rest = args[place.index].text, args[place.index + 1 :]
    texts = [a.text for a in rest if a.exact]
    if sub in NETWORK_SUBCOMMANDS["git"]:
        v.net(f"git {sub} uses the network")
    _smuggling("git", rest, v)
    if why := _git_subcommand(sub, rest):
        v.deny(why)
    if sub in _GIT_DESTROYS and _GIT_DESTROYS[sub](texts):
        v.destroy(GIT_DESTRUCTIVE[sub])
    inspects = place.located and _git_inspects(sub, rest)
    use = READS if inspects or v.read_only else WRITES
    v.paths += [(p, use) for p in place.named]
    _git_operand_paths(sub, rest, place.base, use, v)
    scope = _git_config_scope(rest) if sub == "config" else None
    if scope is not None:
        # `git config --global/--system/--file F` writes that file, not the repository (whose path would be the
        # wrong reason to give: "…/.git is a protected path" for a change to ~/.gitconfig).
        v.paths += [(p, use) for p in scope]
    elif not inspects:
        # Whatever else it touches, a git command that may write the repository writes under `.git`.
        v.paths.append((_join(place.base, ".git"), WRITES))


def _git_config_scope(rest: Sequence[Word]) -> list[str] | None:
    """The files `git config`'s scope option makes it write, when it names one outside the repository: `--global`
    (both places git may use), `--system`, `--file F` (F is named already, as an operand); None otherwise."""
    texts = [a.text for a in rest]
    if "--global" in texts:
        return ["~/.gitconfig", "~/.config/git/config"]
    if "--system" in texts:
        return ["/etc/gitconfig"]
    if any(t in ("-f", "--file") or t.startswith("--file=") for t in texts):
        return []
    return None


def _git_operand_paths(sub: str, rest: Sequence[Word], base: str, use: str, v: Verdict) -> None:
    """The paths the subcommand's words name: operands and `--opt=PATH` values with `use`, the values of output
    options as written (whatever the subcommand reads), nothing for message and format text."""
    following: str | None = None  # what the word after an option is: _SKIP, or the use of the path it names
    for a in rest:
        if following is not None:
            if following != _SKIP:
                _git_name(a, base, following, v)
            following = None
        elif not a.exact:
            v.opaque = v.opaque or not a.fd_path
        else:
            following = _git_word(sub, a, base, use, v)


def _git_word(sub: str, word: Word, base: str, use: str, v: Verdict) -> str | None:
    """Name the path one literal word of `git sub` holds; return what the next word is, if this one is an option
    that takes it (`-m MSG`: _SKIP; `-o FILE`: WRITES)."""
    t = word.text
    stem, eq, value = t.partition("=")
    if t in ("-m", "--message"):
        return _SKIP  # a commit message, not a path
    if t in _GIT_OUTPUT_OPTIONS:
        return WRITES  # the file or directory an output option names is written, whatever the subcommand reads
    if t.startswith("-o") and len(t) > 2 and sub in _GIT_GLUED_OUTPUT:
        v.paths.append((_join(base, t[2:]), WRITES))
    elif t.startswith("--") and eq:
        if stem in _GIT_OUTPUT_OPTIONS and value:
            v.paths.append((_join(base, value), WRITES))
        elif not t.startswith(_GIT_TEXT_OPTIONS) and looks_like_path(value):
            v.paths.append((_join(base, value), use))
    elif not t.startswith(("-", ":")) and looks_like_path(t):
        _git_name(word, base, use, v)
    return None


def _git_name(word: Word, base: str, use: str, v: Verdict) -> None:
    where = path_text(word) if word.exact else None
    if where is None:
        v.opaque = v.opaque or not word.fd_path
    elif where:
        v.paths.append((_join(base, where), use))


_DIALECTS = {"bash": "bash", "sh": "sh", "dash": "sh", "ash": "sh"}
"""Shells whose `-c` scripts are analysed, and how they read them (`sh` is dash on Debian, bash elsewhere)."""


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
    dialect = _DIALECTS.get(prog)
    if not has_c:
        v.interpreter = True
        v.stdin_script = i >= len(args)
        v.deny(f"runs a {prog} script" if i < len(args) else f"runs {prog} on commands from its input")
        v.dialect = dialect or "other"
    elif dialect is None:
        # zsh, ksh and fish read text differently from bash (zsh runs code in glob qualifiers such as `*(e:cmd:)`):
        # their scripts are not analysed as bash.
        v.interpreter = True
        v.deny(f"runs {prog} code, which is not analysed")
    elif i < len(args) and args[i].exact:
        v.script = args[i].text
        v.dialect = dialect
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
        name = args[0].text[2:] or (args[1].text if len(args) > 1 else "")
        if not (args[0].exact and IDENTIFIER.fullmatch(name) and (len(args[0].text) > 2 or args[1].exact)):
            v.deny("printf -v evaluates the subscript of the variable it sets")


_ARITHMETIC_TESTS = frozenset({"-eq", "-ne", "-lt", "-le", "-gt", "-ge"})
_FILE_TESTS = _names("-a -b -c -d -e -f -g -h -k -p -r -s -u -w -x -G -L -N -O -S")
_FILE_COMPARISONS = _names("-nt -ot -ef")
_INTEGER = re.compile(r"[-+]?[0-9]+", re.ASCII)
_TEST_OPERATORS = _FILE_TESTS | _FILE_COMPARISONS | _ARITHMETIC_TESTS | _names("! ( ) -o -z -n = == != < > =~")


def test_risk(tokens: Sequence[Word], *, conditional: bool) -> str | None:
    """Why bash may evaluate data as code in the arguments of `test`/`[` (or, with `conditional`, of `[[`).

    bash evaluates the subscript in the operand of `-v` (`test -v 'a[$(cmd)]'` runs `cmd`) and, in `[[`, both
    operands of an arithmetic comparison as arithmetic. The `test` builtin compares plain integers only, but is held
    to the same rule. For `test`/`[` the words are expanded before the builtin sees them, so any word that could
    expand to `-v` (or into several words) counts as one.
    """
    for i, t in enumerate(tokens):
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        if not conditional and t.splits:
            return "an expanded test argument could become an operator and its operand"
        may_be_v = (t.exact and t.text in ("-v", "-R")) or (not conditional and not t.exact and not t.option_safe)
        if may_be_v and nxt is not None and not (nxt.exact and "[" not in nxt.text):
            return "test -v evaluates the subscript of its operand as arithmetic"
        if t.exact and t.text in _ARITHMETIC_TESTS:
            prev = tokens[i - 1] if i else None
            if not all(w is not None and w.exact and _INTEGER.fullmatch(w.text) for w in (prev, nxt)):
                return "an arithmetic comparison evaluates its operands as arithmetic"
    return None


def test_paths(tokens: Sequence[Word], *, conditional: bool = False) -> tuple[list[str], bool]:
    """The files `test`/`[`/`[[` arguments name (operands of file tests), and whether some cannot be known
    (in `[[`, bash neither splits nor globs words)."""
    paths: list[str] = []
    opaque = not conditional and any(t.splits for t in tokens)
    for i, t in enumerate(tokens):
        if not t.exact:
            continue
        operands = []
        if t.text in _FILE_TESTS:
            operands = [i + 1]
        elif t.text in _FILE_COMPARISONS:
            operands = [i - 1, i + 1]
        for k in operands:
            if 0 <= k < len(tokens) and not (tokens[k].exact and tokens[k].text in _TEST_OPERATORS):
                place = path_text(tokens[k]) if tokens[k].exact else None
                if place is None:
                    opaque = opaque or not tokens[k].fd_path
                elif place:
                    paths.append(place)
    return paths, opaque


def _test(prog: str) -> _Check:
    def check(args: Sequence[Word], v: Verdict) -> None:
        tokens = list(args)
        if prog == "[" and tokens and tokens[-1].exact and tokens[-1].text == "]":
            tokens.pop()
        if why := test_risk(tokens, conditional=False):
            v.deny(why)
        paths, v.opaque = test_paths(tokens)
        v.paths += [(p, BY_PROOF) for p in paths]
        v.own_paths = True

    return check


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
    "test": _test("test"),
    "[": _test("["),
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


def _interpreter(name: str, args: Sequence[Word], v: Verdict) -> None:
    v.interpreter = True
    v.deny("sources a shell script" if name in ("source", ".") else f"runs {name} code")


def _checked(name: str, args: Sequence[Word], v: Verdict) -> None:
    _CHECKERS[name](args, v)


def _read_only(name: str, args: Sequence[Word], v: Verdict) -> None:
    pass


def _networked(name: str, args: Sequence[Word], v: Verdict) -> None:
    v.net(f"{name} uses the network")
    v.download = name in DOWNLOADERS


def _destroys(name: str, args: Sequence[Word], v: Verdict) -> None:
    v.destroy(DESTRUCTIVE["mkfs" if name.startswith("mkfs") else name])


def _ownership(name: str, args: Sequence[Word], v: Verdict) -> None:
    if any(a.exact and (_short(a.text, "R") or _long(a.text, "recursive")) for a in args):
        v.destroy(RECURSIVE_OWNERSHIP[name])
    else:
        v.deny(f"{name} changes files")


def _rsync(name: str, args: Sequence[Word], v: Verdict) -> None:
    if any(a.exact and _long(a.text, "delete", "del", "remove-source-files") for a in args):
        v.destroy("rsync --delete deletes files")
    if any(not a.exact or _URL.match(a.text) or re.match(r"^[^/]*:", a.text) for a in args):
        v.net("rsync copies to or from another machine")
    v.deny("rsync writes files")


def _unknown(name: str, args: Sequence[Word], v: Verdict) -> None:
    v.unknown = True
    v.deny(f"{name} is not known to be read-only")
    _hidden_programs(args, v)


_Judge = Callable[[str, Sequence[Word], Verdict], None]
_KINDS: tuple[tuple[Callable[[str], bool], _Judge], ...] = (
    (lambda name: name in SHELLS, _shell),
    (lambda name: bool(_PYTHON.match(name)) or name in INTERPRETERS, _interpreter),
    (lambda name: name in _CHECKERS, _checked),
    (lambda name: name in READ_ONLY, _read_only),
    (lambda name: name in NETWORK, _networked),
    (lambda name: name in DESTRUCTIVE or name.startswith("mkfs"), _destroys),
    (lambda name: name in RECURSIVE_OWNERSHIP, _ownership),
    (lambda name: name == "rsync", _rsync),
)
"""Kinds of program, in the order a name is tried against them, each with its judge; a program of none of these
kinds is unknown (not read-only, and assumed to run the programs its arguments name)."""


def _program(words: Sequence[Word]) -> tuple[str, Sequence[Word]]:
    """The name to judge a command by and its arguments: `python -m pip x` and `pip3.12 x` are pip."""
    name, args = program_name(words[0])[0], words[1:]
    if _PYTHON.match(name) and len(args) >= 2 and args[0].text == "-m" and args[1].text == "pip":
        name, args = "pip", args[2:]
    return ("pip" if re.fullmatch(r"pip[0-9.]*", name) else name), args


def judge(words: Sequence[Word], *, known: bool = True) -> Verdict:
    """Judge one unwrapped simple command whose program word is exact.

    `known=False` says unwrapping got stuck on an option it did not understand: the words are then only scanned for
    programs they might run.
    """
    v = Verdict()
    if not program_name(words[0])[1]:
        v.unknown = True
        v.deny("runs a program from a path")
    name, args = _program(words)
    kind = next((judged for fits, judged in _KINDS if fits(name)), _unknown) if known else _unknown
    kind(name, args, v)
    if name in NETWORK_SUBCOMMANDS and name != "git" and _subcommand(args) in NETWORK_SUBCOMMANDS[name]:
        v.net(f"{name} {_subcommand(args)} uses the network")
    elif not v.read_only and not v.network and any(a.exact and _URL.match(a.text) for a in args):
        v.net(f"passes a URL to {name}")
    return v


# -- the paths a command names -----------------------------------------------------------------------------------

_NO_PATH_ARGS = _names(
    "echo printf true false : type which command basename dirname printenv id whoami uname pwd env eval"
)
"""Programs that treat their arguments as text, never as files (a glob among them still reads directories)."""


@dataclass(frozen=True, slots=True)
class _Operands:
    """How a program's arguments name files: `values` options take a value that is no file (skipped), `files`
    options take a file, and with `pattern_first` the first operand is a pattern unless a `given` option gave one."""

    values: frozenset[str] = frozenset()
    files: frozenset[str] = frozenset()
    pattern_first: bool = False
    given: frozenset[str] = frozenset()
    pairs: frozenset[str] = frozenset()  # options followed by a name and a value (`jq --arg name value`)
    code: frozenset[str] = frozenset()  # options whose value is program code (`python -c CODE`)


_GREP = _Operands(
    _names(
        "-e --regexp -m --max-count -A -B -C --context --after-context --before-context --label --include --exclude "
        "--exclude-dir --color --colour -d --directories -D --devices --binary-files"
    ),
    _names("-f --file --exclude-from"),
    True,
    _names("-e --regexp -f --file"),
)
_OPERANDS: dict[str, _Operands] = {
    "grep": _GREP,
    "egrep": _GREP,
    "fgrep": _GREP,
    "rg": _Operands(
        _names(
            "-e --regexp -g --glob --iglob -t --type -T --type-not --type-add --type-clear -m --max-count -A -B -C "
            "--context -M --max-columns -j --threads -r --replace -E --encoding --max-depth -d --sort --sortr "
            "--colors --color --path-separator --context-separator --field-match-separator --max-filesize --engine"
        ),
        _names("-f --file --ignore-file"),
        True,
        _names("-e --regexp -f --file"),
    ),
    "sed": _Operands(_names("-e --expression -l --line-length"), _names("-f --file"), True, _names("-e -f")),
    "awk": _Operands(_names("-v -F"), _names("-f"), True, _names("-f")),
    "jq": _Operands(
        _names("--indent --tab"),
        _names("-f --from-file -L"),
        True,
        _names("-f --from-file"),
        _names("--arg --argjson --slurpfile --rawfile"),
    ),
    "head": _Operands(_names("-n -c --lines --bytes")),
    "tail": _Operands(_names("-n -c --lines --bytes --pid -s --sleep-interval --max-unchanged-stats")),
    "cut": _Operands(_names("-b -c -d -f --bytes --characters --delimiter --fields --output-delimiter")),
    "sort": _Operands(_names("-k --key -t --field-separator -S --buffer-size --parallel"), _names("-o --output -T")),
    "date": _Operands(_names("-d --date -I"), _names("-f --file -r --reference")),
    "git": _Operands(),
}
_OPERANDS |= {
    "python": _Operands(_names("-m -W -X"), code=_names("-c")),
    "node": _Operands(_names("-r --require --import --loader"), code=_names("-e --eval -p --print")),
    "perl": _Operands(_names("-M -m"), _names("-I"), code=_names("-e -E")),
    "ruby": _Operands(_names("-r"), _names("-I"), code=_names("-e")),
    "php": _Operands(_names("-d"), code=_names("-r")),
    "lua": _Operands(_names("-l"), code=_names("-e")),
    "Rscript": _Operands(code=_names("-e")),
    "osascript": _Operands(code=_names("-e")),
    "pwsh": _Operands(code=_names("-c -Command")),
}
for _alias, _name in (("gawk", "awk"), ("mawk", "awk"), ("nodejs", "node"), ("deno", "node"), ("luajit", "lua")):
    _OPERANDS[_alias] = _OPERANDS[_name]
_QUOTED = re.compile(r"""(["'`])((?:\\.|(?!\1)[^\\\n])*)\1""")
_FOLLOWS_LINKS = {
    "grep": ("R", ("dereference-recursive",)),
    "egrep": ("R", ("dereference-recursive",)),
    "fgrep": ("R", ("dereference-recursive",)),
    "rg": ("L", ("follow",)),
    "fd": ("L", ("follow",)),
    "du": ("L", ("dereference",)),
    "tree": ("l", ()),
}
"""Options that follow symbolic links while walking a tree: the walk may leave every directory the words name."""
_FIND_VALUES = _names(
    "-name -iname -path -ipath -wholename -iwholename -regex -iregex -lname -ilname -type -xtype -perm -size -user "
    "-group -uid -gid -mtime -mmin -atime -amin -ctime -cmin -used -links -inum -maxdepth -mindepth -printf "
    "-context -regextype -fstype"
)
_FIND_FILES = _names("-newer -anewer -cnewer -samefile -fprint -fprint0 -fls -fprintf -files0-from")


_FIND_START = {"-H": 1, "-P": 1, "-O0": 1, "-O1": 1, "-O2": 1, "-O3": 1, "-L": 1, "-D": 2}
"""Options before find's starting points, and how many words each takes up (`-L` follows links)."""
_FIND_EXEC = _names("-exec -execdir -ok -okdir")


def _named(word: Word, use: str, out: list[tuple[str, str]], base: str = "") -> bool:
    """Add the path a word names (as seen from `base`) to `out`; True when it may name one nobody can know here
    (an expansion, `~user`). A lone process substitution names a /dev/fd path: none of the workspace."""
    place = path_text(word) if word.exact else None
    if place:
        out.append((_join(base, place), use))
    return place is None and not word.fd_path


@dataclass(slots=True)
class _OperandScan:
    """One pass over a program's arguments: the files its operands and option values name (generic rules, refined
    by the program's `_Operands`), and whether some word may expand to a path nobody can know."""

    spec: _Operands
    follows: tuple[str, tuple[str, ...]] | None
    out: list[tuple[str, str]]
    opaque: bool = False
    ended: bool = False  # after `--`, every word is an operand
    pattern: bool = False  # the next operand is a pattern, not a file
    pending: list[str] = field(default_factory=list)  # what the next words are: "file", "code" or "value" (no file)

    def word(self, a: Word) -> None:
        t = a.text
        if self.pending:
            self.value(self.pending.pop(0), a)
        elif not a.exact:
            # A quoted expansion in the pattern's place is the pattern; anywhere else it may be any path.
            self.opaque = self.opaque or not a.fd_path and (a.splits or not self.pattern)
            self.pattern = False
        elif not self.ended and t == "--":
            self.ended = True
        elif not self.ended and t.startswith("-") and t != "-":
            self.option(t)
        elif self.pattern:
            self.pattern = False
        elif not ((t.isascii() and t.isdigit()) or _URL.match(t)):
            self.operand(a)

    def value(self, kind: str, a: Word) -> None:
        if kind == "file":
            self.opaque = _named(a, BY_PROOF, self.out) or self.opaque
        elif kind == "code":
            self.opaque = _code_paths(a, self.out) or self.opaque

    def option(self, t: str) -> None:
        spec, long = self.spec, t.startswith("--")
        stem, glued = (t.partition("=")[0], "=" in t) if long else (t[:2], len(t) > 2)
        glued_value = t[len(stem) + long :]
        if stem in spec.given:
            self.pattern = False
        if self.follows and (_short(t, self.follows[0]) or _long(t, *self.follows[1])) or "files0-from" in t:
            self.opaque = True
        if stem in spec.pairs:
            self.pending = ["value", "file" if stem in ("--slurpfile", "--rawfile") else "value"]
        elif stem in spec.code:
            self.pattern = False
            if glued:
                self.opaque = _code_paths(Word(glued_value, True, True), self.out) or self.opaque
            else:
                self.pending = ["code"]
        elif stem in spec.values:
            self.pending = [] if glued else ["value"]
        elif stem in spec.files and not glued:
            self.pending = ["file"]
        else:
            candidates = [glued_value] if stem in spec.files and glued_value else _option_paths(t)
            self.out.extend((p, BY_PROOF) for p in candidates)

    def operand(self, a: Word) -> None:
        self.opaque = _named(a, BY_PROOF, self.out) or self.opaque
        if "=" in a.text[1:]:
            value = a.text.split("=", 1)[1]  # `of=/dev/sda`, `PREFIX=/opt`: bash expands `~` after the `=` too
            if looks_like_path(value):
                self.opaque = _named(Word(value, True, True, tilde=True), BY_PROOF, self.out) or self.opaque


def _scan_operands(name: str, args: Sequence[Word], out: list[tuple[str, str]], spec: _Operands | None = None) -> bool:
    """The files a program's operands and option values name (see `_OperandScan`); returns whether some word may
    expand to a path nobody can know."""
    spec = spec or _OPERANDS.get(name, _Operands())
    scan = _OperandScan(spec, _FOLLOWS_LINKS.get(name), out, pattern=spec.pattern_first)
    for a in args:
        scan.word(a)
    return scan.opaque


def _code_paths(code: Word, out: list[tuple[str, str]]) -> bool:
    """Paths named by string literals in inline program code (`python -c 'shutil.rmtree("/x")'`), counted as
    written; returns True when the code itself is not literal. Code may build paths no literal shows: these are
    only the ones it names."""
    if not code.exact:
        return True
    for m in _QUOTED.finditer(code.text):
        if looks_like_path(m[2]):
            out.append((m[2] if m[2].startswith("~") else path_text(Word(m[2], True, True)) or m[2], WRITES))
    return False


def _find_takes_value(t: str) -> bool:
    """A test whose value names no file (`-name X`, `-newermt DATE`)."""
    return t in _FIND_VALUES or t.startswith("-newer") and t not in _FIND_FILES and len(t) == 8 and t[-1] == "t"


def _find_paths(name: str, args: Sequence[Word], v: Verdict, out: list[tuple[str, str]]) -> bool:
    """find's starting points and the files its tests name (`-newer F`); a command `-exec` runs is named on its
    own. Following links (`-L`, `-follow`) or reading names from a file makes the walk opaque."""
    opaque, i, starting = False, 0, True
    while i < len(args):
        a = args[i]
        t = a.text if a.exact else ""
        if starting and t in _FIND_START:
            opaque = opaque or t == "-L"
            i += _FIND_START[t]
            continue
        starting = starting and not (a.exact and (t.startswith("-") or t in ("(", ")", "!", ",")))
        if t in _FIND_EXEC:
            i += 2 + len(_rest_until(args, i + 1, (";", "+")))
            continue
        opaque = opaque or t in ("-follow", "-files0-from")
        if _find_takes_value(t):
            i += 2
        elif starting or t in _FIND_FILES or t.startswith("-newer"):
            target = a if starting else args[i + 1] if i + 1 < len(args) else None
            i += 1 if starting else 2
            opaque = (target is not None and _named(target, BY_PROOF, out)) or opaque
        else:
            opaque = opaque or not a.exact and a.splits
            i += 1
    return opaque


def _cd_paths(name: str, args: Sequence[Word], v: Verdict, out: list[tuple[str, str]]) -> bool:
    """`cd dir` names the directory every later command of the line runs in: written unless the line is read-only."""
    operands = [a for a in args if not (a.exact and re.fullmatch(r"-[LPe@]+", a.text))]
    if name == "popd" or (name == "pushd" and (not operands or operands[0].text[:1] in "+-")):
        return True  # the directory stack: nobody here knows it
    if not operands:
        out.append(("~", BY_LINE))
        return False
    target = operands[0]
    if not target.exact or target.text == "-":
        return not target.fd_path
    place = path_text(target)
    if place is None:
        return True
    out.append((place or ".", BY_LINE))
    return False


def _script_paths(name: str, args: Sequence[Word], v: Verdict, out: list[tuple[str, str]]) -> bool:
    """sed's and awk's operands, and what their scripts open (`w file`; awk's `print > "/x"`, read as any inline
    code's literals)."""
    opaque = _scan_operands(name, args, out)
    script_paths, script_opaque, programs = script_effects("sed" if name == "sed" else "awk", args)
    out.extend(script_paths)
    for code in programs:
        _code_paths(Word(code, True, True), out)
    return opaque or script_opaque


def _text_paths(name: str, args: Sequence[Word], v: Verdict, out: list[tuple[str, str]]) -> bool:
    """A program that treats its arguments as text names no file; a glob among them still reads directories."""
    return any(a.splits for a in args)


def _shell_paths(name: str, args: Sequence[Word], v: Verdict, out: list[tuple[str, str]]) -> bool:
    """The script of `bash -c` is walked on its own (its commands name their paths); the rest are operands."""
    script = any(a.exact and len(a.text) > 1 and a.text[0] in "-+" and "c" in a.text for a in args)
    spec = _Operands(_names("-o +o -O +O"), pattern_first=script)
    return _scan_operands(name, args, out, spec) or script and v.script is None


def _operand_paths(name: str, args: Sequence[Word], v: Verdict, out: list[tuple[str, str]]) -> bool:
    return _scan_operands(name, args, out)


_PathReader = Callable[[str, Sequence[Word], Verdict, list[tuple[str, str]]], bool]
_PATH_READERS: dict[str, _PathReader] = {
    **dict.fromkeys(("cd", "pushd", "popd"), _cd_paths),
    "find": _find_paths,
    **dict.fromkeys(("sed", "awk", "gawk", "mawk"), _script_paths),
    **dict.fromkeys(_NO_PATH_ARGS, _text_paths),
    **dict.fromkeys(SHELLS, _shell_paths),
}
"""How a program's words name files, where the generic operand scan (`_operand_paths`) is not the whole story."""


def _wrapper_directory(words: Sequence[Word], k: int) -> Word | None:
    """The directory a wrapper's word moves the command to (`env -C dir`, `--chdir=dir`, `-Cdir`), if it is one."""
    w, t = words[k], words[k].text
    if k > 0 and words[k - 1].exact and words[k - 1].text in ("-C", "--chdir", "-D"):
        return w
    if t.startswith("--chdir="):
        return Word(t.split("=", 1)[1], True, True, tilde=True)
    if t[:2] in ("-C", "-D") and len(t) > 2:
        return Word(t[2:], True, True)
    return None


def _wrapper_paths(words: Sequence[Word], out: list[tuple[str, str]]) -> tuple[str, bool]:
    """The paths the wrappers' words name, the directory they run the command in, and whether some word may name a
    path nobody can know."""
    base, opaque = "", False
    for k, w in enumerate(words):
        if not w.exact:
            opaque = opaque or not w.fd_path
            continue
        directory = _wrapper_directory(words, k)
        if directory is None and w.text.startswith("-"):
            out.extend((p, BY_PROOF) for p in _option_paths(w.text))
        elif directory is not None or looks_like_path(w.text):
            place = path_text(directory or w)
            opaque = opaque or place is None
            if place:
                out.append((place, BY_PROOF))
                base = _join(base, place) if directory is not None else base
    return base, opaque


def named_paths(words: Sequence[Word], unwrapped: Unwrapped, v: Verdict) -> tuple[list[tuple[str, str]], bool]:
    """The paths one simple command names, each with its use (READS, WRITES, BY_PROOF or BY_LINE), and whether
    some word may expand to a path nobody can know here (`$X`, `$(...)`, a glob, `~user`, arguments from xargs).

    `words` is the whole simple command; `unwrapped` and `v` are what `unwrap` and `judge` made of it.
    """
    out: list[tuple[str, str]] = []
    base, opaque = _wrapper_paths(words[: unwrapped.start], out)
    opaque = opaque or v.opaque or "xargs" in unwrapped.wrappers
    program = words[unwrapped.start :]
    if not program:
        return out, opaque
    name, _ = program_name(program[0])
    name = "python" if _PYTHON.match(name) else name
    found: list[tuple[str, str]] = [(program[0].text, BY_PROOF)] if "/" in program[0].text else []
    if v.own_paths:
        found.extend(v.paths)
    else:
        opaque = _PATH_READERS.get(name, _operand_paths)(name, program[1:], v, found) or opaque
    out.extend((_join(base, p), use) for p, use in found)
    return out, opaque
