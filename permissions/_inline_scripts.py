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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol


class _Word(Protocol):
    @property
    def text(self) -> str: ...
    @property
    def exact(self) -> bool: ...


READS, WRITES = "read", "write"


@dataclass(frozen=True, slots=True)
class _CommandLine:
    """How a language's command line gives its scripts. Each option is a short letter or a long name (matched by
    prefix, first in order) with what it takes: "code" (a script), "file" (a script read from a file, which is not
    seen here), "value" (anything else), "flag" (nothing), or "suffix" (sed's `-i[SUFFIX]`: the rest of the
    cluster). An option not listed may load code or write a file: opaque."""

    letters: Mapping[str, str]
    longs: Mapping[str, str]


_SED = _CommandLine(
    letters={"e": "code", "f": "file", "l": "value", "i": "suffix", **dict.fromkeys("nrsuzE", "flag")},
    longs={
        "--expression": "code",
        "--file": "file",
        "--line-length": "value",
        **dict.fromkeys(
            (
                "--in-place",
                "--quiet",
                "--silent",
                "--regexp-extended",
                "--separate",
                "--unbuffered",
                "--null-data",
                "--posix",
                "--sandbox",
                "--follow-symlinks",
                "--debug",
            ),
            "flag",
        ),
    },
)
# awk: only the options every awk shares; anything else (gawk's -i/-l/-o/-p/-d/-E, --exec ...) is opaque.
_AWK = _CommandLine(
    letters={"f": "file", "v": "value", "F": "value", "e": "code"},
    longs={"--file": "file", "--assign": "value", "--field-separator": "value", "--source": "code"},
)


@dataclass(slots=True)
class _Reading:
    """The scripts a command line gives, its operands, and whether anything is opaque (see `_options`)."""

    language: _CommandLine
    scripts: list[str] = field(default_factory=list)
    operands: list[_Word] = field(default_factory=list)
    opaque: bool = False
    given: bool = False  # an option gave the script (or a script file): the first operand is no script
    pending: str = ""  # what the next word is: "code", "value" or nothing
    ended: bool = False

    def word(self, a: _Word) -> None:
        t = a.text
        if self.pending:
            if self.pending == "code":
                self.script(a)
            self.pending = ""
        elif not a.exact:
            self.opaque = self.opaque or not self.ended  # could expand to an option, or be the script itself
            self.operands.append(a)
        elif self.ended or t == "-" or not t.startswith("-"):
            self.operands.append(a)
        elif t == "--":
            self.ended = True
        elif t.startswith("--"):
            self.long_option(t)
        else:
            self.cluster(t)

    def script(self, a: _Word) -> None:
        if a.exact:
            self.scripts.append(a.text)
        else:
            self.opaque = True

    def takes(self, kind: str, glued: str | None) -> None:
        """An option of `kind` whose value is `glued` to it (None: the value, if any, is the next word)."""
        self.given = self.given or kind in ("code", "file")
        self.opaque = self.opaque or kind == "file"  # a script read from a file is not seen here
        if kind == "code" and glued is not None:
            self.scripts.append(glued)
        elif glued is None:
            self.pending = "code" if kind == "code" else "value"

    def long_option(self, t: str) -> None:
        stem, eq, value = t.partition("=")
        kind = next((k for name, k in self.language.longs.items() if len(stem) > 2 and name.startswith(stem)), None)
        if kind is None:
            self.opaque = True  # an option this reader does not know may load code or write a file
        elif kind != "flag":
            self.takes(kind, value if eq else None)

    def cluster(self, t: str) -> None:
        """`-nE`, `-e SCRIPT`, `-eSCRIPT`, `-i.bak`: flags until the first letter that takes a value."""
        for k, letter in enumerate(t[1:], start=1):
            kind = self.language.letters.get(letter)
            if kind is None:
                self.opaque = True
            elif kind in ("code", "file", "value"):
                self.takes(kind, t[k + 1 :] or None)
            if kind != "flag":
                return

    def finish(self) -> None:
        if not self.given and self.operands:
            self.script(self.operands.pop(0))


def _options(args: Sequence[_Word], sed: bool) -> tuple[list[str], bool, list[_Word]]:
    """The scripts given by options, whether anything is opaque, and the operands (the script first when no option
    gave one)."""
    reading = _Reading(_SED if sed else _AWK)
    for a in args:
        reading.word(a)
    reading.finish()
    return reading.scripts, reading.opaque, reading.operands


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


def _sed_script(script: str) -> tuple[list[tuple[str, str]], bool]:
    """Walk a GNU sed script command by command; (paths, opaque). Anything not followed exactly is opaque."""
    reader = _SedReader(script)
    return reader.paths, not reader.read()


class _SedReader:
    """A GNU sed script, read command by command. Each reading method takes the index where its part starts and
    returns the index just past it, or None where the script is not followed exactly (then it is opaque)."""

    def __init__(self, script: str) -> None:
        self.s, self.n = script, len(script)
        self.paths: list[tuple[str, str]] = []

    def skip(self, j: int, chars: str, *, digits: bool = False) -> int:
        """The first index from j whose character is not one of `chars` (nor, with `digits`, a digit)."""
        while j < self.n and (self.s[j] in chars or digits and self.s[j].isdigit()):
            j += 1
        return j

    def read(self) -> bool:
        """True when every command was followed exactly."""
        i: int | None = self.skip(0, " \t\n;")
        while i is not None and i < self.n:
            i = self.command(i)
            i = None if i is None else self.skip(i, " \t\n;")
        return i is not None

    def command(self, i: int) -> int | None:
        """Its addresses, `!`, the command letter and what follows it, then the end of the command."""
        start = i
        after = self.addresses(i)
        if after is None:
            return None
        i = self.skip(after, " \t!")
        if i >= self.n:
            return None if i > start else i  # an address without a command: sed refuses it
        argument = _SED_COMMANDS.get(self.s[i])
        if argument is None:
            return None
        end = argument(self, i + 1, self.s[i])
        if end is None or self.s[i] in "{}":
            return end
        end = self.skip(end, " \t")
        return end if end >= self.n or self.s[end] in ";\n}#" else None

    def addresses(self, j: int) -> int | None:
        """`ADDR`, `ADDR,ADDR`, `ADDR,+N`, `ADDR,~N`, or none."""
        first = self.address(j)
        if first is None or first == j or first >= self.n or self.s[first] != ",":
            return first
        j = first + 1
        if j < self.n and self.s[j] in "+~":
            return self.skip(j + 1, "", digits=True)
        after = self.address(j)
        return None if after is None or after == j else after

    def address(self, j: int) -> int | None:
        """A line number (`3`, `1~2`), `$`, `/regex/` or `\\%regex%` (with `I`/`M`), or none (j itself)."""
        s, n = self.s, self.n
        if j < n and s[j].isdigit():
            return self.skip(j, "~", digits=True)
        if j < n and s[j] == "$":
            return j + 1
        if j >= n or s[j] not in "/\\":
            return j
        if s[j] == "\\" and (j + 1 >= n or s[j + 1] in "\n\\"):
            return None
        delim, j = (s[j + 1], j + 2) if s[j] == "\\" else ("/", j + 1)
        end = self.delimited(j, delim)
        return None if end is None else self.skip(end, "IM")

    def delimited(self, j: int, delim: str) -> int | None:
        """The index just past the closing `delim` of a regex or replacement starting at j, or None. A bracket
        expression is refused: where it ends differs between sed's reading and a simple one."""
        s, n = self.s, self.n
        while j < n and s[j] != delim:
            if s[j] == "\\" and s[j + 1 : j + 2] == "\n" or s[j] == "\n" or s[j] == "[":
                return None
            j += 2 if s[j] == "\\" else 1
        return j + 1 if j < n else None

    def line(self, j: int) -> tuple[str, int]:
        end = self.s.find("\n", j)
        end = self.n if end < 0 else end
        return self.s[j:end], end

    # -- what follows each command letter (`_SED_COMMANDS`) --------------------------------------------------------

    def nothing(self, j: int, cmd: str) -> int:
        return j

    def comment(self, j: int, cmd: str) -> int:
        return self.line(j)[1]

    def label(self, j: int, cmd: str) -> int:
        while j < self.n and self.s[j] not in ";\n}":
            j += 1
        return j

    def text(self, j: int, cmd: str) -> int:
        """`a text`, `i\\` + newline + text: to the end of the line, continued while a line ends in a backslash."""
        j = self.line(j)[1]
        while self.s[j - 1 : j] == "\\" and j < self.n:
            j = self.line(j + 1)[1]
        return j

    def number(self, j: int, cmd: str) -> int:
        return self.skip(j, " \t", digits=True)

    def runs(self, j: int, cmd: str) -> None:
        return None  # `e`: runs a command sed builds

    def file(self, j: int, cmd: str) -> int | None:
        """`r`/`R` read and `w`/`W` write the file named to the end of the line."""
        return self.named(j, READS if cmd in "rR" else WRITES, ("/dev/stdout", "/dev/stderr", "/dev/stdin"))

    def named(self, j: int, use: str, unnamed: tuple[str, ...]) -> int | None:
        name, end = self.line(j)
        name = name.strip()
        if not name:
            return None
        if name not in unnamed:
            self.paths.append((name, use))
        return end

    def replace(self, j: int, cmd: str) -> int | None:
        """`s/regex/replacement/flags` and `y/source/dest/`; the `w FILE` flag writes, the `e` flag runs."""
        if j >= self.n or self.s[j] in "\n\\":
            return None
        delim = self.s[j]
        end = self.delimited(j + 1, delim)
        end = None if end is None else self.delimited(end, delim)
        if end is None or cmd == "y":
            return end
        end = self.skip(end, "gpiImM", digits=True)
        if self.s[end : end + 1] == "e":
            return None  # runs the pattern space as a command
        if self.s[end : end + 1] == "w":
            return self.named(end + 1, WRITES, ("/dev/stdout", "/dev/stderr"))
        return end


_SedArgument = Callable[[_SedReader, int, str], int | None]
_SED_COMMANDS: dict[str, _SedArgument] = {
    **dict.fromkeys("{}=dDgGhHnNpPxzF", _SedReader.nothing),
    "#": _SedReader.comment,
    **dict.fromkeys(":btTv", _SedReader.label),
    **dict.fromkeys("aic", _SedReader.text),
    **dict.fromkeys("qQlL", _SedReader.number),
    **dict.fromkeys("rRwW", _SedReader.file),
    "e": _SedReader.runs,
    **dict.fromkeys("sy", _SedReader.replace),
}
"""Every sed command this reader follows, with what reads its argument; any other letter is opaque."""


# ---- awk ---------------------------------------------------------------------------------------------------------
_AWK_REACHES = re.compile(r"[>|]|\bsystem\b|\bgetline\b|@|\bENVIRON\b|\bPROCINFO\b|\bARGV\b")
"""An awk program with any of these may write or read files no word names, or run a program: `print > f`, `cmd |
getline`, `system()`, gawk's `@include`/`@load`; ARGV can make awk read files the command line does not show. A
comparison (`$3 > 10`) is caught too: the reader fails closed rather than parse awk."""
