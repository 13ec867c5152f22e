"""The operating-system sandbox under every process the agent starts: `permissions` decides, this enforces.

- `support()`: what this system offers (cached): Landlock's ABI, whether unprivileged user/pid/mount/net
  namespaces work, a one-line `describe()` for `/status`. `GATEWRIGHT_SANDBOX=off` forces "no sandbox" (as on a
  machine without Landlock or namespaces), `GATEWRIGHT_SANDBOX=landlock` forces Landlock without namespaces (as where
  unprivileged user namespaces are forbidden); both exist for tests and for a user who must opt out.
- `build_spec(confinement, roots, tmpdir=...)`: the `SandboxSpec` of one call (what it may read, write, reach).
- `baseline_readable(path)`: reads the sandbox always allows (the policy need not ask for them).
- `grants`: what the user's `[sandbox]` table lets every command also read and write, and the toolchains'
  per-project caches.
- `configure_network(hosts)` / `network_hosts()`: the user's `[sandbox] network` (None: every host), set once at
  start-up; `network_unheld()`: why this system cannot hold it ("" when a network namespace can).
- `session_tmpdir(session_id)` / `remove_session_tmpdir`: the per-session private temp dir (`TMPDIR`).
- `client.Spawner`: the agent's connection to the sandbox helper (`helper`), which forks every sandboxed child
  (`child`); `runtime.processes` is its only user.
- `__main__`: the launcher that editor terminals run (`launcher_env`), and `boot`: how it and the helper start, as
  isolated interpreters of the install.

Backends. Only Linux is built: Landlock for files, TCP, signals and abstract sockets; namespaces for containment
(pid), protected paths (mount), the network (net). A macOS backend would slot in at the same two seams: the helper's
probe reports it (`/usr/bin/sandbox-exec` present), and `child.Plan` execs `sandbox-exec -p PROFILE -- CMD` instead
of entering namespaces and Landlock, the profile generated from the same `SandboxSpec`: `(deny default)`,
`(allow file-read* (subpath …))` per read tree, `(allow file-write* (subpath …))` per write tree followed by
`(deny file-write* (subpath …))` per protected path (Seatbelt, unlike Landlock, can carve a subtree out, so no mount
trick is needed), `(deny network*)` unless the network is allowed, `(allow process-fork) (allow process-exec)`. The
kill guarantee would rest on the helper as here without namespaces: process groups, a subreaper-like watch of what
left them, and the helper's end when the agent's socket closes.
"""

from __future__ import annotations

import functools
import sys

from runtime.sandbox._frozen import Frozen
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

__all__ = [
    "SandboxSpec",
    "Support",
    "baseline",
    "baseline_readable",
    "build_spec",
    "child_env",
    "configure_network",
    "harden_agent",
    "network_hosts",
    "network_unheld",
    "prestart",
    "remove_all_tmpdirs",
    "remove_session_tmpdir",
    "session_tmpdir",
    "support",
]

ENV_SWITCH = "GATEWRIGHT_SANDBOX"


class Support(Frozen):
    """What this system lets the sandbox do. `active`: processes are confined (Landlock works)."""

    __slots__ = ("landlock_abi", "namespaces", "forced", "reason")
    landlock_abi: int
    namespaces: bool
    forced: str | None  # the value of GATEWRIGHT_SANDBOX that limited it
    reason: str  # why something is missing

    def __init__(
        self, landlock_abi: int = 0, namespaces: bool = False, forced: str | None = None, reason: str = ""
    ) -> None:
        self._init(landlock_abi=landlock_abi, namespaces=namespaces, forced=forced, reason=reason)

    @property
    def active(self) -> bool:
        return self.landlock_abi > 0

    def describe(self) -> str:
        if self.forced == "off":
            return f"sandbox: off ({ENV_SWITCH}=off): commands run unconfined and more calls ask"
        if not self.active:
            return (
                f"sandbox: not available ({self.reason or 'no Landlock'}): commands run unconfined and more calls ask"
            )
        text = f"sandbox: Landlock ABI {self.landlock_abi}"
        if self.namespaces:
            return text + ", user/pid/mount/net namespaces"
        why = f"{ENV_SWITCH}=landlock" if self.forced == "landlock" else self.reason or "unavailable"
        return (
            text + f", no namespaces ({why}): what a command starts may outlive the agent if it leaves its "
            "process group and drops its environment"
        )


@functools.cache
def support() -> Support:
    """Asked of the sandbox helper once per process (which starts it: ~20–30 ms, or none after `prestart`)."""
    if not sys.platform.startswith("linux"):
        return Support(reason="not Linux")
    from runtime.sandbox.client import Spawner

    try:
        spawner = Spawner.get()
    except OSError as exc:
        return Support(reason=f"the sandbox helper did not start ({exc})")
    return Support(spawner.caps.landlock_abi, spawner.caps.namespaces, forced=spawner.forced, reason=spawner.why)


_network: list[tuple[str, ...] | None] = [None]


def configure_network(hosts: tuple[str, ...] | None) -> None:
    """Once at start-up: the config file's `[sandbox] network` (None: commands with the network reach every host)."""
    _network[0] = None if hosts is None else tuple(hosts)


def network_hosts() -> tuple[str, ...] | None:
    return _network[0]


def network_unheld() -> str:
    """Why the sandbox cannot hold `[sandbox] network` on this system, in one line ("" when it can: a command then
    gets a network namespace whose only way out is the proxy)."""
    found = support()
    if found.namespaces:
        return ""
    if found.landlock_abi >= 4:
        return (
            "[sandbox] network is not fully held here (no network namespace): UDP, DNS included, is not blocked, "
            "and TCP is allowed to the proxy's port on every address"
        )
    why = f"Landlock ABI {found.landlock_abi} has no TCP rules" if found.active else "no sandbox"
    return (
        f"[sandbox] network is not held here (no network namespace, {why}): a command that ignores the proxy "
        "variables reaches every host"
    )


def prestart() -> None:
    """Start the sandbox helper on a thread (for warm-up: the first command then does not wait for it)."""
    if sys.platform.startswith("linux"):
        from runtime.sandbox.client import prestart as start

        start()


def harden_agent() -> None:
    """Once at start-up of `acp`/`run`: the agent becomes not dumpable, so that no other process of the user (a
    sandboxed one above all) can ptrace it or open its `/proc/<pid>/mem`, `environ` or `fd/*`. (No child subreaper
    is needed in the agent: the sandbox helper is the subreaper of everything it spawns.)"""
    if not sys.platform.startswith("linux"):
        return
    from runtime.sandbox._libc import PR_SET_DUMPABLE, libc

    libc().prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
