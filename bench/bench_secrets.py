"""What keeping secrets costs: redaction per KB of text, and the check that a file a call reads may hold a secret.

Redaction: `SecretMatcher` (every value whole, and every run of 12 of its characters, through one Aho-Corasick
automaton) against the whole-value matching it replaced (a `str.replace` per value, longest first: `WholeValues`
below is that code), on the same texts, interleaved. Texts: a 1 KB tool result and a 24 KB one (the bash tool's
head + tail), with nothing to redact (the common case), with 3 and with 10 registered values of 40-56 characters;
and the wire's cheap check of an encoded 1 KB frame (bytes).
"""

from __future__ import annotations

import random
import statistics
import string
import time
from collections.abc import Callable

from permissions.redaction import REDACTED, SecretMatcher

ALPHABET = string.ascii_letters + string.digits
TEXT_CHARS = ALPHABET + " \n=:/.-_()[]{}"


class WholeValues:
    """The redaction before runs were matched: each value found and replaced whole."""

    def __init__(self, values: list[str]) -> None:
        self.values = sorted(values, key=len, reverse=True)
        self.encoded = [v.encode() for v in self.values]

    def redact(self, text: str) -> str:
        for s in self.values:
            if s in text:
                text = text.replace(s, REDACTED)
        return text

    def found(self, data: bytes) -> bool:
        return any(v in data for v in self.encoded)


def _values(n: int, rng: random.Random) -> list[str]:
    return ["sk-" + "".join(rng.choice(ALPHABET) for _ in range(rng.randint(40, 56))) for _ in range(n)]


def _per_kb(fn: Callable[[], object], size: int, inner: int) -> float:
    t = time.perf_counter()
    for _ in range(inner):
        fn()
    return (time.perf_counter() - t) / inner / (size / 1024)


def measure_redaction(runs: int) -> list[tuple[str, float, float]]:
    """(case, new seconds per KB, old seconds per KB), medians of interleaved runs."""
    rng = random.Random(7)
    out = []
    for n in (3, 10):
        values = _values(n, rng)
        new, old = SecretMatcher(values), WholeValues(values)
        for size in (1024, 24 * 1024):
            text = "".join(rng.choice(TEXT_CHARS) for _ in range(size))
            assert new.redact(text) == old.redact(text) == text
            inner = max(20, 200_000 // size)
            a, b = [], []
            for _ in range(runs):
                a.append(_per_kb(lambda t=text, m=new: m.redact(t), size, inner))
                b.append(_per_kb(lambda t=text, m=old: m.redact(t), size, inner))
            out.append((f"{size // 1024} KB text, {n} values", statistics.median(a), statistics.median(b)))
        frame = ("".join(rng.choice(TEXT_CHARS) for _ in range(1024))).encode()
        a, b = [], []
        for _ in range(runs):
            a.append(_per_kb(lambda d=frame, m=new: m.found(d), 1024, 200))
            b.append(_per_kb(lambda d=frame, m=old: m.found(d), 1024, 200))
        out.append((f"1 KB frame check, {n} values", statistics.median(a), statistics.median(b)))
    return out
