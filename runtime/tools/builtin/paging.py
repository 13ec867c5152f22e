"""How `read_file` cuts a file into pages a model can read to the end: sans-I/O, fed line by line or piece by piece.

A page is numbered rows (`     N<TAB>text`) up to `maxChars` characters, prefixes included. Whole lines are shown
while they fit. A line that does not fit is not cut, unless it is the first row of the page: then the page is that
piece of it (at least one character, so every call makes progress), and the note names the exact next call, with
`startColumn` (1-based, in characters of the line) where the piece ends. So a minified file whose one line holds
megabytes is read in pieces, and any line of any length can be read whole by following the notes. Only the
characters a page shows (and the row being decided) are ever held: a line is fed in pieces as it is read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


def _prefix(lineno: int) -> str:
    return f"{lineno:6}\t"


@dataclass(slots=True)
class Page:
    """One page of `read_file`: feed it the lines from `start` on (`feed`, then `end_of_file`), read `text()`."""

    start: int
    start_column: int
    max_chars: int
    call: Mapping[str, Any]  # the arguments of the call that made this page, for the next call's note
    rows: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    used: int = 0
    last_line: int = 0  # the last line shown in full (or, for a piece, the line it is a piece of)
    truncated: bool = False
    next_call: dict[str, Any] | None = None
    done: bool = False
    # the line being fed
    _line: int = 0
    _seen: int = 0  # characters of it fed so far
    _kept: list[str] = field(default_factory=list)  # what is kept of it for the row
    _kept_len: int = 0
    _first_column: int = 1  # the column its row starts at
    _piece: bool = False  # the row is a piece: the rest of the line is only counted
    _line_open: bool = False

    def __post_init__(self) -> None:
        self.last_line = self.start - 1

    def feed(self, lineno: int, text: str, ends: bool) -> bool:
        """Give the page `text`, the next characters of line `lineno` (`ends`: the line's end is in them, its line
        break already stripped). Lines come in order from `start`; a line may come in any number of pieces.
        Returns whether the page wants more."""
        if self.done:
            return False
        if lineno != self._line:
            self._begin(lineno)
        self._take(text)
        if ends:
            self._finish()
        return not self.done

    def end_of_file(self) -> None:
        """The file ended (a last line without a line break is finished here)."""
        if self._line and not self.done and self._line_open:
            self._finish()
        self.done = True

    def text(self) -> str:
        return "".join(self.rows) + ("\n".join(self.notes) + "\n" if self.notes else "")

    # ---- one line ----------------------------------------------------------------------------------------------
    def _begin(self, lineno: int) -> None:
        self._line, self._seen, self._kept, self._kept_len, self._piece = lineno, 0, [], 0, False
        self._first_column = self.start_column if lineno == self.start else 1
        self._line_open = True

    def _room(self) -> int:
        """Characters of text this line's row may hold."""
        return self.max_chars - self.used - len(_prefix(self._line)) - 1

    def _take(self, text: str) -> None:
        skip = max(0, self._first_column - 1 - self._seen)  # characters before the start column
        self._seen += len(text)
        if self._piece or skip >= len(text):
            return
        text = text[skip:] if skip else text
        if self.rows:  # a later row is shown whole or not at all: keep one character more than fits, to know
            want = self._room() + 1 - self._kept_len
            if want > 0:
                self._kept.append(text[:want])
                self._kept_len += min(len(text), want)
            if self._kept_len > self._room():
                self._stop_before_line()
            return
        room = max(1, self._room())
        want = room - self._kept_len
        self._kept.append(text[:want])
        self._kept_len += min(len(text), want)
        if len(text) > want:  # the first row cannot hold the rest of this line: it is a piece
            self._piece = True

    def _finish(self) -> None:
        self._line_open = False
        if self.done:
            return
        length = self._seen
        lineno, first = self._line, self._first_column
        if first > 1 and first > length:
            self.notes.append(f"[line {lineno} has only {length} characters; nothing to show from column {first}]")
            self.last_line = lineno
            return
        row = f"{_prefix(lineno)}{''.join(self._kept)}\n"
        self.rows.append(row)
        self.used += len(row)
        self.last_line = lineno
        if self._piece:
            shown_to = first + self._kept_len - 1
            self._cut(
                f"line {lineno} has {length} characters; this shows columns {first}–{shown_to}",
                {"startLine": lineno, "startColumn": shown_to + 1},
            )
        elif first > 1:
            self.notes.append(f"[line {lineno} is shown from column {first} to its end (it has {length} characters)]")

    def _stop_before_line(self) -> None:
        self._cut(
            f"output truncated at {self.max_chars} characters after line {self.last_line}",
            {"startLine": self.last_line + 1},
        )

    def _cut(self, what: str, where: dict[str, Any]) -> None:
        nxt: dict[str, Any] = {"path": self.call["path"], **where}
        for key in ("endLine", "maxChars"):
            if self.call.get(key) is not None:
                nxt[key] = self.call[key]
        self.next_call = nxt
        self.truncated = True
        self.done = True
        self.notes.append(f"[{what}; continue with read_file {json.dumps(nxt, ensure_ascii=False)}]")
