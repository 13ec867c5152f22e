"""Redaction of what this package writes to disk (audit rows, remembered rules' labels): this process's secret-looking
environment values, the values of the host's secret registry, and well-known token shapes.

This package imports neither `runtime` nor `acp_server`, so the process-wide secret registry (`runtime.secrets`) adds
its values here itself (`add_secret_source`) when it is created; the runtime imports it before any tool call exists,
so every value it knows is redacted from every row and label written here.

What is a secret in a text (`SecretMatcher`, used by every sink of the process: `runtime.secrets` too): each whole
value, and every run of `RUN` (12) or more consecutive characters of a value, so a key cut in pieces (`cut -c16-37
.env; cut -c38- .env`) or quoted in part is redacted too. A transform of a value (`tr`, base64, pieces shorter than
`RUN`) cannot be found by any matching: that is why reading a file that may hold one asks first (`permissions.policy`).
"""

from __future__ import annotations

import functools
import os
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from permissions import lazy  # ahocorasick_rs: built the first time a text is checked

if TYPE_CHECKING:
    from ahocorasick_rs import AhoCorasick, BytesAhoCorasick

REDACTED = "<redacted>"
RUN = 12  # a run of this many consecutive characters of a secret value is a secret too
_SECRET_NAMES = ("API_KEY", "SECRET", "TOKEN", "PASSWORD", "PASSWD", "CREDENTIAL", "PRIVATE_KEY", "AUTH")
# Well-known token shapes and `name=value` / `--name value` / `Authorization: Bearer x` forms.
_SECRET_PATTERNS = (
    re.compile(r"\b(sk|pk|rk)-[A-Za-z0-9_\-]{8,}"),
    re.compile(r"\b(ghp|gho|ghu|ghs|ghr|github_pat|glpat|xox[abpr])[-_][A-Za-z0-9_\-]{8,}"),
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),
    re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=\-]{8,}"),
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(-----END [A-Z ]*PRIVATE KEY-----|$)"),
    re.compile(
        r"(?i)\b(\w*(?:api[_-]?key|secret|token|password|passwd|credential)\w*)(\s*[=:]\s*|\s+)"
        r"(['\"]?)[^\s'\"]{4,}\3"
    ),
)
# Callables giving secret values known elsewhere in the process (see the module docstring).
_SOURCES: list[Callable[[], Iterable[str]]] = []
_sources_lock = threading.Lock()


def add_secret_source(values: Callable[[], Iterable[str]]) -> None:
    """Redact every value `values()` gives, at each redaction from now on (adding the same callable twice is one)."""
    with _sources_lock:
        if values not in _SOURCES:
            _SOURCES.append(values)


def env_secret_values(environ: Mapping[str, str] | None = None) -> frozenset[str]:
    """Secret-looking environment values, and every value of the added secret sources (the host's secret registry:
    configured key variables, MCP values)."""
    env = os.environ if environ is None else environ
    return frozenset(
        v for k, v in env.items() if len(v) >= 6 and any(m in k.upper() for m in _SECRET_NAMES)
    ) | frozenset(v for values in _SOURCES for v in values())


def redact(text: str, secrets: frozenset[str] | None = None) -> str:
    """Remove secret values from a string: this process's secret environment values (whole, and every run of `RUN`
    or more of their characters) and well-known token shapes."""
    text = matcher_for(secrets if secrets is not None else env_secret_values()).redact(text)
    for pattern in _SECRET_PATTERNS:
        if pattern.groups >= 3:
            text = pattern.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
        else:
            text = pattern.sub(REDACTED, text)
    return text


@functools.lru_cache(maxsize=8)
def matcher_for(values: frozenset[str]) -> SecretMatcher:
    """The matcher of a set of values (the set rarely changes: the automaton is built once per set)."""
    return SecretMatcher(values)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _grams(value: str) -> list[str]:
    return [value[i : i + RUN] for i in range(len(value) - RUN + 1)]


class SecretMatcher:
    """Where secret values occur in a text: each whole value, and every run of `RUN` or more consecutive characters
    of a value at least `RUN` long (a key cut in pieces, a line quoting half of it).

    One Aho-Corasick automaton (`ahocorasick_rs`, in Rust) holds every `RUN`-character piece of every long value, so
    a text is read once whatever the number of values; values shorter than `RUN` are matched whole, as before. The
    union of the overlapping pieces found is exactly the set of characters that belong to some run of `RUN` or more:
    each piece found is such a run, and each such run is covered by its pieces. Measured (`python -m bench --only
    redaction`): a few µs per KB, against ~1 µs for whole values alone with a handful of values, and constant in the
    number of values where whole-value matching grows with it. The automata are built on first use and then only
    read (safe to share between threads); a value holding a lone surrogate (an undecodable environment byte) is
    matched whole only.
    """

    __slots__ = ("_bytes_ac", "_grams", "_short", "_short_bytes", "_text_ac")

    def __init__(self, values: Iterable[str]) -> None:
        ordered = sorted({v for v in values if v}, key=len, reverse=True)
        whole = [v for v in ordered if len(v) < RUN or _SURROGATE.search(v)]
        self._short = tuple(whole)
        self._short_bytes = tuple(v.encode("utf-8", "surrogatepass") for v in whole)
        self._grams = tuple(sorted({g for v in ordered if v not in whole for g in _grams(v)}))
        self._text_ac: AhoCorasick | None = None
        self._bytes_ac: BytesAhoCorasick | None = None

    def __bool__(self) -> bool:
        return bool(self._short or self._grams)

    def _text(self) -> AhoCorasick:
        if self._text_ac is None:
            self._text_ac = lazy.ahocorasick_rs.AhoCorasick(list(self._grams))
        return self._text_ac

    def _bytes(self) -> BytesAhoCorasick:
        if self._bytes_ac is None:
            # Contiguous NFA: measured 0.6 ms to build and 0.2 MB for ten 50-character values, against 4.5 ms and
            # 2.5 MB for a DFA that scans twice as fast; scanning bytes beats scanning str (which converts).
            ac = lazy.ahocorasick_rs
            patterns = [g.encode() for g in self._grams]
            self._bytes_ac = ac.BytesAhoCorasick(patterns, implementation=ac.Implementation.ContiguousNFA)
        return self._bytes_ac

    def _pieces(self, text: str, overlapping: bool) -> list[tuple[int, int, int]]:
        try:
            return self._text().find_matches_as_indexes(text, overlapping=overlapping)
        except UnicodeEncodeError:  # a lone surrogate in the text: no piece holds one, and one character is one
            return self._text().find_matches_as_indexes(_SURROGATE.sub("\ufffd", text), overlapping=overlapping)

    def found(self, data: str | bytes) -> bool:
        """Whether `data` holds a value or a run of one (encoded text is matched as UTF-8)."""
        if isinstance(data, str):
            if any(v in data for v in self._short):
                return True
            if len(data) < RUN or not self._grams:
                return False
            data = data.encode("utf-8", "surrogatepass")  # no piece holds a surrogate's bytes
        elif any(v in data for v in self._short_bytes):
            return True
        return len(data) >= RUN and bool(self._grams) and bool(self._bytes().find_matches_as_indexes(data))

    def spans(self, text: str) -> list[tuple[int, int]]:
        """The runs of secret characters in `text`, merged and in order (start, end); whole short values included."""
        found: list[tuple[int, int]] = []
        if self._grams and len(text) >= RUN:
            found.extend((start, end) for _, start, end in self._pieces(text, True))
        for v in self._short:
            at = text.find(v)
            while at != -1:
                found.append((at, at + len(v)))
                at = text.find(v, at + len(v))
        if not found:
            return found
        found.sort()
        merged = [found[0]]
        for start, end in found[1:]:
            if start <= merged[-1][1]:
                if end > merged[-1][1]:
                    merged[-1] = (merged[-1][0], end)
            else:
                merged.append((start, end))
        return merged

    def redact(self, text: str) -> str:
        """`text` with every run of secret characters replaced by one `REDACTED` marker."""
        if not self.found(text):
            return text
        spans = self.spans(text)
        if not spans:
            return text
        out: list[str] = []
        last = 0
        for start, end in spans:
            out += (text[last:start], REDACTED)
            last = end
        out.append(text[last:])
        return "".join(out)
