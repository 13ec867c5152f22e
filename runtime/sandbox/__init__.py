"""The operating-system sandbox under every process the agent starts: `permissions` decides, this enforces.

- `support()`: what this system offers (cached probe): Landlock's ABI, whether unprivileged user/pid/mount/net
  namespaces work, a one-line `describe()` for `/status`. `GATEWRIGHT_SANDBOX=off` forces "no sandbox" (a machine
  without Landlock or namespaces), `GATEWRIGHT_SANDBOX=landlock` forces Landlock without namespaces (a machine where
  unprivileged user namespaces are forbidden); both exist for tests and for a user who must opt out.
- `build_spec(confinement, roots, tmpdir=...)`: the `SandboxSpec` of one call (what it may read, write, reach).
- `baseline_readable(path)`: reads the sandbox always allows (the policy need not ask for them).
- `session_tmpdir(session_id)` / `remove_session_tmpdir`: the per-session private temp dir (`TMPDIR`).
- `spawn.Launch`: the child side of one spawn (`runtime.processes` uses it for every child).
- `python -m runtime.sandbox -- CMD...` (`__main__`): the launcher that editor terminals run.

Backends. Only Linux is built: Landlock for files, TCP, signals and abstract sockets; namespaces for containment
(pid), protected paths (mount), the network (net). A macOS backend would slot in at the same two seams: `support()`
reports it (`sandbox-exec` present, a Seatbelt profile compiled once per spec), and `Launch` becomes "exec
`/usr/bin/sandbox-exec -p PROFILE -- CMD`" instead of a pre-exec function, the profile generated from the same
`SandboxSpec` (`(deny default)`, `(allow file-read* (subpath …))` per read tree, `(allow file-write* (subpath …))`
per write tree with `(deny file-write* (subpath …))` for each protected path, `(deny network*)` unless network). The
kill guarantee would then rest on process groups and a parent-death watch, as in the no-namespace fallback here.
"""

from __future__ import annotations

import functools
import os
import sys
from dataclasses import dataclass

from runtime.sandbox.spec import (
    SandboxSpec,
    baseline,
    baseline_readable,
    build_spec,
    child_env,
    remove_all_tmpdirs,
    remove_session_tmpdir,
    session_tmpdir,
)

__all__ = ["SandboxSpec", "Support", "baseline", "baseline_readable", "build_spec", "child_env", "ensure_subreaper",
           "harden_agent", "remove_all_tmpdirs", "remove_session_tmpdir", "session_tmpdir", "support"]

ENV_SWITCH = "GATEWRIGHT_SANDBOX"


@dataclass(frozen=True, slots=True)
class Support:
    """What this system lets the sandbox do. `active`: processes are confined (Landlock works)."""

    landlock_abi: int = 0
    namespaces: bool = False
    network_namespace: bool = False
    forced: str | None = None  # the value of GATEWRIGHT_SANDBOX that limited it
    reason: str = ""  # why something is missing

    @property
    def active(self) -> bool:
        return self.landlock_abi > 0

    def capabilities(self):  # -> spawn.Capabilities (imported lazily: ctypes stays off the start-up path)
        from runtime.sandbox.spawn import Capabilities

        return Capabilities(self.landlock_abi, self.namespaces)

    def describe(self) -> str:
        if self.forced == "off":
            return f"sandbox: off ({ENV_SWITCH}=off): commands run unconfined and more calls ask"
        if not self.active:
            return f"sandbox: not available ({self.reason or 'no Landlock'}): commands run unconfined and more " \
                   "calls ask"
        text = f"sandbox: Landlock ABI {self.landlock_abi}"
        if self.namespaces:
            return text + ", user/pid/mount" + ("/net" if self.network_namespace else "") + " namespaces"
        why = f"{ENV_SWITCH}=landlock" if self.forced == "landlock" else self.reason or "unavailable"
        return text + f", no namespaces ({why}): processes that leave their group may outlive the agent"


@functools.cache
def support() -> Support:
    """Probe once per process (the first spawn or `/status` pays ~10 ms; start-up does not)."""
    forced = (os.environ.get(ENV_SWITCH) or "").strip().lower() or None
    if forced == "off" or not sys.platform.startswith("linux"):
        return Support(forced="off" if forced == "off" else None,
                       reason="not Linux" if not sys.platform.startswith("linux") else "")
    from runtime.sandbox import landlock

    try:
        abi = landlock.abi()
    except OSError:
        abi = 0
    reason = "" if abi else "the kernel has no Landlock (Linux 5.13+ with landlock in its LSM list)"
    if forced == "landlock":
        return Support(abi, forced="landlock", reason=reason)
    from runtime.sandbox.probe import probe_namespaces

    ns, why = probe_namespaces(abi)
    return Support(abi, ns, network_namespace=ns, reason=reason or why)


_done: set[str] = set()


def ensure_subreaper() -> None:
    """Make this process a child subreaper: orphans of its children come back to it (to be killed and reaped)
    instead of going to the system's init. Idempotent; every spawn calls it."""
    if "subreaper" in _done or not sys.platform.startswith("linux"):
        return
    from runtime.sandbox._libc import PR_SET_CHILD_SUBREAPER, libc

    libc().prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    _done.add("subreaper")


def harden_agent() -> None:
    """Once at start-up of `acp`/`run`: a child subreaper, and not dumpable, so that no other process of the user
    (a sandboxed one above all) can ptrace the agent or open its `/proc/<pid>/mem`, `environ` or `fd/*`."""
    if not sys.platform.startswith("linux"):
        return
    ensure_subreaper()
    if "dumpable" not in _done:
        from runtime.sandbox._libc import PR_SET_DUMPABLE, libc

        libc().prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
        _done.add("dumpable")
