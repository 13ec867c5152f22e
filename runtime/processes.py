"""Every child process the agent starts: foreground `exec` runs, per-session background processes, and their groups.

Children run in their own session (process group, `start_new_session`). Each group is registered here so that a
timeout, a cancelled prompt, a closed session and the agent's exit can kill the whole group, grandchildren included.

- `run_exec` runs one command to completion with stdin closed, head+tail capped output and a timeout; whatever the
  outcome (exit, timeout, anyio cancellation) no member of its group survives it.
- `ProcessTable` holds one session's background processes (`start`/`status`/`logs`/`write`/`stop`/`list`): output
  goes to a ring buffer read by character offset; reader and waiter threads keep them independent of any prompt.
"""

from __future__ import annotations

import codecs
import contextlib
import itertools
import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import anyio
import anyio.abc

_groups: set[int] = set()
_lock = threading.Lock()


def register_group(pgid: int) -> None:
    with _lock:
        _groups.add(pgid)


def unregister_group(pgid: int) -> None:
    with _lock:
        _groups.discard(pgid)


def kill_group(pgid: int, sig: int = signal.SIGKILL) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def kill_all_process_groups() -> None:
    with _lock:
        groups = list(_groups)
        _groups.clear()
    for pgid in groups:
        kill_group(pgid)


def group_alive(pgid: int) -> bool:
    """Whether any live (non-zombie) process is still in the group.

    `killpg(pgid, 0)` alone also counts zombies, which linger when PID 1 does not reap (containers); /proc tells them
    apart where it exists.
    """
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if not os.path.isdir("/proc/self"):
        return True
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # Fields after the parenthesised command name: state ppid pgrp ...
        rest = stat[stat.rfind(b")") + 2:].split()
        if len(rest) >= 3 and int(rest[2]) == pgid and rest[0] not in (b"Z", b"X"):
            return True
    return False


def child_cwd(path: str, dir_fd: int | None) -> tuple[str, tuple[int, ...]]:
    """The `cwd` to give a child: the verified directory fd itself when /proc allows, so a directory swapped for a
    symlink after the boundary check cannot redirect the child."""
    if dir_fd is not None and os.path.isdir("/proc/self/fd"):
        return f"/proc/self/fd/{dir_fd}", (dir_fd,)
    return path, ()


# ---- capped capture ------------------------------------------------------------------------------------------------
class HeadTail:
    """Keeps the first `head` and the last `tail` bytes of a stream and counts what was dropped between them."""

    def __init__(self, head: int, tail: int) -> None:
        self.head_limit = head
        self.tail_limit = tail
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > self.tail_limit:
                del self.tail[: len(self.tail) - self.tail_limit]

    @property
    def dropped(self) -> int:
        return self.total - len(self.head) - len(self.tail)

    def text(self) -> str:
        head = bytes(self.head).decode("utf-8", errors="replace")
        if not self.dropped:
            return head + bytes(self.tail).decode("utf-8", errors="replace")
        tail = bytes(self.tail).decode("utf-8", errors="replace")
        cap = self.head_limit + self.tail_limit
        return f"{head}\n[... {self.dropped} bytes truncated: output exceeded {cap} bytes ...]\n{tail}"


@dataclass(frozen=True, slots=True)
class ExecResult:
    stdout: str
    stderr: str
    exit_code: int | None  # None when killed by a signal
    signal: int | None
    timed_out: bool
    pid: int
    duration_ms: int
    truncated: bool
    leftovers_killed: bool  # background children of the command were still running after it exited


async def run_exec(
    argv: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str],
    timeout: float,
    cwd_fd: int | None = None,
    head_bytes: int = 12_000,
    tail_bytes: int = 12_000,
    drain_grace: float = 0.3,
) -> ExecResult:
    """Run `argv` in its own process group with stdin closed and wait for it.

    After `timeout` seconds, or if the calling task is cancelled, the whole group is killed with SIGKILL. When the
    command exits but left children running, they are killed as well: `exec` means "run to completion"; long-running
    processes belong to `start`.
    """
    child_dir, fds = child_cwd(cwd, cwd_fd)
    out, err = HeadTail(head_bytes, tail_bytes), HeadTail(head_bytes, tail_bytes)
    started = time.monotonic()
    # Shielded: a cancel arriving while the child is already forked but `open_process` has not returned would
    # otherwise leave us without the handle needed to kill it. The cancel takes effect at the next await instead.
    with anyio.CancelScope(shield=True):
        proc = await anyio.open_process(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, cwd=child_dir, env=dict(env), start_new_session=True,
                                        pass_fds=fds)
        pgid = proc.pid
        register_group(pgid)
    timed_out = False
    leftovers = False
    try:
        pumps_left = [2]
        pumps_done = anyio.Event()

        async def pump(stream: anyio.abc.ByteReceiveStream | None, buf: HeadTail) -> None:
            try:
                if stream is None:
                    return
                with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                    while True:
                        buf.add(await stream.receive(65536))
            finally:
                pumps_left[0] -= 1
                if not pumps_left[0]:
                    pumps_done.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(pump, proc.stdout, out)
            tg.start_soon(pump, proc.stderr, err)
            with anyio.move_on_after(timeout) as deadline:
                await proc.wait()
            if deadline.cancelled_caught:
                timed_out = True
                kill_group(pgid)
                await proc.wait()
            # Children that inherited the pipes keep them open: give the readers a moment, then end the group.
            with anyio.move_on_after(drain_grace):
                while group_alive(pgid):
                    await anyio.sleep(0.02)
            if not timed_out and group_alive(pgid):
                leftovers = True
            kill_group(pgid)
            # A process that left the group (setsid) may still hold a pipe: stop reading rather than hang.
            with anyio.move_on_after(1.0):
                await pumps_done.wait()
            tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            kill_group(pgid)
            with contextlib.suppress(Exception):
                await proc.aclose()
            # SIGKILL is delivered asynchronously: return only once no member is left (bounded).
            with anyio.move_on_after(2.0):
                while group_alive(pgid):
                    await anyio.sleep(0.005)
            unregister_group(pgid)
    rc = proc.returncode
    sig = -rc if rc is not None and rc < 0 else None
    return ExecResult(
        stdout=out.text(), stderr=err.text(), exit_code=None if sig else rc, signal=sig, timed_out=timed_out,
        pid=pgid, duration_ms=int((time.monotonic() - started) * 1000), truncated=bool(out.dropped or err.dropped),
        leftovers_killed=leftovers,
    )


# ---- background processes ------------------------------------------------------------------------------------------
class RingLog:
    """A thread-safe text log addressed by absolute character offsets; only the last `capacity` characters are kept."""

    def __init__(self, capacity: int = 200_000) -> None:
        self.capacity = capacity
        self._buf: list[str] = []
        self._size = 0
        self._start = 0  # absolute offset of the first kept character
        self._lock = threading.Lock()

    def append(self, text: str) -> None:
        if not text:
            return
        with self._lock:
            self._buf.append(text)
            self._size += len(text)
            if self._size > self.capacity:
                joined = "".join(self._buf)
                drop = len(joined) - self.capacity
                self._buf = [joined[drop:]]
                self._size = self.capacity
                self._start += drop

    @property
    def end(self) -> int:
        with self._lock:
            return self._start + self._size

    def read(self, offset: int, limit: int) -> tuple[str, int, int, bool]:
        """(text, offset actually read from, next offset, whether characters before it were already dropped)."""
        with self._lock:
            joined = "".join(self._buf)
            self._buf = [joined] if joined else []
            lost = offset < self._start
            begin = max(offset, self._start)
            rel = min(begin - self._start, len(joined))
            text = joined[rel: rel + limit]
            return text, self._start + rel, self._start + rel + len(text), lost


Status = Literal["running", "exited", "stopped"]


@dataclass
class BackgroundProcess:
    id: str
    command: str
    cwd: str
    popen: subprocess.Popen[bytes]
    log: RingLog
    started_at: float
    ended_at: float | None = None
    stop_requested: bool = False

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def exit_code(self) -> int | None:
        return self.popen.returncode

    @property
    def status(self) -> Status:
        if self.popen.returncode is None:
            return "running"
        return "stopped" if self.stop_requested else "exited"

    def info(self) -> dict[str, object]:
        return {"processId": self.id, "command": self.command, "cwd": self.cwd, "pid": self.pid,
                "status": self.status, "exitCode": self.exit_code, "startedAt": self.started_at,
                "endedAt": self.ended_at, "logSize": self.log.end}


class ProcessLimit(Exception):
    pass


_ids = itertools.count(1)


class ProcessTable:
    """One session's background processes. Closing the table kills every group it started."""

    def __init__(self, session_id: str, max_running: int = 16, log_capacity: int = 200_000) -> None:
        self.session_id = session_id
        self.max_running = max_running
        self.log_capacity = log_capacity
        self._procs: dict[str, BackgroundProcess] = {}
        self.closed = False

    def start(self, argv: Sequence[str], *, command: str, cwd: str, env: Mapping[str, str],
              cwd_fd: int | None = None) -> BackgroundProcess:
        if self.closed:
            raise ProcessLimit("the session is closed")
        running = sum(1 for p in self._procs.values() if p.status == "running")
        if running >= self.max_running:
            raise ProcessLimit(f"{running} background processes are already running (limit {self.max_running}); "
                               "stop one first")
        child_dir, fds = child_cwd(cwd, cwd_fd)
        popen = subprocess.Popen(list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, cwd=child_dir, env=dict(env), start_new_session=True,
                                 pass_fds=fds, close_fds=True)
        register_group(popen.pid)
        proc = BackgroundProcess(f"proc_{next(_ids)}", command, cwd, popen, RingLog(self.log_capacity), time.time())
        self._procs[proc.id] = proc
        threading.Thread(target=_pump_log, args=(proc,), name=f"gw-log-{proc.id}", daemon=True).start()
        threading.Thread(target=_wait_exit, args=(proc,), name=f"gw-wait-{proc.id}", daemon=True).start()
        return proc

    def get(self, process_id: str) -> BackgroundProcess | None:
        return self._procs.get(process_id)

    def list(self) -> list[BackgroundProcess]:
        return sorted(self._procs.values(), key=lambda p: p.started_at)

    def write(self, process_id: str, text: str) -> int:
        proc = self._procs[process_id]
        if proc.popen.stdin is None or proc.status != "running":
            raise BrokenPipeError("the process is not running")
        data = text.encode("utf-8")
        proc.popen.stdin.write(data)
        proc.popen.stdin.flush()
        return len(data)

    async def stop(self, process_id: str, grace: float = 2.0) -> BackgroundProcess:
        """SIGTERM to the group, up to `grace` seconds for it to go, then SIGKILL to whatever is left."""
        proc = self._procs[process_id]
        proc.stop_requested = proc.status == "running" or proc.stop_requested
        kill_group(proc.pid, signal.SIGTERM)
        with anyio.move_on_after(grace):
            while proc.popen.poll() is None or group_alive(proc.pid):
                await anyio.sleep(0.02)
        kill_group(proc.pid, signal.SIGKILL)
        await anyio.to_thread.run_sync(proc.popen.wait)
        unregister_group(proc.pid)
        return proc

    def kill_all(self) -> None:
        self.closed = True
        for proc in self._procs.values():
            if proc.status == "running":
                proc.stop_requested = True
            kill_group(proc.pid, signal.SIGKILL)
            unregister_group(proc.pid)
            if proc.popen.stdin is not None:
                with contextlib.suppress(OSError):
                    proc.popen.stdin.close()


def _pump_log(proc: BackgroundProcess) -> None:
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    stream = proc.popen.stdout
    assert stream is not None
    fd = stream.fileno()
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        proc.log.append(decoder.decode(chunk))
    proc.log.append(decoder.decode(b"", final=True))
    with contextlib.suppress(OSError):
        stream.close()


def _wait_exit(proc: BackgroundProcess) -> None:
    proc.popen.wait()
    proc.ended_at = time.time()


_tables: dict[str, ProcessTable] = {}
_tables_lock = threading.Lock()


def session_table(session_id: str) -> ProcessTable:
    with _tables_lock:
        table = _tables.get(session_id)
        if table is None:
            table = _tables[session_id] = ProcessTable(session_id)
        return table


def close_session(session_id: str) -> None:
    """Kill every background process of a session (its groups included) and forget the table."""
    with _tables_lock:
        table = _tables.pop(session_id, None)
    if table is not None:
        table.kill_all()
