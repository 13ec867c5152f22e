"""The sandbox's cost: `bash` `exec` of `true`, through the real tool, sandboxed and not, interleaved.

Four ways, each sample of each taken in turn so a noisy neighbour slows all alike:
- sandboxed: the default (Landlock + user/pid/mount/ipc/net namespaces where the system has them), a call approved
  as an ordinary command (`Confinement()`: workspace writes, no network);
- `GATEWRIGHT_SANDBOX=landlock`: Landlock without namespaces (the seccomp no-network filter, protected paths held
  by granting a root entry by entry), the path of a system that refuses user namespaces;
- `GATEWRIGHT_SANDBOX=off`: the same code path with the sandbox switched off (the helper still contains it);
- direct: what `exec` did before the sandbox: one `anyio.open_process` of `bash -c true`, no helper.
The target (added p50 latency ≤ 5 ms) is against the direct spawn: what a user pays compared to no sandbox at all.

`in_environment(refuse, runs)` measures the sandboxed and the direct spawn again in a child process that runs in
another environment, built for real by a seccomp filter (`tests/support/refuse.py`: user namespaces refused, or no
Landlock), so each environment's cost is a difference against a direct spawn in that same run.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

from runtime.tools.base import ToolContext
from runtime.tools.builtin.bash import BashTool
from runtime.workspace import Workspace


def measure(runs: int) -> dict[str, list[float]]:
    ws = Path(tempfile.mkdtemp(prefix="gw-bench-sandbox-")).resolve()
    (ws / ".git").mkdir()
    tool = BashTool()
    ctx = ToolContext("sess_bench_sandbox", "call_1", Workspace(str(ws)))
    samples: dict[str, list[float]] = {"sandboxed": [], "landlock": [], "off": [], "direct": []}
    saved = os.environ.get("GATEWRIGHT_SANDBOX")

    async def via_tool(switch: str | None) -> float:
        if switch is None:
            os.environ.pop("GATEWRIGHT_SANDBOX", None)
        else:
            os.environ["GATEWRIGHT_SANDBOX"] = switch
        t = time.perf_counter()
        res = await tool.run({"command": "true"}, ctx)
        dt = time.perf_counter() - t
        assert res.raw_output["exitCode"] == 0, res.output
        return dt

    async def direct() -> float:
        t = time.perf_counter()
        proc = await anyio.open_process(
            ["/bin/bash", "-c", "true"], stdin=subprocess.DEVNULL, cwd=str(ws), start_new_session=True
        )
        async with proc:
            await proc.wait()
        return time.perf_counter() - t

    async def main() -> None:
        for _ in range(3):  # start the helpers, warm the caches
            await via_tool(None)
            await via_tool("landlock")
            await via_tool("off")
            await direct()
        for _ in range(runs):
            samples["sandboxed"].append(await via_tool(None))
            samples["landlock"].append(await via_tool("landlock"))
            samples["off"].append(await via_tool("off"))
            samples["direct"].append(await direct())

    try:
        anyio.run(main)
    finally:
        if saved is None:
            os.environ.pop("GATEWRIGHT_SANDBOX", None)
        else:
            os.environ["GATEWRIGHT_SANDBOX"] = saved
        from runtime import processes

        processes.close_session("sess_bench_sandbox")
    return samples


def measure_git(runs: int, repo: str) -> dict[str, list[float]]:
    """The environment block's look at git, interleaved: `git_state` as the agent runs it now (in the sandbox, a
    `git config` listing the filter drivers, then `git status` with every repository program switched off), and the
    unconfined `git status` it ran before, on the same repository."""
    from runtime.context import git_state

    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "XDG_CONFIG_HOME", "TMPDIR")}
    env.update(LC_ALL="C", GIT_OPTIONAL_LOCKS="0", GIT_TERMINAL_PROMPT="0")
    before = ["git", "-c", "core.fsmonitor=false", "status", "--porcelain=v2", "--branch"]

    def unconfined() -> float:
        t = time.perf_counter()
        subprocess.run(before, cwd=repo, env=env, stdin=subprocess.DEVNULL, capture_output=True, check=True)
        return time.perf_counter() - t

    def sandboxed() -> float:
        t = time.perf_counter()
        state = git_state(repo)
        dt = time.perf_counter() - t
        assert state.line.startswith(("branch", "detached")), state.line
        return dt

    samples: dict[str, list[float]] = {"sandboxed": [], "unconfined": []}
    for _ in range(3):  # the helper started, the caches warm
        sandboxed()
        unconfined()
    for _ in range(runs):
        samples["sandboxed"].append(sandboxed())
        samples["unconfined"].append(unconfined())
    return samples


def p50(xs: list[float]) -> float:
    return statistics.median(xs)


REFUSE = Path(__file__).resolve().parents[1] / "tests" / "support" / "refuse.py"
_CHILD = (
    "import json, sys; from bench.bench_sandbox import measure, p50; from runtime.sandbox import support; "
    "s = measure(int(sys.argv[1])); "
    "print(json.dumps({'p50': {k: p50(v) for k, v in s.items()}, 'offers': support().describe()}))"
)


def in_environment(refuse: str, runs: int) -> dict[str, object] | None:
    """p50s of the ways above measured in a child under `refuse.py REFUSE`, and what its sandbox found; None where
    the environment cannot be built here (no filter for this machine, a checkout without the tests)."""
    if not REFUSE.exists():
        return None
    out = subprocess.run(
        [sys.executable, str(REFUSE), refuse, "--", sys.executable, "-c", _CHILD, str(runs)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=Path(__file__).resolve().parents[1],
        check=False,
    )
    if out.returncode:
        return None
    found: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return found
