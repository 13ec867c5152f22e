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


def measure_file_check(runs: int) -> list[tuple[str, float, float]]:
    """(case, seconds with the check, seconds without): what describing a call costs per file it names, the path's
    resolution alone (what the describer did before) against resolution plus `runtime.secret_files.secret_reason`
    (name rules, then the file's content searched for 3 registered values), on files of 4 KB, 100 KB and 1 MB."""
    import os
    import tempfile

    from runtime import secret_files, secrets

    rng = random.Random(11)
    secrets.register_values(_values(3, rng), label="a bench value")
    root = tempfile.mkdtemp(prefix="gw-bench-secrets-")
    out = []
    try:
        for size in (4 << 10, 100 << 10, 1 << 20):
            path = os.path.join(root, f"file-{size}.txt")
            with open(path, "w", encoding="utf-8") as f:
                f.write("".join(rng.choice(TEXT_CHARS) for _ in range(size)))
            inner = 2000 if size < 1 << 20 else 50

            def resolve(p: str = path) -> object:
                return os.path.isfile(os.path.realpath(p))

            def check(p: str = path) -> object:
                real = os.path.realpath(p)
                return secret_files.secret_reason(p, real, p)

            a, b = [], []
            for _ in range(runs):
                a.append(_per_kb(check, 1024, inner))
                b.append(_per_kb(resolve, 1024, inner))
            out.append(
                (
                    f"{size // 1024:,} KB file" if size < 1 << 20 else "1 MB file",
                    statistics.median(a),
                    statistics.median(b),
                )
            )
    finally:
        for name in os.listdir(root):
            os.unlink(os.path.join(root, name))
        os.rmdir(root)
    return out


def measure_walk(runs: int, files: int = 10_000) -> tuple[float, float]:
    """(seconds, baseline seconds): what deciding `grep -r KEY .` adds (the walk of the tree for well-known secret
    files, `runtime.secret_files.unnamed_reads`) on a generated tree, against `rg --files` listing the same tree."""
    import shutil
    import subprocess
    import tempfile
    from pathlib import Path

    from bench.bench_search import generate
    from runtime.secret_files import unnamed_reads
    from runtime.tools.builtin.search import rg_binary

    root = Path(tempfile.mkdtemp(prefix="gw-bench-walk-")).resolve()
    try:
        generate(root, files)
        rg = rg_binary() or "rg"
        a, b = [], []
        for _ in range(runs):
            t = time.perf_counter()
            unnamed_reads([["grep", "-r", "KEY", "."]], str(root), False)
            a.append(time.perf_counter() - t)
            t = time.perf_counter()
            subprocess.run([rg, "--files", "--hidden"], cwd=root, capture_output=True, check=False)
            b.append(time.perf_counter() - t)
        return statistics.median(a), statistics.median(b)
    finally:
        shutil.rmtree(root, ignore_errors=True)
