"""The namespace probe the sandbox helper runs once at start: one real sandboxed spawn that must show its effects.

A kernel may allow `unshare(CLONE_NEWUSER)` and still refuse what follows (Ubuntu's AppArmor restriction on
unprivileged user namespaces, a container's seccomp profile): so the probe spawns a shell in a full sandbox with a
protected directory and checks effects, not return codes: a file could be created in the writable tree and none in
the protected one, and the background process it left was seen and ended (the init reports the command's end only
once nothing of the namespace is left).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile

from runtime.sandbox.child import Capabilities, Plan
from runtime.sandbox.spec import SandboxSpec, baseline

_SCRIPT = "touch ok || exit 2; touch p/x 2>/dev/null && exit 3; sleep 30 & exit 0"


def probe_namespaces(abi: int) -> tuple[bool, str]:
    """(namespaces work, why not). Runs in the helper (a subreaper whose children are only its spawns)."""
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
        return _run(spec, Capabilities(abi, True), tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _run(spec: SandboxSpec, caps: Capabilities, cwd: str) -> tuple[bool, str]:
    report_r, report_w = os.pipe()
    plan = Plan(
        ["/bin/sh", "-c", _SCRIPT], {"PATH": "/usr/bin:/bin"}, spec, caps, cwd=cwd, report_w=report_w, grace=0.0
    )
    null = os.open(os.devnull, os.O_RDWR)
    try:
        plan.stdio = (null, null, null)
        pid = plan.start()
        os.close(report_w)
        report_w = -1
        data = b""
        while chunk := os.read(report_r, 65536):  # until I is gone
            data += chunk
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
    status = next((int(ln[1:]) for ln in lines if ln.startswith(b"S")), None)
    if err is not None:
        return False, err
    if status is None:
        return False, "the sandboxed probe did not report its end"
    code = os.waitstatus_to_exitcode(status)
    if code:
        return False, {2: "the writable tree was not writable", 3: "a read-only bind mount was writable"}.get(
            code, f"the sandboxed probe failed (exit {code})"
        )
    if b"L" not in lines:
        return False, "the probe's background process was not seen"
    return True, ""
