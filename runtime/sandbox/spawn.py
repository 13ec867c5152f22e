"""The child side of a spawn: what runs between `fork` and `exec`, prepared in the agent, and its parent-side ends.

With namespaces (unprivileged user namespaces work), a spawn is two processes:

    agent ─▶ C (the Popen child, which becomes the command)
               └─▶ I (pid 1 of a new pid namespace: the command's children are born into it)

- C sets `PR_SET_PDEATHSIG(SIGKILL)` (the agent spawns from its event-loop thread, which lives as long as the agent)
  and enters new user (its uid/gid mapped to themselves, setgroups denied), pid, mount, ipc and, with the network
  off, network namespaces. It bind-mounts every protected path read-only over itself, mounts a private `/dev/shm`,
  forks I, re-enters its working directory through the new mounts, sets no-new-privs, enforces the Landlock
  ruleset and execs. Every process the command starts is born in I's pid namespace.
- I is the namespace's init (in the command's Landlock domain, not dumpable): its own session, a parent-death
  signal, and nothing else to do but reap orphans and pass the signals the agent sends it on to every process of
  the namespace. When the command ends (I's parent died), I ends at once if the namespace is empty, after a drain
  grace (`exec`), or when its last process is gone (background processes, MCP servers); at once if the agent is
  gone. When I ends, the kernel kills whatever is left in the namespace: `setsid` and double forks cannot escape.
- The agent is a child subreaper: the command's own children, reparented to it when the command ends, stay in the
  namespace and die with it; the agent reaps them (`reap_namespace_zombies`: its children that live in a child pid
  namespace, which no `Popen` of it ever does) and I, which it adopts too.

This is one process fewer than an intermediate mirroring an init's status: the command is the agent's own child, so
its exit status, signals and `$$` are ordinary, and each spawn pays one fork of the agent (~1 ms here) less. What
it gives up: the command itself is not in the new pid namespace (it sees the host's /proc; Landlock keeps it from
tracing or opening the `/proc/<pid>/fd` of anything outside its sandbox, and from signalling out from ABI 6 on).

Without namespaces, C is all there is: `PDEATHSIG`, no-new-privs and Landlock, then exec. Processes that `setsid`
away are adopted by the agent and killed when the spawn ends if they still carry the spawn's marker variable
(`orphans.sweep`); after a `kill -9` of the agent they survive (see README).

Everything here is plain `os`/`signal` calls and prepared ctypes objects: the children are copies of a threaded
process, so nothing imports, logs, or takes a lock after the fork. I forks with libc's `fork` directly (Python's
at-fork hooks cost ~0.5 ms and already ran for C).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import secrets
import select
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass

from runtime.sandbox import landlock
from runtime.sandbox._libc import (
    CLONE_NEWNET,
    CLONE_NEWNS,
    CLONE_NEWPID,
    CLONE_NEWUSER,
    MS_BIND,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    MS_PRIVATE,
    MS_RDONLY,
    MS_REC,
    MS_REMOUNT,
    PR_SET_DUMPABLE,
    PR_SET_NO_NEW_PRIVS,
    PR_SET_PDEATHSIG,
    libc,
)
from runtime.sandbox.spec import SandboxSpec, baseline, carve, within

CLONE_NEWIPC = 0x08000000
MARKER_ENV = "GATEWRIGHT_SPAWN_TAG"
# Exit status of a child whose sandbox could not be set up after `subprocess` stopped listening (126: "cannot
# execute", as shells say). The reason is on the child's stderr, prefixed with this.
SETUP_FAILED = 126
SETUP_PREFIX = b"gatewright sandbox: "
# The parent-death signal of I: a real-time signal nobody else sends, so that it cannot be mistaken for a forward.
_PARENT_DIED = signal.SIGRTMIN + 3
_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
_WAITED = frozenset((*_FORWARDED, signal.SIGCHLD, _PARENT_DIED))


_FROM_SPEC = object()


class SandboxError(OSError):
    """The sandbox of a spawn could not be set up: the command did not run."""


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What the running system lets a spawn use (see `runtime.sandbox.support`)."""

    landlock_abi: int = 0
    namespaces: bool = False  # user + pid + mount + ipc (+ net) namespaces, bind mounts included


def _mount_flags_to_keep(path: str) -> int:
    """The per-mount flags a read-only remount inside a user namespace must repeat: the kernel refuses to clear a
    flag that the mount it copied has locked (nosuid, nodev, noexec)."""
    try:
        f = os.statvfs(path).f_flag
    except OSError:
        return MS_NOSUID | MS_NODEV
    return ((MS_NOSUID if f & os.ST_NOSUID else 0) | (MS_NODEV if f & os.ST_NODEV else 0)
            | (MS_NOEXEC if f & os.ST_NOEXEC else 0))


_finished_inits: list[int] = []  # pidfds of inits that reported an empty namespace, reaped when they are gone


def _reap_pidfd(fd: int) -> None:
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitid(os.P_PIDFD, fd, os.WEXITED | os.WNOHANG)
    os.close(fd)


def reap_finished_inits() -> None:
    """Reap the inits that had nothing left to wait for (each spawn calls this; they exit within a millisecond)."""
    p = select.poll()
    for fd in _finished_inits:
        p.register(fd, select.POLLIN)
    done = {fd for fd, _ in p.poll(0)} if _finished_inits else set()
    for fd in done:
        _finished_inits.remove(fd)
        _reap_pidfd(fd)


class Launch:
    """One spawn, prepared in the parent. `preexec` is the `preexec_fn`; `report_fd` is read after the child ends.

    Use: `launch = Launch(...)`, `Popen(..., preexec_fn=launch.preexec)`, `launch.started()`; after the command was
    reaped, `await launch.settle()` (or `settle_sync()`); `close()` in every case. To end it early: `kill()` with
    a SIGKILL of the command's process group.
    """

    def __init__(self, spec: SandboxSpec | None, caps: Capabilities, *, cwd: str | None = None,
                 grace: float | None | object = _FROM_SPEC) -> None:
        self.spec = spec
        self.caps = caps
        self.namespaces = caps.namespaces
        self.tag = secrets.token_hex(8)
        self.ruleset: landlock.Ruleset | None = None
        self.notes: list[str] = []
        self.init_pid: int | None = None
        self.init_pidfd: int | None = None
        self.emptied = False  # the init reported an empty namespace when the command ended
        self._killed = False
        self._reap = False
        self.leftovers = False
        self.setup_error: str | None = None
        reap_finished_inits()
        lc = libc()
        self._lc = lc
        self._agent_pid = os.getpid()
        self._fork = lc.fork
        self._prctl = lc.prctl
        self._mount = lc.mount
        self._unshare = lc.unshare
        self._syscall = lc.syscall
        self._restrict_nr = ctypes.c_long(lc.landlock_nrs[2]) if lc.landlock_nrs else None
        self._zero = ctypes.c_uint32(0)
        self._max_fd = os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 65536
        self._mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
        self._waited = _WAITED
        self._sigwaitinfo = signal.sigwaitinfo
        self._sigtimedwait = signal.sigtimedwait
        self._sigmask = signal.pthread_sigmask
        self._monotonic = time.monotonic
        self._poll = select.poll
        self._grace: float | None = (spec.grace if spec is not None else None) if grace is _FROM_SPEC \
            else grace  # type: ignore[assignment]
        self.report_fd, self._report_w = os.pipe()
        os.set_blocking(self.report_fd, False)
        self._uid_map = f"{os.getuid()} {os.getuid()} 1".encode()
        self._gid_map = f"{os.getgid()} {os.getgid()} 1".encode()
        self._shm_rule = landlock.PathBeneathAttr(0, -1)
        self._add_rule_args: tuple[object, ...] = ()
        self._shm = False
        self._mounts: list[tuple[bytes | None, bytes, bytes | None, int, bytes | None]] = []
        self._chdir: tuple[bytes, int, int] | None = None
        self._flags = 0
        try:
            self._prepare(cwd)
        except BaseException:
            self.close()
            raise

    # ---- parent side: preparation ----------------------------------------------------------------------------------
    def _prepare(self, cwd: str | None) -> None:
        spec = self.spec
        abi = self.caps.landlock_abi
        if spec is not None and abi > 0:
            rs = self.ruleset = landlock.Ruleset(abi, network=spec.network)
            base = set(baseline())
            rs.allow_cached([p for p in spec.read if p in base], landlock.READ)
            rs.allow_all([p for p in spec.read if p not in base], landlock.READ)
            rw = landlock.READ | landlock.write_rights(abi)
            for tree in spec.write:
                if self.namespaces or not any(within(p, tree) for p in spec.protected):
                    rs.allow(tree, rw)
                else:
                    rs.allow_all(carve(tree, spec.protected), rw)
                    self.notes.append(f"{tree}: new files directly in this directory cannot be created (no mount "
                                      "namespace here to keep its protected entries read-only otherwise)")
            # The rule for the private /dev/shm is added in the child after the mount: a rule binds the inode
            # that is there when it is added.
            self._shm_rule.allowed_access = rw & ~landlock.FS_EXECUTE
            self._shm = spec.tmpdir is not None and spec.tmpdir in spec.write
            lc = self._lc
            assert lc.landlock_nrs is not None
            self._add_rule_args = (ctypes.c_long(lc.landlock_nrs[1]), ctypes.c_int(rs.fd),
                                   ctypes.c_int(landlock.RULE_PATH_BENEATH))
        if not self.namespaces:
            return
        flags = CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC
        if spec is not None and not spec.network:
            flags |= CLONE_NEWNET
        self._flags = flags
        if spec is None:
            return
        mounts = self._mounts
        mounts.append((None, b"/", None, MS_REC | MS_PRIVATE, None))
        islands = [w for w in spec.write if any(within(w, p) and w != p for p in spec.protected)]
        for path in islands:  # an approved path inside a protected one keeps its own writable mount
            b = os.fsencode(path)
            mounts.append((b, b, None, MS_BIND | MS_REC, None))
        for path in spec.protected:
            b = os.fsencode(path)
            mounts.append((b, b, None, MS_BIND | MS_REC, None))
            mounts.append((None, b, None, MS_BIND | MS_REMOUNT | MS_RDONLY | _mount_flags_to_keep(path), None))
        if cwd is not None and spec.protected and any(within(cwd, p) for p in spec.protected):
            # The working directory was entered before the mounts: enter it again through them.
            st = os.stat(cwd)
            self._chdir = (os.fsencode(cwd), st.st_dev, st.st_ino)

    def started(self) -> None:
        """Right after `Popen` returned (the child has exec'd): close the child's ends, open the init's pidfd."""
        if self._report_w >= 0:
            os.close(self._report_w)
            self._report_w = -1
        if self.ruleset is not None:
            self.ruleset.close()
        self.read_report()
        if self.init_pid is not None:
            # The init is the command's child until the command ends, then the agent's: alive and unreaped now.
            with contextlib.suppress(OSError):
                self.init_pidfd = os.pidfd_open(self.init_pid)

    def read_report(self) -> None:
        try:
            data = os.read(self.report_fd, 65536) if self.report_fd >= 0 else b""
        except (BlockingIOError, OSError):
            data = b""
        for line in data.splitlines():
            if line.startswith(b"I"):
                self.init_pid = int(line[1:])
            elif line == b"L":
                self.leftovers = True
            elif line == b"N":
                self.emptied = True
            elif line.startswith(b"E"):
                self.setup_error = line[1:].decode("utf-8", "replace")

    # ---- parent side: signals and the end of the namespace ---------------------------------------------------------
    def signal_namespace(self, sig: int) -> None:
        """Send `sig` to the init: SIGKILL ends the namespace; others are passed on to every process in it."""
        if self.init_pidfd is not None:
            self._reap = True  # what the signal ends must be reaped for the namespace to end
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(self.init_pidfd, sig)

    def namespace_ended(self) -> bool:
        """True once nothing of this spawn's namespace is left (always true without one). The init, adopted by the
        agent when the command ended, is reaped here or, when it reported an empty namespace and is still on its
        way out, by a later call (`reap_finished_inits`). While it waits for them, the command's children adopted
        by the agent are reaped too (`orphans.reap_namespace_zombies`)."""
        self.read_report()
        fd = self.init_pidfd
        if fd is None:
            return True
        p = select.poll()
        p.register(fd, select.POLLIN)
        if not p.poll(0):
            if self.emptied and not self._killed:
                _finished_inits.append(fd)
                self.init_pidfd = None
                return True
            if self.leftovers or self._killed or self._reap:
                from runtime.sandbox.orphans import reap_namespace_zombies

                reap_namespace_zombies()
            return False
        _reap_pidfd(fd)
        self.init_pidfd = None
        return True

    def kill(self) -> None:
        """End the namespace now (the command itself is killed by its caller, through its process group)."""
        self._killed = True
        self.signal_namespace(signal.SIGKILL)

    def settle_sync(self, timeout: float = 2.0) -> None:
        """After the command was reaped, in a thread or a short-lived process: wait for the namespace to end (its
        drain grace), then without namespaces kill what left the group (`orphans.sweep`)."""
        deadline = time.monotonic() + timeout
        pause = 0.0005
        while not self.namespace_ended():
            if time.monotonic() > deadline and not self._killed:
                self.kill()
            time.sleep(pause)
            pause = min(pause * 2, 0.02)
        self.sweep_fallback()

    async def settle(self, limit: float = 2.0) -> None:
        """`settle_sync` for the event loop."""
        import anyio

        deadline = time.monotonic() + limit
        while not self.namespace_ended():
            if time.monotonic() > deadline and not self._killed:
                self.kill()
            # The init writes its verdict (N or L) on the report pipe, then exits: wake on either.
            fd = self.init_pidfd if self.leftovers or self._killed else self.report_fd
            if fd is None or fd < 0:
                break
            with anyio.move_on_after(0.02):
                await anyio.wait_readable(fd)
        if not self.namespaces:
            await anyio.to_thread.run_sync(self.sweep_fallback)

    def sweep_fallback(self) -> None:
        """Without namespaces: kill this spawn's processes that left its group and came back to the agent."""
        if self.namespaces:
            return
        from runtime.sandbox.orphans import sweep

        if sweep(self.tag):
            self.leftovers = True

    def close(self) -> None:
        for fd in (self.report_fd, self._report_w):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.report_fd = self._report_w = -1
        if self.init_pidfd is not None:
            with contextlib.suppress(OSError):
                os.close(self.init_pidfd)
            self.init_pidfd = None
        if self.ruleset is not None:
            self.ruleset.close()

    # ---- child side ------------------------------------------------------------------------------------------------
    def preexec(self) -> None:
        """The `preexec_fn` of the command's process."""
        self._prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != self._agent_pid:
            os._exit(SETUP_FAILED)  # the agent died before the death signal was armed
        if self.namespaces:
            self._enter_namespaces(os.pidfd_open(self._agent_pid))
        else:
            self._enforce()

    def launch_exec(self, argv: Sequence[str], env: dict[str, str], agent_pidfd: int | None) -> None:
        """The launcher's path (`python -m runtime.sandbox`): this process becomes the command."""
        if self.namespaces:
            self._enter_namespaces(agent_pidfd, launcher=True)
        else:
            self._enforce()
        os.execvpe(argv[0], list(argv), env)  # noqa: S606 - an argv, no shell

    def _fail(self, what: str) -> None:
        """The reason on the report pipe, then an exception `subprocess` reports to the parent."""
        with contextlib.suppress(OSError):
            os.write(self._report_w, b"E" + what.encode("utf-8", "replace") + b"\n")
        raise SandboxError(what)

    def _enter_namespaces(self, agent_pidfd: int | None, launcher: bool = False) -> None:
        self_pidfd = os.pidfd_open(os.getpid())
        self._prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # I stays undumpable; exec makes the command dumpable again
        if self._unshare(self._flags) != 0:
            self._fail(f"unshare: {os.strerror(self._lc.get_errno())}")
        try:
            for name, data in ((b"/proc/self/setgroups", b"deny"), (b"/proc/self/uid_map", self._uid_map),
                               (b"/proc/self/gid_map", self._gid_map)):
                fd = os.open(name, os.O_WRONLY)
                try:
                    os.write(fd, data)
                finally:
                    os.close(fd)
        except OSError as exc:
            self._fail(f"user namespace map: {exc.strerror}")
        for src, tgt, fstype, flags, data in self._mounts:
            if self._mount(src, tgt, fstype, flags, data) != 0:
                self._fail(f"mount {os.fsdecode(tgt)}: {os.strerror(self._lc.get_errno())}")
        # A private /dev/shm: POSIX shared memory and semaphores (multiprocessing) work without a shared write.
        if self._shm and self._mount(b"tmpfs", b"/dev/shm", b"tmpfs", MS_NOSUID | MS_NODEV, b"mode=1777") == 0:
            self._add_rule(b"/dev/shm", self._shm_rule)
        # Enforced before I is forked, so that I shares the command's Landlock domain: the command's death signal
        # to I would otherwise be refused by the signal scope (I stays out of reach all the same: it is not
        # dumpable, and the command has no capability in the namespace I's memory belongs to).
        self._enforce()
        self._sigmask(signal.SIG_BLOCK, self._waited)
        pid = self._fork()
        if pid == 0:
            self._become_init(self_pidfd, agent_pidfd, launcher)
        self._sigmask(signal.SIG_SETMASK, self._mask)
        os.close(self_pidfd)
        if agent_pidfd is not None and not launcher:
            os.close(agent_pidfd)
        if pid < 0:
            self._fail(f"fork: {os.strerror(self._lc.get_errno())}")
        os.write(self._report_w, b"I%d\n" % pid)

    def _add_rule(self, path: bytes, rule: landlock.PathBeneathAttr) -> None:
        if not self._add_rule_args:
            return
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return
        rule.parent_fd = fd
        self._syscall(*self._add_rule_args, ctypes.byref(rule), self._zero)
        os.close(fd)

    def _close_except(self, keep: tuple[int, ...]) -> None:
        lo = 0
        for fd in sorted(keep):
            if fd > lo:
                os.closerange(lo, fd)
            lo = fd + 1
        os.closerange(lo, self._max_fd)

    def _become_init(self, parent_pidfd: int, agent_pidfd: int | None, launcher: bool) -> None:
        """I: pid 1 of the new namespace, until the namespace is empty (or must die). Never returns."""
        try:
            self._prctl(PR_SET_PDEATHSIG, _PARENT_DIED, 0, 0, 0)
            os.setsid()
            self._close_except(tuple(fd for fd in (self._report_w, parent_pidfd, agent_pidfd) if fd is not None))
            self._init_loop(parent_pidfd, agent_pidfd, launcher)
        finally:
            os._exit(0)

    def _init_loop(self, parent_pidfd: int, agent_pidfd: int | None, launcher: bool) -> None:
        poll = self._poll()
        poll.register(parent_pidfd, select.POLLIN)
        watch = None
        if agent_pidfd is not None:
            watch = self._poll()
            watch.register(agent_pidfd, select.POLLIN)
        parent_gone = bool(poll.poll(0))  # it may have exited before the death signal was armed
        deadline: float | None = None
        reported = False
        while True:
            if parent_gone:
                if watch is not None and watch.poll(0):
                    return  # the agent is gone: end the namespace now
                if not self._namespace_busy():
                    os.write(self._report_w, b"N\n")  # nothing left: the agent need not wait for I's exit
                    return
                if not reported:
                    os.write(self._report_w, b"L\n")  # processes outlived the command
                    reported = True
                    if self._grace is not None:
                        deadline = self._monotonic() + self._grace
                if deadline is not None and self._monotonic() >= deadline:
                    return  # the kernel kills the rest
                # Only I's own children signal it; the others (the command's) are polled for.
                info = self._sigtimedwait(self._waited, 0.01 if deadline is not None else 0.25)
            elif launcher:
                info = self._sigtimedwait(self._waited, 1.0)
                if info is None and watch is not None and watch.poll(0):
                    with contextlib.suppress(OSError):
                        signal.pidfd_send_signal(parent_pidfd, signal.SIGKILL)
                    return
            else:
                info = self._sigwaitinfo(self._waited)
            if info is None:
                continue
            sig = info.si_signo
            if sig == _PARENT_DIED:
                parent_gone = parent_gone or bool(poll.poll(0)) or not launcher
                continue
            if sig == signal.SIGCHLD:
                with contextlib.suppress(ChildProcessError):
                    while os.waitpid(-1, os.WNOHANG)[0]:
                        pass
                continue
            with contextlib.suppress(OSError):
                os.kill(-1, sig)  # from the agent (stop): to every process of the namespace

    @staticmethod
    def _namespace_busy() -> bool:
        try:
            os.kill(-1, 0)
        except ProcessLookupError:
            return False
        except OSError:
            return True
        return True

    def _enforce(self) -> None:
        """The command's last steps before exec."""
        if self._chdir is not None:
            path, dev, ino = self._chdir
            try:
                os.chdir(path)
                st = os.stat(".")
                ok = st.st_dev == dev and st.st_ino == ino
            except OSError:
                ok = False
            if not ok:
                self._die(b"the working directory changed while the sandbox was set up")
        rs = self.ruleset
        if rs is None:
            return
        if self._prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            self._die(b"prctl(PR_SET_NO_NEW_PRIVS) failed")
        if self._syscall(self._restrict_nr, ctypes.c_int(rs.fd), self._zero) != 0:
            self._die(b"landlock_restrict_self failed")
        os.close(rs.fd)

    def _die(self, why: bytes) -> None:
        with contextlib.suppress(OSError):
            os.write(2, SETUP_PREFIX + why + b"\n")
        os._exit(SETUP_FAILED)
