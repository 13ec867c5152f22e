"""What a sed or awk script written on the command line can touch beyond the files its words name.

Both languages open files and run programs from inside the script: sed's `w`/`W`/`r`/`R` commands and the `w` flag
of `s` name files, its `e` command and `e` flag run a shell; awk redirects `print` to files and pipes, calls
`system()`, reads with `getline`, and gawk loads code with `@include`/`@load` or options such as `-i`, `-l`, `-o`.
The shell analysis sees only words, so without this a command like `sed -n 'w /outside/f' notes.txt` names no
outside path at all.

`script_effects(program, args)` returns the paths a sed script names (with their use), whether a script may touch
paths nobody can know here (opaque), and awk's programs, whose string literals the caller reads as it reads any
inline code (`python -c`). It fails closed: a script read from a file, built from an expansion, or written in a
way this reader does not fully follow is opaque, so that where no sandbox holds, the policy asks.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol


class _Word(Protocol):
    @property
    def text(self) -> str: ...
    @property
    def exact(self) -> bool: ...


READS, WRITES = "read", "write"

# sed: options taking a value (short letters; long names), the ones whose value is a script or a script file.
_SED_VALUE_LETTERS = "efl"
_SED_FLAG_LETTERS = "nrsuzEi"  # `-i` takes an optional glued suffix (`-i.bak`): the rest of the cluster
_SED_LONG = {
    "--expression": "code",
    "--file": "file",
    "--line-length": "value",
    "--in-place": "flag",
    "--quiet": "flag",
    "--silent": "flag",
    "--regexp-extended": "flag",
    "--separate": "flag",
    "--unbuffered": "flag",
    "--null-data": "flag",
    "--posix": "flag",
    "--sandbox": "flag",
    "--follow-symlinks": "flag",
    "--debug": "flag",
}
# awk: only the options every awk shares; anything else (gawk's -i/-l/-o/-p/-d/-E, --exec ...) is opaque.
_AWK_VALUE_LETTERS = "fvFe"
_AWK_LONG = {"--file": "file", "--assign": "value", "--field-separator": "value", "--source": "code"}


def _options(args: Sequence[_Word], sed: bool) -> tuple[list[str], bool, list[_Word]]:
    """The scripts given by options, whether anything is opaque, and the operands (the script first when no option
    gave one)."""
    value_letters, flag_letters = (_SED_VALUE_LETTERS, _SED_FLAG_LETTERS) if sed else (_AWK_VALUE_LETTERS, "")
    longs = _SED_LONG if sed else _AWK_LONG
    scripts: list[str] = []
    operands: list[_Word] = []
    opaque, given, pending, ended = False, False, "", False
    for a in args:
        if pending:
            if pending == "code":
                if a.exact:
                    scripts.append(a.text)
                else:
                    opaque = True
            pending = ""
            continue
        if not a.exact:
            if not ended:  # could expand to an option, or be the script itself
                opaque = True
            operands.append(a)
            continue
        t = a.text
        if ended or t == "-" or not t.startswith("-"):
            operands.append(a)
            continue
        if t == "--":
            ended = True
            continue
        if t.startswith("--"):
            stem, eq, value = t.partition("=")
            kind = next((k for name, k in longs.items() if len(stem) > 2 and name.startswith(stem)), None)
            if kind is None:
                opaque = True  # an option this reader does not know may load code or write a file
            elif kind == "code":
                given = True
                if eq:
                    scripts.append(value)
                else:
                    pending = "code"
            elif kind in ("file", "value"):
                given = given or kind == "file"
                opaque = opaque or kind == "file"  # a script read from a file is not seen here
                pending = "" if eq else "value"
            continue
        for k, letter in enumerate(t[1:], start=1):
            if letter in value_letters:
                given = given or letter in "ef"
                opaque = opaque or letter == "f"
                glued = t[k + 1 :]
                if letter == "e" and glued:
                    scripts.append(glued)
                elif not glued:
                    pending = "code" if letter == "e" else "value"
                break
            if sed and letter == "i":
                break  # -i[SUFFIX]: the rest of the cluster is the suffix
            if letter not in flag_letters:
                opaque = True
                break
    if not given and operands:
        first = operands.pop(0)
        if first.exact:
            scripts.append(first.text)
        else:
            opaque = True
    return scripts, opaque, operands


def script_effects(program: str, args: Sequence[_Word]) -> tuple[list[tuple[str, str]], bool, list[str]]:
    """(paths a sed script names, whether a script may touch others, awk's program texts); see the module doc."""
    sed = program == "sed"
    scripts, opaque, _operands = _options(args, sed)
    paths: list[tuple[str, str]] = []
    for script in scripts:
        found, unknown = _sed_script(script) if sed else ([], bool(_AWK_REACHES.search(script)))
        paths += found
        opaque = opaque or unknown
    return paths, opaque, [] if sed else scripts


# ---- sed ---------------------------------------------------------------------------------------------------------
_NO_ARGUMENT = set("=dDgGhHnNpPxzF")
_OPTIONAL_NUMBER = set("qQlL")
_TO_LINE_END = {"r": READS, "R": READS, "w": WRITES, "W": WRITES}


def _sed_script(script: str) -> tuple[list[tuple[str, str]], bool]:
    """Walk a GNU sed script command by command; (paths, opaque). Anything not followed exactly is opaque."""
    paths: list[tuple[str, str]] = []
    s, i, n = script, 0, len(script)

    def delimited(j: int, delim: str) -> int | None:
        """The index just past the closing `delim` of a regex or replacement starting at j, or None. A bracket
        expression is refused: where it ends differs between sed's reading and a simple one."""
        while j < n:
            ch = s[j]
            if ch == "\\":
                if j + 1 < n and s[j + 1] == "\n":
                    return None
                j += 2
                continue
            if ch == "\n" and delim != "\n":
                return None
            if ch == delim:
                return j + 1
            if ch == "[":
                return None
            j += 1
        return None

    def address(j: int) -> int | None:
        if j < n and s[j].isdigit():
            while j < n and (s[j].isdigit() or s[j] == "~"):
                j += 1
            return j
        if j < n and s[j] == "$":
            return j + 1
        if j < n and s[j] in "/\\":
            if s[j] == "\\":
                if j + 1 >= n or s[j + 1] in "\n\\":
                    return None
                delim, j = s[j + 1], j + 2
            else:
                delim, j = "/", j + 1
            end = delimited(j, delim)
            if end is None:
                return None
            while end < n and s[end] in "IM":
                end += 1
            return end
        return j

    def to_line_end(j: int) -> tuple[str, int]:
        end = s.find("\n", j)
        end = n if end < 0 else end
        return s[j:end], end

    while i < n:
        while i < n and s[i] in " \t\n;":
            i += 1
        if i >= n:
            break
        start = i
        first = address(i)
        if first is None:
            return paths, True
        i = first
        if i > start and i < n and s[i] == ",":
            i += 1
            if i < n and s[i] in "+~":
                i += 1
                while i < n and s[i].isdigit():
                    i += 1
            else:
                after = address(i)
                if after is None or after == i:
                    return paths, True
                i = after
        while i < n and s[i] in " \t!":
            i += 1
        if i >= n:
            return paths, i > start  # an address without a command: sed refuses it
        cmd = s[i]
        i += 1
        if cmd in "{}":
            continue
        if cmd == "#":
            _, i = to_line_end(i)
        elif cmd in ":btTv":
            while i < n and s[i] not in ";\n}":
                i += 1
        elif cmd in "aic":
            _, i = to_line_end(i)  # text to the end of the line (a one-liner's `a text`)
            while s[i - 1 : i] == "\\" and i < n:  # continued on the next line
                _, i = to_line_end(i + 1)
        elif cmd in _TO_LINE_END:
            name, i = to_line_end(i)
            name = name.strip()
            if not name:
                return paths, True
            if name not in ("/dev/stdout", "/dev/stderr", "/dev/stdin"):
                paths.append((name, _TO_LINE_END[cmd]))
        elif cmd == "e":
            return paths, True  # runs a command sed builds
        elif cmd in _NO_ARGUMENT:
            pass
        elif cmd in _OPTIONAL_NUMBER:
            while i < n and (s[i].isdigit() or s[i] in " \t"):
                i += 1
        elif cmd in "sy":
            if i >= n or s[i] in "\n\\":
                return paths, True
            delim = s[i]
            end = delimited(i + 1, delim)
            end = None if end is None else delimited(end, delim)
            if end is None:
                return paths, True
            i = end
            if cmd == "s":
                while i < n and (s[i] in "gpiImM" or s[i].isdigit()):
                    i += 1
                if i < n and s[i] == "e":
                    return paths, True  # runs the pattern space as a command
                if i < n and s[i] == "w":
                    name, i = to_line_end(i + 1)
                    name = name.strip()
                    if not name:
                        return paths, True
                    if name not in ("/dev/stdout", "/dev/stderr"):
                        paths.append((name, WRITES))
        else:
            return paths, True
        while i < n and s[i] in " \t":
            i += 1
        if i < n and s[i] not in ";\n}#":
            return paths, True
    return paths, False


# ---- awk ---------------------------------------------------------------------------------------------------------
_AWK_REACHES = re.compile(r"[>|]|\bsystem\b|\bgetline\b|@|\bENVIRON\b|\bPROCINFO\b|\bARGV\b")
"""An awk program with any of these may write or read files no word names, or run a program: `print > f`, `cmd |
getline`, `system()`, gawk's `@include`/`@load`; ARGV can make awk read files the command line does not show. A
comparison (`$3 > 10`) is caught too: the reader fails closed rather than parse awk."""
