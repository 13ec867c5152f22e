"""Start-up benchmark: spawn → `initialize` answered, median of N runs, with baselines from the same run.

Baselines: a bare interpreter (`python -c pass`, spawn → exit) and the official Python SDK's echo agent. Targets
(issue #2): gatewright under 100 ms median and at least 5× faster than the SDK agent.

    python bench/startup.py [--runs 20]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
INIT = (json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                    "params": {"protocolVersion": 1, "clientCapabilities": {}}}) + "\n").encode()


def time_initialize(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    assert p.stdin is not None and p.stdout is not None
    p.stdin.write(INIT)
    p.stdin.flush()
    line = p.stdout.readline()
    elapsed = time.perf_counter() - start
    assert b'"protocolVersion"' in line, line
    p.stdin.close()
    p.wait(10)
    p.stdout.close()
    return elapsed


def time_bare(env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True, env=env)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    env = dict(os.environ, GATEWRIGHT_STATE_DIR=tempfile.mkdtemp())
    script = shutil.which("gatewright")
    subjects = {
        "python -c pass (spawn → exit)": lambda: time_bare(env),
        "gatewright acp (python -m acp_server)": lambda: time_initialize([sys.executable, "-m", "acp_server"], env),
        "SDK echo agent (agent-client-protocol)": lambda: time_initialize(
            [sys.executable, str(HERE / "sdk_echo_agent.py")], env),
    }
    if script:
        subjects["gatewright acp (console script)"] = lambda: time_initialize([script, "acp"], env)
    samples: dict[str, list[float]] = {k: [] for k in subjects}
    for _ in range(2):  # warm the page cache and bytecode
        for fn in subjects.values():
            fn()
    for _ in range(args.runs):  # interleaved, so machine noise hits every subject alike
        for name, fn in subjects.items():
            samples[name].append(fn())
    med = {k: statistics.median(v) * 1000 for k, v in samples.items()}
    bare = med["python -c pass (spawn → exit)"]
    sdk = med["SDK echo agent (agent-client-protocol)"]
    print(f"start-up: spawn → initialize answered, median of {args.runs} runs (ms)")
    print(f"{'subject':42} {'median':>8} {'p90':>8} {'× bare':>8} {'SDK ÷ it':>9}")
    for name, v in samples.items():
        p90 = sorted(v)[int(len(v) * 0.9) - 1] * 1000
        print(f"{name:42} {med[name]:8.1f} {p90:8.1f} {med[name] / bare:8.2f} {sdk / med[name]:9.2f}")
    gw = med["gatewright acp (python -m acp_server)"]
    print(f"\ntarget: < 100 ms → {gw:.1f} ms ({'met' if gw < 100 else 'NOT met'}); "
          f"≥ 5× faster than the SDK agent → {sdk / gw:.1f}× ({'met' if sdk / gw >= 5 else 'NOT met'})")


if __name__ == "__main__":
    main()
