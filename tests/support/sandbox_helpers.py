"""Finding processes by a marker in their argv: the effect a containment test checks (no process survives)."""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Callable

import anyio


def marker() -> str:
    """A unique `sleep` duration: `sleep {marker()}` runs 1000 s and is findable by its argv."""
    return f"1000.{secrets.randbelow(10**9):09d}"


def survivors(mark: str) -> list[int]:
    """Live (non-zombie) processes whose argv contains `mark`."""
    out = []
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read()
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        if mark.encode() in argv and stat[stat.rfind(b")") + 2 :][:1] not in (b"Z", b"X"):
            out.append(int(entry))
    return out


def wait_for(pred, timeout: float = 5.0) -> bool:
    """Poll `pred` until true (for processes appearing, where no event exists); False on timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.01)
    return pred()


async def eventually(predicate: Callable[[], bool], seconds: float = 10.0) -> bool:
    """Poll a fact about another process (a pid gone, a file written), which no event in this process reports."""
    with anyio.move_on_after(seconds):
        while not predicate():  # noqa: ASYNC110 - the fact lives in another process
            await anyio.sleep(0.02)
    return predicate()


def children(pid: int) -> list[int]:
    """The pids of `pid`'s children (every thread's)."""
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(c) for c in f.read().split()]
        except OSError:
            continue
    return out


def alive(pid: int) -> bool:
    """Whether `pid` is a live process (not gone, not a zombie)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 :][:1] not in (b"Z", b"X")
