"""Start-up benchmark: spawn → `initialize` answered, median of N runs, with baselines from the same run.

Baselines: a bare interpreter (`python -c pass`, spawn → exit) and the official Python SDK's echo agent. Targets:
gatewright under 100 ms median and at least 5× faster than the SDK agent.

    python bench/startup.py [--runs 20]      (also part of `python -m bench`)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
INIT = (
    json.dumps(
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1, "clientCapabilities": {}}}
    )
    + "\n"
).encode()


def time_initialize(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    p = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=ROOT,
        start_new_session=True,
    )
    assert p.stdin is not None and p.stdout is not None
    p.stdin.write(INIT)
    p.stdin.flush()
    line = p.stdout.readline()
    elapsed = time.perf_counter() - start
    assert b'"protocolVersion"' in line, line
    p.stdin.close()
    try:
        p.wait(5)
    except subprocess.TimeoutExpired:  # some peers keep running after their input ends
        p.kill()
        p.wait()
    try:  # and whatever it started (a peer's npm launcher runs the real agent as a child)
        os.killpg(p.pid, signal.SIGKILL)
    except OSError:
        pass
    p.stdout.close()
    return elapsed


def time_bare(env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True, env=env)
    return time.perf_counter() - start


BARE = "python -c pass (spawn → exit)"
GW = "gatewright acp (python -m acp_server)"
SDK = "SDK echo agent (agent-client-protocol)"


def measure(
    runs: int, console_script: bool = False, peers: dict[str, list[str]] | None = None
) -> dict[str, list[float]]:
    """Samples (seconds) per subject, interleaved run by run. `peers`: other ACP agents (name → argv) measured the
    same way, e.g. Zed's Claude Code adapter installed from npm."""
    state = tempfile.mkdtemp()
    # This checkout, not whatever `pip install -e` points at.
    env = dict(os.environ, GATEWRIGHT_STATE_DIR=state, PYTHONPATH=str(ROOT))
    env.pop("GATEWRIGHT_MODEL", None)
    script = shutil.which("gatewright")
    subjects = {
        BARE: lambda: time_bare(env),
        GW: lambda: time_initialize([sys.executable, "-m", "acp_server"], env),
        SDK: lambda: time_initialize([sys.executable, str(HERE / "sdk_echo_agent.py")], env),
    }
    if script and console_script:
        subjects["gatewright acp (console script)"] = lambda: time_initialize([script, "acp"], env)
    for name, argv in (peers or {}).items():
        subjects[name] = lambda argv=argv: time_initialize(argv, env)
    samples: dict[str, list[float]] = {k: [] for k in subjects}
    for _ in range(2):  # warm the page cache and bytecode
        for fn in subjects.values():
            fn()
    for _ in range(runs):  # interleaved, so machine noise hits every subject alike
        for name, fn in subjects.items():
            samples[name].append(fn())
    shutil.rmtree(state, ignore_errors=True)
    return samples


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    samples = measure(args.runs, console_script=True)
    med = {k: statistics.median(v) * 1000 for k, v in samples.items()}
    bare = med[BARE]
    sdk = med[SDK]
    print(f"start-up: spawn → initialize answered, median of {args.runs} runs (ms)")
    print(f"{'subject':42} {'median':>8} {'p90':>8} {'× bare':>8} {'SDK ÷ it':>9}")
    for name, v in samples.items():
        p90 = sorted(v)[int(len(v) * 0.9) - 1] * 1000
        print(f"{name:42} {med[name]:8.1f} {p90:8.1f} {med[name] / bare:8.2f} {sdk / med[name]:9.2f}")
    gw = med[GW]
    print(
        f"\ntarget: < 100 ms → {gw:.1f} ms ({'met' if gw < 100 else 'NOT met'}); "
        f"≥ 5× faster than the SDK agent → {sdk / gw:.1f}× ({'met' if sdk / gw >= 5 else 'NOT met'})"
    )


if __name__ == "__main__":
    main()
