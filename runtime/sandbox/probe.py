"""The probes the sandbox helper runs once at start: real sandboxed spawns that must show their effects.

Each layer is probed on its own, and a failure of one is a reason in words and a weaker sandbox, never the helper's
end (before, a refused `clone` killed the helper, and every command then failed with a broken pipe):

- Landlock: the kernel's ABI version, then one spawn under a ruleset (no namespaces) that must be able to write its
  granted directory and unable to write a sibling. A kernel can report an ABI and still refuse to enforce it (a
  seccomp filter that refuses `landlock_restrict_self`).
- namespaces: one spawn in a full sandbox (user, pid, mount, ipc and net namespaces, a protected directory) that
  must write the writable tree, fail to write the protected one, and leave a background process that the init
  sees and ends. A kernel may allow `clone(CLONE_NEWUSER)` and refuse what follows (Ubuntu's AppArmor restriction
  of unprivileged user namespaces: no capability inside, so the id maps or the mounts fail), or refuse the clone
  itself (a chroot, a container's seccomp profile, `user.max_user_namespaces = 0`): each says which step failed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import socket
import tempfile

from runtime.sandbox._libc import PR_SET_NO_NEW_PRIVS, libc
from runtime.sandbox.child import Capabilities, Plan
from runtime.sandbox.seccomp import network_filter
from runtime.sandbox.spec import SandboxSpec, baseline

_NS_SCRIPT = "touch ok || exit 2; touch p/x 2>/dev/null && exit 3; sleep 30 & exit 0"
_LANDLOCK_SCRIPT = "touch w/ok || exit 2; touch r/x 2>/dev/null && exit 3; exit 0"
SHELL = "/bin/sh"
REFUSED = "user namespaces are refused here"
WHERE = "as in a chroot, under a container's seccomp profile or Ubuntu's AppArmor restriction"


def probe_landlock(abi: int) -> tuple[bool, str]:
    """(Landlock is enforced, why not) for a kernel that reports `abi`."""
    tmp = os.path.realpath(tempfile.mkdtemp(prefix="gatewright-probe-"))
    try:
        for d in ("w", "r"):
            os.mkdir(os.path.join(tmp, d))
        w = os.path.join(tmp, "w")
        spec = SandboxSpec(read=(*baseline(), tmp), write=(w, "/dev/null"), network=False, grace=0.0)
        ok, why = _run(spec, Capabilities(abi, False), tmp, _LANDLOCK_SCRIPT, background=False)
        return ok, "" if ok else f"Landlock ABI {abi} is reported but cannot be enforced here: {why}"
    except Exception as exc:  # any failure of the probe is a reason, never the helper's end
        return False, f"the Landlock probe failed ({type(exc).__name__}: {exc})"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def probe_network_filter() -> tuple[bool, str]:
    """(the no-network seccomp filter works, why not): in a forked child, a UDP socket must be refused with EACCES
    and a unix one still made."""
    flt = network_filter()
    if flt is None:
        return False, f"no seccomp filter is built for {os.uname().machine}"
    try:
        pid = os.fork()
    except OSError as exc:
        return False, f"the seccomp probe could not start ({exc.strerror or exc})"
    if pid == 0:  # pragma: no cover - the child
        code = 4
        try:
            if libc().prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
                os._exit(2)
            flt.install()
            socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).close()
            try:
                socket.socket(socket.AF_INET, socket.SOCK_DGRAM).close()
                code = 3
            except PermissionError:
                code = 0
        except BaseException:
            code = 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code == 0:
        return True, ""
    return False, {
        1: "the kernel refused the seccomp filter",
        2: "no-new-privs could not be set",
        3: "a UDP socket was still made under the seccomp filter",
    }.get(code, f"the seccomp probe failed (exit {code})")


def probe_namespaces(abi: int) -> tuple[bool, str]:
    """(namespaces work, why not, in words). Runs in the helper (a subreaper whose children are only its spawns)."""
    if not os.path.exists("/proc/self/uid_map"):
        return False, "the kernel has no user namespaces"
    tmp = os.path.realpath(tempfile.mkdtemp(prefix="gatewright-probe-"))
    try:
        os.mkdir(os.path.join(tmp, "p"))
        spec = SandboxSpec(
            read=(*baseline(), tmp),
            write=(tmp, "/dev/null"),
            protected=(os.path.join(tmp, "p"),),
            network=False,
            tmpdir=tmp,
            grace=0.0,
        )
        return _run(spec, Capabilities(abi, True), tmp, _NS_SCRIPT, background=True)
    except OSError as exc:
        return False, _clone_refused(exc)
    except Exception as exc:  # any failure of the probe is a reason, never the helper's end
        return False, f"the namespace probe failed ({type(exc).__name__}: {exc})"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _clone_refused(exc: OSError) -> str:
    if exc.errno in (errno.EPERM, errno.EACCES):
        return f"{REFUSED} (clone(CLONE_NEWUSER) failed with {errno.errorcode[exc.errno]}, {WHERE})"
    if exc.errno == errno.ENOSPC:
        return "user namespaces are disabled here (user.max_user_namespaces is 0 or used up)"
    if exc.errno == errno.EINVAL:
        return "the kernel refused the namespace flags (EINVAL)"
    return f"the namespaces could not be created ({exc.strerror or exc})"


def _in_words(err: str) -> str:
    """A set-up step's failure (the `E` line of the probe's report) as the reason a user reads."""
    if err.startswith("user namespace map"):
        return f"{REFUSED} (writing the user namespace's id map failed: {err.split(': ', 1)[-1]}, {WHERE})"
    if err.startswith("mount "):
        return f"mounts inside a user namespace are refused here ({err}, {WHERE})"
    return err if err.startswith("landlock") else f"the sandboxed probe could not be set up ({err})"


def _run(spec: SandboxSpec, caps: Capabilities, cwd: str, script: str, *, background: bool) -> tuple[bool, str]:
    report_r, report_w = os.pipe()
    plan = Plan([SHELL, "-c", script], {"PATH": "/usr/bin:/bin"}, spec, caps, cwd=cwd, report_w=report_w, grace=0.0)
    null = os.open(os.devnull, os.O_RDWR)
    try:
        plan.stdio = (null, null, null)
        pid = plan.start()
        os.close(report_w)
        report_w = -1
        if not caps.namespaces:
            _, status = os.waitpid(pid, 0)  # the command itself: its end is ours to report
            data = _read_all(report_r) + b"S%d\n" % status
        else:
            data = _read_all(report_r)  # until I is gone
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
    finally:
        plan.close()
        os.close(null)
        os.close(report_r)
        if report_w >= 0:
            os.close(report_w)
    lines = data.splitlines()
    err = next((ln[1:].decode("utf-8", "replace") for ln in lines if ln.startswith(b"E")), None)
    end = next((int(ln[1:]) for ln in lines if ln.startswith(b"S")), None)
    if err is not None:
        return False, _in_words(err)
    if end is None:
        return False, "the sandboxed probe did not report its end"
    code = os.waitstatus_to_exitcode(end)
    if code:
        return False, {
            2: "the writable tree was not writable",
            3: "a read-only path was writable" if background else "a path outside the ruleset was writable",
        }.get(code, f"the sandboxed probe failed (exit {code})")
    if background and b"L" not in lines:
        return False, "the probe's background process was not seen"
    return True, ""


def _read_all(fd: int) -> bytes:
    data = b""
    while chunk := os.read(fd, 65536):
        data += chunk
    return data
