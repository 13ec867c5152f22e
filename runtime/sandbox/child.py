"""The processes between the helper's `fork` and the command's `exec`, and what they leave on the report pipe.

A `Plan` is prepared and started in the sandbox helper (`helper`, a small single-threaded Python process the agent
starts once) or in the editor-terminal launcher (`__main__`), never in the agent: a fork of the agent would copy a
large threaded process (~1.5 ms, and every page the agent then writes is copied while the child lives), and Python
code between fork and exec in a threaded process can deadlock. With namespaces a spawn is two processes:

    helper ─clone─▶ I (pid 1 of new user/pid/mount/ipc/net namespaces: the init) ─posix_spawn─▶ C (the command)

- I is cloned straight into its namespaces (no intermediate: `clone(CLONE_NEWPID…)` makes the child pid 1). It arms
  a parent-death signal (the helper dies with the agent), takes its own session, the stdio and working directory it
  was given, maps its uid/gid to themselves (setgroups denied), bind-mounts every protected path read-only over
  itself, mounts a /proc of the new pid namespace and a private `/dev/shm`, re-enters its working directory through
  the new mounts, sets no-new-privs and enforces the Landlock ruleset. Then it starts C with `posix_spawn` (vfork
  speed: no copy of I) with the original signal mask and dispositions.
- I then reaps every orphan and passes the signals the agent sends it on to every process of the namespace (as pid
  1 the command would ignore SIGTERM). When the command has exited and nothing is left (at once, after the drain
  grace of `exec`, or when the last process ends by itself for background processes), it writes the command's wait
  status and exits. Every process of the namespace descends from I, so "no child left" means "nothing left". When I
  dies (its parent's death, or the agent's SIGKILL), the kernel kills whatever remains in the namespace: `setsid`
  and double forks cannot escape. I is in the command's Landlock domain and not dumpable; the command has no
  capability in the user namespace I's memory belongs to, so it cannot read or trace it.

Under `[sandbox] network` I also brings up the loopback of its new network namespace, listens on
`127.0.0.1:<proxy_port>` there and hands that listening socket to the helper's proxy (`proxy`) over the channel it
was given; the proxy accepts on it directly, so the proxy is the namespace's only way out. I keeps its end of the
channel (never the command) until it ends, which ends the proxy's endpoint too.

Without namespaces the helper forks the command itself: `PDEATHSIG`, no-new-privs and Landlock, then exec; the
helper reports its exit and ends what it left behind (`helper`).

The report pipe (one per spawn, read by the agent; the command cannot write it): `E<why>` (set-up failed, nothing
ran), `L` (processes outlived the command), `S<wait status>` (the command's; everything it started is gone). End of
file without `S`: the spawn was killed.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import socket
import time
from collections.abc import Callable, Sequence

from runtime.sandbox import landlock
from runtime.sandbox._frozen import Frozen
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
    drop_root_privileges,
    last_capability,
    libc,
)
from runtime.sandbox.seccomp import network_filter
from runtime.sandbox.spec import SandboxSpec, baseline, carve, within

CLONE_NEWIPC = 0x08000000
MARKER_ENV = "GATEWRIGHT_SPAWN_TAG"
SETUP_FAILED = 126  # the exit status of a spawn whose sandbox could not be set up (as shells say "cannot execute")
SETUP_PREFIX = b"gatewright sandbox: "
# I's parent-death signal: a real-time signal nobody else sends, so it cannot be mistaken for one to pass on.
PARENT_DIED = signal.SIGRTMIN + 3
# <linux/sockios.h>, <net/if.h>: the interface flags of `lo`, and struct ifreq's size.
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP, IFREQ = 0x8913, 0x8914, 0x1, "16sH22x"
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
WAITED = frozenset((*FORWARDED, signal.SIGCHLD, PARENT_DIED))
# Python ignores these at start-up; a command must get them at their default.
_RESTORED = tuple(getattr(signal, n) for n in ("SIGPIPE", "SIGXFSZ", "SIGXFZ") if hasattr(signal, n))


class Capabilities(Frozen):
    """What the running system lets a spawn use (see `runtime.sandbox.support`)."""

    __slots__ = ("landlock_abi", "namespaces", "netfilter")
    landlock_abi: int
    namespaces: bool  # user + pid + mount + ipc (+ net) namespaces, bind mounts included
    netfilter: bool  # the seccomp filter that leaves a command without network approval no socket (`seccomp`)

    def __init__(self, landlock_abi: int = 0, namespaces: bool = False, netfilter: bool = False) -> None:
        self._init(landlock_abi=landlock_abi, namespaces=namespaces, netfilter=netfilter)


def _mount_flags_to_keep(path: str) -> int:
    """The per-mount flags a read-only remount inside a user namespace must repeat: the kernel refuses to clear a
    flag that the mount it copied has locked (nosuid, nodev, noexec)."""
    try:
        f = os.statvfs(path).f_flag
    except OSError:
        return MS_NOSUID | MS_NODEV
    return (
        (MS_NOSUID if f & os.ST_NOSUID else 0)
        | (MS_NODEV if f & os.ST_NODEV else 0)
        | (MS_NOEXEC if f & os.ST_NOEXEC else 0)
    )


class Plan:
    """One spawn, prepared before the fork. `run()` in the forked P (or the launcher process) never returns."""

    def __init__(
        self,
        argv: Sequence[str],
        env: dict[str, str],
        spec: SandboxSpec | None,
        caps: Capabilities,
        *,
        cwd: str,
        report_w: int,
        grace: float | None,
        stdio: tuple[int, int, int] | None = None,
        cwd_fd: int | None = None,
        proxy_fd: int | None = None,
    ) -> None:
        self.argv = list(argv)
        self.env = env
        self.spec = spec
        self.caps = caps
        self.namespaces = caps.namespaces
        self.cwd = cwd
        self.cwd_fd = cwd_fd
        self.proxy_fd = proxy_fd  # under [sandbox] network with namespaces: the channel to the proxy
        self._channel: socket.socket | None = None
        self.report_w = report_w
        self.grace = grace
        self.stdio = stdio
        self.notes: list[str] = []
        self.ruleset: landlock.Ruleset | None = None
        self._lc = libc()
        self._mounts: list[tuple[bytes | None, bytes, bytes | None, int, bytes | None]] = []
        self._flags = 0
        self._cwd_id: tuple[int, int] | None = None
        self._shm_rule: int = 0
        self._mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
        self._max_fd = os.sysconf("SC_OPEN_MAX")
        # Without a net namespace, a call without the network gets no socket but unix and netlink ones, and one
        # limited by [sandbox] network TCP ones besides, held to the proxy's port by Landlock (`seccomp`).
        self._netfilter = (
            network_filter(tcp=spec.network)
            if spec is not None and (not spec.network or spec.limited) and not caps.namespaces and caps.netfilter
            else None
        )
        # uid 0 without a user namespace: the command keeps root's file access only (`_libc.ROOT_KEEPS`).
        self._last_cap = last_capability() if os.geteuid() == 0 and not caps.namespaces else -1
        # Written by I inside the new user namespace, where its own ids already read as the overflow id.
        self._uid_map = b"%d %d 1" % (os.getuid(), os.getuid())
        self._gid_map = b"%d %d 1" % (os.getgid(), os.getgid())
        try:
            self._prepare()
        except BaseException:
            self.close()
            raise

    # ---- preparation (before the fork) ---------------------------------------------------------------------------
    def _prepare(self) -> None:
        spec = self.spec
        abi = self.caps.landlock_abi
        if spec is not None and abi > 0:
            # Without a network namespace, a limited command may connect to the proxy's port only (on any address).
            ports = (spec.proxy_port,) if spec.limited and not self.namespaces and spec.proxy_port else ()
            rs = self.ruleset = landlock.Ruleset(abi, network=spec.network, connect_ports=ports)
            base = set(baseline())
            rs.allow_cached([p for p in spec.read if p in base], landlock.READ)
            rs.allow_all([p for p in spec.read if p not in base], landlock.READ)
            rw = landlock.READ | landlock.write_rights(abi)
            for tree in spec.write:
                if self.namespaces or not any(within(p, tree) and p != tree for p in spec.protected):
                    rs.allow(tree, rw)
                else:
                    rs.allow_all(carve(tree, spec.protected), rw)
                    self.notes.append(
                        f"new files directly in {tree} cannot be created: without a mount namespace "
                        "on this system, its protected entries stay read-only only this way"
                    )
            if spec.tmpdir is not None and spec.tmpdir in spec.write:
                self._shm_rule = rw & ~landlock.FS_EXECUTE
        if not self.namespaces:
            return
        flags = CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC
        if spec is not None and (not spec.network or spec.limited):
            flags |= CLONE_NEWNET
        if spec is not None and spec.limited and (self.proxy_fd is None or not spec.proxy_port):
            raise OSError("the command's way to the network proxy is missing")
        self._flags = flags
        if spec is None:
            return
        mounts = self._mounts
        mounts.append((None, b"/", None, MS_REC | MS_PRIVATE, None))
        for path in spec.write:  # an approved path inside a protected one keeps its own writable mount
            if any(within(path, p) and path != p for p in spec.protected) and path not in spec.protected:
                b = os.fsencode(path)
                mounts.append((b, b, None, MS_BIND | MS_REC, None))
        for path in spec.protected:
            b = os.fsencode(path)
            mounts.append((b, b, None, MS_BIND | MS_REC, None))
            mounts.append((None, b, None, MS_BIND | MS_REMOUNT | MS_RDONLY | _mount_flags_to_keep(path), None))

    def close(self) -> None:
        if self.ruleset is not None:
            self.ruleset.close()

    # ---- starting (in the helper or the launcher) ------------------------------------------------------------------
    def start(self, *, agent_pidfd: int | None = None, keep: Sequence[int] = ()) -> int:
        """Fork the spawn from this single-threaded process; returns its pid (I's, or the command's without
        namespaces). `agent_pidfd`: for the launcher, the agent to outlive no longer than."""
        me = os.getpid()
        if not self.namespaces:
            pid = os.fork()
            if pid == 0:
                self._child(lambda: self._fallback(me))
            return pid
        parent_pidfd = os.pidfd_open(me)
        signal.pthread_sigmask(signal.SIG_BLOCK, WAITED)  # from its first instruction on, I only waits for them
        try:
            pid = self._lc.clone(self._flags)
            if pid == 0:
                self._child(lambda: self._init(parent_pidfd, agent_pidfd, keep))
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, self._mask)
            os.close(parent_pidfd)
        if pid < 0:
            raise OSError(self._lc.get_errno(), f"clone: {os.strerror(self._lc.get_errno())}")
        return pid

    def _child(self, body: Callable[[], object]) -> None:
        """Run `body` in the new process; on any failure the reason goes to the report pipe and nothing runs."""
        try:
            body()
        except BaseException as exc:  # the reason goes to the report pipe, then nothing runs
            why = str(exc).encode("utf-8", "replace").replace(b"\n", b" ")
            self._report(b"E" + why)
            with contextlib.suppress(OSError):
                os.write(2, SETUP_PREFIX + why + b"\n")
        os._exit(SETUP_FAILED)

    def _report(self, line: bytes) -> None:
        with contextlib.suppress(OSError):
            os.write(self.report_w, line + b"\n")

    def _close_except(self, keep: Sequence[int]) -> None:
        lo = 0
        for fd in sorted({k for k in keep if k >= 0}):
            if fd > lo:
                os.closerange(lo, fd)
            lo = fd + 1
        os.closerange(lo, self._max_fd)

    def _fail(self, what: str) -> None:
        raise OSError(what)

    def _stdio_and_cwd(self, keep: Sequence[int]) -> None:
        if self.stdio is not None:
            for target, fd in enumerate(self.stdio):
                os.dup2(fd, target)
        rs_fd = self.ruleset.fd if self.ruleset is not None else -1
        mine = tuple(fd for fd in (self.cwd_fd, self.proxy_fd) if fd is not None)
        self._close_except((0, 1, 2, self.report_w, rs_fd, *keep, *mine))
        if self.cwd_fd is not None:
            st = os.fstat(self.cwd_fd)
            self._cwd_id = (st.st_dev, st.st_ino)
            os.fchdir(self.cwd_fd)
            os.close(self.cwd_fd)
        else:
            os.chdir(self.cwd)

    def _cwd_in_namespace(self) -> None:
        """The verified directory again, by path, once in the new mount namespace: a directory entered through a
        descriptor of the agent's namespace has no path from this namespace's root (bash, git and `pwd` fail to find
        it). It must still be the directory that was verified, or the command does not run (swapped meanwhile)."""
        os.chdir(self.cwd)
        st = os.stat(".")
        if self._cwd_id is not None and (st.st_dev, st.st_ino) != self._cwd_id:
            self._fail(f"{self.cwd} was replaced while the command started")

    # ---- without namespaces: the command itself -------------------------------------------------------------------
    def _fallback(self, parent_pid: int) -> None:
        os.setsid()
        self._lc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent_pid:
            os._exit(SETUP_FAILED)  # the helper died before the death signal was armed
        self._stdio_and_cwd(())
        self.exec_here()

    def exec_here(self) -> None:
        """Landlock on this process, then exec the command in it (the launcher without namespaces, and the
        namespace-less spawn). Never returns."""
        if self._last_cap >= 0:
            drop_root_privileges(self._lc, self._last_cap)
        self._enforce()
        if self._netfilter is not None:
            if self.ruleset is None and self._lc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
                self._fail("prctl(PR_SET_NO_NEW_PRIVS) failed")
            self._netfilter.install()
        for sig in _RESTORED:
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, self._mask)
        self._close_except((0, 1, 2, self.report_w))
        os.set_inheritable(self.report_w, False)
        try:
            os.execvpe(self.argv[0], self.argv, self.env)  # noqa: S606 - an argv, never a shell string
        except OSError as exc:
            self._report(b"E" + f"{self.argv[0]}: {exc.strerror or exc}".encode("utf-8", "replace"))
            with contextlib.suppress(OSError):
                os.write(2, f"{self.argv[0]}: {exc.strerror or exc}\n".encode("utf-8", "replace"))
        os._exit(127)

    # ---- I: pid 1 of the new namespaces ---------------------------------------------------------------------------
    def _init(self, parent_pidfd: int, agent_pidfd: int | None, keep: Sequence[int]) -> None:
        self._lc.prctl(PR_SET_PDEATHSIG, PARENT_DIED, 0, 0, 0)
        parent = select.poll()
        parent.register(parent_pidfd, select.POLLIN)
        if parent.poll(0):
            os._exit(SETUP_FAILED)  # the helper died before the death signal was armed
        # Dumpable just while it writes its own id maps: the /proc files of an undumpable process belong to root
        # of the initial namespace, which an unprivileged user may not open for writing.
        self._lc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
        os.setsid()
        self._stdio_and_cwd((parent_pidfd, *keep, *((agent_pidfd,) if agent_pidfd is not None else ())))
        self._enter_namespaces()
        self._cwd_in_namespace()
        if self.spec is not None and self.spec.limited:
            self._way_out()
        self._enforce()
        os.set_inheritable(self.report_w, False)  # the command must not be able to write the agent a report
        try:
            # posix_spawn: the vfork-like start of the command (no copy of this process, and it runs at once).
            cpid = os.posix_spawnp(self.argv[0], self.argv, self.env, setsigmask=self._mask, setsigdef=_RESTORED)
        except OSError as exc:
            self._report(b"E" + f"{self.argv[0]}: {exc.strerror or exc}".encode("utf-8", "replace"))
            with contextlib.suppress(OSError):
                os.write(2, f"{self.argv[0]}: {exc.strerror or exc}\n".encode("utf-8", "replace"))
            self._report(b"S%d" % (127 << 8))
            os._exit(0)
        self._close_except(tuple(fd for fd in (self.report_w, agent_pidfd, self.proxy_fd) if fd is not None))
        status = self._reap(cpid, agent_pidfd)
        if status is not None:
            self._report(b"S%d" % status)
        os._exit(0)

    def _enter_namespaces(self) -> None:
        """In I, right after the clone: the id maps, the mounts, a fresh /proc."""
        lc = self._lc
        try:
            for name, data in (
                (b"/proc/self/setgroups", b"deny"),
                (b"/proc/self/uid_map", self._uid_map),
                (b"/proc/self/gid_map", self._gid_map),
            ):
                fd = os.open(name, os.O_WRONLY)
                try:
                    os.write(fd, data)
                finally:
                    os.close(fd)
        except OSError as exc:
            self._fail(f"user namespace map: {exc.strerror}")
        self._lc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
        for src, tgt, fstype, flags, options in self._mounts:
            if lc.mount(src, tgt, fstype, flags, options) != 0:
                self._fail(f"mount {os.fsdecode(tgt)}: {os.strerror(lc.get_errno())}")
        # A /proc of this pid namespace: the agent's processes are not even visible. (Refused where the outer /proc
        # is partly hidden, in some containers: the outer one then stays, Landlock still guarding it.)
        if (
            lc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None) == 0
            and self.ruleset is not None
        ):
            self.ruleset.allow("/proc", landlock.READ)
        # A private /dev/shm: POSIX shared memory and semaphores (multiprocessing) work without a shared write.
        # Rules for new mounts are added after them: a rule binds the inode that is there when it is added.
        if (
            self._shm_rule
            and self.ruleset is not None
            and lc.mount(b"tmpfs", b"/dev/shm", b"tmpfs", MS_NOSUID | MS_NODEV, b"mode=1777") == 0
        ):
            self.ruleset.allow("/dev/shm", self._shm_rule)  # noqa: S108 - a private mount, just made

    def _way_out(self) -> None:
        """In I, under `[sandbox] network`: the namespace's loopback up, and a listener on the proxy port handed to
        the proxy, the only way out of this network namespace."""
        import fcntl
        import struct

        assert self.spec is not None and self.proxy_fd is not None and self.spec.proxy_port
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                got = fcntl.ioctl(s.fileno(), SIOCGIFFLAGS, struct.pack(IFREQ, b"lo", 0))
                flags = struct.unpack(IFREQ, got)[1]
                fcntl.ioctl(s.fileno(), SIOCSIFFLAGS, struct.pack(IFREQ, b"lo", flags | IFF_UP))
            os.set_inheritable(self.proxy_fd, False)  # the channel is I's, never the command's
            self._channel = socket.socket(fileno=self.proxy_fd)
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
                listener.bind(("127.0.0.1", self.spec.proxy_port))
                listener.listen(128)
                socket.send_fds(self._channel, [b"L"], [listener.fileno()])
        except OSError as exc:
            self._fail(f"the way to the network proxy: {exc.strerror or exc}")

    def _enforce(self) -> None:
        rs = self.ruleset
        if rs is None:
            return
        lc = self._lc
        if lc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            self._fail("prctl(PR_SET_NO_NEW_PRIVS) failed")
        assert lc.landlock_nrs is not None
        if lc.syscall(ctypes.c_long(lc.landlock_nrs[2]), ctypes.c_int(rs.fd), ctypes.c_uint32(0)) != 0:
            self._fail(f"landlock_restrict_self: {os.strerror(lc.get_errno())}")
        os.close(rs.fd)
        rs.fd = -1

    def _reap(self, cpid: int, agent_pidfd: int | None) -> int | None:
        """I's loop: reap everything, pass signals on. The command's wait status; None when I must end now (its
        parent or the agent died: what is left is killed)."""
        status: int | None = None
        deadline: float | None = None
        reported = False
        watch = None
        if agent_pidfd is not None:  # the launcher's: the editor, not the agent, is its parent
            watch = select.poll()
            watch.register(agent_pidfd, select.POLLIN)
        while True:
            if deadline is not None:
                left = deadline - time.monotonic()
                info = signal.sigtimedwait(WAITED, left) if left > 0 else None
                if info is None:
                    self._end_all()
                    return status
            elif watch is not None:
                info = signal.sigtimedwait(WAITED, 1.0)
                if info is None:
                    if watch.poll(0):
                        self._end_all()
                        return None
                    continue
            else:
                info = signal.sigwaitinfo(WAITED)
            sig = info.si_signo
            if sig == PARENT_DIED:
                self._end_all()
                return None
            if sig != signal.SIGCHLD:
                with contextlib.suppress(OSError):
                    os.kill(-1, sig)  # from the agent (stop): to every process of the namespace
                continue
            try:
                while True:
                    pid, st = os.waitpid(-1, os.WNOHANG)
                    if pid == 0:
                        break
                    if pid == cpid:
                        status = st
            except ChildProcessError:
                return status  # no child left: every process of the namespace is gone
            if status is not None and not reported:  # the command is gone, not everything it started
                self._report(b"L")
                reported = True
                if self.grace is not None:
                    deadline = time.monotonic() + self.grace

    @staticmethod
    def _end_all() -> None:
        with contextlib.suppress(OSError):
            os.kill(-1, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            while True:
                os.waitpid(-1, 0)
