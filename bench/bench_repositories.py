"""What watching for new `.git` and `.gatewright` costs (runtime.repositories), on a generated 10,000-file workspace.

A call that may write is checked twice (before it runs, for what background processes did meanwhile; after it, for
what it did), and each check `lstat`s every directory of the workspace and lists again only those that changed. The
figures, interleaved in one run:
- a check when nothing changed, and one after a new nested repository appeared (`git init` of a new directory),
  on a tree last changed more than a second ago (a directory changed within the last second is listed again at
  every check: the clock's granularity);
- the baselines: `lstat` of every directory and nothing else (the least a check without inotify can do), and
  `bash exec true` through the real tool (sandboxed), the cheapest call a check can follow;
- the session's first look at the tree (every directory listed), taken once, on a thread, after `session/new`.
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import anyio

from runtime.repositories import RepositoryWatch
from runtime.tools.base import ToolContext
from runtime.tools.builtin.bash import BashTool
from runtime.workspace import Workspace


def make_tree(root: Path, files: int) -> int:
    """`files` files, ten to a directory, three levels deep, with a few nested repositories and an ignored
    node_modules; returns the number of directories."""
    n = 0
    for i in range(max(1, files // 10)):
        d = root / f"p{i // 100}" / f"q{(i // 10) % 10}" / f"r{i % 10}"
        d.mkdir(parents=True, exist_ok=True)
        for j in range(10):
            (d / f"f{j}.txt").write_text("x\n")
            n += 1
    (root / ".gitignore").write_text("node_modules/\n")
    for nested in ("vendor/a", "vendor/b", "node_modules/pkg"):
        (root / nested / ".git").mkdir(parents=True)
    return sum(1 for _ in os.walk(root))


def measure(files: int, runs: int) -> dict[str, float]:
    ws = Path(tempfile.mkdtemp(prefix="gw-bench-repos-")).resolve()
    try:
        dirs = make_tree(ws, files)
        # The steady state: a directory changed within the last second is listed again at every check (the clock's
        # granularity, `RACY_NS`), which a tree made a moment ago would be, whole.
        time.sleep(1.2)
        t = time.perf_counter()
        watch = RepositoryWatch([str(ws)])
        watch.ready()
        first = time.perf_counter() - t
        tool = BashTool()
        ctx = ToolContext("sess_bench_repos", "call_1", Workspace(str(ws)))
        quiet: list[float] = []
        new: list[float] = []
        command: list[float] = []
        floor: list[float] = []
        known = list(watch.tree.dirs)

        async def exec_true() -> float:
            t = time.perf_counter()
            res = await tool.run({"command": "true"}, ctx)
            assert res.raw_output["exitCode"] == 0, res.output
            return time.perf_counter() - t

        async def main() -> None:
            for _ in range(3):
                await exec_true()
            for i in range(runs):
                command.append(await exec_true())
                t = time.perf_counter()
                for d in known:
                    os.lstat(d)
                floor.append(time.perf_counter() - t)
                t = time.perf_counter()
                assert watch.check() == []
                quiet.append(time.perf_counter() - t)
                (ws / "p0" / "q0" / f"new{i}" / ".git").mkdir(parents=True)  # what `git init` of a new directory makes
                t = time.perf_counter()
                found = watch.check()
                new.append(time.perf_counter() - t)
                assert [f.path for f in found] == [str(ws / "p0" / "q0" / f"new{i}" / ".git")], found
                for f in found:
                    watch.keep(f)

        anyio.run(main)
        return {
            "dirs": dirs,
            "first": first,
            "quiet": statistics.median(quiet),
            "new": statistics.median(new),
            "command": statistics.median(command),
            "floor": statistics.median(floor),
        }
    finally:
        from runtime import processes

        processes.close_session("sess_bench_repos")
        shutil.rmtree(ws, ignore_errors=True)
