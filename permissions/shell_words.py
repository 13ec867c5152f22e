"""What one shell word becomes when bash expands it, for the words whose value needs no state: brace expansion
(`.{env,txt}`, `f{1..3}`), quote removal (`'...'`, `"..."` without expansions, backslashes) and ANSI-C quoting
(`$'\\x2eenv'`). Pure: no file system, no variables.

The shell analysis (`permissions.shell`) reports such words as expansions it cannot see through. The checks that must
know which files a command may read whatever the analysis proved (a well-known secret file, `runtime.secret_files`)
expand them here first, then glob what is left as bash would.

`expand` returns None for a word whose value depends on something else (a variable, `$(...)`, backticks, `$"..."`)
or is too large to list; the caller then knows nothing more than before. Glob characters in the results are not
told apart from quoted ones (`'*'` and `*` both come back as `*`): a caller that globs them may find more than bash
would, never less.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

MAX_WORDS = 256
_SIMPLE_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "e": "\x1b",
    "E": "\x1b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "?": "?",
}
_SEQUENCE = re.compile(r"(-?\d+|[A-Za-z])\.\.(-?\d+|[A-Za-z])(?:\.\.(-?\d+))?")


class _Unknown(Exception):
    """The word's value depends on more than its text."""


def expand(raw: str) -> list[str] | None:
    """The words bash makes of the source text `raw` by brace expansion and quote removal (before globbing), or
    None when its value depends on something else or it makes more than `MAX_WORDS` words."""
    try:
        return [_unquote(w) for w in _braces(raw)]
    except _Unknown:
        return None


# ---- quote removal -------------------------------------------------------------------------------------------------
def _unquote(raw: str) -> str:
    out: list[str] = []
    i, n = 0, len(raw)
    while i < n:
        c = raw[i]
        if c == "\\":
            if i + 1 < n:
                out.append(raw[i + 1])
            i += 2
        elif c == "'":
            end = raw.find("'", i + 1)
            if end < 0:
                raise _Unknown
            out.append(raw[i + 1 : end])
            i = end + 1
        elif c == '"':
            end = _closing_double(raw, i)
            body = raw[i + 1 : end]
            if "$" in body or "`" in body:
                raise _Unknown
            out.append(re.sub(r'\\([$`"\\\n])', lambda m: "" if m[1] == "\n" else m[1], body))
            i = end + 1
        elif c == "$":
            if raw.startswith("$'", i):
                text, i = _ansi_c(raw, i + 2)
                out.append(text)
            else:
                raise _Unknown
        elif c == "`":
            raise _Unknown
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _closing_double(raw: str, start: int) -> int:
    i = start + 1
    while i < len(raw):
        if raw[i] == "\\":
            i += 2
            continue
        if raw[i] == '"':
            return i
        i += 1
    raise _Unknown


def _ansi_c(raw: str, i: int) -> tuple[str, int]:
    """The text of `$'...'` whose body starts at `i`, and the index after its closing quote. What bash decodes in
    ways this does not (`\\c`, `\\u`, `\\U`, a NUL that ends the word) makes the word unknown."""
    out: list[str] = []
    n = len(raw)
    while i < n:
        c = raw[i]
        if c == "'":
            return "".join(out), i + 1
        if c != "\\":
            out.append(c)
            i += 1
            continue
        if i + 1 >= n:
            raise _Unknown
        e = raw[i + 1]
        if e in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[e])
            i += 2
        elif e in "01234567":
            digits = re.match(r"[0-7]{1,3}", raw[i + 1 :])
            assert digits is not None
            out.append(_byte(int(digits[0], 8)))
            i += 1 + len(digits[0])
        elif e == "x":
            digits = re.match(r"[0-9A-Fa-f]{1,2}", raw[i + 2 :])
            if digits is None:
                out.append("\\x")
                i += 2
                continue
            out.append(_byte(int(digits[0], 16)))
            i += 2 + len(digits[0])
        else:  # \c, \u, \U and anything bash reads its own way
            raise _Unknown
    raise _Unknown


def _byte(value: int) -> str:
    if value == 0 or value > 0x7F:  # a NUL ends the word; a high byte is not one character of UTF-8 on its own
        raise _Unknown
    return chr(value)


# ---- brace expansion -----------------------------------------------------------------------------------------------
def _braces(raw: str) -> list[str]:
    """Bash's brace expansion of the source text `raw` (quoted text untouched), left to right, as bash nests it."""
    found = _first_brace(raw)
    if found is None:
        return [raw]
    start, end, parts = found
    prefix, suffix = raw[:start], raw[end + 1 :]
    words: list[str] = []
    for middle in parts:
        for rest in _braces(middle + suffix):
            words.append(prefix + rest)
            if len(words) > MAX_WORDS:
                raise _Unknown
    return words


def _first_brace(raw: str) -> tuple[int, int, list[str]] | None:
    """The first `{...}` that expands: (its start, its end, the alternatives), or None."""
    for i, c in _unquoted(raw, 0):
        if c == "$" and raw.startswith("${", i):
            raise _Unknown  # a parameter expansion's braces are not brace expansion, and its value is unknown
        if c == "{":
            parsed = _brace_body(raw, i)
            if parsed is not None:
                return parsed
    return None


def _unquoted(raw: str, start: int) -> Iterator[tuple[int, str]]:
    """The characters of `raw` from `start` on that no quote or backslash protects, with their indexes."""
    i = start
    while i < len(raw):
        c = raw[i]
        if c == "\\":
            i += 2
        elif c in "'\"" or raw.startswith("$'", i):
            i = _skip_quoted(raw, i)
        else:
            yield i, c
            i += 1


def _skip_quoted(raw: str, i: int) -> int:
    if raw[i] == "'":
        end = raw.find("'", i + 1)
        if end < 0:
            raise _Unknown
        return end + 1
    if raw[i] == '"':
        return _closing_double(raw, i) + 1
    j = i + 2  # $'...': backslashes may escape the quote
    while j < len(raw):
        if raw[j] == "\\":
            j += 2
            continue
        if raw[j] == "'":
            return j + 1
        j += 1
    raise _Unknown


def _brace_body(raw: str, start: int) -> tuple[int, int, list[str]] | None:
    """The alternatives of the brace expression opening at `start` (commas at its top level, or a sequence)."""
    depth = 0
    commas: list[int] = []
    for i, c in _unquoted(raw, start):
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                if commas:
                    cuts = [start, *commas, i]
                    return start, i, [raw[a + 1 : b] for a, b in zip(cuts, cuts[1:], strict=False)]
                sequence = _sequence(raw[start + 1 : i])
                return None if sequence is None else (start, i, sequence)
        elif c == "," and depth == 1:
            commas.append(i)
    return None


def _sequence(body: str) -> list[str] | None:
    m = _SEQUENCE.fullmatch(body)
    if m is None:
        return None
    a, b, step_text = m[1], m[2], m[3]
    step = abs(int(step_text)) if step_text else 1
    step = step or 1
    if a.lstrip("-").isdigit() and b.lstrip("-").isdigit():
        lo, hi = int(a), int(b)
        count = abs(hi - lo) // step + 1
        if count > MAX_WORDS:
            raise _Unknown
        width = max(len(a), len(b)) if (a.lstrip("-").startswith("0") or b.lstrip("-").startswith("0")) else 0
        values = range(lo, hi + 1, step) if lo <= hi else range(lo, hi - 1, -step)
        return [str(v).zfill(width) if width else str(v) for v in values]
    if a.isalpha() and b.isalpha():
        lo, hi = ord(a), ord(b)
        values = range(lo, hi + 1, step) if lo <= hi else range(lo, hi - 1, -step)
        return [chr(v) for v in values]
    return None
