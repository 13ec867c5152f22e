"""The long fuzz run: the suite's fuzz tests (tests/*/test_fuzz_*.py) with many more examples.

    python bench/fuzz_long.py [--scale 25] [--no-jsonschema] [-k EXPR]

`--scale` multiplies every fuzz test's example count (the suite runs scale 1, bounded to well under a minute).
Unless `--no-jsonschema`, schema-driven params also come from hypothesis-jsonschema (an independent generator for
the official ACP schema, too slow for the suite). Each test still runs against one long-lived `gatewright acp`
process (or in process), with the same invariants. Prints how many examples ran per test and in total; exits
non-zero if any invariant broke (Hypothesis prints the shrunk failing example).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", type=float, default=25.0)
    ap.add_argument("--no-jsonschema", action="store_true", help="only the built-in schema generator")
    ap.add_argument("-k", default=None, help="pytest -k expression to select fuzz tests")
    args = ap.parse_args()
    report = Path(tempfile.mkdtemp(prefix="gw-fuzz-")) / "report.jsonl"
    env = dict(os.environ, GW_FUZZ_SCALE=str(args.scale), PYTHONPATH=str(ROOT), GW_FUZZ_REPORT=str(report))
    if not args.no_jsonschema:
        env["GW_FUZZ_JSONSCHEMA"] = "1"
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:randomly",
        "--hypothesis-show-statistics",
        *sorted(str(p) for p in (ROOT / "tests").glob("*/test_fuzz_*.py")),
    ]
    if args.k:
        cmd += ["-k", args.k]
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    elapsed = time.monotonic() - start
    out = proc.stdout + proc.stderr
    counts: dict[str, int] = {}
    current = None
    for line in out.splitlines():
        m = re.match(r"^(tests/\S+::\S+):", line.strip())
        if m:
            current = m.group(1)
        m = re.search(r"(\d+) passing examples?, (\d+) failing examples?", line)
        if m and current:
            counts[current] = counts.get(current, 0) + int(m.group(1)) + int(m.group(2))
    lines = 0
    if report.exists():  # the tests against a live agent count their own examples (and lines sent)
        for row in report.read_text(encoding="utf-8").splitlines():
            rec = json.loads(row)
            counts[rec["test"]] = counts.get(rec["test"], 0) + rec["examples"]
            lines += rec["lines"]
    width = max((len(k) for k in counts), default=10)
    print(f"| {'fuzz test'.ljust(width)} | examples |")
    print(f"|{'-' * (width + 2)}|----------|")
    for name, n in sorted(counts.items()):
        print(f"| {name.ljust(width)} | {n} |")
    print(f"| {'total'.ljust(width)} | {sum(counts.values())} |")
    jsonschema = "off" if args.no_jsonschema else "on"
    print(
        f"\n{lines} lines sent to live agents; scale {args.scale}, hypothesis-jsonschema {jsonschema}, "
        f"{elapsed:.0f} s, pytest exit {proc.returncode}"
    )
    if proc.returncode != 0:
        print(out[-20000:])
    return proc.returncode


if __name__ == "__main__":
    raise SystemExit(main())
