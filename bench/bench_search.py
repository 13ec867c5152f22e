"""Benchmark: gatewright's grep and glob tools against raw ripgrep on a generated tree of 50,000 files.

Run: `python bench/bench_search.py [--files 50000] [--runs 5]` (also part of `python -m bench`). The tree is generated
once in a temporary directory (with a .gitignore'd build directory and some binary files, like a real project). Each
measurement is the median wall time of several runs of the full tool call (argument handling, the boundary,
subprocesses, formatting) next to `rg` doing the same search on the same tree in the same run. Target: within 1.5x of
ripgrep.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import anyio

from runtime.tools.base import ToolContext
from runtime.tools.builtin.search import GlobTool, GrepTool, rg_binary
from runtime.workspace import Workspace

WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "zeta",
    "eta",
    "theta",
    "iota",
    "kappa",
    "lambda",
    "mu",
    "nu",
    "xi",
    "omicron",
    "pi",
    "rho",
    "sigma",
]


def generate(root: Path, n_files: int) -> None:
    per_dir = 100
    (root / ".gitignore").write_text("build/\n")
    for i in range(n_files):
        d = root / f"pkg{i // (per_dir * 20)}" / f"mod{(i // per_dir) % 20}"
        if i % per_dir == 0:
            d.mkdir(parents=True, exist_ok=True)
        ext = (".py", ".ts", ".md", ".txt")[i % 4]
        lines = [f"{WORDS[(i + j) % len(WORDS)]} line {j} of file {i}" for j in range(30)]
        if i % 500 == 0:
            lines[7] = f"def needle_function_{i}(): pass"
        (d / f"f{i}{ext}").write_text("\n".join(lines) + "\n")
    build = root / "build"
    build.mkdir()
    for i in range(200):
        (build / f"gen{i}.py").write_text("needle_function_generated\n")
    for i in range(50):
        (root / f"blob{i}.bin").write_bytes(b"needle\x00" * 100)


def median_time(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def measure(files: int, runs: int) -> list[tuple[str, float, float, float]]:
    """(case, gatewright median s, rg median s, median of per-pair ratios) for each case, on a fresh tree."""
    rg = rg_binary()
    if rg is None:
        raise RuntimeError("ripgrep is not installed")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp).resolve()
        t = time.perf_counter()
        generate(root, files)
        sys.stderr.write(f"generated {files} files in {time.perf_counter() - t:.1f} s\n")
        ctx = ToolContext("bench", "c", Workspace(str(root)))
        grep, glob = GrepTool(), GlobTool()

        def tool(t, args):
            return lambda: anyio.run(t.run, args, ctx)

        def raw(*args):
            return lambda: subprocess.run([rg, *args], cwd=root, stdout=subprocess.DEVNULL, check=False)

        # warm the page cache
        raw("needle")()
        cases = [
            ("grep needle_function (100 hits)", tool(grep, {"pattern": "needle_function"}), raw("needle_function")),
            ("grep 'line 1 of' (capped at 100)", tool(grep, {"pattern": "line 1 of"}), raw("line 1 of")),
            (
                "grep -i NEEDLE include *.py",
                tool(grep, {"pattern": "NEEDLE", "caseInsensitive": True, "include": "*.py"}),
                raw("-i", "--glob", "*.py", "NEEDLE"),
            ),
            ("glob **/*.py", tool(glob, {"pattern": "**/*.py"}), raw("--files", "--glob", "*.py")),
            (
                "glob pkg1/**/f1*.ts",
                tool(glob, {"pattern": "pkg1/**/f1*.ts"}),
                raw("--files", "--glob", "pkg1/**/f1*.ts"),
            ),
            # The same listing against rg applying the same rules as the tool (.gitignore outside a git repository,
            # hidden files, a name filter that does not override ignores): what the tool adds around rg.
            (
                "glob **/*.py vs rg with the tool's rules",
                tool(glob, {"pattern": "**/*.py"}),
                raw("--files", "--hidden", "--no-require-git", "--type-add", "py:*.py", "--type", "py", "--null"),
            ),
        ]
        out = []
        for name, ours, theirs in cases:
            ours(), theirs()  # warm-up
            # Interleaved, so a noisy neighbour slows both sides alike; the ratio is the median of per-pair ratios.
            pairs = [(median_time(ours, 1), median_time(theirs, 1)) for _ in range(runs)]
            a = statistics.median(p[0] for p in pairs)
            b = statistics.median(p[1] for p in pairs)
            ratio = statistics.median(p[0] / p[1] for p in pairs)
            out.append((name, a, b, ratio))
        return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=50_000)
    ap.add_argument("--runs", type=int, default=5)
    opts = ap.parse_args()
    sys.stdout.write(f"{'case':40} {'gatewright':>11} {'rg':>9} {'ratio':>6}\n")
    for name, a, b, ratio in measure(opts.files, opts.runs):
        sys.stdout.write(f"{name:40} {a * 1000:9.0f}ms {b * 1000:7.0f}ms {ratio:6.2f}\n")
    sys.stdout.write(f"(median of {opts.runs} runs, {os.cpu_count()} CPUs)\n")


if __name__ == "__main__":
    main()
