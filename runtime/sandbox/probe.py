"""The namespace probe behind `support()`: one real sandboxed spawn that must show every effect we rely on.

A kernel may allow `unshare(CLONE_NEWUSER)` and still refuse what follows (Ubuntu's AppArmor restriction on
unprivileged user namespaces, a container's seccomp profile): so the probe spawns a shell in a full sandbox with a
protected directory and checks effects, not return codes: a file could be created in the writable tree, none in
the protected one, and a background child of the command was gone once the spawn had settled.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

from runtime.sandbox.spawn import Capabilities, Launch, SandboxError
from runtime.sandbox.spec import SandboxSpec, baseline

_SCRIPT = "touch ok || exit 2; touch p/x 2>/dev/null && exit 3; sleep 30 & echo $! > child; exit 0"


def probe_namespaces(abi: int) -> tuple[bool, str]:
    """(namespaces work, why not)."""
    if not os.path.exists("/proc/self/uid_map"):
        return False, "the kernel has no user namespaces"
    tmp = os.path.realpath(tempfile.mkdtemp(prefix="gatewright-probe-"))
    try:
        os.mkdir(os.path.join(tmp, "p"))
        spec = SandboxSpec(read=(*baseline(), tmp), write=(tmp, "/dev/null"), protected=(os.path.join(tmp, "p"),),
                           network=False, tmpdir=tmp, grace=0.0)
        return _run(spec, Capabilities(abi, True), tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _run(spec: SandboxSpec, caps: Capabilities, cwd: str) -> tuple[bool, str]:
    launch = Launch(spec, caps, cwd=cwd, grace=0.0)
    try:
        try:
            p = subprocess.Popen(["/bin/sh", "-c", _SCRIPT], cwd=cwd, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=launch.preexec,
                                 start_new_session=True, env={"PATH": "/usr/bin:/bin"})
        except (subprocess.SubprocessError, SandboxError, OSError) as exc:
            launch.read_report()
            return False, launch.setup_error or f"the namespace set-up failed ({exc})"
        launch.started()
        try:
            _, err = p.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            launch.kill()
            launch.settle_sync()
            return False, "the probe did not finish"
        launch.settle_sync()
        if p.returncode:
            detail = err.decode("utf-8", "replace").strip().splitlines()
            return False, {2: "bind mounts are refused", 3: "a read-only bind mount was writable"}.get(
                p.returncode, f"the sandboxed probe failed (exit {p.returncode}"
                              f"{': ' + detail[-1] if detail else ''})")
        try:
            with open(os.path.join(cwd, "child")) as f:
                child = int(f.read())
        except (OSError, ValueError):
            return False, "the probe's child did not start"
        if _alive(child):
            os.kill(child, 9)
            return False, "a child outlived the pid namespace"
        return True, ""
    finally:
        launch.close()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2:][:1] not in (b"Z", b"X")
