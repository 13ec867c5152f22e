"""Without namespaces: find and kill the processes of one spawn that left its process group.

A `setsid` child (or a double fork) leaves the group `killpg` reaches. When its parent dies, it is adopted by the
sandbox helper (a child subreaper), whose only other children are the spawns themselves. Every spawn's environment
carries a random marker (`child.MARKER_ENV`); after the spawn ends, the adopted children that carry it are killed
with their descendants and reaped. A process that dropped the marker from its environment (`env -i`) and
double-forked is not found: that is what only the pid namespace guarantees.

When the helper itself dies (killed with SIGKILL), its adopted children go to the system's init instead: the agent
then ends every process that carries the marker of one of that helper's spawns, wherever it now hangs
(`kill_marked`), so the helper's death is not a way out either.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator

from runtime.sandbox.child import MARKER_ENV


def _stats() -> Iterator[tuple[int, bytes, int, int]]:
    """(pid, state, ppid, pgrp) of every process /proc shows."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        rest = stat[stat.rfind(b")") + 2 :].split()  # the fields after the parenthesised name: state ppid pgrp ...
        if len(rest) >= 3:
            yield int(entry), rest[0], int(rest[1]), int(rest[2])


def _children() -> list[int] | None:
    """This process's children from its own /proc entry (one small read instead of a walk over every process), or
    None where the kernel does not list them."""
    tid = os.getpid()
    try:
        with open(f"/proc/{tid}/task/{tid}/children", "rb") as f:
            return [int(p) for p in f.read().split()]
    except (OSError, ValueError):
        return None


def _table() -> dict[int, tuple[int, bytes]]:
    return {pid: (ppid, state) for pid, state, ppid, _ in _stats()}


def group_alive(pgid: int) -> bool:
    """Whether a live (non-zombie) process is still in the group.

    `killpg(pgid, 0)` alone also counts zombies, which linger when nobody reaps them (a container's PID 1); /proc
    tells them apart where it exists.
    """
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if not os.path.isdir("/proc/self"):
        return True
    return any(g == pgid and state not in (b"Z", b"X") for _, state, _, g in _stats())


def _carries(pid: int, marker: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return marker in f.read().split(b"\0")
    except OSError:
        return False


def adopted_alive(tag: str) -> bool:
    """Whether a live child this process adopted carries `tag` (what a spawn left its group with is still running)."""
    if not os.path.isdir("/proc/self"):
        return False
    me = os.getpid()
    marker = f"{MARKER_ENV}={tag}".encode()
    kids = _children()
    if kids is not None:
        return any(_carries(pid, marker) and _live(pid) for pid in kids)
    return any(ppid == me and state not in (b"Z", b"X") and _carries(pid, marker) for pid, state, ppid, _ in _stats())


def _live(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 :][:1] not in (b"Z", b"X")


def sweep(tag: str, rounds: int = 4) -> bool:
    """Kill and reap this process's adopted children carrying `tag`, with all their descendants. True if any."""
    if not os.path.isdir("/proc/self"):
        return False
    me = os.getpid()
    marker = f"{MARKER_ENV}={tag}".encode()
    found = False
    for _ in range(rounds):
        kids = _children()
        if kids is not None and not any(_carries(pid, marker) for pid in kids):
            break  # nothing adopted carries it: no walk over every process
        table = _table()
        roots = [
            pid
            for pid, (ppid, state) in table.items()
            if ppid == me and state not in (b"Z", b"X") and _carries(pid, marker)
        ]
        if not roots:
            break
        found = True
        children: dict[int, list[int]] = {}
        for pid, (ppid, _) in table.items():
            children.setdefault(ppid, []).append(pid)
        doomed, todo = [], list(roots)
        while todo:
            pid = todo.pop()
            doomed.append(pid)
            todo += children.get(pid, [])
        for pid in doomed:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 1.0
        for pid in roots:  # our children now: reap them (their descendants come back to us next round)
            while time.monotonic() < deadline:
                try:
                    got, _ = os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    break
                if got:
                    break
                time.sleep(0.002)
    return found


def kill_marked(tags: set[str] | frozenset[str], sig: int = signal.SIGKILL) -> int:
    """Signal every process, whoever its parent, whose environment carries one of these spawns' markers (the agent's
    side: a stop of a spawn without namespaces, or the helper's death). How many were found. Only SIGKILL is
    repeated until none is left (a process forking while we look)."""
    if not tags or not os.path.isdir("/proc/self"):
        return 0
    markers = {f"{MARKER_ENV}={t}".encode() for t in tags}
    me = os.getpid()
    killed = 0
    for _ in range(4):  # a process forking while we look: again, until a pass finds none
        found = 0
        for pid, state, _, _ in list(_stats()):
            if pid == me or state in (b"Z", b"X"):
                continue
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    env = set(f.read().split(b"\0"))
            except OSError:
                continue
            if env & markers:
                with contextlib.suppress(OSError):
                    os.kill(pid, sig)
                found += 1
        killed += found
        if not found or sig != signal.SIGKILL:
            break
    return killed


def kill_descendants(rounds: int = 4) -> None:
    """Kill every descendant of this process and reap its children (the helper's end without namespaces: as a child
    subreaper, everything its spawns started and left behind is beneath it)."""
    me = os.getpid()
    for _ in range(rounds):
        table = _table()
        children: dict[int, list[int]] = {}
        for pid, (ppid, _) in table.items():
            children.setdefault(ppid, []).append(pid)
        doomed, todo = [], list(children.get(me, []))
        while todo:
            pid = todo.pop()
            doomed.append(pid)
            todo += children.get(pid, [])
        if not doomed:
            return
        for pid in doomed:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    time.sleep(0.002)
            except ChildProcessError:
                break
