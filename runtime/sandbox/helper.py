"""The sandbox helper: a small single-threaded process the agent starts once, which forks every sandboxed child.

Why a helper: forking the agent (a large, threaded Python process) costs ~1.5 ms per fork here and keeps every
page the agent writes afterwards copied while the child lives; Python between fork and exec in a threaded process
can deadlock. The helper imports only the standard library and this package (`python -S`), so its forks are cheap
(~0.2 ms), its children are small, and the agent never forks at all for a command.

Protocol (a SOCK_SEQPACKET socket whose fd is its argument): the helper first sends `{"caps": …}` (what its probe
found). Each request is one message `{"argv", "env", "cwd", "spec", "grace", "fds"}` with the spawn's descriptors
attached (`fds` names them: `report`, `stdin`, `stdout`, `stderr`, `cwd`); the answer is `{"pid": N}` with a pidfd
of the spawn attached (the namespace's init, or the command without namespaces), or `{"error": …}`. Everything
after that goes on the spawn's report pipe (`child`). A spawn under `[sandbox] network` with namespaces also
attaches `proxy`, its channel to the network proxy. `{"op": "proxy"}` starts a network proxy (`proxy`: a forked,
Landlocked child of the helper, only ever asked for when `[sandbox] network` is set) and answers `{"pid": N}` with
the agent's end of its control socket attached.

The helper is a child subreaper. Without namespaces it is also what ends a spawn: when the command exits it
gives what it left in its process group the drain grace, kills the group and the processes that left it carrying
the spawn's marker (`orphans.sweep`), then writes `S`. When the agent goes away (its end of the socket closes, on
any exit, `kill -9` included) the helper kills every spawn it made, and exits.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import time

from runtime.sandbox._libc import PR_SET_CHILD_SUBREAPER, PR_SET_DUMPABLE, libc
from runtime.sandbox.child import MARKER_ENV, Capabilities, Plan
from runtime.sandbox.orphans import adopted_alive, group_alive
from runtime.sandbox.spec import SandboxSpec

# typing.TYPE_CHECKING, without importing typing: this process starts with `python -S` and typing is ~10 ms of it.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MAX_MESSAGE = 1 << 20
MAX_SOCKET_BASE = 48  # + "/gatewright-proxy-PID-HEX/" + the proxy's one-shot socket name: within sun_path
MAX_FDS = 8


class _Fallback:
    """A spawn without namespaces: the helper's child is the command; the helper ends it and reports."""

    __slots__ = ("pid", "report_w", "tag", "grace", "status", "deadline", "reported_leftovers")

    def __init__(self, pid: int, report_w: int, tag: str, grace: float | None) -> None:
        self.pid = pid
        self.report_w = report_w
        self.tag = tag
        self.grace = grace
        self.status: int | None = None
        self.deadline: float | None = None
        self.reported_leftovers = False


class Helper:
    def __init__(self, sock: socket.socket, caps: Capabilities) -> None:
        self.sock = sock
        self.caps = caps
        self.children: dict[int, int] = {}  # spawn pid -> pidfd (to kill them all when the agent goes)
        self.fallback: dict[int, _Fallback] = {}
        self.proxy_dir: str | None = None  # the network proxies' one-shot sockets (for editor terminals)

    # ---- requests -------------------------------------------------------------------------------------------------
    def handle(self, data: bytes, fds: list[int]) -> None:
        try:
            req = json.loads(data)
            names = req.get("fds") or []
            got = dict(zip(names, fds, strict=False))
            reply, pidfd = self._proxy() if req.get("op") == "proxy" else self._spawn(req, got)
        except Exception as exc:  # any failure is an answer, never the helper's end
            reply, pidfd = {"error": f"{type(exc).__name__}: {exc}"}, None
        finally:
            for fd in fds:  # the helper's copies: the child has its own, and a namespace-less spawn kept a dup
                with contextlib.suppress(OSError):
                    os.close(fd)
        try:
            socket.send_fds(self.sock, [json.dumps(reply).encode()], [pidfd] if pidfd is not None else [])
        finally:
            if pidfd is not None:
                os.close(pidfd)

    def _spawn(self, req: dict[str, Any], fds: dict[str, int]) -> tuple[dict[str, Any], int | None]:
        spec = SandboxSpec.from_json(req["spec"]) if req.get("spec") else None
        env = dict(req.get("env") or {})
        tag = str(req.get("tag") or os.urandom(8).hex())
        if not self.caps.namespaces:
            env[MARKER_ENV] = tag
        report_w = fds["report"]
        stdio = (fds.get("stdin", -1), fds.get("stdout", -1), fds.get("stderr", -1))
        null = -1
        if -1 in stdio:
            null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
            stdio = (
                null if stdio[0] < 0 else stdio[0],
                null if stdio[1] < 0 else stdio[1],
                null if stdio[2] < 0 else stdio[2],
            )
        plan = Plan(
            req["argv"],
            env,
            spec,
            self.caps,
            cwd=req["cwd"],
            report_w=report_w,
            grace=req.get("grace"),
            stdio=stdio,
            cwd_fd=fds.get("cwd"),
            proxy_fd=fds.get("proxy"),
        )
        try:
            pid = plan.start()
            pidfd = os.pidfd_open(pid)
        finally:
            plan.close()
            if null >= 0:
                os.close(null)
        self.children[pid] = os.dup(pidfd)
        if not self.caps.namespaces:
            # The helper writes this spawn's end: keep a copy of its report pipe until then.
            fb = _Fallback(pid, os.dup(report_w), tag, req.get("grace"))
            self.fallback[pid] = fb
        return {"pid": pid, "notes": plan.notes}, pidfd

    def _proxy(self) -> tuple[dict[str, Any], int]:
        """Fork a network proxy; the agent gets its control socket (the proxy ends when the agent closes it)."""
        if self.proxy_dir is None:
            base = os.environ.get("TMPDIR") or "/tmp"  # noqa: S108 - a 0700 directory of our own in it
            if len(base) > MAX_SOCKET_BASE:  # a unix socket's path holds at most 107 bytes
                base = "/tmp"  # noqa: S108
            path = os.path.join(base, f"gatewright-proxy-{os.getpid()}-{os.urandom(6).hex()}")
            os.mkdir(path, 0o700)
            self.proxy_dir = path
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        me = os.getpid()
        pid = os.fork()
        if pid == 0:  # the proxy: never back into this loop
            try:
                from runtime.sandbox.proxy import run

                ours.close()
                run(theirs.fileno(), self.caps.landlock_abi, self.proxy_dir, me)
            finally:
                os._exit(1)
        theirs.close()
        self.children[pid] = os.pidfd_open(pid)
        return {"pid": pid}, ours.detach()

    # ---- children -------------------------------------------------------------------------------------------------
    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            fd = self.children.pop(pid, None)
            if fd is not None:
                os.close(fd)
            fb = self.fallback.get(pid)
            if fb is not None:
                fb.status = status
                if fb.grace is not None:
                    fb.deadline = time.monotonic() + fb.grace

    def tick(self) -> float | None:
        """Advance the namespace-less spawns whose command exited; the next timeout for the main loop."""
        now = time.monotonic()
        nxt: float | None = None
        for pid, fb in list(self.fallback.items()):
            if fb.status is None:
                continue
            # A background spawn (no grace) lives while anything it started does, in its group or not.
            busy = group_alive(pid) or (fb.grace is None and adopted_alive(fb.tag))
            if busy and not fb.reported_leftovers:
                _write(fb.report_w, b"L")
                fb.reported_leftovers = True
            if busy and (fb.deadline is None or now < fb.deadline):
                nxt = min(nxt or 1.0, 0.02 if fb.deadline is not None else 0.25)
                continue
            self._end_fallback(pid, fb)
        return nxt

    def _end_fallback(self, pid: int, fb: _Fallback) -> None:
        from runtime.sandbox.orphans import sweep

        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)
        deadline = time.monotonic() + 1.0
        while group_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.002)
        # Only once the group is gone are what its members had started (`setsid`) adopted here, to be swept.
        if sweep(fb.tag) and not fb.reported_leftovers:
            _write(fb.report_w, b"L")
        _write(fb.report_w, b"S%d" % (fb.status or 0))
        os.close(fb.report_w)
        del self.fallback[pid]

    def shutdown(self) -> None:
        """The agent is gone: nothing it started may stay."""
        for fd in self.children.values():
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(fd, signal.SIGKILL)
        for pid, fb in list(self.fallback.items()):
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
            fb.status = fb.status if fb.status is not None else signal.SIGKILL
            self._end_fallback(pid, fb)
        if not self.caps.namespaces:
            # Whatever this subreaper adopted and no marker names (a process that left its group and cleared its
            # environment): every child left now came from a spawn, and the agent is gone.
            from runtime.sandbox.orphans import kill_descendants

            kill_descendants()
        if self.proxy_dir is not None:  # the proxies' one-shot sockets left behind, then the directory
            with contextlib.suppress(OSError):
                for name in os.listdir(self.proxy_dir):
                    os.unlink(os.path.join(self.proxy_dir, name))
                os.rmdir(self.proxy_dir)


def _write(fd: int, line: bytes) -> None:
    with contextlib.suppress(OSError):
        os.write(fd, line + b"\n")


def _forced() -> str | None:
    return (os.environ.get("GATEWRIGHT_SANDBOX") or "").strip().lower() or None


def capabilities() -> tuple[Capabilities, str, str]:
    """What this system allows (honouring GATEWRIGHT_SANDBOX), and why Landlock and why the namespaces are missing.

    Every step is probed on its own and any failure is a reason and the next weaker layer: a refused `clone`, a
    refused id map or mount, a Landlock that reports an ABI it cannot enforce, a probe that crashed."""
    from runtime.sandbox import landlock

    forced = _forced()
    if forced == "off":
        return Capabilities(), "GATEWRIGHT_SANDBOX=off", "GATEWRIGHT_SANDBOX=off"
    try:
        abi = landlock.abi()
    except Exception:  # an unexpected answer of the ABI query is "no Landlock", never the helper's end
        abi = 0
    from runtime.sandbox.probe import probe_landlock, probe_namespaces, probe_network_filter

    ll_why = "" if abi else "this kernel has no Landlock (Linux 5.13 or later, with landlock among its LSMs)"
    if abi:
        ok, ll_why = probe_landlock(abi)
        abi = abi if ok else 0
    netfilter, _ = probe_network_filter()  # what holds the network where no net namespace can
    if forced == "landlock":
        return Capabilities(abi, False, netfilter), ll_why, "GATEWRIGHT_SANDBOX=landlock"
    ns, ns_why = probe_namespaces(abi)
    return Capabilities(abi, ns, netfilter), ll_why, ns_why


def main(fd: int) -> None:
    """The helper's life: until the agent's end of the socket closes. Never a traceback on the agent's stderr."""
    try:
        _main(fd)
    except (BrokenPipeError, ConnectionError, EOFError):
        pass  # the agent went away first (it exited before the helper had started): nothing was spawned
    except Exception as exc:  # one line where the agent's logs go
        os.write(2, f"gatewright sandbox helper: {type(exc).__name__}: {exc}\n".encode("utf-8", "replace"))
        os._exit(1)


def _main(fd: int) -> None:
    lc = libc()
    lc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    lc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    for sig in (signal.SIGINT, signal.SIGHUP):  # the agent decides when the helper ends (by closing the socket)
        signal.signal(sig, signal.SIG_IGN)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    os.set_blocking(wake_r, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    sock = socket.socket(fileno=fd)
    caps, landlock_why, ns_why = capabilities()
    helper = Helper(sock, caps)
    hello = {
        "caps": [caps.landlock_abi, caps.namespaces, caps.netfilter],
        "landlock_why": landlock_why,
        "namespaces_why": ns_why,
        "forced": _forced(),
    }
    sock.send(json.dumps(hello).encode())
    poll = select.poll()
    poll.register(sock.fileno(), select.POLLIN)
    poll.register(wake_r, select.POLLIN)
    timeout: float | None = None
    try:
        while True:
            events = poll.poll(None if timeout is None else int(timeout * 1000) + 1)
            for efd, _ in events:
                if efd == wake_r:
                    with contextlib.suppress(BlockingIOError):
                        os.read(wake_r, 4096)
                    continue
                data, fds, _, _ = socket.recv_fds(sock, MAX_MESSAGE, MAX_FDS)
                if not data:
                    raise EOFError
                helper.handle(data, fds)
            helper.reap()
            timeout = helper.tick()
    except (EOFError, ConnectionError, OSError):
        helper.shutdown()
