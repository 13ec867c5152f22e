"""`python -m bench`: every figure in one table, each a median over repeated, interleaved runs, next to a baseline
measured in the same run. `--quick` for a fast smoke run; `--only NAME[,NAME]` for some figures
(startup, session_new, first_prompt, streaming, approval, search, memory, load, sandbox, proxy, secrets)."""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import figures
from bench.figures import Row, ms, verdict


def startup(runs: int, peers: dict[str, list[str]]) -> list[Row]:
    from bench import startup as su

    samples = su.measure(runs, peers=peers)
    med = {k: statistics.median(v) for k, v in samples.items()}
    gw, bare, sdk = med[su.GW], med[su.BARE], med[su.SDK]
    peer_rows = [
        Row(
            f"  vs peer: {name}",
            ms(gw),
            f"{name}: {ms(med[name])}",
            f"{med[name] / gw:.1f}× faster",
            "faster",
            verdict(med[name] > gw),
        )
        for name in peers
    ]
    return [
        Row(
            "start-up: spawn → initialize answered",
            ms(gw),
            f"python -c pass: {ms(bare)}",
            f"{gw / bare:.2f}× bare",
            "< 100 ms",
            verdict(gw < 0.100),
        ),
        Row(
            "  vs the official SDK's echo agent",
            ms(gw),
            f"SDK echo: {ms(sdk)}",
            f"{sdk / gw:.1f}× faster",
            "≥ 5× faster",
            verdict(sdk / gw >= 5),
        ),
        *peer_rows,
    ]


def first_prompt(runs: int, peers: dict[str, list[str]]) -> list[Row]:
    from bench import first_prompt as fp

    samples = fp.measure(runs, peers)
    sys.stderr.write(fp.table(samples) + "\n")
    return fp.rows(samples, list(peers))


def search(files: int, runs: int) -> list[Row]:
    from bench import bench_search

    rows = []
    for name, a, b, ratio in bench_search.measure(files, runs):
        rows.append(
            Row(
                f"{name} ({files // 1000}k files)",
                ms(a),
                f"rg: {ms(b)}",
                f"{ratio:.2f}× rg",
                "≤ 1.5× rg",
                verdict(ratio <= 1.5),
            )
        )
    return rows


def sandbox(runs: int) -> list[Row]:
    from bench import bench_sandbox as bs
    from runtime.sandbox import support

    s = bs.measure(runs)
    box, landlock, off, direct = (bs.p50(s[k]) for k in ("sandboxed", "landlock", "off", "direct"))
    added = box - direct
    rows = [
        Row(
            "bash exec `true`, sandboxed: added p50",
            f"+{added * 1000:.1f} ms",
            f"direct spawn: {ms(direct)}",
            f"{ms(box)} in all",
            "≤ 5 ms added",
            verdict(added <= 0.005),
        ),
        Row(
            "  Landlock only (GATEWRIGHT_SANDBOX=landlock)",
            f"+{(landlock - direct) * 1000:.1f} ms",
            f"direct spawn: {ms(direct)}",
            f"{ms(landlock)} in all",
            "",
            "",
        ),
        Row(
            "  vs the same path with the sandbox off",
            ms(box),
            f"GATEWRIGHT_SANDBOX=off: {ms(off)}",
            f"{(box - off) * 1000:+.1f} ms",
            "",
            "",
        ),
        *git_status_rows(bs, max(10, runs // 4)),
        Row("  what this system offers", support().describe().removeprefix("sandbox: "), "", "", "", ""),
    ]
    for refuse, name in (("userns", "user namespaces refused (seccomp)"), ("landlock", "no Landlock (seccomp)")):
        env = bs.in_environment(refuse, max(10, runs // 2))
        if env is None:
            rows.append(Row(f"  environment: {name}", "not built here", "", "", "", "n/a"))
            continue
        p = env["p50"]
        assert isinstance(p, dict)
        rows.append(
            Row(
                f"  environment: {name}",
                f"+{(p['sandboxed'] - p['direct']) * 1000:.1f} ms",
                f"direct spawn there: {ms(p['direct'])}",
                f"{ms(p['sandboxed'])} in all",
                "",
                "",
            )
        )
    return rows


def proxy(rounds: int) -> list[Row]:
    from bench import bench_proxy as bp

    s = bp.measure(rounds)
    direct = bp.p50(s["direct"])
    rows = []
    for mode, what in (("forward", "HTTP request"), ("connect", "CONNECT tunnel + request")):
        added = bp.p50(s[mode]) - direct
        rows.append(
            Row(
                f"[sandbox] network proxy, {what}: added p50 per connection",
                f"+{added * 1000:.2f} ms",
                f"direct: {ms(direct)}",
                f"{ms(bp.p50(s[mode]))} in all",
                "≤ 2 ms added",
                verdict(added <= 0.002),
            )
        )
    return rows


def secrets(runs: int) -> list[Row]:
    from bench import bench_secrets as bsec

    rows = []
    for case, new, old in bsec.measure_redaction(runs):
        rows.append(
            Row(
                f"redaction, {case}: per KB",
                f"{new * 1e6:.2f} µs",
                f"whole values only: {old * 1e6:.2f} µs",
                f"{new / old:.1f}×",
                "≤ 5 µs per KB",
                verdict(new <= 5e-6),
            )
        )
    for case, new, old in bsec.measure_file_check(runs):
        rows.append(
            Row(
                f"secret-file check of a named file, {case}",
                f"{new * 1e6:.1f} µs",
                f"resolving it alone: {old * 1e6:.1f} µs",
                f"+{(new - old) * 1e6:.1f} µs",
                "(informational)",
                "",
            )
        )
    walk, listing = bsec.measure_walk(runs)
    rows.append(
        Row(
            "deciding `grep -r KEY .`: the secret-file walk (10k files)",
            ms(walk),
            f"rg --files --hidden: {ms(listing)}",
            f"{walk / listing:.2f}× rg",
            "(informational)",
            "",
        )
    )
    return rows


def repositories(files: int, runs: int) -> list[Row]:
    from bench import bench_repositories as br

    m = br.measure(files, runs)
    per_call = m["quiet"]  # one check after a call that may write; one more before it while a process runs
    return [
        Row(
            f"new .git/.gatewright watch: per writing call ({files // 1000}k files)",
            f"{per_call * 1000:.1f} ms",
            f"bash exec `true`, sandboxed: {ms(m['command'])}",
            f"{per_call / m['command']:.2f}× it",
            "≤ 5 ms",
            verdict(per_call <= 0.005),
        ),
        Row("  while a background process runs (two checks)", f"{2 * per_call * 1000:.1f} ms", "", "", "", ""),
        Row(
            "  one check, nothing new",
            f"{m['quiet'] * 1000:.2f} ms",
            f"lstat of its {int(m['dirs']):,} directories: {m['floor'] * 1000:.2f} ms",
            f"{m['quiet'] / m['floor']:.2f}× it",
            "",
            "",
        ),
        Row("  one check, a nested repository new", f"{m['new'] * 1000:.2f} ms", "", "", "", ""),
        Row("  the session's first look (on a thread)", ms(m["first"]), "", "", "", ""),
    ]


def git_status_rows(bs: Any, runs: int) -> list[Row]:
    """The environment block's `git status` (each turn's start, prefetched at session/new), on this checkout."""
    g = bs.measure_git(runs, str(Path(__file__).resolve().parents[1]))
    box, before = bs.p50(g["sandboxed"]), bs.p50(g["unconfined"])
    return [
        Row(
            "environment block's git status, sandboxed: added p50",
            f"+{(box - before) * 1000:.1f} ms",
            f"unconfined git status: {ms(before)}",
            f"{ms(box)} in all",
            "≤ 10 ms added",
            verdict(box - before <= 0.010),
        )
    ]


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    ap.add_argument("--quick", action="store_true", help="fewer runs and a 5,000-file tree (a smoke run)")
    ap.add_argument("--only", default="", help="comma-separated figure names")
    ap.add_argument(
        "--peer",
        action="append",
        default=[],
        metavar="NAME=COMMAND",
        help="another ACP agent to measure at start-up, on the first prompt of a fresh process and "
        "in idle memory next to gatewright (repeatable), e.g. "
        "claude-code-acp=bench/.peers/node_modules/.bin/claude-code-acp",
    )
    opts = ap.parse_args()
    peers: dict[str, list[str]] = {}
    for spec in opts.peer:
        name, sep, command = spec.partition("=")
        if not sep or not name or not command.strip():
            ap.error(f"--peer wants NAME=COMMAND, got {spec!r}")
        peers[name] = shlex.split(command)
    q = opts.quick
    plan = {
        "startup": lambda: startup(5 if q else 20, peers),
        "session_new": lambda: figures.bench_session_new(5 if q else 15),
        "first_prompt": lambda: first_prompt(3 if q else 7, peers),
        "streaming": lambda: figures.bench_streaming(3 if q else 7, 5_000 if q else 20_000),
        "approval": lambda: figures.bench_approval(10 if q else 100),
        "search": lambda: search(5_000 if q else 50_000, 3 if q else 7),
        "memory": lambda: figures.bench_memory(2 if q else 5, peers=peers),
        "load": lambda: figures.bench_load(2 if q else 5, (20, 200) if q else (100, 1000)),
        "sandbox": lambda: sandbox(30 if q else 200),
        "repositories": lambda: repositories(10_000, 10 if q else 50),
        "proxy": lambda: proxy(3 if q else 15),
        "secrets": lambda: secrets(5 if q else 15),
    }
    only = [x.strip() for x in opts.only.split(",") if x.strip()]
    unknown = set(only) - set(plan)
    if unknown:
        ap.error(f"unknown figure(s): {', '.join(sorted(unknown))}; known: {', '.join(plan)}")
    rows: list[Row] = []
    t0 = time.perf_counter()
    for name, fn in plan.items():
        if only and name not in only:
            continue
        sys.stderr.write(f"bench: {name}…\n")
        t = time.perf_counter()
        try:
            got = fn()
        except Exception as exc:  # one broken figure must not hide the others
            traceback.print_exc()
            got = [Row(name, "FAILED", f"{type(exc).__name__}: {exc}"[:60], "", "", "n/a")]
        for r in got:
            sys.stderr.write(f"  {r.figure}: {r.value} ({r.baseline}; {r.ratio})\n")
        sys.stderr.write(f"  ({time.perf_counter() - t:.0f} s)\n")
        rows.extend(got)
    print_table(rows)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"\n{platform.python_implementation()} {platform.python_version()}, {platform.system()} "
        f"{platform.machine()}, {os.cpu_count()} CPUs, load average {load:.1f} at the end; "
        f"{time.perf_counter() - t0:.0f} s{' (--quick)' if q else ''}. Medians of interleaved runs; "
        "ratios are against the baseline measured in the same run."
    )


def print_table(rows: list[Row]) -> None:
    head = Row("figure", "gatewright", "baseline (same run)", "ratio", "target", "")
    cols = list(
        zip(*[(r.figure, r.value, r.baseline, r.ratio, r.target, r.verdict) for r in [head, *rows]], strict=True)
    )
    widths = [max(len(x) for x in col) for col in cols]
    for i, r in enumerate([head, *rows]):
        cells = (r.figure, r.value, r.baseline, r.ratio, r.target, r.verdict)
        print(
            "  ".join(
                c.ljust(w) if j in (0, 2, 4, 5) else c.rjust(w)
                for j, (c, w) in enumerate(zip(cells, widths, strict=True))
            ).rstrip()
        )
        if i == 0:
            print("  ".join("-" * w for w in widths))


if __name__ == "__main__":
    main()
