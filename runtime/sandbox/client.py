"""The agent's side of the sandbox helper: start it once, ask it to spawn, follow each spawn on its report pipe.

`Spawner.get()` starts the helper on first use (an isolated `python -I -S` running this install's code, `boot`;
~20 ms, once per agent process; `prestart()` does it on a thread during warm-up) and reads what its probe found.
`Spawner.spawn()` sends one request and returns a `Child`: the pid and a pidfd of the spawn's first process (the
namespace's init, or the command itself without namespaces: its handle; the init passes signals on to every process
of the namespace), its report pipe, and the agent's ends of its stdio pipes. The helper ends every spawn when the
agent's end of the socket closes, however the agent ends.

Under `[sandbox] network`, `Spawner.net_limit(spec)` opens the command's endpoint on the network proxy (started by
the helper on first use, `ProxyControl`) and returns a `NetLimit`: the spec with the proxy's way in filled in, the
channel to hand to the spawn, and the refusals the proxy notes for the tool result. Nothing of it runs without the
setting.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from runtime.sandbox.boot import HELPER_BOOT, interpreter
from runtime.sandbox.child import MARKER_ENV, Capabilities
from runtime.sandbox.orphans import group_alive, kill_marked
from runtime.sandbox.spec import SandboxSpec

# What the helper needs of the agent's environment: where tools and the home are (the baseline), and the switch.
_HELPER_ENV = ("PATH", "HOME", "XDG_CONFIG_HOME", "LANG", "LC_ALL", "GATEWRIGHT_SANDBOX", "TMPDIR")


class SandboxError(OSError):
    """The sandbox of a spawn could not be set up: the command did not run. `gone`: the helper or proxy asked is not
    there any more (`failed`: its socket failed, rather than closed)."""

    gone = False
    failed = False
    unsent = False  # the request never left: nothing ran


def exchange(
    sock: socket.socket, lock: threading.Lock, msg: bytes, fds: Sequence[int], who: str
) -> tuple[dict[str, Any], list[int]]:
    """One request and its answer (with the descriptors it carries) on a SOCK_SEQPACKET socket to the helper or the
    network proxy (`who`). Raises SandboxError: a refusal, or the other side failed or is gone."""
    sent = False
    try:
        with lock:
            socket.send_fds(sock, [msg], list(fds))
            sent = True
            data, got, _, _ = socket.recv_fds(sock, 65536, 1)
    except OSError as exc:
        err = SandboxError(f"the {who} failed ({exc.strerror or exc})")
        err.gone = err.failed = True
        err.unsent = not sent
        raise err from None
    if not data:
        err = SandboxError(f"the {who} is gone")
        err.gone = True
        raise err
    answer = json.loads(data)
    if "error" in answer:
        for fd in got:
            os.close(fd)
        raise SandboxError(f"the {who} refused: {answer['error']}")
    return dict(answer), got


def read_lines(fd: int, buf: bytes) -> tuple[list[bytes], bytes, bool]:
    """The complete lines a non-blocking pipe holds now (after `buf`, the partial line read before), the new partial
    line, and whether the pipe reached its end."""
    lines: list[bytes] = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            return lines, buf, False
        except OSError:
            chunk = b""
        if not chunk:
            return lines, buf, True
        *got, buf = (buf + chunk).split(b"\n")
        lines += got


class ProxyControl:
    """The agent's control socket to its network proxy (`runtime.sandbox.proxy`)."""

    def __init__(self, sock: socket.socket, pid: int) -> None:
        self.sock = sock
        self.pid = pid
        self.lock = threading.Lock()
        self.sock.settimeout(5.0)
        self.dead = False

    def request(self, msg: dict[str, object], fds: Sequence[int] = ()) -> tuple[dict[str, Any], int | None]:
        try:
            answer, got = exchange(self.sock, self.lock, json.dumps(msg).encode(), fds, "network proxy")
        except SandboxError as exc:
            self.dead = exc.gone
            raise
        return answer, got[0] if got else None

    def close(self) -> None:
        self.dead = True
        with contextlib.suppress(OSError):
            self.sock.close()


# Inside the command's own network namespace the port is free for the taking; this range avoids the ephemeral
# ports (32768+) and the usual development servers' ports.
_NS_PORTS = (20000, 30000)


class NetLimit:
    """One command's endpoint on the network proxy: how the command reaches it, and what it refused the command."""

    def __init__(self, control: ProxyControl, spec: SandboxSpec, *, namespaces: bool, launcher: bool) -> None:
        self.control = control
        self.channel: int | None = None  # for the spawn request (handed to the helper, then closed here)
        notes_r, notes_w = os.pipe()
        os.set_blocking(notes_r, False)
        self.notes_r = notes_r
        self._buf = b""
        self.refusals: dict[str, str] = {}  # "host:port" -> the line the command got
        kind = "tcp" if not namespaces else "path" if launcher else "pair"
        try:
            answer, fd = control.request({"op": "open", "kind": kind, "hosts": list(spec.hosts or ())}, [notes_w])
        except BaseException:
            os.close(notes_r)
            raise
        finally:
            os.close(notes_w)
        self.id = int(str(answer["id"]))
        self.channel = fd
        port = (
            int(str(answer["port"]))
            if "port" in answer
            else _NS_PORTS[0] + int.from_bytes(os.urandom(2), "big") % (_NS_PORTS[1] - _NS_PORTS[0])
        )
        path = str(answer["path"]) if "path" in answer else None
        self.spec = spec.through_proxy(port, path)

    def refused(self) -> list[str]:
        """The refusals so far, one line each (`gatewright: example.com is not in [sandbox] network`)."""
        if self.notes_r >= 0:
            lines, self._buf, _ = read_lines(self.notes_r, self._buf)
            for line in lines:
                target, _, text = line.decode("utf-8", "replace").partition("\t")
                self.refusals.setdefault(target, text)
        return list(self.refusals.values())

    def release_channel(self) -> None:
        if self.channel is not None:
            with contextlib.suppress(OSError):
                os.close(self.channel)
            self.channel = None

    def close(self) -> None:
        """End the endpoint (and every connection it still has); the refusals stay readable."""
        self.refused()
        self.release_channel()
        if self.notes_r >= 0:
            os.close(self.notes_r)
            self.notes_r = -1
        if not self.control.dead:
            with contextlib.suppress(SandboxError):
                self.control.request({"op": "close", "id": self.id})


class Child:
    """One spawn, followed through its report pipe (see `runtime.sandbox.child` for the lines)."""

    def __init__(
        self,
        pid: int,
        pidfd: int,
        report_fd: int,
        caps: Capabilities,
        notes: Sequence[str],
        net: NetLimit | None = None,
        tag: str = "",
    ) -> None:
        self.pid = pid
        self.net = net
        self.tag = tag  # the marker in its processes' environment (without namespaces)
        self.pidfd = pidfd
        self.report_fd = report_fd
        self.namespaces = caps.namespaces
        self.notes = list(notes)
        self.status: int | None = None  # the command's wait status, once its spawn is over
        self.leftovers = False
        self.setup_error: str | None = None
        self.eof = False
        self._buf = b""
        os.set_blocking(report_fd, False)

    # ---- the report ------------------------------------------------------------------------------------------------
    def read_report(self) -> None:
        if self.eof:
            return
        lines, self._buf, self.eof = read_lines(self.report_fd, self._buf)
        for line in lines:
            self._line(line)
        if self.eof and self.status is None and not self.namespaces and self.tag:
            # The helper died before the command's end (only it writes `S` without namespaces): what it had
            # adopted went to init; end whatever still carries this spawn's marker.
            kill_marked({self.tag})

    def _line(self, line: bytes) -> None:
        tag, rest = line[:1], line[1:]
        if tag == b"L":
            self.leftovers = True
        elif tag == b"E":
            self.setup_error = rest.decode("utf-8", "replace")
        elif tag == b"S":
            self.status = int(rest)

    @property
    def done(self) -> bool:
        """The command's end was reported (and nothing it started is left), or the spawn was killed."""
        self.read_report()
        return self.status is not None or self.eof

    @property
    def returncode(self) -> int | None:
        """Like `Popen.returncode`: the exit code, or -N when a signal N ended it; None while it runs."""
        if not self.done:
            return None
        if self.status is None:
            return -signal.SIGKILL
        return os.waitstatus_to_exitcode(self.status)

    # ---- waiting ---------------------------------------------------------------------------------------------------
    async def wait(self) -> int:
        import anyio

        while not self.done:
            await anyio.wait_readable(self.report_fd)
        # After `S` nothing the command started is left (P is still tearing the namespaces down: ~15 ms for the
        # mount namespace, not waited for); killed, it is gone once its pidfd is readable.
        if self.status is None:
            await self._wait_gone()
        rc = self.returncode
        assert rc is not None
        return rc

    async def _wait_gone(self) -> None:
        """Killed: gone once its pidfd is readable (the spawn is the namespace's init: its exit ends the namespace)."""
        import anyio

        if self.pidfd >= 0:
            with anyio.move_on_after(2.0):
                await anyio.wait_readable(self.pidfd)

    def wait_sync(self, timeout: float | None = None) -> int | None:
        poll = select.poll()
        poll.register(self.report_fd, select.POLLIN)
        while not self.done:
            if not poll.poll(None if timeout is None else int(timeout * 1000)):
                return None
        if self.status is None and self.pidfd >= 0:
            p = select.poll()
            p.register(self.pidfd, select.POLLIN)
            p.poll(2000)
        return self.returncode

    # ---- signals ---------------------------------------------------------------------------------------------------
    def send_signal(self, sig: int) -> None:
        """To the spawn: with namespaces every process in it gets `sig`; without, the command's process group."""
        if self.pidfd >= 0:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(self.pidfd, sig)
        if not self.namespaces and not self.done:
            with contextlib.suppress(OSError):
                os.killpg(self.pid, sig)
            if self.tag:  # and what left the group (`setsid`), found by the spawn's marker
                kill_marked({self.tag}, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def refused(self) -> list[str]:
        """The connections the network proxy refused this spawn (`[sandbox] network`), one line each."""
        return self.net.refused() if self.net is not None else []

    def close(self) -> None:
        for fd in (self.pidfd, self.report_fd):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.pidfd = self.report_fd = -1
        if self.net is not None:
            self.net.close()


class HelperGone(SandboxError):
    """The helper was gone before it read the request: nothing ran, and the request may be sent to a new one."""


# When a helper cannot start, the next weaker one is tried: its probe is the step that may have failed.
WEAKER = {None: "landlock", "landlock": "off", "off": None}


class Spawner:
    """The agent's connection to its sandbox helper (one per value of GATEWRIGHT_SANDBOX)."""

    _instances: dict[str | None, Spawner] = {}
    _instance_lock = threading.Lock()

    def __init__(self, switch: str | None = None) -> None:
        self.dead = False
        self.note = ""  # why this helper is not the one first asked for (it stopped, or a stronger one did not start)
        self.note_told = False
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = {k: v for k, v in os.environ.items() if k in _HELPER_ENV}
        env.pop("GATEWRIGHT_SANDBOX", None)
        if switch:
            env["GATEWRIGHT_SANDBOX"] = switch
        try:
            self.proc: subprocess.Popen[bytes] | None = subprocess.Popen(
                [*interpreter(HELPER_BOOT), str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                env=env,
                close_fds=True,
            )
        except OSError as exc:
            ours.close()
            raise SandboxError(f"the sandbox helper did not start ({exc.strerror or exc})") from None
        finally:
            theirs.close()
        self.sock = ours
        self.lock = threading.Lock()
        self._proxy: ProxyControl | None = None
        # A helper that stops answering must not hang the agent's event loop: its answers take milliseconds.
        self.sock.settimeout(30.0)
        try:
            raw = self.sock.recv(65536)
            if not raw:
                raise EOFError(self._exit_words())
            hello = json.loads(raw)
            abi, ns, *rest = hello["caps"]
        except (OSError, ValueError, EOFError, KeyError, TypeError) as exc:
            self.proc.kill()
            self.sock.close()
            raise SandboxError(f"the sandbox helper did not start ({str(exc) or type(exc).__name__})") from None
        self.sock.settimeout(10.0)
        self.caps = Capabilities(int(abi), bool(ns), bool(rest and rest[0]))
        self.landlock_why = str(hello.get("landlock_why") or "")
        self.namespaces_why = str(hello.get("namespaces_why") or "")
        self.forced: str | None = hello.get("forced")

    def take_note(self) -> list[str]:
        """The note, once: for the first command this helper runs (a restart is said where it happened)."""
        if not self.note or self.note_told:
            return []
        self.note_told = True
        return [self.note]

    def _exit_words(self) -> str:
        assert self.proc is not None
        try:
            code = self.proc.wait(2)
        except subprocess.TimeoutExpired:
            return "it closed its socket"
        return f"it exited with status {code}" if code >= 0 else f"it was killed by signal {-code}"

    @property
    def alive(self) -> bool:
        return not self.dead and (self.proc is None or self.proc.poll() is None)

    @classmethod
    def get(cls) -> Spawner:
        """The helper for the current value of GATEWRIGHT_SANDBOX (one per value: a test or the benchmark may
        compare modes in one process), started on first use and again if it died. A helper that cannot start is
        replaced by the next weaker one (`WEAKER`), and at last by spawning without a helper (`DirectSpawner`):
        its `note` says why, and commands never all fail."""
        switch = (os.environ.get("GATEWRIGHT_SANDBOX") or "").strip().lower() or None
        with cls._instance_lock:
            inst = cls._instances.get(switch)
            if inst is None or not inst.alive:
                inst = cls._instances[switch] = cls._start(switch, inst)
            return inst

    @classmethod
    def _start(cls, switch: str | None, previous: Spawner | None) -> Spawner:
        why: list[str] = []
        if previous is not None:
            previous.close()
            why.append(f"the sandbox helper had stopped ({previous.stopped_words()}) and was restarted")
        attempt: str | None = switch
        tried: set[str | None] = set()
        while attempt not in tried:
            tried.add(attempt)
            try:
                inst = Spawner(attempt)
            except SandboxError as exc:
                why.append(str(exc))
                nxt = WEAKER.get(attempt)
                if nxt is None:
                    break
                attempt = nxt
                continue
            if attempt != switch:
                why.append(f"running the weaker GATEWRIGHT_SANDBOX={attempt} helper instead")
            inst.note = "; ".join(why)
            return inst
        direct = DirectSpawner("; ".join(why))
        return direct

    def stopped_words(self) -> str:
        if self.proc is None:
            return "no helper"
        code = self.proc.poll()
        if code is None:
            return "its socket failed"
        return f"exit status {code}" if code >= 0 else f"killed by signal {-code}"

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()
        if self.proc is not None:
            with contextlib.suppress(OSError):
                self.proc.kill()
            with contextlib.suppress(Exception):
                self.proc.wait(timeout=2)

    @classmethod
    def stop(cls) -> None:
        """End the helpers (each ends every spawn it made). Idempotent."""
        with cls._instance_lock:
            insts = list(cls._instances.values())
            cls._instances.clear()
        for inst in insts:
            if inst._proxy is not None:
                inst._proxy.close()
            with contextlib.suppress(OSError):
                inst.sock.close()
        for inst in insts:
            if inst.proc is not None:
                with contextlib.suppress(Exception):
                    inst.proc.wait(timeout=2)
            elif isinstance(inst, DirectSpawner):  # no helper to end what left the groups: the markers do
                kill_marked(inst.tags)

    def spawn(
        self,
        argv: Sequence[str],
        *,
        cwd: str,
        env: Mapping[str, str],
        spec: SandboxSpec | None,
        grace: float | None,
        report_w: int,
        stdin: int | None = None,
        stdout: int | None = None,
        stderr: int | None = None,
        cwd_fd: int | None = None,
        proxy: int | None = None,
        tag: str = "",
    ) -> tuple[int, int, list[str]]:
        """Ask the helper for one spawn. Returns (its pid, a pidfd of it, notes for the tool output). `tag`: the
        marker its processes carry without namespaces (the agent's, so it can find them if the helper dies).

        Raises:
            HelperGone: the helper was gone before it read the request (nothing ran: ask a new one).
            SandboxError: the helper refused (a bad spec, a failed fork), or died while it answered.
        """
        names, fds = ["report"], [report_w]
        for name, fd in (("stdin", stdin), ("stdout", stdout), ("stderr", stderr), ("cwd", cwd_fd), ("proxy", proxy)):
            if fd is not None:
                names.append(name)
                fds.append(fd)
        msg = json.dumps(
            {
                "argv": list(argv),
                "env": dict(env),
                "cwd": cwd,
                "grace": grace,
                "tag": tag,
                "fds": names,
                "spec": spec.to_json() if spec is not None else None,
            }
        ).encode()
        try:
            answer, got = self._request(msg, fds)
        except SandboxError as exc:
            if exc.unsent:  # never read: nothing ran
                raise HelperGone(f"the sandbox helper had stopped ({exc})") from None
            if exc.gone:
                raise SandboxError(f"{exc} while it started the command; it is restarted for the next one") from None
            raise
        return int(answer["pid"]), got[0], list(answer.get("notes") or ())

    def _request(self, msg: bytes, fds: Sequence[int]) -> tuple[dict[str, Any], list[int]]:
        try:
            return exchange(self.sock, self.lock, msg, fds, "sandbox helper")
        except SandboxError as exc:
            if exc.gone:  # gone or stuck: the next spawn starts a new helper
                self._gone()
            raise

    def proxy(self) -> ProxyControl:
        """The network proxy, started by the helper on first use (and again if it died)."""
        with self.lock:
            current = self._proxy
        if current is not None and not current.dead:
            return current
        answer, got = self._request(json.dumps({"op": "proxy"}).encode(), ())
        if not got:
            raise SandboxError("the sandbox helper started no network proxy")
        control = ProxyControl(socket.socket(fileno=got[0]), int(answer["pid"]))
        with self.lock:
            if self._proxy is not None and not self._proxy.dead:  # another thread was first
                control.close()
                return self._proxy
            self._proxy = control
        return control

    def net_limit(self, spec: SandboxSpec, *, launcher: bool = False) -> NetLimit:
        """Open `spec`'s endpoint on the network proxy (`spec.limited`): for a spawn of this helper, or for the
        editor-terminal launcher (`launcher`, which connects to a one-shot socket instead of being handed one).

        Raises:
            SandboxError: the proxy could not be started or refused (the command must not run).
        """
        return NetLimit(self.proxy(), spec, namespaces=self.caps.namespaces, launcher=launcher)

    def _gone(self) -> None:
        self.dead = True
        if self.proc is not None:
            with contextlib.suppress(OSError):
                self.proc.kill()


class DirectSpawner(Spawner):
    """No helper could start at all: commands run unconfined, started by the agent itself, each in its own process
    group that a thread of the agent ends as the helper would (the drain grace, then the group). Nothing is
    confined, a process that leaves its group is not found, and one that outlives an agent killed with SIGKILL is
    not ended: the `note` and the support say so."""

    def __init__(self, why: str) -> None:  # no helper: nothing of Spawner's start runs
        self.dead = False
        self.proc = None
        self.lock = threading.Lock()
        self.note = why
        self.note_told = False
        self.caps = Capabilities()
        self.landlock_why = self.namespaces_why = why or "the sandbox helper could not start"
        self.forced = None
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)  # closed by `stop` like a helper's
        self._proxy = None  # no helper to run one: a command limited to named hosts does not run
        self.tags: set[str] = set()

    def spawn(
        self,
        argv: Sequence[str],
        *,
        cwd: str,
        env: Mapping[str, str],
        spec: SandboxSpec | None,
        grace: float | None,
        report_w: int,
        stdin: int | None = None,
        stdout: int | None = None,
        stderr: int | None = None,
        cwd_fd: int | None = None,
        proxy: int | None = None,
        tag: str = "",
    ) -> tuple[int, int, list[str]]:
        del spec, cwd_fd, proxy  # nothing can hold a spec here; `cwd` is the verified directory's path
        env = {**env, MARKER_ENV: tag} if tag else env
        if tag:
            self.tags.add(tag)
        try:
            proc = subprocess.Popen(
                list(argv),
                cwd=cwd,
                env=dict(env),
                stdin=stdin if stdin is not None else subprocess.DEVNULL,
                stdout=stdout if stdout is not None else subprocess.DEVNULL,
                stderr=stderr if stderr is not None else subprocess.DEVNULL,
                start_new_session=True,
                close_fds=True,
            )
        except OSError as exc:
            raise SandboxError(f"{argv[0]}: {exc.strerror or exc}") from None
        pidfd = os.pidfd_open(proc.pid)
        report = os.dup(report_w)
        threading.Thread(target=_follow_direct, args=(proc, report, grace, tag), daemon=True).start()
        return proc.pid, pidfd, []


def _follow_direct(proc: subprocess.Popen[bytes], report_w: int, grace: float | None, tag: str) -> None:
    """The helper's part of a spawn, for `DirectSpawner`: the command's end, then what it left in its group."""
    try:
        proc.wait()
        status = proc.returncode
        wait_status = (-status) if status < 0 else status << 8
        if group_alive(proc.pid):
            os.write(report_w, b"L\n")
            deadline = None if grace is None else time.monotonic() + grace
            while group_alive(proc.pid) and (deadline is None or time.monotonic() < deadline):
                time.sleep(0.01)
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)
        if tag:
            kill_marked({tag})
        os.write(report_w, b"S%d\n" % wait_status)
    except OSError:
        pass
    finally:
        os.close(report_w)


def prestart() -> None:
    """Start the helper on a thread (warm-up): the first command then does not wait ~20 ms for it."""
    threading.Thread(target=Spawner.get, name="gw-sandbox-helper", daemon=True).start()
