"""Every child process the agent starts: foreground `exec` runs, per-session background processes, MCP servers.

`spawn` starts each one through `runtime.sandbox`: confined by its `SandboxSpec` where the system allows, and
contained either way. Where namespaces work, everything the command starts lives in a pid namespace that ends with
it (`setsid` and double forks included); elsewhere its process group is killed, and what left the group is found by
the spawn's marker (`runtime.sandbox.orphans`). Each group and namespace is registered here so that a timeout, a
cancelled prompt, a closed session and the agent's exit end them all.

- `run_exec` runs one command to completion with stdin closed, head+tail capped output and a timeout; whatever the
  outcome (exit, timeout, anyio cancellation) no process it started survives it.
- `run_captured` runs one of the agent's own helper programs (git, rg) to completion with its whole output kept,
  synchronously (from a worker thread): the agent starts no process outside the sandbox either.
- `ProcessTable` holds one session's background processes (`start`/`status`/`logs`/`write`/`stop`/`list`): output
  goes to a ring buffer read by character offset; reader and waiter threads keep them independent of any prompt.

Children are spawned from the calling thread, which for `exec`, `start` and MCP servers is the event loop's: a
child's parent-death signal fires when the thread that forked it ends, and that thread lives as long as the agent.
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import itertools
import os
import select
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio

from permissions.confinement import Confinement
from runtime import sandbox
from runtime.sandbox import remove_all_tmpdirs, remove_session_tmpdir
from runtime.sandbox.child import SETUP_PREFIX, Capabilities
from runtime.sandbox.client import Child, HelperGone, SandboxError, Spawner
from runtime.sandbox.orphans import group_alive
from runtime.sandbox.spec import SandboxSpec

__all__ = [
    "Captured",
    "ExecResult",
    "FdStream",
    "HeadTail",
    "ProcessLimit",
    "ProcessTable",
    "RingLog",
    "SandboxError",
    "any_running",
    "Spawned",
    "close_session",
    "group_alive",
    "kill_all_process_groups",
    "own_environ",
    "read_only_sandbox",
    "run_captured",
    "run_exec",
    "session_table",
    "spawn",
]

EXEC_GRACE = 0.3  # how long what an `exec` left behind may still run (and write output) after it exits
_groups: set[int] = set()
_lock = threading.Lock()


def register_group(pgid: int) -> None:
    with _lock:
        _groups.add(pgid)


def unregister_group(pgid: int) -> None:
    with _lock:
        _groups.discard(pgid)


def any_running() -> bool:
    """Whether any process the agent started may still run (a command, a background process, an MCP server)."""
    with _lock:
        return bool(_groups)


def kill_group(pgid: int, sig: int = signal.SIGKILL) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def kill_all_process_groups() -> None:
    """At agent exit: every spawn, now (closing the helper's socket makes it kill all it made)."""
    with _lock:
        groups = list(_groups)
        _groups.clear()
    for pgid in groups:
        kill_group(pgid)
    Spawner.stop()
    remove_all_tmpdirs()


# ---- spawning ------------------------------------------------------------------------------------------------------
class Spawned:
    """One child started by `spawn`: the agent's ends of its pipes and its `Child` (the sandbox helper's report)."""

    def __init__(self, child: Child, stdin: int | None, stdout: int | None, stderr: int | None) -> None:
        self.child = child
        self.pid = child.pid  # its P: the process the agent signals (the command's group without namespaces)
        self.stdin = os.fdopen(stdin, "wb", buffering=0) if stdin is not None else None
        self.stdout = stdout
        self.stderr = stderr

    @property
    def returncode(self) -> int | None:
        return self.child.returncode

    def poll(self) -> int | None:
        return self.child.returncode

    def send_signal(self, sig: int) -> None:
        self.child.send_signal(sig)

    def kill(self) -> None:
        self.child.kill()

    async def wait(self) -> int:
        """Until the command and everything it started are gone (the drain grace included)."""
        return await self.child.wait()

    def wait_sync(self, timeout: float | None = None) -> int | None:
        return self.child.wait_sync(timeout)

    @property
    def leftovers(self) -> bool:
        return self.child.leftovers

    def note(self) -> str | None:
        """What the tool output should say about the sandbox, if anything."""
        return "; ".join(self.child.notes) or None

    def refused(self) -> list[str]:
        """The connections `[sandbox] network` refused it so far, one line each."""
        return self.child.refused()

    def close(self) -> None:
        for fd in (self.stdout, self.stderr):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.stdout = self.stderr = None
        if self.stdin is not None:
            with contextlib.suppress(OSError):
                self.stdin.close()
        unregister_group(self.pid)
        self.child.close()


PIPE, DEVNULL, STDOUT = subprocess.PIPE, subprocess.DEVNULL, subprocess.STDOUT


def _check_command(argv0: str, env: Mapping[str, str], cwd: str) -> None:
    """Fail like `Popen` would for a command that cannot be started (the helper's child can only report it later)."""
    path = argv0 if os.sep in argv0 else shutil.which(argv0, path=env.get("PATH", os.defpath))
    if path is None or not os.path.exists(os.path.join(cwd, path)):
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", argv0)
    if not os.access(os.path.join(cwd, path), os.X_OK):
        raise PermissionError(errno.EACCES, "Permission denied", argv0)


def spawn(
    argv: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str],
    cwd_fd: int | None = None,
    spec: SandboxSpec | None = None,
    grace: float | None = None,
    stdin: int = DEVNULL,
    stdout: int = PIPE,
    stderr: int = PIPE,
) -> Spawned:
    """Start `argv` sandboxed by `spec` (None: unconfined, still contained) through the sandbox helper.

    `stdin`/`stdout`/`stderr`: PIPE, DEVNULL, STDOUT (stderr only) or a descriptor to hand over. `grace`: after the
    command exits, how long what it started may still run (None: until it ends by itself or is killed).

    Raises:
        SandboxError: the sandbox could not be set up (nothing ran).
        FileNotFoundError, PermissionError: the command cannot be started.
    """
    _check_command(argv[0], env, cwd)
    spawner = Spawner.get()
    # Under [sandbox] network the command's endpoint on the proxy comes first: the spec then names the proxy's
    # port, which the proxy variables point at. No proxy, no command (never one with the whole network instead).
    net = spawner.net_limit(spec) if spec is not None and spec.limited else None
    if net is not None:
        spec = net.spec
    child_env = sandbox.child_env(dict(env), spec)
    ours: dict[str, int | None] = {"stdin": None, "stdout": None, "stderr": None}
    theirs: dict[str, int | None] = {"stdin": None, "stdout": None, "stderr": None}
    owned: list[int] = []  # child-side ends we created: closed here once the helper has them
    try:
        if stdin == PIPE:
            r, w = os.pipe()
            theirs["stdin"], ours["stdin"] = r, w
            owned.append(r)
        elif stdin >= 0:
            theirs["stdin"] = stdin
        if stdout == PIPE:
            r, w = os.pipe()
            ours["stdout"], theirs["stdout"] = r, w
            owned.append(w)
        elif stdout >= 0:
            theirs["stdout"] = stdout
        if stderr == STDOUT:
            theirs["stderr"] = theirs["stdout"]
        elif stderr == PIPE:
            r, w = os.pipe()
            ours["stderr"], theirs["stderr"] = r, w
            owned.append(w)
        elif stderr >= 0:
            theirs["stderr"] = stderr
        report_r, report_w = os.pipe()
        owned.append(report_w)
        tag = os.urandom(8).hex()
        try:
            spawner, (pid, pidfd, notes) = _spawn_once_more_if_gone(
                spawner,
                argv,
                cwd=cwd,
                env=child_env,
                spec=spec,
                grace=grace,
                report_w=report_w,
                stdin=theirs["stdin"],
                stdout=theirs["stdout"],
                stderr=theirs["stderr"],
                cwd_fd=cwd_fd,
                proxy=net.channel if net is not None else None,
                tag=tag,
            )
        except BaseException:
            os.close(report_r)
            raise
    except BaseException:
        for fd in ours.values():
            if fd is not None:
                os.close(fd)
        if net is not None:
            net.close()
        raise
    finally:
        for fd in owned:
            os.close(fd)
        if net is not None:
            net.release_channel()  # the spawn's init has its own copy
    child = Child(pid, pidfd, report_r, spawner.caps, notes, net, tag)
    register_group(pid)
    return Spawned(child, ours["stdin"], ours["stdout"], ours["stderr"])


def _spawn_once_more_if_gone(
    spawner: Spawner, argv: Sequence[str], **kw: Any
) -> tuple[Spawner, tuple[int, int, list[str]]]:
    """`spawner.spawn`, and once more through a new helper when the old one was gone before it read the request
    (it died between two commands: nothing ran). The new helper must hold at least what the old one did, or the
    command does not run: it was decided for a sandbox that no longer exists, and the next call is decided afresh
    (the session is told of the weaker sandbox)."""
    try:
        pid, pidfd, notes = spawner.spawn(argv, **kw)
        return spawner, (pid, pidfd, [*notes, *spawner.take_note()])
    except HelperGone as exc:
        fresh = Spawner.get()
        if not _at_least(fresh.caps, spawner.caps):
            raise SandboxError(
                f"{exc}; the new one holds less ({sandbox.support().describe()}): the command did not run, "
                "and the next call is decided for the weaker sandbox"
            ) from None
        pid, pidfd, notes = fresh.spawn(argv, **kw)
        return fresh, (pid, pidfd, [*notes, *(fresh.take_note() or [str(exc)])])


def _at_least(new: Capabilities, old: Capabilities) -> bool:
    return new.landlock_abi >= old.landlock_abi and (new.namespaces or not old.namespaces)


def setup_failure(stderr: str) -> str | None:
    """The reason a child gave on stderr for exiting with `SETUP_FAILED` before its command ran, if it did."""
    prefix = SETUP_PREFIX.decode()
    for line in stderr.splitlines():
        if line.startswith(prefix):
            return line[len(prefix) :]
    return None


class FdStream:
    """Non-blocking reads and writes of a pipe on the event loop (for a child's stdio without anyio's process)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        os.set_blocking(fd, False)

    async def receive(self, max_bytes: int = 65536) -> bytes:
        """b"" at end of stream."""
        while True:
            try:
                return os.read(self.fd, max_bytes)
            except BlockingIOError:
                await anyio.wait_readable(self.fd)

    async def send(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self.fd, view) :]
            except BlockingIOError:
                await anyio.wait_writable(self.fd)


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


PROGRESS_TAIL = 8_000  # bytes of the newest output a progress report of a running `exec` shows


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
    refused: tuple[str, ...] = ()  # the connections `[sandbox] network` refused it, one line each


async def run_exec(
    argv: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str],
    timeout: float,  # noqa: ASYNC109 - the command's own budget, enforced by killing it
    cwd_fd: int | None = None,
    head_bytes: int = 12_000,
    tail_bytes: int = 12_000,
    drain_grace: float = EXEC_GRACE,
    spec: SandboxSpec | None = None,
    note: list[str] | None = None,
    progress: Callable[[str], Awaitable[None]] | None = None,
    progress_interval: float = 1.0,
) -> ExecResult:
    """Run `argv` with stdin closed and wait for it, sandboxed by `spec`.

    `progress`, when given, receives the output so far (the last `PROGRESS_TAIL` bytes of stdout and stderr in the
    order they arrived) every `progress_interval` seconds while there is new output, so a long command shows its
    life.

    After `timeout` seconds, or if the calling task is cancelled, everything it started is killed with SIGKILL.
    When the command exits but left processes running, they get `drain_grace` seconds (their output is still
    read), then are killed as well: `exec` means "run to completion"; long-running processes belong to `start`.
    `note` receives what the output should say about the sandbox.

    Raises:
        SandboxError: the sandbox could not be set up (nothing ran).
    """
    out, err = HeadTail(head_bytes, tail_bytes), HeadTail(head_bytes, tail_bytes)
    live = HeadTail(0, PROGRESS_TAIL)  # both streams as they arrive, for `progress`
    started = time.monotonic()
    # Synchronous, so no cancellation can land between the spawn and our holding the handle that kills it.
    child = spawn(argv, cwd=cwd, env=env, cwd_fd=cwd_fd, spec=spec, grace=drain_grace)
    timed_out = False
    assert child.stdout is not None and child.stderr is not None
    streams = [(child.stdout, out), (child.stderr, err)]
    try:
        pumps_left = [2]
        pumps_done = anyio.Event()

        async def pump(stream: FdStream, buf: HeadTail) -> None:
            try:
                while data := await stream.receive():
                    buf.add(data)
                    live.add(data)
            except OSError:
                pass
            finally:
                pumps_left[0] -= 1
                if not pumps_left[0]:
                    pumps_done.set()

        async def report() -> None:
            assert progress is not None
            shown = 0
            while True:
                await anyio.sleep(progress_interval)
                if live.total != shown:
                    shown = live.total
                    await progress(live.text())

        async with anyio.create_task_group() as tg:
            for fd, buf in streams:
                tg.start_soon(pump, FdStream(fd), buf)
            if progress is not None:
                tg.start_soon(report)
            # The spawn ends when the command and everything it started are gone: what it left running gets the
            # drain grace (its output is still read), then is killed.
            with anyio.move_on_after(timeout) as deadline:
                await child.wait()
            if deadline.cancelled_caught:
                timed_out = True
                child.kill()
                await child.wait()
            with anyio.move_on_after(1.0):
                await pumps_done.wait()
            tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            if child.returncode is None:
                child.kill()
                with anyio.move_on_after(3.0):
                    await child.wait()
            if note is not None and child.note():
                note.append(child.note() or "")
            refused = tuple(child.refused())
            child.close()
    rc = child.returncode
    sig = -rc if rc is not None and rc < 0 else None
    return ExecResult(
        stdout=out.text(),
        stderr=err.text(),
        exit_code=None if sig else rc,
        signal=sig,
        timed_out=timed_out,
        pid=child.pid,
        duration_ms=int((time.monotonic() - started) * 1000),
        truncated=bool(out.dropped or err.dropped),
        leftovers_killed=child.leftovers and not timed_out,
        refused=refused,
    )


# ---- the agent's own short-lived processes ---------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Captured:
    """What `run_captured` saw: the exit code (-N for a signal N), all of both streams, whether time ran out."""

    returncode: int | None
    stdout: bytes
    stderr: bytes
    timed_out: bool


OWN_ENV = ("PATH", "HOME", "XDG_CONFIG_HOME", "LANG", "LC_ALL", "LC_CTYPE")


def own_environ() -> dict[str, str]:
    """The environment of the agent's own helper programs: where programs and the user's git configuration are, the
    locale; nothing else of the agent's (no keys, no `GIT_*` or `RIPGREP_*` variables)."""
    return {k: v for k, v in os.environ.items() if k in OWN_ENV}


def read_only_sandbox(roots: Sequence[str], extra_read: Sequence[str] = ()) -> SandboxSpec:
    """The sandbox of the agent's own helper programs: they read the workspace roots, `extra_read` and the system
    locations every command may read, write nothing, and reach no network."""
    return sandbox.build_spec(Confinement(write=False, network=False, extra_read=tuple(extra_read)), roots, tmpdir=None)


def run_captured(
    argv: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str],
    spec: SandboxSpec | None,
    timeout: float,
    cwd_fd: int | None = None,
) -> Captured:
    """Run one of the agent's own helper programs (`git status` for the environment block, `rg` for the search
    tools and the instruction listing) to completion under `spec`, keeping its whole output. Synchronous: the
    callers run it on a worker thread. After `timeout` seconds it is killed; nothing it started outlives it.

    Raises:
        SandboxError: the sandbox could not be set up (nothing ran).
        FileNotFoundError, PermissionError: the program cannot be started.
    """
    deadline = time.monotonic() + timeout
    child = spawn(argv, cwd=cwd, env=env, cwd_fd=cwd_fd, spec=spec, grace=0.0)
    assert child.stdout is not None and child.stderr is not None
    bufs: dict[int, list[bytes]] = {child.stdout: [], child.stderr: []}
    timed_out = False
    try:
        poll = select.poll()
        for fd in bufs:
            poll.register(fd, select.POLLIN)
        open_fds = set(bufs)
        while open_fds:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            for fd, _ in poll.poll(int(left * 1000) + 1):
                chunk = os.read(fd, 1 << 16)
                if chunk:
                    bufs[fd].append(chunk)
                else:
                    poll.unregister(fd)
                    open_fds.discard(fd)
        if timed_out or child.wait_sync(max(0.0, deadline - time.monotonic())) is None:
            timed_out = True
            child.kill()
            child.wait_sync(3.0)
        return Captured(
            None if timed_out else child.returncode,
            b"".join(bufs[child.stdout]),
            b"".join(bufs[child.stderr]),
            timed_out,
        )
    finally:
        child.close()


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
            text = joined[rel : rel + limit]
            return text, self._start + rel, self._start + rel + len(text), lost


Status = Literal["running", "exited", "stopped"]


@dataclass
class BackgroundProcess:
    id: str
    command: str
    cwd: str
    child: Spawned
    log: RingLog
    started_at: float
    ended_at: float | None = None
    stop_requested: bool = False
    threads: list[threading.Thread] = field(default_factory=list)
    spec: SandboxSpec | None = None

    @property
    def pid(self) -> int:
        return self.child.pid

    @property
    def exit_code(self) -> int | None:
        return self.child.returncode

    @property
    def status(self) -> Status:
        if self.child.returncode is None:
            return "running"
        return "stopped" if self.stop_requested else "exited"

    def info(self) -> dict[str, object]:
        out: dict[str, object] = {
            "processId": self.id,
            "command": self.command,
            "cwd": self.cwd,
            "pid": self.pid,
            "status": self.status,
            "exitCode": self.exit_code,
            "startedAt": self.started_at,
            "endedAt": self.ended_at,
            "logSize": self.log.end,
        }
        refused = self.child.refused()
        if refused:
            out["refusedConnections"] = refused
        return out


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

    def start(
        self,
        argv: Sequence[str],
        *,
        command: str,
        cwd: str,
        env: Mapping[str, str],
        cwd_fd: int | None = None,
        spec: SandboxSpec | None = None,
    ) -> BackgroundProcess:
        """Start a background process (from the event loop's thread: see the module docstring).

        Raises:
            ProcessLimit: the session is closed or runs too many.
            SandboxError: the sandbox could not be set up.
            OSError: the command could not be started.
        """
        if self.closed:
            raise ProcessLimit("the session is closed")
        running = sum(1 for p in self._procs.values() if p.status == "running")
        if running >= self.max_running:
            raise ProcessLimit(
                f"{running} background processes are already running (limit {self.max_running}); stop one first"
            )
        child = spawn(
            argv, cwd=cwd, env=env, cwd_fd=cwd_fd, spec=spec, grace=None, stdin=PIPE, stdout=PIPE, stderr=STDOUT
        )
        proc = BackgroundProcess(
            f"proc_{next(_ids)}", command, cwd, child, RingLog(self.log_capacity), time.time(), spec=spec
        )
        self._procs[proc.id] = proc
        proc.threads = [
            threading.Thread(target=_pump_log, args=(proc,), name=f"gw-log-{proc.id}", daemon=True),
            threading.Thread(target=_wait_exit, args=(proc,), name=f"gw-wait-{proc.id}", daemon=True),
        ]
        for t in proc.threads:
            t.start()
        return proc

    def get(self, process_id: str) -> BackgroundProcess | None:
        return self._procs.get(process_id)

    def list(self) -> list[BackgroundProcess]:
        return sorted(self._procs.values(), key=lambda p: p.started_at)

    def write(self, process_id: str, text: str) -> int:
        proc = self._procs[process_id]
        if proc.child.stdin is None or proc.status != "running":
            raise BrokenPipeError("the process is not running")
        data = text.encode("utf-8")
        proc.child.stdin.write(data)
        return len(data)

    async def stop(self, process_id: str, grace: float = 2.0) -> BackgroundProcess:
        """SIGTERM to every process of it, up to `grace` seconds for them to go, then SIGKILL."""
        proc = self._procs[process_id]
        proc.stop_requested = proc.status == "running" or proc.stop_requested
        proc.child.send_signal(signal.SIGTERM)
        with anyio.move_on_after(grace):
            await proc.child.wait()
        if proc.child.returncode is None:
            proc.child.kill()
            with anyio.move_on_after(3.0):
                await proc.child.wait()
        unregister_group(proc.pid)
        return proc

    def kill_all(self) -> None:
        self.closed = True
        for proc in self._procs.values():
            if proc.status == "running":
                proc.stop_requested = True
            proc.child.kill()
            unregister_group(proc.pid)
        if self._procs:
            threading.Thread(
                target=_close_when_done, args=(list(self._procs.values()),), name="gw-close", daemon=True
            ).start()


def _pump_log(proc: BackgroundProcess) -> None:
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    fd = proc.child.stdout
    assert fd is not None
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        proc.log.append(decoder.decode(chunk))
    proc.log.append(decoder.decode(b"", final=True))
    proc.child.stdout = None  # this thread's descriptor: closed by it alone, once nothing more can come
    with contextlib.suppress(OSError):
        os.close(fd)


def _wait_exit(proc: BackgroundProcess) -> None:
    proc.child.wait_sync()
    proc.ended_at = time.time()
    if proc.child.stdin is not None:
        with contextlib.suppress(OSError):
            proc.child.stdin.close()


def _close_when_done(procs: list[BackgroundProcess]) -> None:
    """After a table was closed: once their reader and waiter threads are done, the processes' pidfds and report
    pipes are closed (not before: a descriptor closed under a thread could be reused by anything)."""
    for proc in procs:
        for t in proc.threads:
            t.join(timeout=10)
        if not any(t.is_alive() for t in proc.threads):
            proc.child.child.close()


_tables: dict[str, ProcessTable] = {}
_tables_lock = threading.Lock()


def session_table(session_id: str) -> ProcessTable:
    with _tables_lock:
        table = _tables.get(session_id)
        if table is None:
            table = _tables[session_id] = ProcessTable(session_id)
        return table


def close_session(session_id: str) -> None:
    """Kill every background process of a session (everything they started included), forget the table, and remove
    the session's private temp dir."""
    with _tables_lock:
        table = _tables.pop(session_id, None)
    if table is not None:
        table.kill_all()
    remove_session_tmpdir(session_id)
